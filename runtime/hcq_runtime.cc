#include "runtime/hcq_runtime.h"

#include <algorithm>
#include <cstdio>

#include "base/log.h"
#include "base/options.h"
#include "base/timer.h"
#include "hcq/graph.h"

namespace baregrad::runtime {
namespace {

hcq::Buffer as_hcq(Buffer b) {
  return hcq::Buffer{reinterpret_cast<uint64_t>(b.ptr), b.bytes, nullptr, 0, {}};
}

size_t slot_bytes(const compiler::BufferArg& b) {
  return static_cast<size_t>(b.size) * b.dtype.itemsize();
}

// An hcq::Graph behind the runtime interface; inputs are the graph's first variables.
class HcqGraph : public Graph {
 public:
  HcqGraph(std::unique_ptr<hcq::Graph> g, std::vector<std::shared_ptr<Program>> keep)
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

void HcqRuntimeDevice::attach(std::unique_ptr<hcq::Device> dev) {
  hcq_ = std::move(dev);
  queue_ = hcq_->compute_queue();
  copy_queue_ = hcq_->copy_queue();
  if (!copy_queue_) copy_queue_ = hcq_->compute_queue();
  hcq_->set_profiling(options().profile);
}

HcqRuntimeDevice::~HcqRuntimeDevice() { shutdown(); }

void HcqRuntimeDevice::shutdown() {
  if (shut_down_ || !hcq_) return;
  shut_down_ = true;
  (void)synchronize();
  programs_.clear();
  queue_.reset();
  copy_queue_.reset();
  if (hcq_->profiling()) write_profile();
}

void HcqRuntimeDevice::write_profile() {
  std::string path = options().profile_path;
  std::string dev = name();
  std::replace(dev.begin(), dev.end(), ':', '_');
  std::replace(dev.begin(), dev.end(), '+', '_');
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

// Memory comes from the HCQ allocator (reused by size); runtime buffers carry the device address.
Result<Buffer> HcqRuntimeDevice::alloc(size_t bytes) {
  ASSIGN_OR_RETURN(hcq::Buffer b, hcq_->allocator().alloc(std::max<size_t>(bytes, 1)));
  return Buffer{reinterpret_cast<void*>(b.va), bytes};
}

void HcqRuntimeDevice::free(Buffer b) {
  if (!b.ptr) return;
  hcq_->allocator().free(
      hcq::Buffer{reinterpret_cast<uint64_t>(b.ptr), std::max<size_t>(b.bytes, 1), nullptr, 0, {}});
}

Status HcqRuntimeDevice::copy_in(Buffer dst, const void* src, size_t bytes) {
  if (bytes > dst.bytes)
    return invalid_argument("copy_in of " + std::to_string(bytes) + " bytes into a buffer of " +
                            std::to_string(dst.bytes) + " on " + name());
  return hcq_->allocator().copy_in(as_hcq(dst), src, bytes);
}

Status HcqRuntimeDevice::copy_out(void* dst, Buffer src, size_t bytes) {
  if (bytes > src.bytes)
    return invalid_argument("copy_out of " + std::to_string(bytes) + " bytes from a buffer of " +
                            std::to_string(src.bytes) + " on " + name());
  return hcq_->allocator().copy_out(dst, as_hcq(src), bytes);
}

Status HcqRuntimeDevice::copy(Buffer dst, Buffer src, size_t bytes) {
  RETURN_IF_ERROR(check_copy(*this, dst, src, bytes));
  if (bytes == 0) return Status();
  std::lock_guard lock(launch_mu_);
  // wait(timeline, v - 1) orders the copy after every earlier launch and copy.
  Result<uint64_t> v = hcq_->submit_on_timeline(
      *copy_queue_,
      [&](hcq::HwQueue& q) {
        q.copy(static_cast<int64_t>(as_hcq(dst).va), static_cast<int64_t>(as_hcq(src).va),
               static_cast<int64_t>(bytes));
      },
      {}, "copy");
  return v.status();
}

Status HcqRuntimeDevice::synchronize() {
  RETURN_IF_ERROR(hcq_->synchronize());
  std::lock_guard lock(launch_mu_);
  retire_locked(true);
  return Status();
}

void HcqRuntimeDevice::retire_locked(bool all) {
  while (!in_flight_.empty() &&
         (all || hcq_->timeline().value() >= in_flight_.front().timeline_value)) {
    hcq_->allocator().free(in_flight_.front().args_mem);
    in_flight_.pop_front();
  }
}

Result<std::shared_ptr<Program>> HcqRuntimeDevice::compile(
    const compiler::UOpPtr& ast, const std::optional<std::vector<compiler::Opt>>& opts) {
  return programs_.get(ast, opts, [&] { return build(ast, opts); });
}

Status HcqRuntimeDevice::launch(const Program& prg,
                                std::span<const Buffer> bufs,
                                std::span<const int64_t> vars) {
  const auto& spec = prg.spec;
  if (bufs.size() != spec.bufs.size())
    return invalid_argument("launch " + spec.name + " on " + name() + ": expected " +
                            std::to_string(spec.bufs.size()) + " buffers, got " +
                            std::to_string(bufs.size()));
  for (const auto& b : spec.bufs) {
    size_t need = slot_bytes(b);
    if (bufs[b.slot].bytes < need || !bufs[b.slot].ptr)
      return invalid_argument("launch " + spec.name + " on " + name() + ": buffer " +
                              std::to_string(b.slot) + " (" + b.dtype.name() + ") needs " +
                              std::to_string(need) + " bytes, got " +
                              std::to_string(bufs[b.slot].bytes));
  }
  if (vars.size() != spec.vars.size())
    return invalid_argument("launch " + spec.name + " on " + name() + ": expected " +
                            std::to_string(spec.vars.size()) + " vars, got " +
                            std::to_string(vars.size()));
  LaunchShape sh = shape(prg);
  size_t prefix = sh.prg->args_prefix();
  size_t args_bytes = prefix + 8 * (bufs.size() + vars.size());
  hcq::BufferSpec args_spec{.host = true, .cpu_access = true};
  ASSIGN_OR_RETURN(hcq::Buffer mem,
                   hcq_->allocator().alloc(std::max<size_t>(args_bytes, 8), args_spec));
  auto args = std::make_unique<hcq::ArgsState>(mem, prefix, static_cast<int>(bufs.size()),
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
    Result<uint64_t> r = hcq_->submit_on_timeline(
        *queue_, [&](hcq::HwQueue& q) { q.exec(*sh.prg, *args, sh.grid, sh.block); }, {},
        spec.name);
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
  BG_LOG(1) << "launch " << spec.name << " on " << name() << ": " << now_ms() - t0 << " ms";
  return Status();
}

Result<std::unique_ptr<Graph>> HcqRuntimeDevice::make_graph(
    const std::vector<GraphLaunch>& launches, size_t num_inputs) {
  std::vector<hcq::GraphItem> items;
  std::vector<std::shared_ptr<Program>> keep;
  for (const GraphLaunch& l : launches) {
    const auto& spec = l.prg->spec;
    if (l.bufs.size() != spec.bufs.size() || l.input.size() != l.bufs.size() || !spec.vars.empty())
      return invalid_argument("graph of " + spec.name + " on " + name() + ": " +
                              std::to_string(l.bufs.size()) + " buffers for " +
                              std::to_string(spec.bufs.size()) + " slots" +
                              (spec.vars.empty() ? "" : " (symbolic kernels are not supported)"));
    LaunchShape sh = shape(*l.prg);
    hcq::GraphItem it;
    it.prg = sh.prg;
    it.grid = sh.grid;
    it.block = sh.block;
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
  return std::unique_ptr<Graph>(new HcqGraph(std::move(g), std::move(keep)));
}

}  // namespace baregrad::runtime
