#include "runtime/cuda/cuda_device.h"

#include <algorithm>
#include <charconv>

#include "base/log.h"
#include "base/options.h"
#include "base/timer.h"
#include "compiler/target/nvptx_target.h"
#include "runtime/device.h"

namespace baregrad::runtime {

using compiler::Opt;
using compiler::UOpPtr;
using namespace cuda;  // NOLINT: the driver API's own names

namespace {

Result<CudaDeviceInfo> query_device(const CudaApi& api, int ordinal) {
  CudaDeviceInfo d;
  d.ordinal = ordinal;
  CUdevice dev;
  RETURN_IF_ERROR(BG_CU(api, cuDeviceGet, &dev, ordinal));
  char name[256] = {};
  RETURN_IF_ERROR(BG_CU(api, cuDeviceGetName, name, static_cast<int>(sizeof(name) - 1), dev));
  d.name = name;
  RETURN_IF_ERROR(BG_CU(api, cuDeviceGetAttribute, &d.cc_major,
                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  RETURN_IF_ERROR(BG_CU(api, cuDeviceGetAttribute, &d.cc_minor,
                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  RETURN_IF_ERROR(
      BG_CU(api, cuDeviceGetAttribute, &d.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  RETURN_IF_ERROR(BG_CU(api, cuDeviceTotalMem_v2, &d.total_mem, dev));
  d.cubin_sm = CudaDevice::cubin_sm(d.cc_major, d.cc_minor);
  return d;
}

uintptr_t addr(const Buffer& b) { return static_cast<uintptr_t>(b.va); }

// A CUevent destroyed with its scope.
struct Event {
  const CudaApi& api;
  CUevent ev = nullptr;
  ~Event() {
    if (ev) (void)api.cuEventDestroy_v2(ev);
  }
};

}  // namespace

std::string CudaInfo::driver_version_str() const {
  return std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10);
}

Result<std::shared_ptr<CudaContext>> CudaContext::retain(const CudaApi& api, CUdevice dev) {
  CUcontext ctx = nullptr;
  RETURN_IF_ERROR(BG_CU(api, cuDevicePrimaryCtxRetain, &ctx, dev));
  return std::shared_ptr<CudaContext>(new CudaContext(api, dev, ctx));
}

CudaContext::~CudaContext() { (void)api_.cuDevicePrimaryCtxRelease_v2(dev_); }

Status CudaContext::bind() const { return BG_CU(api_, cuCtxSetCurrent, ctx_); }

CudaProgram::~CudaProgram() {
  if (!module || !ctx->bind().ok()) return;
  // NOTE: the cache may drop a program whose launch is still queued; let it finish first.
  (void)ctx->api().cuCtxSynchronize();
  (void)ctx->api().cuModuleUnload(module);
}

Result<CudaInfo> CudaDevice::probe(std::string_view libcuda) {
  ASSIGN_OR_RETURN(const CudaApi* api, load_cuda_api(libcuda));
  CudaInfo info;
  info.library = api->path;
  RETURN_IF_ERROR(BG_CU(*api, cuDriverGetVersion, &info.driver_version));
  CUresult r = api->cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE) return info;  // a driver without GPUs: an empty list
  RETURN_IF_ERROR(api->check(r, "cuInit"));
  int count = 0;
  RETURN_IF_ERROR(BG_CU(*api, cuDeviceGetCount, &count));
  for (int i = 0; i < count; i++) {
    ASSIGN_OR_RETURN(CudaDeviceInfo d, query_device(*api, i));
    info.devices.push_back(std::move(d));
  }
  return info;
}

int CudaDevice::cubin_sm(int major, int minor) {
  for (int m = minor; m >= 0; m--)
    if (compiler::NvptxCompiler::supported(major * 10 + m)) return major * 10 + m;
  return 0;
}

std::optional<int> CudaDevice::ordinal_of(std::string_view name) {
  if (name == "CUDA") return 0;
  if (!name.starts_with("CUDA:") || name.size() == 5) return std::nullopt;
  int n = -1;
  auto [end, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), n);
  if (ec != std::errc() || end != name.data() + name.size() || n < 0) return std::nullopt;
  return n;
}

Result<std::unique_ptr<CudaDevice>> CudaDevice::create(int ordinal, std::string_view libcuda) {
  ASSIGN_OR_RETURN(const CudaApi* api, load_cuda_api(libcuda));
  RETURN_IF_ERROR(BG_CU(*api, cuInit, 0));
  int count = 0;
  RETURN_IF_ERROR(BG_CU(*api, cuDeviceGetCount, &count));
  if (ordinal < 0 || ordinal >= count)
    return not_found("no CUDA device " + std::to_string(ordinal) + " (the driver reports " +
                     std::to_string(count) + ")");
  ASSIGN_OR_RETURN(CudaDeviceInfo info, query_device(*api, ordinal));
  CUdevice dev;
  RETURN_IF_ERROR(BG_CU(*api, cuDeviceGet, &dev, ordinal));
  ASSIGN_OR_RETURN(std::shared_ptr<CudaContext> ctx, CudaContext::retain(*api, dev));
  RETURN_IF_ERROR(ctx->bind());
  // NOTE: a blocking stream (CU_STREAM_DEFAULT): the synchronous cuMemcpy* calls, which run on
  // the legacy NULL stream, wait for its launches and it waits for them.
  CUstream stream = nullptr;
  RETURN_IF_ERROR(BG_CU(*api, cuStreamCreate, &stream, CU_STREAM_DEFAULT));
  return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(ctx), stream, std::move(info)));
}

CudaDevice::CudaDevice(std::shared_ptr<CudaContext> ctx, CUstream stream, CudaDeviceInfo info)
    : ctx_(std::move(ctx)), stream_(stream), info_(std::move(info)) {
  int sm = info_.cubin_sm ? info_.cubin_sm : info_.cc_major * 10 + info_.cc_minor;
  target_ = compiler::nv_target_info(sm);
  Result<std::unique_ptr<compiler::NvTarget>> nv =
      info_.cubin_sm ? compiler::NvTarget::create(info_.cubin_sm)
                     : Result<std::unique_ptr<compiler::NvTarget>>(invalid_argument(
                           "no cubin target for compute capability " +
                           std::to_string(info_.cc_major) + "." + std::to_string(info_.cc_minor)));
  if (nv.ok()) {
    nv_ = std::move(*nv);
  } else {
    nv_status_ = nv.status();
  }
}

CudaDevice::~CudaDevice() {
  if (bind().ok()) {
    (void)api().cuStreamSynchronize(stream_);
    (void)api().cuStreamDestroy_v2(stream_);
  }
}

std::string CudaDevice::name() const {
  return info_.ordinal == 0 ? "CUDA" : "CUDA:" + std::to_string(info_.ordinal);
}

Result<Buffer> CudaDevice::alloc(size_t bytes) {
  RETURN_IF_ERROR(bind());
  CUdeviceptr p = 0;
  // cuMemAlloc refuses 0 bytes; its allocations are aligned to at least 256 bytes.
  RETURN_IF_ERROR(in_context(name() + " alloc of " + std::to_string(bytes) + " bytes",
                             BG_CU(api(), cuMemAlloc_v2, &p, std::max<size_t>(bytes, 1))));
  return Buffer{static_cast<uint64_t>(p), bytes};
}

void CudaDevice::free(Buffer b) {
  if (!b.va) return;
  Status s = bind();
  if (s.ok()) s = BG_CU(api(), cuMemFree_v2, addr(b));
  if (!s.ok()) BG_LOG(1) << name() << " free: " << s.to_string();
}

Status CudaDevice::copy_in(Buffer dst, const void* src, size_t bytes) {
  if (bytes > dst.bytes)
    return invalid_argument("copy_in of " + std::to_string(bytes) + " bytes into a buffer of " +
                            std::to_string(dst.bytes));
  if (bytes == 0) return Status();
  RETURN_IF_ERROR(bind());
  return BG_CU(api(), cuMemcpyHtoD_v2, addr(dst), src, bytes);
}

Status CudaDevice::copy_out(void* dst, Buffer src, size_t bytes) {
  if (bytes > src.bytes)
    return invalid_argument("copy_out of " + std::to_string(bytes) + " bytes from a buffer of " +
                            std::to_string(src.bytes));
  if (bytes == 0) return Status();
  RETURN_IF_ERROR(bind());
  return BG_CU(api(), cuMemcpyDtoH_v2, dst, addr(src), bytes);
}

Status CudaDevice::copy(Buffer dst, Buffer src, size_t bytes) {
  RETURN_IF_ERROR(check_copy(*this, dst, src, bytes));
  if (bytes == 0) return Status();
  RETURN_IF_ERROR(bind());
  return BG_CU(api(), cuMemcpyDtoDAsync_v2, addr(dst), addr(src), bytes, stream_);
}

Status CudaDevice::synchronize() {
  RETURN_IF_ERROR(bind());
  return BG_CU(api(), cuStreamSynchronize, stream_);
}

Result<float> CudaDevice::time_ms(const std::function<Status()>& enqueue) {
  RETURN_IF_ERROR(bind());
  Event start{api()}, end{api()};
  RETURN_IF_ERROR(BG_CU(api(), cuEventCreate, &start.ev, CU_EVENT_DEFAULT));
  RETURN_IF_ERROR(BG_CU(api(), cuEventCreate, &end.ev, CU_EVENT_DEFAULT));
  RETURN_IF_ERROR(BG_CU(api(), cuEventRecord, start.ev, stream_));
  RETURN_IF_ERROR(enqueue());
  RETURN_IF_ERROR(bind());  // enqueue may have run on another context
  RETURN_IF_ERROR(BG_CU(api(), cuEventRecord, end.ev, stream_));
  RETURN_IF_ERROR(BG_CU(api(), cuEventSynchronize, end.ev));
  float ms = 0;
  RETURN_IF_ERROR(BG_CU(api(), cuEventElapsedTime, &ms, start.ev, end.ev));
  return ms;
}

Result<std::shared_ptr<Program>> CudaDevice::compile(const UOpPtr& ast,
                                                     const std::optional<std::vector<Opt>>& opts) {
  return programs_.get(ast, opts, [&] { return build(ast, opts); });
}

Result<std::shared_ptr<Program>> CudaDevice::build(const UOpPtr& ast,
                                                   const std::optional<std::vector<Opt>>& opts) {
  if (!nv_) return in_context(name() + " compile", nv_status_);
  double t0 = now_ms();
  ASSIGN_OR_RETURN(compiler::CompiledKernel k, nv_->compile(ast, opts));
  const std::string fn = k.spec.name;  // a copy: k.spec moves into the program
  if (k.binary.num_bufs != static_cast<int>(k.spec.bufs.size()))
    return internal("compile " + fn + ": the kernel takes " + std::to_string(k.binary.num_bufs) +
                    " buffers, the spec has " + std::to_string(k.spec.bufs.size()));
  std::string cubin = std::move(k.binary.code);
  auto prg = std::make_shared<CudaProgram>(*this, std::move(k), ctx_);
  RETURN_IF_ERROR(bind());
  RETURN_IF_ERROR(
      in_context("compile " + fn, BG_CU(api(), cuModuleLoadData, &prg->module, cubin.data())));
  RETURN_IF_ERROR(in_context(
      "compile " + fn, BG_CU(api(), cuModuleGetFunction, &prg->function, prg->module, fn.c_str())));
  RETURN_IF_ERROR(in_context("compile " + fn, BG_CU(api(), cuFuncGetAttribute, &prg->registers,
                                                    CU_FUNC_ATTRIBUTE_NUM_REGS, prg->function)));
  prg->compile_ms = now_ms() - t0;
  BG_LOG(1) << name() << " compiled " << fn << " in " << prg->compile_ms << " ms, "
            << prg->registers << " registers" << (prg->cache_hit ? " (cached cubin)" : "");
  return std::shared_ptr<Program>(std::move(prg));
}

Status CudaDevice::launch(const Program& p,
                          std::span<const Buffer> bufs,
                          std::span<const int64_t> vars) {
  RETURN_IF_ERROR(check_launch(*this, p, bufs, vars));
  const auto& kern = static_cast<const CudaProgram&>(p);
  const auto& spec = p.spec;
  // kernelParams: one pointer per kernel parameter, each to its 8 bytes (the buffer's device
  // address, then the int64 vars); the driver copies them at the call.
  std::vector<uint64_t> values;
  values.reserve(bufs.size() + vars.size());
  for (const Buffer& b : bufs) values.push_back(addr(b));
  for (int64_t v : vars) values.push_back(static_cast<uint64_t>(v));
  std::vector<void*> params;
  for (uint64_t& v : values) params.push_back(&v);
  RETURN_IF_ERROR(bind());
  auto enqueue = [&] {
    return in_context("launch " + spec.name,
                      BG_CU(api(), cuLaunchKernel, kern.function, kern.grid[0], kern.grid[1],
                            kern.grid[2], kern.block[0], kern.block[1], kern.block[2], 0, stream_,
                            params.empty() ? nullptr : params.data(), nullptr));
  };
  // Launches are asynchronous; DEBUG=1 times each on the device and waits for it.
  if (options().debug < 1) return enqueue();
  ASSIGN_OR_RETURN(float ms, time_ms(enqueue));
  BG_LOG(1) << "launch " << spec.name << " on " << name() << ": " << ms << " ms";
  return Status();
}

namespace {

// A runtime::Graph as a CUDA graph: one kernel node per launch, each depending on the one
// before (so they run in order, as on the stream), instantiated once. replay() patches the
// nodes whose input addresses changed and launches the executable graph on the device's stream.
class CudaGraph : public Graph {
 public:
  // Checks `launches` like launch() does (input slots are checked at replay), then builds and
  // instantiates the graph.
  static Result<std::unique_ptr<Graph>> create(CudaDevice& dev,
                                               const std::vector<GraphLaunch>& launches,
                                               size_t num_inputs);
  ~CudaGraph() override;
  Status replay(std::span<const Buffer> inputs) override;
  size_t size() const override { return nodes_.size(); }

 private:
  struct Node {
    std::shared_ptr<Program> prg;  // keeps the module (and the function) loaded
    const CudaProgram* kern = nullptr;
    CUgraphNode node = nullptr;
    std::vector<int> input;        // per slot: the input bound there, or -1
    std::vector<uint64_t> values;  // the kernel parameters the executable graph holds
  };
  explicit CudaGraph(CudaDevice& dev) : dev_(dev), ctx_(dev.context()) {}
  // The node's parameters with `values` as its kernel parameters; `ptrs` holds their addresses.
  static CUDA_KERNEL_NODE_PARAMS_v2 params_of(const Node& n,
                                              std::vector<uint64_t>& values,
                                              std::vector<void*>& ptrs);

  CudaDevice& dev_;
  std::shared_ptr<CudaContext> ctx_;  // released after the graph
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  std::vector<Node> nodes_;
  GraphInputs inputs_;
  std::mutex mu_;  // one replay patches at a time
};

CUDA_KERNEL_NODE_PARAMS_v2 CudaGraph::params_of(const Node& n,
                                                std::vector<uint64_t>& values,
                                                std::vector<void*>& ptrs) {
  ptrs.clear();
  for (uint64_t& v : values) ptrs.push_back(&v);
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  p.func = n.kern->function;
  p.gridDimX = n.kern->grid[0];
  p.gridDimY = n.kern->grid[1];
  p.gridDimZ = n.kern->grid[2];
  p.blockDimX = n.kern->block[0];
  p.blockDimY = n.kern->block[1];
  p.blockDimZ = n.kern->block[2];
  p.sharedMemBytes = 0;
  p.kernelParams = ptrs.empty() ? nullptr : ptrs.data();
  return p;  // extra, kern and ctx stay null: `func` names the kernel
}

Result<std::unique_ptr<Graph>> CudaGraph::create(CudaDevice& dev,
                                                 const std::vector<GraphLaunch>& launches,
                                                 size_t num_inputs) {
  std::unique_ptr<CudaGraph> g(new CudaGraph(dev));
  ASSIGN_OR_RETURN(g->inputs_, check_graph(dev, launches, num_inputs));
  for (const GraphLaunch& l : launches) {
    Node n{l.prg, static_cast<const CudaProgram*>(l.prg.get()), nullptr, l.input, {}};
    // Inputs start at the recorded buffers; replay patches them.
    for (const Buffer& b : l.bufs) n.values.push_back(addr(b));
    g->nodes_.push_back(std::move(n));
  }
  RETURN_IF_ERROR(dev.bind());
  const std::string what = "graph on " + dev.name();
  const CudaApi& api = dev.api();
  RETURN_IF_ERROR(in_context(what, BG_CU(api, cuGraphCreate, &g->graph_, 0)));
  std::vector<void*> ptrs;
  CUgraphNode prev = nullptr;
  for (Node& n : g->nodes_) {
    CUDA_KERNEL_NODE_PARAMS_v2 p = params_of(n, n.values, ptrs);
    RETURN_IF_ERROR(in_context("graph of " + n.prg->spec.name + " on " + dev.name(),
                               BG_CU(api, cuGraphAddKernelNode_v2, &n.node, g->graph_,
                                     prev ? &prev : nullptr, prev ? 1 : 0, &p)));
    prev = n.node;
  }
  RETURN_IF_ERROR(
      in_context(what, BG_CU(api, cuGraphInstantiateWithFlags, &g->exec_, g->graph_, 0)));
  return std::unique_ptr<Graph>(std::move(g));
}

CudaGraph::~CudaGraph() {
  if (!ctx_->bind().ok()) return;
  // The driver frees an executable graph still running once it completes.
  if (exec_) (void)ctx_->api().cuGraphExecDestroy(exec_);
  if (graph_) (void)ctx_->api().cuGraphDestroy(graph_);
}

Status CudaGraph::replay(std::span<const Buffer> inputs) {
  RETURN_IF_ERROR(inputs_.check(dev_, inputs));
  RETURN_IF_ERROR(dev_.bind());
  const CudaApi& api = dev_.api();
  std::lock_guard lock(mu_);
  std::vector<uint64_t> values;
  std::vector<void*> ptrs;
  for (Node& n : nodes_) {
    values = n.values;
    for (size_t s = 0; s < n.input.size(); s++)
      if (n.input[s] >= 0) values[s] = addr(inputs[n.input[s]]);
    if (values == n.values) continue;
    // Only later launches of the executable graph see the new parameters.
    CUDA_KERNEL_NODE_PARAMS_v2 p = params_of(n, values, ptrs);
    RETURN_IF_ERROR(in_context("graph replay of " + n.prg->spec.name,
                               BG_CU(api, cuGraphExecKernelNodeSetParams_v2, exec_, n.node, &p)));
    n.values = values;
  }
  auto enqueue = [&] {
    return in_context("graph replay on " + dev_.name(),
                      BG_CU(api, cuGraphLaunch, exec_, dev_.stream()));
  };
  // Replays are asynchronous; DEBUG=1 times each on the device and waits for it.
  if (options().debug < 1) return enqueue();
  ASSIGN_OR_RETURN(float ms, dev_.time_ms(enqueue));
  BG_LOG(1) << "graph replay of " << nodes_.size() << " launches on " << dev_.name() << ": " << ms
            << " ms";
  return Status();
}

}  // namespace

Result<std::unique_ptr<Graph>> CudaDevice::make_graph(const std::vector<GraphLaunch>& launches,
                                                      size_t num_inputs) {
  return CudaGraph::create(*this, launches, num_inputs);
}

}  // namespace baregrad::runtime
