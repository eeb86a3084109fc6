#include "compiler/codegen/lower.h"

#include <algorithm>
#include <functional>
#include <map>

#include "base/check.h"
#include "base/error.h"
#include "compiler/ast.h"
#include "compiler/codegen/lowerer.h"
#include "compiler/codegen/reduce.h"

namespace baregrad::compiler {
namespace lowering {
namespace {

// Elements of its buffer that `st` can touch (one past the largest index).
int64_t extent(const ShapeTracker& st) {
  const View& v = st.views.front();
  if (v.sym) return v.sym->extent_bound();
  if (v.mask)
    for (auto [lo, hi] : *v.mask)
      if (lo >= hi) return 0;  // every element is padding: nothing is read
  int64_t hi = v.offset;
  for (size_t d = 0; d < v.shape.size(); d++) {
    int64_t lo_d = 0, hi_d = v.shape[d] - 1;
    if (v.mask) std::tie(lo_d, hi_d) = std::make_pair((*v.mask)[d].first, (*v.mask)[d].second - 1);
    hi += v.strides[d] > 0 ? hi_d * v.strides[d] : lo_d * v.strides[d];
  }
  return hi + 1;
}

// Buffer arguments and the FLOP / byte estimates of `k`.
void estimate(const Kernel& k, Lowered* out) {
  std::vector<bool> hot(k.ndim(), false);  // one-hot axes run no loop
  for (const OneHotAxis& h : k.one_hot_axes()) hot[h.axis] = k.kinds()[h.axis] == AxisKind::kReduce;
  int64_t all = 1, outer = 1;
  for (int a = 0; a < k.ndim(); a++) {
    if (!hot[a]) all *= k.shape()[a];
    if (k.kinds()[a] != AxisKind::kReduce && k.kinds()[a] != AxisKind::kUnroll &&
        k.kinds()[a] != AxisKind::kOuterReduce && k.kinds()[a] != AxisKind::kGroupReduce &&
        k.kinds()[a] != AxisKind::kStaged)
      outer *= k.shape()[a];
  }
  std::vector<const UOp*> topo = k.ast()->toposort();
  std::map<const UOp*, bool> in_reduce;
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    bool inside = in_reduce[*it] || (*it)->op() == Op::REDUCE_AXIS;
    for (auto& s : (*it)->src()) in_reduce[s.get()] = in_reduce[s.get()] || inside;
  }
  for (const UOp* n : topo) {
    if (is_alu(n->op()) || n->op() == Op::REDUCE_AXIS)
      out->flops += static_cast<double>(in_reduce[n] ? all : outer);
    if (n->op() != Op::VIEW || n->src(0)->op() != Op::DEFINE_GLOBAL) continue;
    int slot = static_cast<int>(n->src(0)->arg_as<int64_t>());
    if (static_cast<int>(out->bufs.size()) <= slot) out->bufs.resize(slot + 1);
    BufferArg& b = out->bufs[slot];
    b.slot = slot;
    b.dtype = n->dtype().base();
    b.size = std::max(b.size, extent(n->arg_as<ShapeTracker>()));
  }
  for (auto& s : k.ast()->src()) {
    int slot = static_cast<int>(s->src(0)->src(0)->arg_as<int64_t>());
    out->bufs[slot].written = true;
  }
  for (auto& b : out->bufs) out->bytes += static_cast<double>(b.size) * b.dtype.itemsize();
}

}  // namespace

// The size of kernel axis `axis` as index math: a constant, or a launch scalar's expression.
UOpPtr axis_size(const Kernel& k, int axis) {
  return k.sym_axis(axis) ? sym_index(k.sym_shape()[axis]) : UOp::index_const(k.shape()[axis]);
}

int Lowerer::pick_vector_axis() const {
  std::vector<OneHotAxis> hot = k_.one_hot_axes();  // their loads need a scalar index
  int best = -1;
  for (int a = 0; a < k_.ndim(); a++) {
    int64_t n = k_.shape()[a];
    if (!is_expand(a)) continue;
    // Powers of two only: C's ext_vector_type(3) occupies (and loads and stores) 4 elements.
    if (n < 2 || n > 32 || (n & (n - 1)) != 0) continue;
    // CPU targets move a reduction's per-output lanes one by one where they are strided.
    if (!k_.vector_axis(a, !t_.gpu)) continue;
    if (std::any_of(hot.begin(), hot.end(),
                    [&](const OneHotAxis& h) { return !constant_along(h.index.get(), a); }))
      continue;
    // Prefer UPCAST axes (vector accumulators need no horizontal reduce), then the most lanes
    // (a convolution tiled as 16 output channels by 8 positions fills 16-lane registers with
    // the channels), then the last one.
    auto rank = [&](int x) {
      return std::make_pair(k_.kinds()[x] == AxisKind::kUpcast, k_.shape()[x]);
    };
    if (best < 0 || rank(a) >= rank(best)) best = a;
  }
  return best;
}

UOpPtr Lowerer::make_range(int axis, const UOpPtr& parent, int64_t id) {
  int64_t n = k_.shape()[axis];
  std::vector<UOpPtr> src;
  if (axis == 0 && k_.kinds()[0] == AxisKind::kGlobal) {
    // Cores split [0, n) of the max size; a symbolic axis stops at its launch value.
    UOpPtr hi = UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{"core_hi", 0, n});
    if (k_.sym_axis(0)) hi = -maximum(-hi, -axis_size(k_, 0));
    src = {UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{"core_lo", 0, n}), hi};
  } else {
    src = {UOp::index_const(0), axis_size(k_, axis)};
  }
  if (parent) src.push_back(parent);
  return UOp::make(Op::RANGE, dtypes::kIndex, std::move(src), id);
}

UOpPtr Lowerer::coord(const Ctx& ctx, const std::vector<int64_t>& c, int axis, int lane) const {
  if (!is_expand(axis) || (ctx.expand_from_loops && ctx.loops[axis])) return ctx.loops[axis];
  if (axis == vaxis_ && ctx.vector_active) return UOp::index_const(lane);
  return UOp::index_const(c[axis]);
}

// The buffer index and validity (null when always valid) of one lane.
std::pair<UOpPtr, UOpPtr> Lowerer::index(const ShapeTracker& st,
                                         const Ctx& ctx,
                                         const std::vector<int64_t>& c,
                                         int lane) const {
  UOpPtr valid;
  auto add_valid = [&](UOpPtr v) { valid = valid ? logical_and(valid, v) : v; };
  UOpPtr idx;
  for (size_t vi = st.views.size(); vi-- > 0;) {
    const View& v = st.views[vi];
    if (v.sym) {
      idx = sym_view_index(*v.sym, vi + 1 == st.views.size(), idx, ctx, c, lane, add_valid);
      continue;
    }
    std::vector<UOpPtr> x(v.shape.size());
    if (vi + 1 == st.views.size()) {
      for (size_t d = 0; d < x.size(); d++)
        x[d] = v.shape[d] == 1 ? UOp::index_const(0) : coord(ctx, c, static_cast<int>(d), lane);
    } else {  // unravel the later view's linear index into this view's dims
      int64_t inner = 1;
      for (size_t d = x.size(); d-- > 0;) {
        x[d] = (idx / inner) % v.shape[d];
        inner *= v.shape[d];
      }
    }
    UOpPtr out = UOp::index_const(v.offset);
    for (size_t d = 0; d < x.size(); d++) {
      if (v.strides[d] != 0) out = out + x[d] * v.strides[d];
      if (v.mask) {
        auto [lo, hi] = (*v.mask)[d];
        if (lo > 0)
          add_valid(
              logical_and(lt(x[d], hi), UOp::alu(Op::CMPLT, {UOp::index_const(lo - 1), x[d]})));
        else if (hi < v.shape[d])
          add_valid(lt(x[d], hi));
      }
    }
    idx = out;
  }
  return {idx, valid};
}

// index() for one view with a symbolic shadow: sizes, strides, offset and mask bounds are
// index math over the launch scalars.
UOpPtr Lowerer::sym_view_index(const SymView& v,
                               bool last,
                               const UOpPtr& idx,
                               const Ctx& ctx,
                               const std::vector<int64_t>& c,
                               int lane,
                               const std::function<void(UOpPtr)>& add_valid) const {
  std::vector<UOpPtr> x(v.shape.size());
  if (last) {
    for (size_t d = 0; d < x.size(); d++)
      x[d] = v.shape[d] == Sym(1) ? UOp::index_const(0) : coord(ctx, c, static_cast<int>(d), lane);
  } else {
    Sym inner = 1;
    for (size_t d = x.size(); d-- > 0;) {
      x[d] = (idx / sym_index(inner)) % sym_index(v.shape[d]);
      inner = inner * v.shape[d];
    }
  }
  UOpPtr out = sym_index(v.offset);
  for (size_t d = 0; d < x.size(); d++) {
    if (v.strides[d] != Sym(0)) out = out + x[d] * sym_index(v.strides[d]);
    if (!v.mask) continue;
    const auto& [lo, hi] = (*v.mask)[d];
    if (lo != Sym(0)) add_valid(lt(sym_index(lo) - 1, x[d]));
    if (hi != v.shape[d]) add_valid(lt(x[d], sym_index(hi)));
  }
  return out;
}

UOpPtr Lowerer::widen(const Val& v) const {
  if (v.vec || width_ == 1) return v.u;
  if (v.u->op() == Op::CONST) return UOp::make(Op::CONST, v.u->dtype().vec(width_), {}, v.u->arg());
  return UOp::make(Op::VECTORIZE, v.u->dtype().vec(width_), std::vector<UOpPtr>(width_, v.u));
}

UOpPtr Lowerer::combine(Op op, std::vector<UOpPtr> vals) const {
  while (vals.size() > 1) {  // balanced tree: shorter dependency chains
    std::vector<UOpPtr> next;
    for (size_t i = 0; i + 1 < vals.size(); i += 2)
      next.push_back(UOp::alu(op, {vals[i], vals[i + 1]}));
    if (vals.size() % 2) next.push_back(vals.back());
    vals = std::move(next);
  }
  return vals[0];
}

Val Lowerer::lower_load(const UOpPtr& n,
                        const Ctx& ctx,
                        const std::vector<int64_t>& c,
                        const UOpPtr& gate,
                        const UOpPtr& after) {
  if (auto t = tiles_.find(n.get()); t != tiles_.end() && ctx.staged)  // read from the tile
    return lower_load(UOp::make(Op::LOAD, n->dtype(), {t->second}), ctx, c, nullptr, ctx.staged);
  const UOpPtr& view = n->src(0);
  const auto& st = view->arg_as<ShapeTracker>();
  const UOpPtr& buf = view->src(0);
  DType dt = n->dtype();
  int64_t s = ctx.vector_active && width_ > 1 ? Kernel::stride(st, vaxis_) : 0;
  if (buf->op() == Op::IOTA) {  // the index itself, 0 where masked: no memory
    auto iota_at = [&](int lane) {
      auto [idx, valid] = index(st, ctx, c, lane);
      UOpPtr v = cast(idx, dt);
      return valid ? where(valid, v, UOp::cnst(dt, 0)) : v;
    };
    if (s == 0) return {iota_at(0), false};
    std::vector<UOpPtr> lanes;
    for (int l = 0; l < width_; l++) lanes.push_back(iota_at(l));
    return {UOp::make(Op::VECTORIZE, dt.vec(width_), std::move(lanes)), true};
  }
  // LOAD(INDEX(buf, idx, valid && gate)) of `lanes` consecutive elements starting at `lane`.
  auto load_at = [&](int lane, int lanes) {
    auto [idx, valid] = index(st, ctx, c, lane);
    UOpPtr g = gate && ctx.gate ? logical_and(gate, ctx.gate) : gate ? gate : ctx.gate;
    if (g) valid = valid ? logical_and(valid, g) : g;
    std::vector<UOpPtr> src{buf, idx};
    if (valid) src.push_back(valid);
    UOpPtr ix = UOp::make(Op::INDEX, buf->dtype(), std::move(src));
    if (after) return UOp::make(Op::LOAD, dt.vec(lanes), {ix, after});
    return UOp::make(Op::LOAD, dt.vec(lanes), {ix});
  };
  if (s == 0) return {load_at(0, 1), false};
  if (s == 1) return {load_at(0, width_), true};
  std::vector<UOpPtr> lanes;
  for (int l = 0; l < width_; l++) lanes.push_back(load_at(l, 1));
  return {UOp::make(Op::VECTORIZE, dt.vec(width_), std::move(lanes)), true};
}

Val Lowerer::lower_reduce(const UOpPtr& n, const Ctx& ctx, const std::vector<int64_t>& c) {
  Op op = n->arg_as<ReduceArg>().op;
  // One-hot axes (a sum of where(e == iota, v, 0)) get no loop: v is read at e. An index that
  // differs across vector lanes keeps the loop.
  std::vector<OneHotAxis> hot = one_hot_axes(n.get(), k_.shape());
  std::erase_if(hot, [&](const OneHotAxis& h) {
    return kind(h.axis) != AxisKind::kReduce ||
           (vaxis_ >= 0 && !constant_along(h.index.get(), vaxis_));
  });
  auto is_hot = [&](int a) {
    return std::any_of(hot.begin(), hot.end(), [&](const OneHotAxis& h) { return h.axis == a; });
  };
  // Every copy of one reduction shares its loops, so their accumulators update side by side.
  auto [it, fresh] = reduce_ctx_.try_emplace({n.get(), ctx.id});
  Ctx& inner = it->second;
  if (fresh) {
    inner = ctx;
    inner.id = next_ctx_++;
    inner.vector_active = vaxis_ >= 0;
    UOpPtr parent = guard_;
    for (int a = 0; a < k_.ndim(); a++)
      if ((is_outer_loop(kind(a)) || kind(a) == AxisKind::kLocal) && !is_thread_axis(a))
        parent = ctx.loops[a];
    for (int a = 0; a < k_.ndim(); a++) {
      if ((kind(a) != AxisKind::kReduce && kind(a) != AxisKind::kStaged) || is_hot(a)) continue;
      parent = make_range(a, parent, next_loop_id_++);
      inner.loops[a] = parent;
    }
    if (k_.count(AxisKind::kStaged)) inner.staged = stage_tiles(inner);
  }
  std::vector<UOpPtr> ranges;
  for (int a = 0; a < k_.ndim(); a++)
    if ((kind(a) == AxisKind::kReduce || kind(a) == AxisKind::kStaged) && !is_hot(a))
      ranges.push_back(inner.loops[a]);
  // Every combination of the (non-vector) UNROLL axes, combined in registers.
  std::vector<int> unroll;
  for (int a = 0; a < k_.ndim(); a++)
    if (kind(a) == AxisKind::kUnroll && a != vaxis_) unroll.push_back(a);
  bool vec_reduced = vaxis_ >= 0 && k_.kinds()[vaxis_] == AxisKind::kUnroll;
  std::vector<UOpPtr> vals;
  std::vector<int64_t> cc = c;
  std::function<void(size_t)> each = [&](size_t i) {
    if (i == unroll.size()) {
      Val v = hot.empty() ? lower(n->src(0), inner, cc) : lower_one_hot(n, hot, inner, cc);
      vals.push_back(vec_reduced ? widen(v) : v.u);
      return;
    }
    for (int64_t j = 0; j < k_.shape()[unroll[i]]; j++) {
      cc[unroll[i]] = j;
      each(i + 1);
    }
  };
  each(0);
  bool vec = vec_reduced || std::any_of(vals.begin(), vals.end(),
                                        [](const UOpPtr& u) { return u->dtype().count > 1; });
  if (vec && !vec_reduced)
    for (auto& v : vals) v = widen({v, v->dtype().count > 1});
  UOpPtr acc = combine(op, std::move(vals));
  if (!ranges.empty()) {
    std::vector<UOpPtr> src{acc};
    src.insert(src.end(), ranges.begin(), ranges.end());
    acc = UOp::make(Op::REDUCE, acc->dtype(), std::move(src), static_cast<int64_t>(op));
  }
  if (vec_reduced) {
    std::vector<UOpPtr> lanes;
    for (int l = 0; l < width_; l++)
      lanes.push_back(UOp::make(Op::GEP, acc->dtype().base(), {acc}, int64_t{l}));
    acc = combine(op, std::move(lanes));
    vec = false;
  }
  if (group_thread_) {
    CHECK(!vec) << "lower: a GROUP reduction with vector accumulators";
    acc = group_combine(op, acc);
  }
  return {acc, vec};
}

Val Lowerer::lower_one_hot(const UOpPtr& n,
                           const std::vector<OneHotAxis>& hot,
                           const Ctx& inner,
                           const std::vector<int64_t>& c) {
  Ctx at = inner;
  at.id = next_ctx_++;
  UOpPtr in_range;
  for (const OneHotAxis& h : hot) {
    Val e = lower(h.index, inner, c);
    CHECK(!e.vec) << "lower: a one-hot index that differs across lanes";
    UOpPtr i = cast(e.u, dtypes::kIndex);
    UOpPtr ok =
        logical_and(lt(i, axis_size(k_, h.axis)), UOp::alu(Op::CMPLT, {UOp::index_const(-1), i}));
    in_range = in_range ? logical_and(in_range, ok) : ok;
    at.loops[h.axis] = i;
  }
  at.gate = inner.gate ? logical_and(inner.gate, in_range) : in_range;
  Val v = lower(n->src(0), at, c);
  UOpPtr zero = UOp::cnst(n->dtype(), 0);
  if (!v.vec) return {where(in_range, v.u, zero), false};
  return {UOp::make(Op::WHERE, v.u->dtype(), {widen({in_range, false}), v.u, widen({zero, false})}),
          true};
}

Val Lowerer::lower(const UOpPtr& n, const Ctx& ctx, const std::vector<int64_t>& c) {
  auto key = std::make_tuple(n.get(), ctx.id, c);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  Val out;
  if (n->op() == Op::CONST || n->op() == Op::DEFINE_VAR) {  // uniform across lanes
    out = {n, false};
  } else if (n->op() == Op::LOAD) {
    out = lower_load(n, ctx, c);
  } else if (n->op() == Op::REDUCE_AXIS) {
    out = lower_reduce(n, ctx, c);
  } else if (is_alu(n->op())) {
    std::vector<Val> src;
    bool vec = false;
    for (auto& s : n->src()) {
      src.push_back(lower(s, ctx, c));
      vec |= src.back().vec;
    }
    std::vector<UOpPtr> us;
    for (auto& v : src) us.push_back(vec ? widen(v) : v.u);
    DType dt = vec ? n->dtype().vec(width_) : n->dtype();
    out = {UOp::make(n->op(), dt, std::move(us), n->arg()), vec};
  } else {
    fail("lower", std::string("unexpected ") + op_name(n->op()) + " in kernel AST");
  }
  memo_[key] = out;
  return out;
}

// The partial reduction `v` combined with what earlier OUTER_REDUCE iterations stored:
// op(first iteration ? identity : out[i], v).
Val Lowerer::accumulate(const UOpPtr& store, Val v, const Ctx& ctx, const std::vector<int64_t>& c) {
  const UOpPtr& red = store->src(1);
  Op op = red->arg_as<ReduceArg>().op;
  UOpPtr first;
  for (int a = 0; a < k_.ndim(); a++) {
    if (kind(a) != AxisKind::kOuterReduce) continue;
    UOpPtr is0 = lt(ctx.loops[a], 1);
    first = first ? logical_and(first, is0) : is0;
  }
  // Gated on "not the first slice": never reads uninitialised output, and the gate keeps the
  // load inside the OUTER_REDUCE loop, after the previous iteration's store.
  UOpPtr later = UOp::alu(Op::CMPNE, {first, UOp::cnst(dtypes::kBool, 1)});
  Val prev = lower_load(UOp::make(Op::LOAD, red->dtype(), {store->src(0)}), ctx, c, later);
  bool vec = v.vec || prev.vec;
  auto w = [&](const Val& x) { return vec ? widen(x) : x.u; };
  UOpPtr base = where(w({first, false}), w({reduce_identity(op, red->dtype()), false}), w(prev));
  return {UOp::alu(op, {base, w(v)}), vec};
}

std::vector<UOpPtr> Lowerer::lower_store(const UOpPtr& n,
                                         const Ctx& ctx,
                                         const std::vector<int64_t>& c) {
  const auto& st = n->src(0)->arg_as<ShapeTracker>();
  if (st.views.back().mask) fail("lower", "masked store views are not supported: " + st.str());
  const UOpPtr& buf = n->src(0)->src(0);
  Val v = lower(n->src(1), ctx, c);
  if (has_outer_reduce()) v = accumulate(n, v, ctx, c);
  auto store_at = [&](int lane, const UOpPtr& value) {
    auto [idx, valid] = index(st, ctx, c, lane);
    UOpPtr ix = UOp::make(Op::INDEX, buf->dtype(), {buf, idx});
    return UOp::make(Op::STORE, dtypes::kVoid, {ix, value});
  };
  int64_t s = ctx.vector_active && width_ > 1 ? Kernel::stride(st, vaxis_) : 0;
  if (s == 0)
    return {store_at(0, v.vec ? UOp::make(Op::GEP, v.u->dtype().base(), {v.u}, int64_t{0}) : v.u)};
  UOpPtr wide = widen(v);
  if (s == 1) return {store_at(0, wide)};
  std::vector<UOpPtr> out;
  for (int l = 0; l < width_; l++)
    out.push_back(store_at(l, UOp::make(Op::GEP, wide->dtype().base(), {wide}, int64_t{l})));
  return out;
}

Lowered Lowerer::run() {
  if (k_.count(AxisKind::kStaged) && !k_.count(AxisKind::kLocal))
    fail("lower", k_.str() + ": a STAGED axis needs LOCAL axes (a work-group)");
  if (k_.count(AxisKind::kGroupReduce) && (!t_.gpu || !t_.has_local))
    fail("lower",
         k_.str() + ": GROUP needs shared memory, which target " + t_.name + " does not have");
  vaxis_ = pick_vector_axis();
  width_ = vaxis_ >= 0 ? static_cast<int>(k_.shape()[vaxis_]) : 1;
  Ctx top;
  top.loops.assign(k_.ndim(), nullptr);
  top.vector_active = vaxis_ >= 0 && k_.kinds()[vaxis_] == AxisKind::kUpcast;
  if (t_.gpu) guard_ = gpu_threads(top);
  UOpPtr parent = guard_;
  for (int a = 0; a < k_.ndim(); a++) {
    if (!is_outer_loop(kind(a)) && kind(a) != AxisKind::kLocal) continue;
    if (is_thread_axis(a)) continue;
    parent = make_range(a, parent, next_loop_id_++);
    top.loops[a] = parent;
  }
  // One copy per combination of the non-vector UPCAST axes.
  std::vector<int> upcast;
  for (int a = 0; a < k_.ndim(); a++)
    if (kind(a) == AxisKind::kUpcast && a != vaxis_) upcast.push_back(a);
  std::vector<UOpPtr> stores;
  std::vector<int64_t> c(k_.ndim(), 0);
  std::function<void(size_t)> each = [&](size_t i) {
    if (i == upcast.size()) {
      for (auto& s : k_.ast()->src())
        for (auto& st : lower_store(s, top, c)) stores.push_back(st);
      return;
    }
    for (int64_t j = 0; j < k_.shape()[upcast[i]]; j++) {
      c[upcast[i]] = j;
      each(i + 1);
    }
  };
  each(0);

  Lowered out;
  estimate(k_, &out);
  out.sink = UOp::make(Op::SINK, dtypes::kVoid, std::move(stores));
  out.vector_axis = vaxis_;
  out.thread_extent =
      !t_.gpu && k_.ndim() > 0 && k_.kinds()[0] == AxisKind::kGlobal ? k_.shape()[0] : 1;
  out.global_size = grid_;
  out.local_size = block_;
  return out;
}

}  // namespace lowering

Lowered lower_to_ranges(const Kernel& k, const TargetInfo& target) {
  return lowering::Lowerer(k, target).run();
}

}  // namespace baregrad::compiler
