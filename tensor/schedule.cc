#include "tensor/schedule.h"

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/check.h"
#include "base/checked.h"
#include "base/error.h"
#include "base/log.h"
#include "compiler/ast.h"
#include "compiler/view_ops.h"
#include "tensor/schedule_cache.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {

// The most steps (elements, reduced axes included) one kernel may run: 2**40 is seconds on a
// GPU and many minutes on a CPU; a graph asking for more is an error, not a hang.
constexpr int64_t kMaxKernelIterations = int64_t{1} << 40;
using compiler::UOp;
using compiler::UOpPtr;
using BasePtr = std::shared_ptr<LazyBase>;

// A chain of elementwise ops longer than this is cut into kernels of at most this many ops, so
// kernel ASTs (and the recursive passes over them) stay shallow however deep the graph is.
constexpr size_t kMaxFusedDepth = 512;

// `outer` maps a consumer's shape onto a base's layout; `inner` maps that base's shape onto
// its source: the consumer reads the source through both.
ShapeTracker compose(const ShapeTracker& inner, const ShapeTracker& outer) {
  ShapeTracker st = inner;
  st.views.insert(st.views.end(), outer.views.begin(), outer.views.end());
  return compiler::simplify(st);
}

// A contiguous view that only adds or removes size-1 dims: same elements, same order.
bool is_unit_reshape(const Lazy& v) {
  if (v.st.views.size() != 1 || !compiler::is_contiguous(v.st)) return false;
  auto squeezed = [](const std::vector<int64_t>& s) {
    std::vector<int64_t> out;
    for (int64_t d : s)
      if (d != 1) out.push_back(d);
    return out;
  };
  return squeezed(v.shape()) == squeezed(v.base->shape);
}

bool has_mask(const ShapeTracker& st) {
  return std::any_of(st.views.begin(), st.views.end(), [](const auto& v) { return v.mask; });
}

// Kernels over symbolic shapes are built from SymTrackers (compiler/sym_view.h); these overloads
// let one builder serve both kinds of tracker.
using compiler::Sym;
using compiler::SymTracker;
bool has_mask(const SymTracker& st) {
  return std::any_of(st.views.begin(), st.views.end(), [](const auto& v) { return v.mask; });
}
SymTracker compose(const SymTracker& inner, const SymTracker& outer) {
  return compiler::sym_compose(inner, outer);
}
const ShapeTracker& tracker(const Lazy& l, const ShapeTracker*) { return l.st; }
SymTracker tracker(const Lazy& l, const SymTracker*) {
  return l.sym ? *l.sym : SymTracker::of(l.st);
}
const ShapeTracker& ast_view(const ShapeTracker& st) { return st; }
ShapeTracker ast_view(const SymTracker& st) { return st.instantiate(); }
uint64_t memo_key(const ShapeTracker& st) { return compiler::hash_value(st); }
uint64_t memo_key(const SymTracker& st) { return compiler::hash_value(st.instantiate()); }

// The symbolic form of an AST view's last view (its shadow, or its ints).
compiler::SymView last_sym(const ShapeTracker& st) {
  const compiler::View& v = st.views.back();
  return v.sym ? *v.sym : compiler::SymView::of(v);
}

// A symbolic kernel AST the code generator accepts: its views agree on every axis's size (one
// Sym other than 1), and every buffer holds what any value of the Variables reads or writes.
bool sym_kernel_ok(const UOpPtr& ast, const std::vector<std::shared_ptr<LazyBase>>& bufs) {
  auto no = [](const std::string& why) {
    BG_LOG(2) << "symbolic kernel built for the current values: " << why;
    return false;
  };
  std::vector<Sym> sizes;
  for (const UOp* n : ast->toposort()) {
    if (n->op() == Op::REDUCE_AXIS)  // the stored result has size 1 on the reduced axes
      for (int a : n->arg_as<compiler::ReduceArg>().axes)
        for (const UOpPtr& store : ast->src())
          if (last_sym(store->src(0)->arg_as<ShapeTracker>()).shape[a] != Sym(1))
            return no("the stored shape is not 1 on reduced axis " + std::to_string(a));
    if (n->op() != Op::VIEW) continue;
    const ShapeTracker& st = n->arg_as<ShapeTracker>();
    compiler::SymView v = last_sym(st);
    if (sizes.empty()) sizes.assign(v.shape.size(), Sym(1));
    for (size_t i = 0; i < v.shape.size() && i < sizes.size(); i++) {
      if (v.shape[i] == Sym(1)) continue;
      if (sizes[i] != Sym(1) && sizes[i] != v.shape[i])
        return no("axis " + std::to_string(i) + " is " + sizes[i].str() + " in one view and " +
                  v.shape[i].str() + " in another");
      sizes[i] = v.shape[i];
    }
    if (n->src(0)->op() == Op::IOTA) continue;  // no buffer: any index is a value
    const compiler::View& first = st.views.front();
    int64_t need =
        first.sym ? first.sym->extent_bound() : compiler::real_size(ShapeTracker{{first}});
    const LazyBase& b = *bufs[static_cast<size_t>(n->src(0)->arg_as<int64_t>())];
    int64_t have = b.realized ? static_cast<int64_t>(b.realized->buffer.bytes / b.dtype.itemsize())
                   : b.write_into
                       ? static_cast<int64_t>(b.write_into->buffer.bytes / b.dtype.itemsize())
                       : output_elements(b);
    if (need > have)
      return no("buffer " + std::to_string(n->src(0)->arg_as<int64_t>()) + " holds " +
                std::to_string(have) + " elements; the Variables' bounds allow reading " +
                std::to_string(need));
  }
  return true;
}

class Scheduler {
 public:
  Scheduler() = default;
  // Kernels built with placeholders for the values of these constant bases (the schedule
  // cache's templates, detail::const_placeholder).
  explicit Scheduler(const std::unordered_map<const LazyBase*, uint32_t>* const_slots)
      : const_slots_(const_slots) {}

  std::vector<ScheduleItem> run(const std::vector<Lazy>& targets) {
    std::vector<const Lazy*> todo;
    for (auto& t : targets)
      if (!broadcast_const(t)) todo.push_back(&t);
    for (const Lazy* t : todo) {
      check_not_overwritten(*t->base);
      visit(t->base);
    }
    for (const Lazy* t : todo)
      if (!t->base->realized) outputs_.insert(t->base.get());
    decide();
    std::vector<ScheduleItem> items;
    for (LazyBase* b : order_)
      if (outputs_.count(b)) items.push_back(kernel(b));
    return order_writes_after_reads(std::move(items));
  }

 private:
  const std::unordered_map<const LazyBase*, uint32_t>* const_slots_ = nullptr;

  // Post-order walk from `root` with an explicit stack: graphs millions of ops deep must not
  // overflow the C++ stack.
  void visit(const BasePtr& root) {
    struct Frame {
      LazyBase* base;
      size_t next_src;
    };
    std::vector<Frame> stack;
    auto enter = [&](const BasePtr& b) {
      if (!seen_.insert(b.get()).second) return;
      ptrs_[b.get()] = b;
      stack.push_back({b.get(), 0});
    };
    enter(root);
    while (!stack.empty()) {
      LazyBase* b = stack.back().base;
      size_t i = stack.back().next_src;
      if (!b->realized && i < b->srcs.size()) {
        stack.back().next_src++;
        enter(b->srcs[i].base);
        continue;
      }
      stack.pop_back();
      if (b->dropped && !b->realized)
        fail("realize",
             "a gradient of shape " + shape_str(b->shape) + " " + b->dtype.name() +
                 " of a tensor that does not require grad was dropped when an optimizer step "
                 "(or assign) overwrote a weight it reads: read it before the step, or set "
                 "requires_grad=True on that tensor to keep it");
      if (!b->realized)
        for (auto& s : b->srcs) uses_[s.base.get()].push_back({b, &s});
      order_.push_back(b);
    }
  }

  static bool pending(const LazyBase* b) { return !b->realized && b->kind != LazyKind::kConst; }

  // A broadcast of a constant (Tensor.full, zeros, ones) asked for as a target has nothing to
  // compute: it stays a constant that reads fold, and setitem into it makes the buffer it needs
  // (a 1-element buffer made for it would be read through a broadcast setitem cannot write).
  static bool broadcast_const(const Lazy& t) {
    return t.base->kind == LazyKind::kConst && !t.base->realized && !t.is_base_view();
  }

  // True when `b`, inlined, still computes a reduction. Reads the memo of b's sources, so it is
  // only called on `b` in a decide() pass after its sources (order_ is sources first).
  bool has_reduce(const LazyBase* b) const {
    if (!pending(b) || outputs_.count(b)) return false;
    if (b->kind == LazyKind::kReduce) return true;
    return std::any_of(b->srcs.begin(), b->srcs.end(),
                       [&](const Lazy& s) { return inlined_reduce_.count(s.base.get()) > 0; });
  }

  // How many pending ops deep `b`'s kernel expression would be if `b` were inlined; same
  // calling rule as has_reduce().
  size_t fused_depth(const LazyBase* b) const {
    if (!pending(b) || outputs_.count(b)) return 0;
    size_t d = 0;
    for (auto& s : b->srcs)
      if (auto it = depth_.find(s.base.get()); it != depth_.end()) d = std::max(d, it->second);
    return d + 1;
  }

  // Which bases become kernel outputs. Local rules, then whole-kernel consistency, to a fixed
  // point: every rule only ever adds outputs.
  void decide() {
    for (bool changed = true; changed;) {
      changed = false;
      inlined_reduce_.clear();
      depth_.clear();
      for (LazyBase* b : order_) {
        bool unrealized_const = b->kind == LazyKind::kConst && !b->realized;
        bool candidate = (pending(b) || unrealized_const) && !outputs_.count(b);
        if (candidate && must_realize(b)) {
          outputs_.insert(b);
          changed = true;
        }
        if (has_reduce(b)) inlined_reduce_.insert(b);
        if (size_t d = fused_depth(b)) depth_[b] = d;
      }
      for (LazyBase* b : order_)
        if (outputs_.count(b) && split_conflicting_reduces(b)) changed = true;
    }
  }

  // Whether `b`'s inlined expression (down to kernel outputs and buffers) can be computed at
  // a pad's masked-out elements, whose loads read 0, and cheaply: no integer division or
  // remainder, no reduction (a reduction is read unchanged; see has_reduce), plain reads only.
  bool safe_outside_mask(const LazyBase* b) const {
    std::vector<const LazyBase*> stack{b};
    std::unordered_set<const LazyBase*> seen{b};
    while (!stack.empty()) {
      const LazyBase* x = stack.back();
      stack.pop_back();
      if (x != b && (!pending(x) || outputs_.count(x))) continue;
      if (x->kind == LazyKind::kReduce) return false;
      if (x->kind == LazyKind::kAlu && (x->op == Op::IDIV || x->op == Op::MOD)) return false;
      for (const Lazy& s : x->srcs) {
        // Plain reads only (one view, no mask: a broadcast is fine): windowed or padded reads
        // gated again by the pad's mask made slow kernels (see must_realize).
        if (s.st.views.size() > 1 || has_mask(s.st)) return false;
        if (seen.insert(s.base.get()).second) stack.push_back(s.base.get());
      }
    }
    return true;
  }

  bool must_realize(LazyBase* b) {
    if (b->force_kernel || fused_depth(b) > kMaxFusedDepth) return true;
    if (b->kind == LazyKind::kCopy) return true;  // its own item, after its source
    const auto& uses = uses_[b];
    if (std::any_of(uses.begin(), uses.end(),
                    [](const auto& u) { return u.first->kind == LazyKind::kCopy; }))
      return true;                                  // a copy reads a buffer
    if (b->kind == LazyKind::kConst) return false;  // padded: where(valid, c, 0), see build_expr
    if (b->kind == LazyKind::kReduce && uses.size() > 1) return true;  // never recompute
    for (auto& [consumer, view] : uses) {
      // A padded computed value gets a buffer, but for a padded copy (x.pad(...).contiguous(),
      // as conv2d makes): that kernel computes it with the pad's zeros put back (build_expr)
      // when every masked-out element's computation is harmless (no integer division by a 0
      // its loads read). Fused into other readers, its gated loads made beautiful_mnist's
      // max_pool2d backward slower (bench/results/pad-fusion-experiment-cpu-2026-11-26.txt).
      bool padded_copy = consumer->force_kernel && consumer->kind == LazyKind::kCast &&
                         consumer->op != Op::BITCAST && consumer->srcs.size() == 1;
      if (has_mask(view->st) && b->kind != LazyKind::kBuffer && b->kind != LazyKind::kIota &&
          (!padded_copy || !safe_outside_mask(b)))
        return true;
      if (has_reduce(b) && (consumer->kind == LazyKind::kReduce || !is_unit_reshape(*view)))
        return true;  // a reduction is only read unchanged, by elementwise work
    }
    return false;
  }

  // The reductions `root`'s kernel contains (inlined, not realized separately), in depth-first
  // order, each once.
  std::vector<LazyBase*> fused_reduces(LazyBase* root) {
    std::vector<LazyBase*> reduces;
    std::unordered_set<LazyBase*> seen{root};
    std::vector<LazyBase*> stack{root};
    while (!stack.empty()) {
      LazyBase* b = stack.back();
      stack.pop_back();
      if (!pending(b) || (b != root && outputs_.count(b))) continue;
      if (b->kind == LazyKind::kReduce) {
        reduces.push_back(b);
        continue;
      }
      for (auto s = b->srcs.rbegin(); s != b->srcs.rend(); ++s)
        if (seen.insert(s->base.get()).second) stack.push_back(s->base.get());
    }
    return reduces;
  }

  // The reductions an output's kernel would contain must share source shape and axes. A write
  // through a view (setitem, assign into t[1:]) runs in the view's shape, so it fuses none.
  bool split_conflicting_reduces(LazyBase* root) {
    std::vector<LazyBase*> reduces = fused_reduces(root);
    bool changed = false;
    for (LazyBase* r : reduces) {
      const LazyBase* first = reduces[0];
      if (root->write_view || r->axes != first->axes ||
          r->srcs[0].shape() != first->srcs[0].shape()) {
        changed |= outputs_.insert(r).second;
      }
    }
    return changed;
  }

  // ---- kernel ASTs ----

  struct KernelCtx {
    std::vector<BasePtr> bufs;
    std::unordered_map<const LazyBase*, UOpPtr> globals;
    // expr() of each (base, view) already built: a DAG that reuses a value (x = x + x, n times)
    // is walked once per distinct node, not once per path.
    std::map<std::pair<const LazyBase*, uint64_t>, std::vector<std::pair<ShapeTracker, UOpPtr>>>
        exprs;
    std::map<std::pair<const LazyBase*, uint64_t>, std::vector<std::pair<SymTracker, UOpPtr>>>
        sym_exprs;
    compiler::Bindings vals;  // symbolic kernels: the Variables' values
    bool saw_sym = false;     // a concrete build read a view with a symbolic shadow
  };
  auto& memo(KernelCtx& k, const ShapeTracker*) { return k.exprs; }
  auto& memo(KernelCtx& k, const SymTracker*) { return k.sym_exprs; }

  UOpPtr global_of(KernelCtx& k, LazyBase* b) {
    auto it = k.globals.find(b);
    if (it != k.globals.end()) return it->second;
    int slot = static_cast<int>(k.bufs.size());
    k.bufs.push_back(ptrs_.at(b));
    return k.globals[b] = compiler::global(slot, b->dtype);
  }

  // The value of `b` read through `st` (which maps the kernel's shape onto b's layout); `T` is
  // ShapeTracker, or SymTracker for a kernel over symbolic shapes.
  template <class T>
  UOpPtr expr(KernelCtx& k, LazyBase* b, const T& st, bool top) {
    auto& built = memo(k, static_cast<const T*>(nullptr))[{b, memo_key(st)}];
    for (auto& [seen_st, value] : built)
      if (seen_st == st) return value;
    UOpPtr value = build_expr(k, b, st, top);
    built.emplace_back(st, value);
    return value;
  }

  // `value` where the masked view `st` is valid, 0 elsewhere. The validity is a load of an iota
  // through the same view with its memory-facing view's strides 0 and offset 1: 1 inside every
  // mask, 0 outside.
  template <class T>
  UOpPtr padded(KernelCtx& k, const T& st, UOpPtr value, DType dtype) {
    if constexpr (std::is_same_v<T, SymTracker>)
      compiler::merge_bindings("realize", k.vals, st.vals);
    T one = st;
    auto& mem = one.views.front();
    for (auto& stride : mem.strides) stride = decltype(mem.offset)(0);
    mem.offset = decltype(mem.offset)(1);
    UOpPtr valid = UOp::make(Op::CMPNE, dtypes::kBool,
                             {compiler::load(compiler::iota(dtypes::kInt32), ast_view(one)),
                              UOp::cnst(dtypes::kInt32, 0)});
    return UOp::make(Op::WHERE, dtype, {valid, std::move(value), UOp::cnst(dtype, 0)});
  }

  template <class T>
  UOpPtr build_expr(KernelCtx& k, LazyBase* b, const T& st, bool top) {
    if (b->kind == LazyKind::kConst && !b->realized) {
      check_not_overwritten(*b);  // a constant that write_view replaced
      const uint32_t* slot = nullptr;
      if (const_slots_)
        if (auto it = const_slots_->find(b); it != const_slots_->end()) slot = &it->second;
      UOpPtr c = slot ? detail::const_placeholder(*slot, b->dtype) : UOp::cnst(b->dtype, b->value);
      if (b->sym_value) {
        compiler::merge_bindings("realize", k.vals, b->sym_value_vals);
        c = compiler::cast(compiler::sym_index(*b->sym_value), b->dtype);
      }
      if (!has_mask(st)) return c;
      // Padded (a setitem's mask, Tensor.ones(...).pad(...)): no buffer.
      return padded(k, st, c, b->dtype);
    }
    if (b->kind == LazyKind::kIota && !b->realized && (top || !outputs_.count(b))) {
      if constexpr (std::is_same_v<T, SymTracker>)
        compiler::merge_bindings("realize", k.vals, st.vals);
      return compiler::load(compiler::iota(b->dtype), ast_view(st));
    }
    if (!pending(b) || (!top && outputs_.count(b))) {
      check_not_overwritten(*b);
      if constexpr (std::is_same_v<T, SymTracker>)
        compiler::merge_bindings("realize", k.vals, st.vals);
      return compiler::load(global_of(k, b), ast_view(st));
    }
    const T* kind = nullptr;
    if (b->kind == LazyKind::kReduce) {
      // Read unchanged (the fusion rule), so the kernel's full shape is the source's shape.
      const Lazy& s = b->srcs[0];
      return compiler::reduce_axis(b->op, b->axes, expr(k, s.base.get(), tracker(s, kind), false));
    }
    std::vector<UOpPtr> src;
    for (auto& s : b->srcs) {
      k.saw_sym |= s.sym != nullptr;
      src.push_back(expr(k, s.base.get(), compose(tracker(s, kind), st), false));
    }
    UOpPtr value;
    if (b->kind == LazyKind::kCast) {
      value = b->op == Op::BITCAST ? UOp::make(Op::BITCAST, b->dtype, {src[0]})
                                   : compiler::cast(src[0], b->dtype);
    } else {
      CHECK(b->kind == LazyKind::kAlu) << "schedule: unexpected base kind";
      value = UOp::make(b->op, b->dtype, std::move(src));
    }
    // Computed and padded (see must_realize): its loads read 0 outside the mask, the value of
    // those zeros is not 0 (exp(0)), so the pad's zeros are put back.
    return has_mask(st) ? padded(k, st, std::move(value), b->dtype) : value;
  }

  // The kernel of `out` over symbolic shapes, or nullopt when it cannot serve every value of
  // its Variables (it is then built for the current values).
  std::optional<ScheduleItem> sym_kernel(LazyBase* out, const std::vector<LazyBase*>& reduces) {
    KernelCtx k;
    UOpPtr g = global_of(k, out);
    SymTracker st = out->sym ? *out->sym : SymTracker::contiguous(compiler::to_syms(out->shape));
    const LazyBase* r = reduces.empty() ? nullptr : reduces[0];
    std::vector<Sym> r_shape = !r       ? st.shape()
                               : r->sym ? r->sym->shape()
                                        : compiler::to_syms(r->shape);
    if (r_shape != st.shape()) {  // (symbolic shapes: also where a size is 1 for now only)
      std::optional<SymTracker> full = compiler::sym_reshape(st, r_shape);
      if (!full) {
        BG_LOG(2) << "symbolic kernel built for the current values: the output "
                  << compiler::syms_str(st.shape()) << " is no reshape of its reduction's "
                  << compiler::syms_str(r_shape);
        return std::nullopt;
      }
      st = *full;
    }
    UOpPtr value = expr(k, out, st, true);
    if (out->write_view_sym)
      st = *out->write_view_sym;
    else if (out->write_view)
      st = SymTracker::of(*out->write_view);
    compiler::merge_bindings("realize", k.vals, st.vals);
    ScheduleItem item{compiler::sink({compiler::store(g, ast_view(st), value)}), std::move(k.bufs),
                      std::move(k.vals), false};
    if (!sym_kernel_ok(item.ast, item.bufs)) return std::nullopt;
    return item;
  }

  ScheduleItem kernel(LazyBase* out) {
    if (out->kind == LazyKind::kCopy)  // no AST: run_schedule copies bufs[1] into bufs[0]
      return ScheduleItem{nullptr, {ptrs_.at(out), out->srcs[0].base}, {}, false};
    std::vector<LazyBase*> reduces = fused_reduces(out);
    check_iterations(out, reduces.empty() ? out->shape : reduces[0]->srcs[0].shape());
    bool symbolic =
        out->sym || out->write_view_sym || (!reduces.empty() && reduces[0]->srcs[0].sym);
    if (symbolic)
      if (std::optional<ScheduleItem> item = sym_kernel(out, reduces)) return std::move(*item);
    ScheduleItem item = concrete_kernel(out, reduces);  // specialized: it read a symbolic view
    if (item.specialized && !symbolic)  // a concrete output reading a symbolic view (an offset)
      if (std::optional<ScheduleItem> sym = sym_kernel(out, reduces)) return std::move(*sym);
    item.specialized |= symbolic;
    return item;
  }

  ScheduleItem concrete_kernel(LazyBase* out, const std::vector<LazyBase*>& reduces) {
    KernelCtx k;
    UOpPtr g = global_of(k, out);
    // With a fused reduction the kernel runs in the reduction's (keepdim) shape; the output
    // differs from it at most by size-1 dims.
    ShapeTracker st = ShapeTracker::contiguous(out->shape);
    if (!reduces.empty() && reduces[0]->shape != out->shape)
      st = compiler::reshape(st, reduces[0]->shape);
    UOpPtr value = expr(k, out, st, true);
    if (out->write_view) {
      CHECK(reduces.empty()) << "schedule: a write through a view fused a reduction";
      st = *out->write_view;
    }
    return ScheduleItem{compiler::sink({compiler::store(g, st, value)}), std::move(k.bufs),
                        std::move(k.vals), k.saw_sym};
  }

  // A kernel over `full` (its shape with any reduced axes) must be one that can finish: a graph
  // of lazily broadcast tensors can describe 2**62 steps, which would spin rather than fail.
  static void check_iterations(const LazyBase* out, const Shape& full) {
    bytes_or_fail("realize", out->shape, out->numel(), out->dtype.itemsize());  // MemoryError
    int64_t n = numel_or_fail("realize", full);
    if (n > kMaxKernelIterations)
      fail("realize",
           "a kernel for " + shape_str(out->shape) + " " + out->dtype.name() + " runs over " +
               shape_str(full) + ": " + std::to_string(n) + " elements, more than the limit 2**" +
               std::to_string(std::bit_width(static_cast<uint64_t>(kMaxKernelIterations)) - 1),
           ErrorKind::kValue);
  }

  static void check_not_overwritten(const LazyBase& b) {
    if (b.overwritten && b.kind == LazyKind::kConst)
      fail("realize", "a view of a constant tensor of shape " + shape_str(b.shape) + " " +
                          b.dtype.name() +
                          " (Tensor.full, zeros, ones) is read after setitem or assign changed "
                          "another view of it; a constant has no storage to share: call "
                          ".contiguous() on it before taking views");
    if (b.overwritten)
      fail("realize", "a tensor of shape " + shape_str(b.shape) + " " + b.dtype.name() +
                          " reads a buffer that assign() has overwritten since; realize it (or "
                          "copy it with contiguous().realize()) before the assign");
  }

  // Orders the kernels so that each runs after the kernels producing its inputs and every
  // kernel writing into an existing buffer (assign) runs after the kernels reading that buffer's
  // old contents. Stable: otherwise the order stays the DFS order.
  static std::vector<ScheduleItem> order_writes_after_reads(std::vector<ScheduleItem> items) {
    size_t n = items.size();
    std::unordered_map<const LazyBase*, size_t> producer;
    std::unordered_map<const DeviceBuffer*, size_t> writer;
    for (size_t i = 0; i < n; i++) {
      producer[items[i].bufs[0].get()] = i;
      if (auto& w = items[i].bufs[0]->write_into) writer[w.get()] = i;
    }
    if (writer.empty()) return items;
    std::vector<std::vector<size_t>> next(n);
    std::vector<size_t> indegree(n, 0);
    auto edge = [&](size_t from, size_t to) {
      next[from].push_back(to);
      indegree[to]++;
    };
    for (size_t i = 0; i < n; i++)
      for (size_t s = 1; s < items[i].bufs.size(); s++) {
        const LazyBase* in = items[i].bufs[s].get();
        if (auto p = producer.find(in); p != producer.end()) edge(p->second, i);
        if (!in->realized) continue;
        if (auto w = writer.find(in->realized.get()); w != writer.end() && w->second != i)
          edge(i, w->second);
      }
    std::set<size_t> ready;
    for (size_t i = 0; i < n; i++)
      if (indegree[i] == 0) ready.insert(i);
    std::vector<ScheduleItem> out;
    while (!ready.empty()) {
      size_t i = *ready.begin();
      ready.erase(ready.begin());
      out.push_back(std::move(items[i]));
      for (size_t j : next[i])
        if (--indegree[j] == 0) ready.insert(j);
    }
    if (out.size() != n)
      fail("assign",
           "a kernel reads both the old and the new value of an assigned buffer; "
           "realize the reader before the assign");
    return out;
  }

  std::unordered_set<const LazyBase*> seen_;
  std::unordered_map<const LazyBase*, BasePtr> ptrs_;
  std::unordered_map<const LazyBase*, std::vector<std::pair<LazyBase*, const Lazy*>>> uses_;
  std::vector<LazyBase*> order_;  // sources before users
  std::set<const LazyBase*> outputs_;
  // Per decide() pass: the bases that, inlined, compute a reduction; and fused_depth() of each.
  std::unordered_set<const LazyBase*> inlined_reduce_;
  std::unordered_map<const LazyBase*, size_t> depth_;
};

}  // namespace

int64_t output_elements(const LazyBase& b) {
  if (!b.sym) return b.numel();
  return std::max(compiler::sym_prod(b.sym->shape()).vmax(), b.numel());
}

std::vector<ScheduleItem> create_schedule(const std::vector<Lazy>& targets) {
  // realize() of realized tensors: nothing to compute (an overwritten one still throws below).
  if (std::all_of(targets.begin(), targets.end(),
                  [](const Lazy& t) { return t.base->realized && !t.base->overwritten; }))
    return {};
  std::optional<detail::GraphKey> key = detail::graph_key(targets);
  if (!key) return Scheduler().run(targets);
  if (std::optional<std::vector<ScheduleItem>> hit = detail::cached_schedule(*key))
    return std::move(*hit);
  // Scalar constants' values are not part of the key: the kernels are built with placeholders
  // for them, kept as templates, and given this graph's values.
  std::unordered_map<const LazyBase*, uint32_t> slots;
  for (uint32_t n : detail::const_nodes(*key)) slots.emplace(key->nodes[n].get(), n);
  std::vector<ScheduleItem> items = Scheduler(&slots).run(targets);
  return detail::cache_schedule(*key, std::move(items));
}

}  // namespace baregrad::tensor
