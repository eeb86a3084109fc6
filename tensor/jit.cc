#include "tensor/jit.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "base/error.h"
#include "base/log.h"
#include "tensor/counters.h"
#include "tensor/schedule.h"

namespace baregrad::tensor {
namespace detail {
namespace {
thread_local JitCapture* g_capture = nullptr;
thread_local bool g_paused = false;  // CAPTURING=0: kernels run but are not captured

// Installs a capture on this thread for the lifetime of the guard.
class CaptureScope {
 public:
  explicit CaptureScope(JitCapture* c) {
    if (g_capture)
      fail("jit",
           "having TinyJit inside another TinyJit is not supported: a TinyJit function called "
           "another TinyJit while capturing");
    g_capture = c;
  }
  ~CaptureScope() { g_capture = nullptr; }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};
}  // namespace

JitCapture* jit_capture() { return g_paused ? nullptr : g_capture; }

bool set_jit_capturing(bool on) {
  bool was = !g_paused;
  g_paused = !on;
  return was;
}

void JitCapture::record_kernel(std::shared_ptr<runtime::Program> prg,
                               std::vector<std::shared_ptr<DeviceBuffer>> bufs,
                               std::vector<int64_t> vars) {
  steps_.push_back({std::move(prg), std::move(bufs), nullptr, std::move(vars)});
}

void JitCapture::record_copy(std::shared_ptr<DeviceBuffer> dst,
                             std::shared_ptr<DeviceBuffer> src,
                             size_t bytes) {
  steps_.push_back({nullptr, {std::move(dst), std::move(src)}, nullptr, {}, bytes});
}

void JitCapture::record_upload(std::shared_ptr<DeviceBuffer> buf, Regenerate regen) {
  steps_.push_back({nullptr, {std::move(buf)}, std::move(regen), {}});
}

void check_no_host_read(const char* op) {
  if (jit_capture())
    fail("jit", std::string("cannot access tensor data during JIT capture (") + op +
                    "): the value would be baked into every replay");
}

void JitCapture::reject(std::string why) { rejected_.push_back(std::move(why)); }

void JitCapture::specialize(std::string why) {
  if (specialized_.size() < 4) specialized_.push_back(std::move(why));
}

void jit_specialize(std::string why) {
  if (JitCapture* c = jit_capture()) c->specialize(std::move(why));
}

}  // namespace detail

struct TinyJit::Captured {
  struct Step {
    std::shared_ptr<runtime::Program> prg;  // null for a random upload
    std::shared_ptr<runtime::Device> device;
    std::vector<runtime::Buffer> bufs;
    std::vector<int> input;  // per buffer: the input bound there, or -1
    detail::JitCapture::Regenerate regen;
    std::vector<int64_t> vars;                    // launch scalars
    std::vector<std::string> var_names;           // their Variables (a shared capture's replays)
    std::shared_ptr<runtime::Device> src_device;  // a copy: the device it reads (bufs[1])
    size_t copy_bytes = 0;
    std::vector<int> slot;       // per buffer: the arena (of slots) it lives in, or -1
    std::vector<size_t> offset;  // per buffer in a slot: its offset there
  };
  // The memory the private intermediates share, one arena per device (see plan);
  // free_intermediates() releases it and the next replay allocates it again.
  struct Slot {
    std::shared_ptr<runtime::Device> device;
    size_t bytes = 0;
    std::shared_ptr<DeviceBuffer> mem;  // null while freed
  };
  struct Input {
    Shape shape;
    DType dtype;
    std::shared_ptr<runtime::Device> device;
    std::shared_ptr<const compiler::SymTracker> sym;  // a symbolic shape: any value fits
  };
  struct Output {
    int input = -1;  // an input returned as is
    std::shared_ptr<DeviceBuffer> buf;
    DType dtype;
    Shape base_shape;
    ShapeTracker st;
    // Symbolic outputs: their trackers, evaluated at each replay's values.
    std::shared_ptr<const compiler::SymTracker> base_sym, sym;
  };
  std::vector<Input> inputs;
  std::vector<Output> outputs;
  std::vector<Step> steps;
  std::vector<std::shared_ptr<DeviceBuffer>> keep;  // every buffer the steps use but the slots
  std::vector<Slot> slots;
  bool freed = false;      // free_intermediates() released the slots
  std::set<uint64_t> own;  // addresses of the steps' buffers that are not inputs
  size_t kernels = 0, intermediate_bytes = 0, planned_bytes = 0;
  std::vector<std::string> specialized;  // why replays need the captured values (empty: shared)
  bool symbolic = false;                 // some kernel takes a Variable at launch
  // Variables whose values were verified not to matter: a capture at values differing in them
  // launched the same programs.
  std::set<std::string> verified;
  compiler::Bindings vals;  // the values it was captured with
  // The steps as one device graph (one submission per replay), when the device has graphs and
  // the capture has no random uploads between its kernels.
  std::unique_ptr<runtime::Graph> graph;

  std::vector<StepView> step_views() const {
    std::vector<StepView> out;
    for (const Step& st : steps) out.push_back({st.prg.get(), &st.input, &st.var_names});
    return out;
  }
};

namespace {
// Each tensor as a whole realized buffer (views and lazy values get one), in one schedule.
std::vector<Tensor> as_buffers(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  std::vector<Lazy> pending;
  for (const Tensor& t : ts) {
    const Lazy& l = t.lazy();
    out.push_back(l.is_base_view() && l.base->realized ? t : t.contiguous());
    if (!out.back().lazy().base->realized) pending.push_back(out.back().lazy());
  }
  run_schedule(create_schedule(pending));
  return out;
}

// The function's return values, realized: a view of a buffer the function computed or reads
// by address stays a view (a replay returns it over the same buffer), and anything else (a
// lazy value, a view of an input, whose buffer each call replaces) gets a buffer of its own.
std::vector<Tensor> as_outputs(const std::vector<Tensor>& ts, const std::vector<Tensor>& xs) {
  std::set<const DeviceBuffer*> inputs;
  for (const Tensor& x : xs) inputs.insert(x.lazy().base->realized.get());
  std::vector<Tensor> out;
  std::vector<size_t> own;  // the outputs that get a buffer of their own
  for (size_t i = 0; i < ts.size(); i++) {
    const DeviceBuffer* b = ts[i].lazy().base->realized.get();
    if (!b || inputs.count(b)) own.push_back(i);
  }
  std::vector<Tensor> pending;
  for (size_t i : own) pending.push_back(ts[i]);
  pending = as_buffers(pending);
  out = ts;
  for (size_t k = 0; k < own.size(); k++) out[own[k]] = pending[k];
  return out;
}

// Where a capture's private intermediates may start in their arena: what every device's own
// allocations give at least, so kernels that assume an aligned base stay right.
constexpr size_t kSlotAlign = 256;
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Memory for one slot of a capture's private intermediates.
std::shared_ptr<DeviceBuffer> alloc_slot(const std::shared_ptr<runtime::Device>& dev,
                                         size_t bytes) {
  auto mem = dev->alloc(bytes);
  if (!mem.ok()) mem.status().throw_if_error("jit");
  return std::make_shared<DeviceBuffer>(dev, *mem);
}

std::string describe(const Shape& s, DType d, const runtime::Device& dev) {
  return shape_str(s) + " " + d.name() + " on " + dev.name();
}
}  // namespace

TinyJit::TinyJit(Fn fn, bool prune) : fn_(std::move(fn)), prune_(prune) {}
TinyJit::~TinyJit() = default;

size_t TinyJit::kernel_count() const { return captured_ ? captured_->kernels : 0; }
std::vector<std::pair<std::string, std::string>> TinyJit::kernels() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (!captured_) return out;
  for (const auto& st : captured_->steps)
    if (st.prg) out.emplace_back(st.prg->spec.name, st.device->name());
  return out;
}
size_t TinyJit::intermediate_bytes() const { return captured_ ? captured_->intermediate_bytes : 0; }
size_t TinyJit::planned_bytes() const { return captured_ ? captured_->planned_bytes : 0; }
bool TinyJit::uses_graph() const { return captured_ && captured_->graph; }

void TinyJit::reset() {
  captured_.reset();
  calls_ = 0;
}

bool TinyJit::may_share() const { return captured_ && captured_->specialized.empty(); }

bool TinyJit::shared() const {
  if (!may_share()) return false;
  for (auto& [k, v] : captured_->vals)
    if (!captured_->verified.count(k)) return false;
  return true;
}

const compiler::Bindings& TinyJit::captured_vals() const {
  static const compiler::Bindings kNone;
  return captured_ ? captured_->vals : kNone;
}

namespace {
// Where captures `a` and `b` (of one function at different values) first differ in the programs
// they launch, their inputs, Variables or random uploads; empty when they do not.
std::string first_difference(const std::vector<TinyJit::StepView>& a,
                             const std::vector<TinyJit::StepView>& b) {
  auto name = [](const TinyJit::StepView& v) {
    return v.prg ? v.prg->spec.name : std::string("a random upload");
  };
  for (size_t i = 0; i < std::min(a.size(), b.size()); i++)
    if (a[i].prg != b[i].prg || *a[i].input != *b[i].input || *a[i].var_names != *b[i].var_names)
      return "step " + std::to_string(i) + " is " + name(a[i]) + " in one and " + name(b[i]) +
             " in the other";
  if (a.size() != b.size())
    return std::to_string(a.size()) + " steps in one and " + std::to_string(b.size()) +
           " in the other";
  return "";
}
}  // namespace

std::string TinyJit::why_not_shared() const {
  if (!captured_) return "nothing is captured yet";
  if (!captured_->specialized.empty()) {
    std::string why;
    for (auto& r : captured_->specialized) why += (why.empty() ? "" : "; ") + r;
    return why;
  }
  return shared()
             ? ""
             : "not verified yet: no call with other values of every Variable since the capture";
}

std::vector<Tensor> TinyJit::operator()(const std::vector<Tensor>& inputs,
                                        const compiler::Bindings& vals) {
  std::vector<Tensor> xs = as_buffers(inputs);
  std::unordered_map<const DeviceBuffer*, size_t> seen;
  for (size_t i = 0; i < xs.size(); i++)
    if (auto [it, fresh] = seen.emplace(xs[i].lazy().base->realized.get(), i); !fresh)
      fail("jit", "duplicate inputs to JIT: inputs " + std::to_string(it->second) + " and " +
                      std::to_string(i) + " are one buffer (pass a .clone() of one of them)");
  calls_++;
  std::set<std::string> changed;  // Variables whose values differ from the capture's
  if (captured_ && may_share()) {
    for (auto& [k, v] : vals)
      if (auto it = captured_->vals.find(k); it == captured_->vals.end() || it->second != v)
        changed.insert(k);
    for (auto& k : captured_->verified) changed.erase(k);
  }
  if (!changed.empty()) {  // verify: capture again at these values and compare
    std::unique_ptr<Captured> first = std::move(captured_);
    std::vector<Tensor> outs = capture(xs, vals);
    std::string diff = first_difference(first->step_views(), captured_->step_views());
    if (diff.empty()) {
      captured_->verified = first->verified;
      captured_->verified.insert(changed.begin(), changed.end());
    } else
      captured_->specialized.push_back(
          "the captures at two values of its Variables launch different programs (a value "
          "computed from a value on the host, such as x * float(n)): " +
          diff);
    return outs;
  }
  if (captured_) return replay(xs, vals);
  if (calls_ == 1) {
    std::vector<Tensor> outs = as_outputs(fn_(xs), xs);
    for (auto& o : outs) o = o.detach();
    return outs;
  }
  return capture(xs, vals);
}

std::vector<Tensor> TinyJit::capture(const std::vector<Tensor>& xs,
                                     const compiler::Bindings& vals) {
  detail::JitCapture cap;
  std::vector<Tensor> outs;
  {
    detail::CaptureScope scope(&cap);
    outs = as_outputs(fn_(xs), xs);
  }
  for (auto& o : outs) o = o.detach();  // the history would pin every activation
  if (cap.steps_.empty())
    fail("jit", "didn't JIT anything: the captured call ran no kernel and made no upload");
  if (!cap.rejected_.empty()) {
    std::string why;
    for (auto& r : cap.rejected_) why += (why.empty() ? "" : "; ") + r;
    fail("jit", "the captured call cannot be replayed: " + why);
  }
  if (prune_) prune(cap, xs);
  auto c = std::make_unique<Captured>();
  std::unordered_map<const DeviceBuffer*, int> input_of;
  for (size_t i = 0; i < xs.size(); i++) {
    const Lazy& l = xs[i].lazy();
    c->inputs.push_back({l.shape(), l.dtype(), l.base->device, l.sym});
    input_of.emplace(l.base->realized.get(), static_cast<int>(i));
  }
  for (const Tensor& o : outs) {
    const Lazy& l = o.lazy();
    Captured::Output out{-1, l.base->realized, l.dtype(), l.base->shape, l.st, l.base->sym, l.sym};
    if (auto it = input_of.find(out.buf.get()); it != input_of.end()) {
      out.input = it->second;
      out.buf.reset();
    }
    c->outputs.push_back(std::move(out));
  }
  plan(cap, input_of, *c);
  c->specialized = cap.specialized_;
  c->vals = vals;
  for (const Captured::Step& st : c->steps) c->symbolic |= !st.var_names.empty();
  captured_ = std::move(c);
  BG_LOG(1) << "jit: captured " << captured_->kernels << " kernels and "
            << captured_->steps.size() - captured_->kernels << " random uploads; intermediates "
            << captured_->intermediate_bytes << " bytes planned into " << captured_->planned_bytes;
  return outs;
}

void TinyJit::prune(detail::JitCapture& cap, const std::vector<Tensor>& xs) {
  // A step depends on the call when it reads an input, a buffer a random upload or a dependent
  // step wrote, or takes Variables at launch. The others computed the same values on the
  // capture as they would on any replay: they ran once and are dropped, their outputs kept as
  // state (unless a dependent step writes that buffer too: then it must run each time).
  std::set<const DeviceBuffer*> dep;
  for (const Tensor& x : xs) dep.insert(x.lazy().base->realized.get());
  std::vector<bool> keep(cap.steps_.size(), true);
  for (size_t i = 0; i < cap.steps_.size(); i++) {
    auto& st = cap.steps_[i];
    bool d = !st.prg || !st.vars.empty();
    for (size_t s = 1; s < st.bufs.size() && !d; s++) d = dep.count(st.bufs[s].get()) > 0;
    if (d) dep.insert(st.bufs[0].get());
    keep[i] = d;
  }
  std::vector<detail::JitCapture::Step> kept;
  for (size_t i = 0; i < cap.steps_.size(); i++)
    if (keep[i] || dep.count(cap.steps_[i].bufs[0].get())) kept.push_back(std::move(cap.steps_[i]));
  BG_LOG(1) << "jit: prune dropped " << cap.steps_.size() - kept.size()
            << " steps that do not depend on the inputs";
  if (kept.empty())
    fail("jit",
         "prune=True dropped every kernel: nothing the function computes depends on its "
         "inputs");
  cap.steps_ = std::move(kept);  // the kept steps hold the pruned steps' outputs they read
}

void TinyJit::plan(detail::JitCapture& cap,
                   const std::unordered_map<const DeviceBuffer*, int>& input_of,
                   Captured& c) {
  // A buffer is private to the step when the capture holds its only references and a step
  // writes it before any reads it; those share memory by liveness, the rest keep theirs.
  struct Life {
    size_t first = 0, last = 0, refs = 0;
    bool written_first = false;
  };
  std::unordered_map<const DeviceBuffer*, Life> life;
  std::vector<const DeviceBuffer*> order;
  for (size_t i = 0; i < cap.steps_.size(); i++) {
    auto& st = cap.steps_[i];
    for (size_t s = 0; s < st.bufs.size(); s++) {
      auto [it, fresh] = life.try_emplace(st.bufs[s].get());
      if (fresh) {
        it->second.first = i;
        it->second.written_first = s == 0;
        order.push_back(st.bufs[s].get());
      }
      it->second.last = i;
      it->second.refs++;
    }
  }
  std::unordered_map<const DeviceBuffer*, std::shared_ptr<DeviceBuffer>> owner;
  for (auto& st : cap.steps_)
    for (auto& b : st.bufs) owner.emplace(b.get(), b);
  // The private buffers share one arena per device: each is placed at an offset no buffer live
  // at the same time overlaps (tinygrad's memory planner places them at offsets too), the
  // largest first, each at the lowest offset that fits.
  struct Placed {
    const DeviceBuffer* db;
    size_t first, last, bytes, offset = 0;
  };
  std::vector<Placed> priv;
  for (const DeviceBuffer* db : order) {
    const Life& l = life[db];
    // +1: the `owner` map holds one reference too.
    bool private_buf = l.written_first && !input_of.count(db) &&
                       static_cast<size_t>(owner[db].use_count()) == l.refs + 1;
    if (!private_buf) {
      c.keep.push_back(owner[db]);
      continue;
    }
    c.intermediate_bytes += db->buffer.bytes;
    priv.push_back(
        {db, l.first, l.last, std::max(align_up(db->buffer.bytes, kSlotAlign), kSlotAlign)});
  }
  std::vector<size_t> by_size(priv.size());
  for (size_t i = 0; i < priv.size(); i++) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return priv[a].bytes > priv[b].bytes; });
  std::unordered_map<const runtime::Device*, int> arena_of;
  std::vector<std::vector<size_t>> placed;  // per arena: the buffers placed in it so far
  std::vector<std::pair<size_t, size_t>> busy;
  for (size_t i : by_size) {
    Placed& p = priv[i];
    const auto& dev = p.db->device;
    auto [a, fresh] = arena_of.try_emplace(dev.get(), static_cast<int>(c.slots.size()));
    if (fresh) {
      c.slots.push_back({dev, 0, nullptr});
      placed.emplace_back();
    }
    busy.clear();
    for (size_t j : placed[static_cast<size_t>(a->second)])
      if (priv[j].first <= p.last && p.first <= priv[j].last)
        busy.push_back({priv[j].offset, priv[j].offset + priv[j].bytes});
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (auto [lo, hi] : busy) {
      if (at + p.bytes <= lo) break;
      at = std::max(at, hi);
    }
    p.offset = at;
    placed[static_cast<size_t>(a->second)].push_back(i);
    Captured::Slot& sl = c.slots[static_cast<size_t>(a->second)];
    sl.bytes = std::max(sl.bytes, at + p.bytes);
  }
  std::unordered_map<const DeviceBuffer*, std::pair<int, size_t>> slot_of;
  for (const Placed& p : priv) slot_of[p.db] = {arena_of[p.db->device.get()], p.offset};
  for (Captured::Slot& sl : c.slots) {
    sl.mem = alloc_slot(sl.device, sl.bytes);
    c.planned_bytes += sl.bytes;
  }
  for (auto& st : cap.steps_) {
    Captured::Step step{
        st.prg, st.bufs[0]->device, {}, {}, std::move(st.regen), st.vars, {}, {}, 0, {}, {}};
    if (!st.prg && !step.regen)
      step.src_device = st.bufs[1]->device, step.copy_bytes = st.copy_bytes;
    if (st.prg)
      for (const compiler::VarArg& v : st.prg->spec.vars) step.var_names.push_back(v.name);
    for (auto& b : st.bufs) {
      auto p = slot_of.find(b.get());
      step.bufs.push_back(b->buffer);  // a slot's address is set by place_slots
      step.slot.push_back(p != slot_of.end() ? p->second.first : -1);
      step.offset.push_back(p != slot_of.end() ? p->second.second : 0);
      auto in = input_of.find(b.get());
      step.input.push_back(in != input_of.end() ? in->second : -1);
    }
    c.kernels += st.prg != nullptr;
    c.steps.push_back(std::move(step));
  }
  place_slots(c);
  make_graph(c, input_of.size());
}

void TinyJit::place_slots(Captured& c) {
  c.own.clear();
  for (Captured::Step& st : c.steps)
    for (size_t k = 0; k < st.bufs.size(); k++) {
      if (st.slot[k] >= 0)
        st.bufs[k].va = c.slots[static_cast<size_t>(st.slot[k])].mem->buffer.va + st.offset[k];
      if (st.input[k] < 0) c.own.insert(st.bufs[k].va);
    }
}

void TinyJit::make_graph(Captured& c, size_t num_inputs) {
  if (c.steps.empty()) return;
  std::vector<runtime::GraphLaunch> launches;
  for (const Captured::Step& st : c.steps) {
    if (!st.prg || st.device != c.steps[0].device) return;
    launches.push_back({st.prg, st.bufs, st.input});
  }
  auto g = c.steps[0].device->make_graph(launches, num_inputs);
  if (g.ok()) {
    c.graph = std::move(*g);
  } else {
    BG_LOG(1) << "jit: replaying launch by launch: " << g.status().message();
  }
}

void TinyJit::free_intermediates() {
  if (!captured_) return;
  Captured& c = *captured_;
  if (c.freed || c.slots.empty()) return;
  // A replay in flight may still use them.
  for (const Captured::Slot& sl : c.slots) sl.device->synchronize().throw_if_error("jit");
  c.graph.reset();  // it holds their addresses
  for (Captured::Slot& sl : c.slots) sl.mem.reset();
  c.freed = true;
}

void TinyJit::reallocate(Captured& c, size_t num_inputs) {
  for (Captured::Slot& sl : c.slots) sl.mem = alloc_slot(sl.device, sl.bytes);
  place_slots(c);
  c.freed = false;
  make_graph(c, num_inputs);
}

std::vector<Tensor> TinyJit::replay(const std::vector<Tensor>& xs, const compiler::Bindings& vals) {
  if (captured_->freed) reallocate(*captured_, captured_->inputs.size());
  const Captured& c = *captured_;
  bool fresh = c.symbolic && c.specialized.empty();  // launch with this call's values
  if (xs.size() != c.inputs.size())
    fail("jit", std::to_string(xs.size()) + " inputs; the captured call had " +
                    std::to_string(c.inputs.size()));
  std::vector<runtime::Buffer> in(xs.size());
  for (size_t i = 0; i < xs.size(); i++) {
    const Lazy& l = xs[i].lazy();
    const auto& want = c.inputs[i];
    bool sym_ok = fresh && want.sym && l.sym && l.sym->shape() == want.sym->shape();
    if ((l.shape() != want.shape && !sym_ok) || l.dtype() != want.dtype ||
        l.base->device != want.device)
      fail("jit", "input " + std::to_string(i) + " is " +
                      describe(l.shape(), l.dtype(), *l.base->device) + "; the captured call had " +
                      describe(want.shape, want.dtype, *want.device));
    in[i] = l.base->realized->buffer;
  }
  // An input that is one of the capture's own buffers (an output of the previous replay fed
  // back, say) would be overwritten while it is read: it is read from a copy.
  std::vector<Tensor> copies;
  for (size_t i = 0; i < xs.size(); i++)
    if (c.own.count(in[i].va)) {
      copies.push_back(xs[i].detach().contiguous());
      copies.back().realize();
      in[i] = copies.back().lazy().base->realized->buffer;
    }
  for (const Captured::Step& step : c.steps)
    if (step.prg) counters().count_kernel(step.prg->spec);
  if (c.graph) {
    c.graph->replay(in).throw_if_error("jit");
    return outputs(xs, vals);
  }
  std::vector<runtime::Buffer> bufs;
  std::vector<int64_t> vars;
  for (const Captured::Step& step : c.steps) {
    bufs = step.bufs;
    for (size_t s = 0; s < bufs.size(); s++)
      if (step.input[s] >= 0) bufs[s] = in[step.input[s]];
    if (!step.prg) {
      if (step.regen)
        step.regen(*step.device, bufs[0]);
      else
        detail::copy_between(*step.device, bufs[0], *step.src_device, bufs[1], step.copy_bytes);
      continue;
    }
    vars = step.vars;
    for (size_t k = 0; fresh && k < step.var_names.size(); k++) {
      auto it = vals.find(step.var_names[k]);
      if (it == vals.end())
        fail("jit", "the capture takes Variable '" + step.var_names[k] +
                        "', which this call does not bind");
      vars[k] = it->second;
    }
    step.device->launch(*step.prg, bufs, vars).throw_if_error("jit");
  }
  return outputs(xs, vals);
}

std::vector<Tensor> TinyJit::outputs(const std::vector<Tensor>& xs,
                                     const compiler::Bindings& vals) const {
  const Captured& c = *captured_;
  bool fresh = c.symbolic && c.specialized.empty();
  // A symbolic tracker at this call's values (its own, where this call binds fewer).
  auto at = [&](const std::shared_ptr<const compiler::SymTracker>& s) {
    auto out = std::make_shared<compiler::SymTracker>(*s);
    for (auto& [k, v] : vals)
      if (out->vals.count(k)) out->vals[k] = v;
    return std::shared_ptr<const compiler::SymTracker>(std::move(out));
  };
  std::vector<Tensor> outs;
  for (const Captured::Output& o : c.outputs) {
    if (o.input >= 0) {
      const Lazy& in = xs[o.input].lazy();
      if (fresh && o.sym && in.sym) {
        auto s = at(o.sym);
        outs.push_back(Tensor(lazy_view(in, s->eval(), s)));
      } else {
        outs.push_back(Tensor(lazy_view(in, o.st)));
      }
    } else if (fresh && o.sym) {
      auto s = at(o.sym);
      Shape base_shape = o.base_shape;
      if (o.base_sym) base_shape = at(o.base_sym)->eval().shape();
      Lazy base = lazy_buffer(o.buf, o.dtype, base_shape);
      if (o.base_sym) base.base->sym = at(o.base_sym);
      outs.push_back(Tensor(lazy_view(base, s->eval(), s)));
    } else {
      outs.push_back(Tensor(lazy_view(lazy_buffer(o.buf, o.dtype, o.base_shape), o.st)));
    }
  }
  return outs;
}

}  // namespace baregrad::tensor
