#include "runtime/cpu/cpu_device.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/options.h"
#include "base/timer.h"
#include "compiler/cache.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/render/c_source.h"
#include "compiler/render/llvm_ir.h"
#include "compiler/target/clang_target.h"
#include "compiler/target/llvm_target.h"
#include "drivers/cpu/device.h"
#include "drivers/null/device.h"
#include "hcq/graph.h"

namespace baregrad::runtime {

using compiler::Opt;
using compiler::UOpPtr;

namespace {
int default_threads(int requested) {
  if (requested > 0) return requested;
  if (options().threads > 0) return options().threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string opts_key(const std::optional<std::vector<Opt>>& opts) {
  if (!opts) return "heuristic";
  std::string s;
  for (auto& o : *opts) s += o.str();
  return s;
}
}  // namespace

CpuDevice::CpuDevice(CpuBackend backend, int threads, bool null) : backend_(backend), null_(null) {
  int n = default_threads(threads);
  if (null) {
    auto dev = drivers::null::Device::create();
    if (!dev.ok()) dev.status().throw_if_error("device");
    hcq_ = std::move(*dev);
  } else {
    auto dev = drivers::cpu::Device::create(n);
    if (!dev.ok()) dev.status().throw_if_error("device");
    hcq_ = std::move(*dev);
  }
  queue_ = hcq_->compute_queue();
  hcq_->set_profiling(options().profile);
  target_.name = backend == CpuBackend::kLlvm ? "cpu-llvm" : "cpu-clang";
  target_.threads = n;
  target_.vector_bytes = 64;
  if (backend == CpuBackend::kLlvm) {
    renderer_ = std::make_unique<compiler::LlvmIrRenderer>();
    compiler_ = std::make_unique<compiler::LlvmCompiler>();
  } else {
    renderer_ = std::make_unique<compiler::CRenderer>();
    compiler_ = std::make_unique<compiler::ClangCompiler>();
  }
}

CpuDevice::~CpuDevice() {
  (void)synchronize();
  queue_.reset();
  if (hcq_->profiling()) write_profile();
}

void CpuDevice::write_profile() {
  std::string path = options().profile_path;
  std::string dev = name();
  std::replace(dev.begin(), dev.end(), ':', '_');
  size_t dot = path.rfind(".json");
  path = dot == std::string::npos ? path + "." + dev + ".json"
                                  : path.substr(0, dot) + "." + dev + ".json";
  auto events = hcq_->take_profile();
  Status s = events.ok() ? hcq::write_chrome_trace(path, {{name(), *events}}) : events.status();
  if (s.ok()) {
    std::fprintf(stderr, "profile: %zu events of %s in %s (open it in https://ui.perfetto.dev)\n",
                 events->size(), name().c_str(), path.c_str());
  } else {
    std::fprintf(stderr, "profile: %s\n", s.to_string().c_str());
  }
}

std::string CpuDevice::name() const {
  if (null_) return "NULL";
  return backend_ == CpuBackend::kLlvm ? "CPU" : "CPU:C";
}

// Memory comes from the HCQ allocator (2 MiB aligned with huge pages from 2 MiB up, reused by
// size); runtime buffers carry the address, which is the device address on the CPU.
Result<Buffer> CpuDevice::alloc(size_t bytes) {
  ASSIGN_OR_RETURN(hcq::Buffer b, hcq_->allocator().alloc(std::max<size_t>(bytes, 1)));
  return Buffer{reinterpret_cast<void*>(b.va), bytes};
}

void CpuDevice::free(Buffer b) {
  if (!b.ptr) return;
  hcq_->allocator().free(
      hcq::Buffer{reinterpret_cast<uint64_t>(b.ptr), std::max<size_t>(b.bytes, 1), nullptr, 0, {}});
}

namespace {
hcq::Buffer as_hcq(Buffer b) {
  return hcq::Buffer{reinterpret_cast<uint64_t>(b.ptr), b.bytes, b.ptr, 0, {}};
}
}  // namespace

Status CpuDevice::copy_in(Buffer dst, const void* src, size_t bytes) {
  if (bytes > dst.bytes)
    return invalid_argument("copy_in of " + std::to_string(bytes) + " bytes into a buffer of " +
                            std::to_string(dst.bytes));
  return hcq_->allocator().copy_in(as_hcq(dst), src, bytes);
}

Status CpuDevice::copy_out(void* dst, Buffer src, size_t bytes) {
  if (bytes > src.bytes)
    return invalid_argument("copy_out of " + std::to_string(bytes) + " bytes from a buffer of " +
                            std::to_string(src.bytes));
  if (null_) {  // nothing was ever computed
    RETURN_IF_ERROR(hcq_->synchronize());
    std::memset(dst, 0, bytes);
    return Status();
  }
  return hcq_->allocator().copy_out(dst, as_hcq(src), bytes);
}

Status CpuDevice::synchronize() {
  RETURN_IF_ERROR(hcq_->synchronize());
  std::lock_guard lock(launch_mu_);
  retire_locked(true);
  return Status();
}

namespace {
// An hcq::Graph behind the runtime interface; inputs are the graph's first variables.
class CpuGraph : public Graph {
 public:
  CpuGraph(std::unique_ptr<hcq::Graph> g, std::vector<std::shared_ptr<Program>> keep)
      : graph_(std::move(g)), keep_(std::move(keep)) {}
  Status replay(std::span<const Buffer> inputs) override {
    vars_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); i++)
      vars_[i] = static_cast<int64_t>(reinterpret_cast<uint64_t>(inputs[i].ptr));
    return graph_->replay(vars_);
  }
  size_t size() const override { return graph_->size(); }

 private:
  std::unique_ptr<hcq::Graph> graph_;
  std::vector<std::shared_ptr<Program>> keep_;  // the programs the graph's execs point to
  std::vector<int64_t> vars_;
};
}  // namespace

Result<std::unique_ptr<Graph>> CpuDevice::make_graph(const std::vector<GraphLaunch>& launches,
                                                     size_t num_inputs) {
  std::vector<hcq::GraphItem> items;
  std::vector<std::shared_ptr<Program>> keep;
  for (const GraphLaunch& l : launches) {
    const auto& spec = l.prg->spec;
    if (l.bufs.size() != spec.bufs.size() || l.input.size() != l.bufs.size() || !spec.vars.empty())
      return invalid_argument("graph of " + spec.name + ": " + std::to_string(l.bufs.size()) +
                              " buffers for " + std::to_string(spec.bufs.size()) + " slots" +
                              (spec.vars.empty() ? "" : " (symbolic kernels are not supported)"));
    hcq::GraphItem it;
    it.prg = static_cast<const drivers::cpu::Program*>(l.prg->handle.get());
    it.grid = hcq::Dim3{static_cast<uint32_t>(std::max<int64_t>(spec.thread_extent, 1)), 1, 1};
    for (size_t s = 0; s < l.bufs.size(); s++) {
      hcq::Value va =
          l.input[s] >= 0
              ? hcq::Value::sym(l.input[s])
              : hcq::Value(static_cast<int64_t>(reinterpret_cast<uint64_t>(l.bufs[s].ptr)));
      it.bufs.push_back(va);
      (s == 0 ? it.writes : it.reads).push_back({va, l.bufs[s].bytes});
    }
    items.push_back(std::move(it));
    keep.push_back(l.prg);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<hcq::Graph> g,
                   hcq::Graph::create(*hcq_, std::move(items), static_cast<int>(num_inputs)));
  return std::unique_ptr<Graph>(new CpuGraph(std::move(g), std::move(keep)));
}

void CpuDevice::retire_locked(bool all) {
  while (!in_flight_.empty() &&
         (all || hcq_->timeline().value() >= in_flight_.front().timeline_value)) {
    hcq_->allocator().free(in_flight_.front().args_mem);
    in_flight_.pop_front();
  }
}

Result<std::shared_ptr<Program>> CpuDevice::compile(const UOpPtr& ast,
                                                    const std::optional<std::vector<Opt>>& opts) {
  // UOps are interned, so the AST's address identifies it while the entry keeps it alive.
  auto key = std::make_pair(ast.get(), opts_key(opts));
  {
    std::lock_guard lock(mu_);
    if (auto it = programs_.find(key); it != programs_.end()) return it->second.second;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Program> prg, build(ast, opts));
  std::lock_guard lock(mu_);
  programs_.emplace(key, std::make_pair(ast, prg));
  return prg;
}

Result<std::shared_ptr<Program>> CpuDevice::build(const UOpPtr& ast,
                                                  const std::optional<std::vector<Opt>>& opts) {
  double t0 = now_ms();
  auto prg = std::make_shared<Program>();
  try {
    prg->spec = compiler::lower_kernel(ast, target_, opts);
  } catch (const Error& e) {
    return invalid_argument(e.what());
  }
  prg->source = renderer_->render(prg->spec);
  // DEBUG=4 shows readable C whatever the backend; DEBUG=5 also the LLVM IR it compiles.
  BG_LOG(4) << (backend_ == CpuBackend::kClang ? prg->source
                                               : compiler::CRenderer().render(prg->spec));
  if (backend_ == CpuBackend::kLlvm) BG_LOG(5) << prg->source;
  auto& cache = compiler::KernelCache::global();
  std::string object;
  // The disk key is the rendered source: any change in lowering or rendering invalidates it.
  std::string disk_key = compiler_->cache_key() + "\n" + prg->source;
  if (auto hit = cache.get(disk_key)) {
    object = std::move(*hit);
    prg->cache_hit = true;
  } else {
    ASSIGN_OR_RETURN(object, compiler_->compile(prg->source, prg->spec.name));
    cache.put(disk_key, object);
  }
  ASSIGN_OR_RETURN(KernelFn fn, loader_.load(object, prg->spec.name));
  prg->entry = reinterpret_cast<void*>(fn);
  std::vector<size_t> buf_bytes(prg->spec.bufs.size(), 0);
  for (const auto& b : prg->spec.bufs)
    buf_bytes.at(b.slot) = static_cast<size_t>(b.size) * b.dtype.itemsize();
  prg->handle = std::make_shared<drivers::cpu::Program>(prg->spec.name, fn, std::move(buf_bytes),
                                                        static_cast<int>(prg->spec.vars.size()));
  prg->compile_ms = now_ms() - t0;
  BG_LOG(1) << "compiled " << prg->spec.name << " in " << prg->compile_ms << " ms"
            << (prg->cache_hit ? " (cached binary)" : "");
  return prg;
}

Status CpuDevice::launch(const Program& prg,
                         std::span<const Buffer> bufs,
                         std::span<const int64_t> vars) {
  const auto& spec = prg.spec;
  if (bufs.size() != spec.bufs.size())
    return invalid_argument("launch " + spec.name + ": expected " +
                            std::to_string(spec.bufs.size()) + " buffers, got " +
                            std::to_string(bufs.size()));
  for (const auto& b : spec.bufs) {
    size_t need = static_cast<size_t>(b.size) * b.dtype.itemsize();
    if (bufs[b.slot].bytes < need || !bufs[b.slot].ptr)
      return invalid_argument("launch " + spec.name + ": buffer " + std::to_string(b.slot) + " (" +
                              b.dtype.name() + ") needs " + std::to_string(need) + " bytes, got " +
                              std::to_string(bufs[b.slot].bytes));
  }
  if (vars.size() != spec.vars.size())
    return invalid_argument("launch " + spec.name + ": expected " +
                            std::to_string(spec.vars.size()) + " vars, got " +
                            std::to_string(vars.size()));
  const auto& hp = *static_cast<const drivers::cpu::Program*>(prg.handle.get());
  size_t args_bytes = 8 * (bufs.size() + vars.size());
  hcq::BufferSpec args_spec{.host = true, .cpu_access = true};
  ASSIGN_OR_RETURN(hcq::Buffer mem,
                   hcq_->allocator().alloc(std::max<size_t>(args_bytes, 8), args_spec));
  auto args = std::make_unique<hcq::ArgsState>(mem, 0, static_cast<int>(bufs.size()),
                                               static_cast<int>(vars.size()));
  for (size_t i = 0; i < bufs.size(); i++)
    args->set_buf(static_cast<int>(i),
                  static_cast<int64_t>(reinterpret_cast<uint64_t>(bufs[i].ptr)));
  for (size_t i = 0; i < vars.size(); i++) args->set_var(static_cast<int>(i), vars[i]);
  double t0 = options().debug >= 1 ? now_ms() : 0;
  uint64_t v;
  {
    std::lock_guard lock(launch_mu_);
    retire_locked(false);
    auto items = static_cast<uint32_t>(std::max<int64_t>(spec.thread_extent, 1));
    Result<uint64_t> r = hcq_->submit_on_timeline(
        *queue_, [&](hcq::HwQueue& q) { q.exec(hp, *args, hcq::Dim3{items, 1, 1}, hcq::Dim3{}); },
        {}, spec.name);
    if (!r.ok()) {
      hcq_->allocator().free(mem);
      return r.status();
    }
    v = *r;
    in_flight_.push_back({v, mem, std::move(args)});
  }
  // Launches are asynchronous; DEBUG=1 waits for each to time it.
  if (options().debug < 1) return Status();
  RETURN_IF_ERROR(hcq_->timeline().wait(v));
  BG_LOG(1) << "launch " << spec.name << ": " << now_ms() - t0 << " ms";
  return Status();
}

}  // namespace baregrad::runtime
