#include "runtime/hcq_device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/log.h"
#include "base/options.h"
#include "base/timer.h"
#include "hcq/graph.h"

namespace baregrad::runtime {
namespace {

hcq::Buffer as_hcq(Buffer b) { return hcq::Buffer{b.va, b.bytes, nullptr, 0, {}}; }

// A program of an HcqDevice: the kernel loaded by the driver and its launch dimensions.
class HcqProgram final : public Program {
 public:
  HcqProgram(const Device& dev, compiler::CompiledKernel&& k, std::unique_ptr<hcq::Program> loaded)
      : Program(dev, std::move(k)),
        grid{k.binary.grid[0], k.binary.grid[1], k.binary.grid[2]},
        block{k.binary.block[0], k.binary.block[1], k.binary.block[2]},
        loaded(std::move(loaded)) {}
  hcq::Dim3 grid, block;
  std::unique_ptr<hcq::Program> loaded;
};

// An hcq::Graph behind the runtime interface; inputs are the graph's first variables.
class HcqGraph final : public Graph {
 public:
  HcqGraph(const Device& dev,
           GraphInputs inputs,
           std::unique_ptr<hcq::Graph> g,
           std::vector<std::shared_ptr<Program>> keep)
      : dev_(dev), inputs_(std::move(inputs)), graph_(std::move(g)), keep_(std::move(keep)) {}
  Status replay(std::span<const Buffer> inputs) override {
    RETURN_IF_ERROR(inputs_.check(dev_, inputs));
    vars_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); i++) vars_[i] = static_cast<int64_t>(inputs[i].va);
    return graph_->replay(vars_);
  }
  size_t size() const override { return graph_->size(); }

 private:
  const Device& dev_;
  GraphInputs inputs_;
  std::unique_ptr<hcq::Graph> graph_;
  std::vector<std::shared_ptr<Program>> keep_;  // the programs the graph's execs point to
  std::vector<int64_t> vars_;
};

}  // namespace

HcqDevice::HcqDevice(std::string name,
                     std::unique_ptr<compiler::Target> target,
                     std::unique_ptr<hcq::Device> dev)
    : name_(std::move(name)), hcq_(std::move(dev)), target_(std::move(target)) {
  queue_ = hcq_->compute_queue();
  copy_queue_ = hcq_->copy_queue();
  if (!copy_queue_) copy_queue_ = hcq_->compute_queue();
  hcq_->set_profiling(options().profile);
}

HcqDevice::~HcqDevice() {
  if (!synchronize().ok() && hcq_->failed()) {
    // Launches that never retired may still run (a hung kernel): their programs stay loaded.
    std::lock_guard lock(launch_mu_);
    for (InFlight& f : in_flight_) new std::shared_ptr<const Program>(std::move(f.prg));
  }
  programs_.clear();
  queue_.reset();
  copy_queue_.reset();
  if (hcq_->profiling()) write_profile();
}

void HcqDevice::write_profile() {
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

// Memory comes from the HCQ allocator (reused by size).
Result<Buffer> HcqDevice::alloc(size_t bytes) {
  ASSIGN_OR_RETURN(hcq::Buffer b, hcq_->allocator().alloc(std::max<size_t>(bytes, 1)));
  return Buffer{b.va, bytes};
}

Result<Buffer> HcqDevice::adopt_host(void* host, size_t bytes) {
  if (!host_addressable()) return Device::adopt_host(host, bytes);
  ASSIGN_OR_RETURN(hcq::Buffer b, hcq_->allocator().adopt(host, bytes));
  return Buffer{b.va, bytes};
}

void HcqDevice::free(Buffer b) {
  if (!b.va) return;
  hcq_->allocator().free(hcq::Buffer{b.va, std::max<size_t>(b.bytes, 1), nullptr, 0, {}});
}

Status HcqDevice::copy_in(Buffer dst, const void* src, size_t bytes) {
  if (bytes > dst.bytes)
    return invalid_argument("copy_in of " + std::to_string(bytes) + " bytes into a buffer of " +
                            std::to_string(dst.bytes) + " on " + name());
  return hcq_->allocator().copy_in(as_hcq(dst), src, bytes);
}

Status HcqDevice::copy_out(void* dst, Buffer src, size_t bytes) {
  if (bytes > src.bytes)
    return invalid_argument("copy_out of " + std::to_string(bytes) + " bytes from a buffer of " +
                            std::to_string(src.bytes) + " on " + name());
  if (hcq_->executes()) return hcq_->allocator().copy_out(dst, as_hcq(src), bytes);
  RETURN_IF_ERROR(hcq_->synchronize());
  std::memset(dst, 0, bytes);
  return Status();
}

Status HcqDevice::copy(Buffer dst, Buffer src, size_t bytes) {
  RETURN_IF_ERROR(check_copy(*this, dst, src, bytes));
  if (bytes == 0) return Status();
  std::lock_guard lock(launch_mu_);
  // wait(timeline, v - 1) orders the copy after every earlier launch and copy.
  Result<uint64_t> v = hcq_->submit_on_timeline(
      *copy_queue_,
      [&](hcq::HwQueue& q) {
        q.copy(static_cast<int64_t>(dst.va), static_cast<int64_t>(src.va),
               static_cast<int64_t>(bytes));
      },
      {}, "copy");
  return v.status();
}

Status HcqDevice::synchronize() {
  RETURN_IF_ERROR(hcq_->synchronize());
  std::lock_guard lock(launch_mu_);
  retire_locked(true);
  return Status();
}

void HcqDevice::retire_locked(bool all) {
  while (!in_flight_.empty() &&
         (all || hcq_->timeline().value() >= in_flight_.front().timeline_value)) {
    hcq_->allocator().free(in_flight_.front().args_mem);
    in_flight_.pop_front();
  }
}

Result<std::shared_ptr<Program>> HcqDevice::compile(
    const compiler::UOpPtr& ast, const std::optional<std::vector<compiler::Opt>>& opts) {
  return programs_.get(ast, opts, [&]() -> Result<std::shared_ptr<Program>> {
    double t0 = now_ms();
    ASSIGN_OR_RETURN(compiler::CompiledKernel k, target_->compile(ast, opts));
    ASSIGN_OR_RETURN(std::unique_ptr<hcq::Program> loaded, hcq_->load_program(k.binary));
    k.compile_ms = now_ms() - t0;
    return std::shared_ptr<Program>(new HcqProgram(*this, std::move(k), std::move(loaded)));
  });
}

Result<std::shared_ptr<Program>> HcqDevice::load(compiler::CompiledKernel&& k) {
  ASSIGN_OR_RETURN(std::unique_ptr<hcq::Program> loaded, hcq_->load_program(k.binary));
  return std::shared_ptr<Program>(new HcqProgram(*this, std::move(k), std::move(loaded)));
}

Status HcqDevice::launch(const Program& p,
                         std::span<const Buffer> bufs,
                         std::span<const int64_t> vars) {
  RETURN_IF_ERROR(check_launch(*this, p, bufs, vars));
  const auto& prg = static_cast<const HcqProgram&>(p);
  size_t prefix = prg.loaded->args_prefix();
  size_t args_bytes = prefix + 8 * (bufs.size() + vars.size());
  hcq::BufferSpec args_spec{.host = true, .cpu_access = true};
  ASSIGN_OR_RETURN(hcq::Buffer mem,
                   hcq_->allocator().alloc(std::max<size_t>(args_bytes, 8), args_spec));
  auto args = std::make_unique<hcq::ArgsState>(mem, prefix, static_cast<int>(bufs.size()),
                                               static_cast<int>(vars.size()));
  for (size_t i = 0; i < bufs.size(); i++)
    args->set_buf(static_cast<int>(i), static_cast<int64_t>(bufs[i].va));
  for (size_t i = 0; i < vars.size(); i++) args->set_var(static_cast<int>(i), vars[i]);
  double t0 = options().debug >= 1 ? now_ms() : 0;
  uint64_t v;
  {
    std::lock_guard lock(launch_mu_);
    retire_locked(false);
    Result<uint64_t> r = hcq_->submit_on_timeline(
        *queue_, [&](hcq::HwQueue& q) { q.exec(*prg.loaded, *args, prg.grid, prg.block); }, {},
        prg.spec.name);
    if (!r.ok()) {
      hcq_->allocator().free(mem);
      return r.status();
    }
    v = *r;
    in_flight_.push_back({v, mem, std::move(args), p.weak_from_this().lock()});
  }
  // Launches are asynchronous; DEBUG=1 waits for each to time it.
  if (options().debug < 1) return Status();
  RETURN_IF_ERROR(hcq_->timeline().wait(v));
  BG_LOG(1) << "launch " << prg.spec.name << " on " << name() << ": " << now_ms() - t0 << " ms";
  return Status();
}

Result<std::unique_ptr<Graph>> HcqDevice::make_graph(const std::vector<GraphLaunch>& launches,
                                                     size_t num_inputs) {
  ASSIGN_OR_RETURN(GraphInputs inputs, check_graph(*this, launches, num_inputs));
  std::vector<hcq::GraphItem> items;
  std::vector<std::shared_ptr<Program>> keep;
  for (const GraphLaunch& l : launches) {
    const auto& prg = static_cast<const HcqProgram&>(*l.prg);
    hcq::GraphItem it;
    it.prg = prg.loaded.get();
    it.grid = prg.grid;
    it.block = prg.block;
    for (size_t s = 0; s < l.bufs.size(); s++) {
      hcq::Value va = l.input[s] >= 0 ? hcq::Value::sym(l.input[s])
                                      : hcq::Value(static_cast<int64_t>(l.bufs[s].va));
      it.bufs.push_back(va);
      (s == 0 ? it.writes : it.reads).push_back({va, l.bufs[s].bytes});
    }
    items.push_back(std::move(it));
    keep.push_back(l.prg);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<hcq::Graph> g,
                   hcq::Graph::create(*hcq_, std::move(items), static_cast<int>(num_inputs)));
  return std::unique_ptr<Graph>(
      new HcqGraph(*this, std::move(inputs), std::move(g), std::move(keep)));
}

}  // namespace baregrad::runtime
