// DEV=CUDA: the vendor stack as a runtime device, for side-by-side benchmarks and cross-checks
// against our own NV driver. Kernels are the cubins compiler::NvTarget produces (the same ones
// drivers/nv runs), loaded and launched through the CUDA driver API (runtime/cuda/cuda_api.h)
// on one stream of the device's primary context.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> dev, CudaDevice::create(0));
//   ASSIGN_OR_RETURN(CudaInfo info, CudaDevice::probe());   // for `bare info`
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/target/nv_target.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/device.h"
#include "runtime/program_cache.h"

namespace baregrad::runtime {

// One GPU as the driver reports it.
struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 0;                // multiprocessors
  size_t total_mem = 0;            // bytes
  int cubin_sm = 0;                // CudaDevice::cubin_sm(cc_major, cc_minor)
};

struct CudaInfo {
  std::string library;     // the driver library loaded
  int driver_version = 0;  // cuDriverGetVersion: 1000 * major + 10 * minor, e.g. 13000
  std::vector<CudaDeviceInfo> devices;
  // "13.0"
  std::string driver_version_str() const;
};

// The primary context of one device, retained for the object's life (RAII). Everything loaded
// or allocated in it holds a shared_ptr to it, so it is released last.
class CudaContext {
 public:
  static Result<std::shared_ptr<CudaContext>> retain(const cuda::CudaApi& api, cuda::CUdevice dev);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const cuda::CudaApi& api() const { return api_; }
  cuda::CUcontext get() const { return ctx_; }
  // Makes the context current on the calling thread (a cheap thread-local set); every entry
  // point calls it first, so any thread may use the device.
  Status bind() const;

 private:
  CudaContext(const cuda::CudaApi& api, cuda::CUdevice dev, cuda::CUcontext ctx)
      : api_(api), dev_(dev), ctx_(ctx) {}
  const cuda::CudaApi& api_;
  cuda::CUdevice dev_;
  cuda::CUcontext ctx_;
};

// A program of a CudaDevice: its module, loaded from the cubin. Unloads the module on
// destruction.
class CudaProgram final : public Program {
 public:
  CudaProgram(const Device& dev, compiler::CompiledKernel&& k, std::shared_ptr<CudaContext> ctx)
      : Program(dev, std::move(k)),
        ctx(std::move(ctx)),
        grid(k.binary.grid),
        block(k.binary.block) {}
  ~CudaProgram() override;
  std::shared_ptr<CudaContext> ctx;
  cuda::CUmodule module = nullptr;
  cuda::CUfunction function = nullptr;
  std::array<uint32_t, 3> grid;   // blocks
  std::array<uint32_t, 3> block;  // threads per block
  int registers = -1;             // cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS)
};

class CudaDevice : public Device {
 public:
  // Opens GPU `ordinal` through the driver library (`libcuda` as load_cuda_api takes it):
  // cuInit, the primary context, one stream. NotFound for a missing library or ordinal.
  static Result<std::unique_ptr<CudaDevice>> create(int ordinal = 0, std::string_view libcuda = {});
  // The driver version and every GPU, without opening one.
  static Result<CudaInfo> probe(std::string_view libcuda = {});
  // The ordinal a device name selects: "CUDA" -> 0, "CUDA:N" -> N; nullopt for other names.
  static std::optional<int> ordinal_of(std::string_view name);
  // The sm to build cubins for on compute capability major.minor: the highest NvTarget
  // supports with that major and a minor <= `minor` (cubins run on later minors of their
  // major); 0 for none.
  static int cubin_sm(int major, int minor);
  ~CudaDevice() override;

  // "CUDA" for ordinal 0, else "CUDA:N".
  std::string name() const override;
  const compiler::TargetInfo& target_info() const override { return target_; }
  Result<Buffer> alloc(size_t bytes) override;
  void free(Buffer b) override;
  // Synchronous: they return once the bytes have moved, after earlier launches on the stream.
  Status copy_in(Buffer dst, const void* src, size_t bytes) override;
  Status copy_out(void* dst, Buffer src, size_t bytes) override;
  // Asynchronous on the device's stream (cuMemcpyDtoDAsync_v2), after earlier launches.
  Status copy(Buffer dst, Buffer src, size_t bytes) override;
  // NvTarget for info().cubin_sm, then cuModuleLoadData + cuModuleGetFunction; cached by
  // (AST, opts). The error of NvTarget::create (no ptxas, unsupported sm) when it failed.
  Result<std::shared_ptr<Program>> compile(
      const compiler::UOpPtr& ast,
      const std::optional<std::vector<compiler::Opt>>& opts = std::nullopt) override;
  ProgramCacheStats program_cache_stats() const override { return programs_.stats(); }
  // Asynchronous on the device's stream (under DEBUG=1 timed with events and waited for);
  // faults show at the next synchronize() or copy.
  Status launch(const Program& prg,
                std::span<const Buffer> bufs,
                std::span<const int64_t> vars = {}) override;
  Status synchronize() override;
  // A CUDA graph: one kernel node per launch, each after the one before, instantiated once.
  // replay() patches the nodes whose inputs moved and launches it on stream(), asynchronous
  // like launch(). The graph must not outlive the device.
  Result<std::unique_ptr<Graph>> make_graph(const std::vector<GraphLaunch>& launches,
                                            size_t num_inputs) override;

  const CudaDeviceInfo& info() const { return info_; }
  const cuda::CudaApi& api() const { return ctx_->api(); }
  // The stream every launch and library call (cuBLAS) of this device goes to.
  cuda::CUstream stream() const { return stream_; }
  // Makes the device's context current on the calling thread.
  Status bind() const { return ctx_->bind(); }
  // The device's primary context (what its programs and graphs hold on to).
  const std::shared_ptr<CudaContext>& context() const { return ctx_; }
  // Device milliseconds between events recorded before and after `enqueue` (which issues work
  // on stream()); waits for the end event.
  Result<float> time_ms(const std::function<Status()>& enqueue);

 private:
  CudaDevice(std::shared_ptr<CudaContext> ctx, cuda::CUstream stream, CudaDeviceInfo info);
  Result<std::shared_ptr<Program>> build(const compiler::UOpPtr& ast,
                                         const std::optional<std::vector<compiler::Opt>>& opts);

  std::shared_ptr<CudaContext> ctx_;
  cuda::CUstream stream_;
  CudaDeviceInfo info_;
  compiler::TargetInfo target_;
  std::unique_ptr<compiler::NvTarget> nv_;
  Status nv_status_;  // why nv_ is empty

  ProgramCache programs_;
};

}  // namespace baregrad::runtime
