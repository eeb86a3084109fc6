// DEV=CL / CL:<n>: any OpenCL platform as a runtime device, a vendor-runtime adapter (not HCQ:
// OpenCL owns the queues, memory and compiler). Kernels are the OpenCL C compiler::ClTarget
// renders (its ABI: compiler/target/cl_target.h), built by the platform with clBuildProgram and
// launched on one in-order command queue. See README.md.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ClDevice> dev, ClDevice::create(0));
//   ASSIGN_OR_RETURN(ClInfo info, ClDevice::probe());   // for `bare info`
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/target/cl_target.h"
#include "runtime/cl/cl_api.h"
#include "runtime/device.h"
#include "runtime/program_cache.h"

namespace baregrad::runtime {

// One device as its platform reports it.
struct ClDeviceInfo {
  int index = 0;  // CL:<index>: devices of every platform, in platform order
  std::string platform, platform_version;
  std::string name, version, driver_version;
  uint32_t compute_units = 0;
  size_t max_work_group_size = 0;
  uint64_t global_mem = 0, local_mem = 0;  // bytes
  bool fp64 = false;                       // cl_khr_fp64
  // CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT in CL_DEVICE_SINGLE_FP_CONFIG: builds pass
  // -cl-fp32-correctly-rounded-divide-sqrt.
  bool correctly_rounded_divide_sqrt = false;
  // The platform, its version, the device and its driver version: what an OpenCL C build
  // depends on.
  std::string device_key() const;
};

struct ClPlatformInfo {
  std::string name, version;
  std::vector<ClDeviceInfo> devices;
};

struct ClInfo {
  std::string library;  // the ICD loader loaded
  std::vector<ClPlatformInfo> platforms;
};

// The context of one device (RAII). Everything built or allocated in it holds a shared_ptr to
// it, so it is released last.
class ClContext {
 public:
  static Result<std::shared_ptr<ClContext>> create(const cl::ClApi& api,
                                                   cl_platform_id platform,
                                                   cl_device_id device);
  ~ClContext();
  ClContext(const ClContext&) = delete;
  ClContext& operator=(const ClContext&) = delete;

  const cl::ClApi& api() const { return api_; }
  cl_context get() const { return ctx_; }
  cl_device_id device() const { return device_; }

 private:
  ClContext(const cl::ClApi& api, cl_device_id device, cl_context ctx)
      : api_(api), device_(device), ctx_(ctx) {}
  const cl::ClApi& api_;
  cl_device_id device_;
  cl_context ctx_;
};

// A program of a ClDevice: its built cl_program and the kernel. Releases both on destruction
// (OpenCL keeps a kernel alive while an enqueued launch uses it).
class ClProgram final : public Program {
 public:
  ClProgram(const Device& dev, compiler::CompiledKernel&& k, std::shared_ptr<ClContext> ctx)
      : Program(dev, std::move(k)),
        ctx(std::move(ctx)),
        num_bufs(k.binary.num_bufs),
        grid(k.binary.grid),
        block(k.binary.block) {}
  ~ClProgram() override;
  std::shared_ptr<ClContext> ctx;
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  int num_bufs = 0;               // buffer slots of the ABI (>= spec.bufs.size())
  std::array<uint32_t, 3> grid;   // work-groups
  std::array<uint32_t, 3> block;  // work-items per work-group
  // NOTE: clSetKernelArg on one cl_kernel is not thread-safe; held from the first argument to
  // the enqueue.
  mutable std::mutex mu;
};

class ClDevice : public Device {
 public:
  // Opens device `index` (counting every device of every platform, in order) through the ICD
  // loader `libopencl` (load_cl_api): a context and one in-order queue. NotFound for a missing
  // library or index.
  static Result<std::unique_ptr<ClDevice>> create(int index = 0, std::string_view libopencl = {});
  // Every platform and device, without opening one.
  static Result<ClInfo> probe(std::string_view libopencl = {});
  ~ClDevice() override;

  // "CL" for index 0, else "CL:N".
  std::string name() const override;
  const compiler::TargetInfo& target_info() const override { return target_.info(); }
  // Also names the platform, the device and its driver (ClDeviceInfo::device_key).
  std::string compiler_key() const override;
  // A cl_mem behind a synthetic device address range (see README.md): Buffer::va + k addresses
  // byte k of it. ResourceExhausted when the platform is out of memory.
  Result<Buffer> alloc(size_t bytes) override;
  void free(Buffer b) override;
  // Synchronous: they return once the bytes have moved, after earlier launches on the queue.
  // InvalidArgument when the range is not inside one allocation.
  Status copy_in(Buffer dst, const void* src, size_t bytes) override;
  Status copy_out(void* dst, Buffer src, size_t bytes) override;
  // Asynchronous on the queue (clEnqueueCopyBuffer), after earlier launches.
  Status copy(Buffer dst, Buffer src, size_t bytes) override;
  // ClTarget's OpenCL C, then load(); cached by (AST, opts).
  Result<std::shared_ptr<Program>> compile(
      const compiler::UOpPtr& ast,
      const std::optional<std::vector<compiler::Opt>>& opts = std::nullopt) override;
  ProgramCacheStats program_cache_stats() const override { return programs_.stats(); }
  // Builds OpenCL C (a Binary of format kOpenClC with the ABI of cl_target.h) into a program:
  // InvalidArgument for another format, Internal with the build log and the numbered source
  // when the platform's compiler refuses it.
  Result<std::shared_ptr<Program>> load(compiler::CompiledKernel&& k);
  // Asynchronous on the queue (flushed so that it starts); faults show at the next
  // synchronize() or copy.
  Status launch(const Program& prg,
                std::span<const Buffer> bufs,
                std::span<const int64_t> vars = {}) override;
  Status synchronize() override;
  // The launches replayed in order through launch(); the graph must not outlive the device.
  Result<std::unique_ptr<Graph>> make_graph(const std::vector<GraphLaunch>& launches,
                                            size_t num_inputs) override;

  const ClDeviceInfo& info() const { return info_; }

 private:
  // An allocation: the buffer object behind [base, base + bytes).
  struct Allocation {
    cl_mem mem = nullptr;
    size_t bytes = 0;
  };
  // The buffer object holding `bytes` from address `va`, and the offset of va in it.
  struct Resolved {
    cl_mem mem = nullptr;
    size_t offset = 0;
  };
  ClDevice(std::shared_ptr<ClContext> ctx, cl_command_queue queue, ClDeviceInfo info);
  const cl::ClApi& api() const { return ctx_->api(); }
  // InvalidArgument "<what>: ..." unless [va, va + bytes) lies in one allocation.
  Result<Resolved> resolve(uint64_t va, size_t bytes, const std::string& what) const;

  std::shared_ptr<ClContext> ctx_;
  cl_command_queue queue_;
  ClDeviceInfo info_;
  compiler::ClTarget target_;
  std::string build_options_;
  cl_mem dummy_ = nullptr;  // bound to buffer slots without a buffer

  mutable std::mutex mem_mu_;
  std::map<uint64_t, Allocation> allocations_;  // by base address
  uint64_t next_va_;

  ProgramCache programs_;
};

}  // namespace baregrad::runtime
