#include "runtime/cl/cl_device.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "base/log.h"
#include "base/timer.h"
#include "compiler/program.h"

namespace baregrad::runtime {

using cl::cl_check;
using cl::ClApi;
using compiler::Opt;
using compiler::UOpPtr;

namespace {

// Synthetic device addresses: the first allocation's, and the granule each one is rounded up
// to, with one unmapped granule after it so that an overrun does not reach the next one.
constexpr uint64_t kVaBase = uint64_t{1} << 44;
constexpr uint64_t kVaGranule = 4096;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// A string query of the OpenCL API: `get(size, value, size_ret)` is called for the size, then
// for the text; the text without its terminating NUL.
Result<std::string> query_string(const std::function<cl_int(size_t, void*, size_t*)>& get,
                                 const std::string& call) {
  size_t size = 0;
  RETURN_IF_ERROR(cl_check(get(0, nullptr, &size), call));
  std::string s(size, '\0');
  RETURN_IF_ERROR(cl_check(get(size, s.data(), nullptr), call));
  if (size_t nul = s.find('\0'); nul != std::string::npos) s.resize(nul);
  return s;
}

Result<std::string> platform_string(const ClApi& api,
                                    cl_platform_id p,
                                    cl_platform_info param,
                                    const char* param_name) {
  return query_string(
      [&](size_t size, void* value, size_t* size_ret) {
        return api.clGetPlatformInfo(p, param, size, value, size_ret);
      },
      std::string("clGetPlatformInfo(") + param_name + ")");
}

Result<std::string> device_string(const ClApi& api,
                                  cl_device_id d,
                                  cl_device_info param,
                                  const char* param_name) {
  return query_string(
      [&](size_t size, void* value, size_t* size_ret) {
        return api.clGetDeviceInfo(d, param, size, value, size_ret);
      },
      std::string("clGetDeviceInfo(") + param_name + ")");
}

template <class T>
Result<T> device_value(const ClApi& api,
                       cl_device_id d,
                       cl_device_info param,
                       const char* param_name) {
  T v{};
  RETURN_IF_ERROR(cl_check(api.clGetDeviceInfo(d, param, sizeof(T), &v, nullptr),
                           std::string("clGetDeviceInfo(") + param_name + ")"));
  return v;
}

#define BG_DEVICE_STRING(api, d, param) device_string(api, d, param, #param)
#define BG_DEVICE_VALUE(T, api, d, param) device_value<T>(api, d, param, #param)

Result<ClDeviceInfo> query_device(const ClApi& api, cl_device_id d) {
  ClDeviceInfo info;
  ASSIGN_OR_RETURN(info.name, BG_DEVICE_STRING(api, d, CL_DEVICE_NAME));
  ASSIGN_OR_RETURN(info.version, BG_DEVICE_STRING(api, d, CL_DEVICE_VERSION));
  ASSIGN_OR_RETURN(info.driver_version, BG_DEVICE_STRING(api, d, CL_DRIVER_VERSION));
  ASSIGN_OR_RETURN(info.compute_units,
                   BG_DEVICE_VALUE(cl_uint, api, d, CL_DEVICE_MAX_COMPUTE_UNITS));
  ASSIGN_OR_RETURN(info.max_work_group_size,
                   BG_DEVICE_VALUE(size_t, api, d, CL_DEVICE_MAX_WORK_GROUP_SIZE));
  ASSIGN_OR_RETURN(info.global_mem, BG_DEVICE_VALUE(cl_ulong, api, d, CL_DEVICE_GLOBAL_MEM_SIZE));
  ASSIGN_OR_RETURN(info.local_mem, BG_DEVICE_VALUE(cl_ulong, api, d, CL_DEVICE_LOCAL_MEM_SIZE));
  ASSIGN_OR_RETURN(std::string extensions, BG_DEVICE_STRING(api, d, CL_DEVICE_EXTENSIONS));
  info.fp64 = (" " + extensions + " ").find(" cl_khr_fp64 ") != std::string::npos;
  ASSIGN_OR_RETURN(cl_device_fp_config fp32,
                   BG_DEVICE_VALUE(cl_device_fp_config, api, d, CL_DEVICE_SINGLE_FP_CONFIG));
  info.correctly_rounded_divide_sqrt = (fp32 & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  return info;
}

// Every platform and device, and the handles of the devices in index order.
struct Enumerated {
  ClInfo info;
  std::vector<std::pair<cl_platform_id, cl_device_id>> handles;
};

Result<Enumerated> enumerate(const ClApi& api) {
  Enumerated e;
  e.info.library = api.path;
  cl_uint n = 0;
  // The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR when no platform is installed.
  cl_int err = api.clGetPlatformIDs(0, nullptr, &n);
  if (err == CL_PLATFORM_NOT_FOUND_KHR) return e;
  RETURN_IF_ERROR(cl_check(err, "clGetPlatformIDs"));
  std::vector<cl_platform_id> platforms(n);
  if (n) RETURN_IF_ERROR(BG_CL(api, clGetPlatformIDs, n, platforms.data(), nullptr));
  for (cl_platform_id p : platforms) {
    ClPlatformInfo pi;
    ASSIGN_OR_RETURN(pi.name, platform_string(api, p, CL_PLATFORM_NAME, "CL_PLATFORM_NAME"));
    ASSIGN_OR_RETURN(pi.version,
                     platform_string(api, p, CL_PLATFORM_VERSION, "CL_PLATFORM_VERSION"));
    cl_uint nd = 0;
    err = api.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd);
    if (err != CL_DEVICE_NOT_FOUND) RETURN_IF_ERROR(cl_check(err, "clGetDeviceIDs"));
    std::vector<cl_device_id> devices(err == CL_DEVICE_NOT_FOUND ? 0 : nd);
    if (!devices.empty())
      RETURN_IF_ERROR(
          BG_CL(api, clGetDeviceIDs, p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr));
    for (cl_device_id d : devices) {
      ASSIGN_OR_RETURN(ClDeviceInfo di, query_device(api, d));
      di.index = static_cast<int>(e.handles.size());
      di.platform = pi.name;
      di.platform_version = pi.version;
      pi.devices.push_back(std::move(di));
      e.handles.emplace_back(p, d);
    }
    e.info.platforms.push_back(std::move(pi));
  }
  return e;
}

}  // namespace

std::string ClDeviceInfo::device_key() const {
  return platform + " / " + platform_version + " / " + name + " / " + driver_version;
}

Result<std::shared_ptr<ClContext>> ClContext::create(const ClApi& api,
                                                     cl_platform_id platform,
                                                     cl_device_id device) {
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                         reinterpret_cast<cl_context_properties>(platform), 0};
  cl_int err = CL_SUCCESS;
  cl_context ctx = api.clCreateContext(props, 1, &device, nullptr, nullptr, &err);
  RETURN_IF_ERROR(cl_check(err, "clCreateContext"));
  return std::shared_ptr<ClContext>(new ClContext(api, device, ctx));
}

ClContext::~ClContext() { (void)api_.clReleaseContext(ctx_); }

ClProgram::~ClProgram() {
  if (kernel) (void)ctx->api().clReleaseKernel(kernel);
  if (program) (void)ctx->api().clReleaseProgram(program);
}

Result<ClInfo> ClDevice::probe(std::string_view libopencl) {
  ASSIGN_OR_RETURN(const ClApi* api, cl::load_cl_api(libopencl));
  ASSIGN_OR_RETURN(Enumerated e, enumerate(*api));
  return std::move(e.info);
}

Result<std::unique_ptr<ClDevice>> ClDevice::create(int index, std::string_view libopencl) {
  ASSIGN_OR_RETURN(const ClApi* api, cl::load_cl_api(libopencl));
  ASSIGN_OR_RETURN(Enumerated e, enumerate(*api));
  if (index < 0 || index >= static_cast<int>(e.handles.size())) {
    std::string names;
    for (const ClPlatformInfo& p : e.info.platforms)
      for (const ClDeviceInfo& d : p.devices)
        names += (names.empty() ? ": " : ", ") + ("CL:" + std::to_string(d.index) + " " + d.name);
    return not_found("no OpenCL device " + std::to_string(index) + " (this machine has " +
                     std::to_string(e.handles.size()) + names + "; ICD loader " + api->path + ")");
  }
  const ClDeviceInfo* info = nullptr;
  for (const ClPlatformInfo& p : e.info.platforms)
    for (const ClDeviceInfo& d : p.devices)
      if (d.index == index) info = &d;
  auto [platform, device] = e.handles[static_cast<size_t>(index)];
  ASSIGN_OR_RETURN(std::shared_ptr<ClContext> ctx, ClContext::create(*api, platform, device));
  cl_int err = CL_SUCCESS;
  // In order: launches and copies run in the order they are enqueued.
  cl_command_queue queue = api->clCreateCommandQueue(ctx->get(), device, 0, &err);
  RETURN_IF_ERROR(cl_check(err, "clCreateCommandQueue"));
  std::unique_ptr<ClDevice> dev(new ClDevice(std::move(ctx), queue, *info));
  dev->dummy_ = api->clCreateBuffer(dev->ctx_->get(), CL_MEM_READ_WRITE, 64, nullptr, &err);
  RETURN_IF_ERROR(in_context(dev->name(), cl_check(err, "clCreateBuffer")));
  return dev;
}

ClDevice::ClDevice(std::shared_ptr<ClContext> ctx, cl_command_queue queue, ClDeviceInfo info)
    : ctx_(std::move(ctx)),
      queue_(queue),
      info_(std::move(info)),
      target_(compiler::cl_target_info(info_.max_work_group_size), info_.device_key()),
      build_options_(info_.correctly_rounded_divide_sqrt ? "-cl-fp32-correctly-rounded-divide-sqrt"
                                                         : ""),
      next_va_(kVaBase) {}

ClDevice::~ClDevice() {
  (void)api().clFinish(queue_);
  programs_.clear();
  for (auto& [va, a] : allocations_) (void)api().clReleaseMemObject(a.mem);
  if (dummy_) (void)api().clReleaseMemObject(dummy_);
  (void)api().clReleaseCommandQueue(queue_);
}

std::string ClDevice::name() const {
  return info_.index == 0 ? "CL" : "CL:" + std::to_string(info_.index);
}

std::string ClDevice::compiler_key() const {
  return name() + " " + target_info().name + " " + info_.device_key();
}

Result<Buffer> ClDevice::alloc(size_t bytes) {
  // clCreateBuffer refuses 0 bytes.
  size_t size = std::max<size_t>(bytes, 1);
  cl_int err = CL_SUCCESS;
  cl_mem mem = api().clCreateBuffer(ctx_->get(), CL_MEM_READ_WRITE, size, nullptr, &err);
  Status s = in_context(name() + " alloc of " + std::to_string(bytes) + " bytes",
                        cl_check(err, "clCreateBuffer"));
  // CL_INVALID_BUFFER_SIZE: more than CL_DEVICE_MAX_MEM_ALLOC_SIZE.
  if (err == CL_INVALID_BUFFER_SIZE) return Status(StatusCode::kResourceExhausted, s.message());
  RETURN_IF_ERROR(s);
  std::lock_guard lock(mem_mu_);
  uint64_t va = next_va_;
  next_va_ += (size + kVaGranule - 1) / kVaGranule * kVaGranule + kVaGranule;
  allocations_.emplace(va, Allocation{mem, bytes});
  return Buffer{va, bytes};
}

void ClDevice::free(Buffer b) {
  if (!b.va) return;
  cl_mem mem = nullptr;
  {
    std::lock_guard lock(mem_mu_);
    auto it = allocations_.find(b.va);
    if (it == allocations_.end()) {
      BG_LOG(1) << name() << " free: " << hex(b.va) << " is not an allocation";
      return;
    }
    mem = it->second.mem;
    allocations_.erase(it);
  }
  // NOTE: OpenCL frees the memory once the launches and copies that use it are done.
  Status s = cl_check(api().clReleaseMemObject(mem), "clReleaseMemObject");
  if (!s.ok()) BG_LOG(1) << name() << " free: " << s.to_string();
}

Result<ClDevice::Resolved> ClDevice::resolve(uint64_t va,
                                             size_t bytes,
                                             const std::string& what) const {
  std::lock_guard lock(mem_mu_);
  auto it = allocations_.upper_bound(va);
  if (it == allocations_.begin())
    return invalid_argument(what + ": " + hex(va) + " is not in a buffer of " + name());
  --it;
  uint64_t offset = va - it->first;
  const Allocation& a = it->second;
  if (offset > a.bytes || bytes > a.bytes - offset)
    return invalid_argument(what + ": " + std::to_string(bytes) + " bytes at offset " +
                            std::to_string(offset) + " of a buffer of " + std::to_string(a.bytes) +
                            " bytes on " + name());
  return Resolved{a.mem, static_cast<size_t>(offset)};
}

Status ClDevice::copy_in(Buffer dst, const void* src, size_t bytes) {
  const std::string what = "copy_in of " + std::to_string(bytes) + " bytes";
  if (bytes > dst.bytes)
    return invalid_argument(what + " into a buffer of " + std::to_string(dst.bytes) + " on " +
                            name());
  if (bytes == 0) return Status();
  ASSIGN_OR_RETURN(Resolved r, resolve(dst.va, bytes, what));
  return in_context(what + " on " + name(),
                    BG_CL(api(), clEnqueueWriteBuffer, queue_, r.mem, CL_TRUE, r.offset, bytes, src,
                          0, nullptr, nullptr));
}

Status ClDevice::copy_out(void* dst, Buffer src, size_t bytes) {
  const std::string what = "copy_out of " + std::to_string(bytes) + " bytes";
  if (bytes > src.bytes)
    return invalid_argument(what + " from a buffer of " + std::to_string(src.bytes) + " on " +
                            name());
  if (bytes == 0) return Status();
  ASSIGN_OR_RETURN(Resolved r, resolve(src.va, bytes, what));
  return in_context(what + " on " + name(),
                    BG_CL(api(), clEnqueueReadBuffer, queue_, r.mem, CL_TRUE, r.offset, bytes, dst,
                          0, nullptr, nullptr));
}

Status ClDevice::copy(Buffer dst, Buffer src, size_t bytes) {
  RETURN_IF_ERROR(check_copy(*this, dst, src, bytes));
  if (bytes == 0) return Status();
  const std::string what = "copy of " + std::to_string(bytes) + " bytes";
  ASSIGN_OR_RETURN(Resolved d, resolve(dst.va, bytes, what));
  ASSIGN_OR_RETURN(Resolved s, resolve(src.va, bytes, what));
  return in_context(what + " on " + name(), BG_CL(api(), clEnqueueCopyBuffer, queue_, s.mem, d.mem,
                                                  s.offset, d.offset, bytes, 0, nullptr, nullptr));
}

Status ClDevice::synchronize() { return in_context(name(), BG_CL(api(), clFinish, queue_)); }

Result<std::shared_ptr<Program>> ClDevice::compile(const UOpPtr& ast,
                                                   const std::optional<std::vector<Opt>>& opts) {
  return programs_.get(ast, opts, [&]() -> Result<std::shared_ptr<Program>> {
    ASSIGN_OR_RETURN(compiler::CompiledKernel k, target_.compile(ast, opts));
    return load(std::move(k));
  });
}

Result<std::shared_ptr<Program>> ClDevice::load(compiler::CompiledKernel&& k) {
  const std::string what = "compile " + k.spec.name + " on " + name();
  if (k.binary.format != BinaryFormat::kOpenClC)
    return invalid_argument(what + ": a " + binary_format_name(k.binary.format) + " binary (" +
                            name() + " builds " + binary_format_name(BinaryFormat::kOpenClC) + ")");
  if (k.binary.num_bufs < static_cast<int>(k.spec.bufs.size()) ||
      k.binary.num_vars != static_cast<int>(k.spec.vars.size()))
    return internal(what + ": the kernel takes " + std::to_string(k.binary.num_bufs) +
                    " buffers and " + std::to_string(k.binary.num_vars) + " vars, the spec has " +
                    std::to_string(k.spec.bufs.size()) + " and " +
                    std::to_string(k.spec.vars.size()));
  double t0 = now_ms();
  const std::string source = std::move(k.binary.code);
  const std::string entry = k.binary.entry;
  auto prg = std::make_shared<ClProgram>(*this, std::move(k), ctx_);
  const char* text = source.data();
  size_t length = source.size();
  cl_int err = CL_SUCCESS;
  prg->program = api().clCreateProgramWithSource(ctx_->get(), 1, &text, &length, &err);
  RETURN_IF_ERROR(in_context(what, cl_check(err, "clCreateProgramWithSource")));
  cl_device_id device = ctx_->device();
  err = api().clBuildProgram(prg->program, 1, &device, build_options_.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    Result<std::string> log = query_string(
        [&](size_t size, void* value, size_t* size_ret) {
          return api().clGetProgramBuildInfo(prg->program, device, CL_PROGRAM_BUILD_LOG, size,
                                             value, size_ret);
        },
        "clGetProgramBuildInfo(CL_PROGRAM_BUILD_LOG)");
    Status s = in_context(what, cl_check(err, "clBuildProgram"));
    return internal(s.message() + " (options '" + build_options_ + "')\nbuild log:\n" +
                    (log.ok() ? *log : log.status().message()) + "\n" +
                    compiler::numbered_source(source));
  }
  prg->kernel = api().clCreateKernel(prg->program, entry.c_str(), &err);
  RETURN_IF_ERROR(in_context(what, cl_check(err, "clCreateKernel")));
  size_t max_group = 0;
  RETURN_IF_ERROR(
      in_context(what, BG_CL(api(), clGetKernelWorkGroupInfo, prg->kernel, device,
                             CL_KERNEL_WORK_GROUP_SIZE, sizeof(max_group), &max_group, nullptr)));
  size_t group = size_t{prg->block[0]} * prg->block[1] * prg->block[2];
  if (group > max_group)
    return invalid_argument(what + ": work-groups of " + std::to_string(group) +
                            " work-items exceed the kernel's CL_KERNEL_WORK_GROUP_SIZE " +
                            std::to_string(max_group));
  double build_ms = now_ms() - t0;
  prg->compile_ms += build_ms;
  BG_LOG(1) << name() << " built " << entry << " in " << build_ms << " ms";
  return std::shared_ptr<Program>(std::move(prg));
}

Status ClDevice::launch(const Program& p,
                        std::span<const Buffer> bufs,
                        std::span<const int64_t> vars) {
  RETURN_IF_ERROR(check_launch(*this, p, bufs, vars));
  const auto& prg = static_cast<const ClProgram&>(p);
  const std::string what = "launch " + p.spec.name + " on " + name();
  // Slots without a buffer (unused by the kernel) get the dummy buffer.
  std::vector<Resolved> args(static_cast<size_t>(prg.num_bufs), Resolved{dummy_, 0});
  for (size_t i = 0; i < bufs.size(); i++) {
    if (!bufs[i].va) continue;
    ASSIGN_OR_RETURN(args[i],
                     resolve(bufs[i].va, bufs[i].bytes, what + ": buffer " + std::to_string(i)));
  }
  size_t global[3], local[3];
  for (int d = 0; d < 3; d++) {
    global[d] = size_t{prg.grid[d]} * prg.block[d];
    local[d] = prg.block[d];
  }
  const ClApi& api = this->api();
  {
    std::lock_guard lock(prg.mu);
    cl_uint arg = 0;
    for (Resolved& r : args) {
      cl_ulong offset = r.offset;
      RETURN_IF_ERROR(
          in_context(what, BG_CL(api, clSetKernelArg, prg.kernel, arg++, sizeof(cl_mem), &r.mem)));
      RETURN_IF_ERROR(
          in_context(what, BG_CL(api, clSetKernelArg, prg.kernel, arg++, sizeof(offset), &offset)));
    }
    for (int64_t v : vars) {
      cl_long value = v;
      RETURN_IF_ERROR(
          in_context(what, BG_CL(api, clSetKernelArg, prg.kernel, arg++, sizeof(value), &value)));
    }
    RETURN_IF_ERROR(in_context(what, BG_CL(api, clEnqueueNDRangeKernel, queue_, prg.kernel, 3,
                                           nullptr, global, local, 0, nullptr, nullptr)));
  }
  return in_context(what, BG_CL(api, clFlush, queue_));
}

namespace {

// A runtime::Graph replayed launch by launch through ClDevice::launch, in order.
class ClGraph : public Graph {
 public:
  // Checks `launches` (check_graph); launch() checks each again at replay.
  static Result<std::unique_ptr<Graph>> create(ClDevice& dev,
                                               const std::vector<GraphLaunch>& launches,
                                               size_t num_inputs);
  Status replay(std::span<const Buffer> inputs) override;
  size_t size() const override { return launches_.size(); }

 private:
  explicit ClGraph(ClDevice& dev) : dev_(dev) {}
  ClDevice& dev_;
  std::vector<GraphLaunch> launches_;
  GraphInputs inputs_;
};

Result<std::unique_ptr<Graph>> ClGraph::create(ClDevice& dev,
                                               const std::vector<GraphLaunch>& launches,
                                               size_t num_inputs) {
  std::unique_ptr<ClGraph> g(new ClGraph(dev));
  ASSIGN_OR_RETURN(g->inputs_, check_graph(dev, launches, num_inputs));
  g->launches_ = launches;
  return std::unique_ptr<Graph>(std::move(g));
}

Status ClGraph::replay(std::span<const Buffer> inputs) {
  RETURN_IF_ERROR(inputs_.check(dev_, inputs));
  std::vector<Buffer> bufs;
  for (const GraphLaunch& l : launches_) {
    bufs = l.bufs;
    for (size_t s = 0; s < l.input.size(); s++)
      if (l.input[s] >= 0) bufs[s] = inputs[static_cast<size_t>(l.input[s])];
    RETURN_IF_ERROR(dev_.launch(*l.prg, bufs));
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<Graph>> ClDevice::make_graph(const std::vector<GraphLaunch>& launches,
                                                    size_t num_inputs) {
  return ClGraph::create(*this, launches, num_inputs);
}

}  // namespace baregrad::runtime
