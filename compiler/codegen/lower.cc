#include "compiler/codegen/lower.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>

#include "base/check.h"
#include "base/error.h"
#include "compiler/ast.h"
#include "compiler/codegen/reduce.h"

namespace baregrad::compiler {
namespace {

// Values of one AST node for one copy: a W-lane vector, or a scalar uniform across lanes.
struct Val {
  UOpPtr u;
  bool vec = false;
};

struct Ctx {
  // RANGE per loop axis (null for expand axes); a one-hot axis holds the index it samples.
  std::vector<UOpPtr> loops;
  UOpPtr gate;  // and-ed into the validity of every load (a one-hot index in range), or null
  bool vector_active = false;
  // UNROLL / UPCAST axes take their coordinate from `loops` (a work-group's copy of an
  // operand tile, where each thread copies elements at computed coordinates).
  bool expand_from_loops = false;
  UOpPtr staged;  // inside a STAGED reduction: the BARRIER after the tiles' copies
  int id = 0;
};

// The size of kernel axis `axis` as index math: a constant, or a launch scalar's expression.
UOpPtr axis_size(const Kernel& k, int axis) {
  return k.sym_axis(axis) ? sym_index(k.sym_shape()[axis]) : UOp::index_const(k.shape()[axis]);
}

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

class Lowerer {
 public:
  Lowerer(const Kernel& k, const TargetInfo& t) : k_(k), t_(t) {}

  Lowered run();

 private:
  AxisKind kind(int axis) const { return k_.kinds()[axis]; }
  bool is_expand(int axis) const {
    return kind(axis) == AxisKind::kUnroll || kind(axis) == AxisKind::kUpcast;
  }
  // GPU targets: an output axis mapped to threads rather than to a loop.
  bool is_thread_axis(int axis) const {
    return t_.gpu && (kind(axis) == AxisKind::kGlobal || kind(axis) == AxisKind::kLocal);
  }
  UOpPtr gpu_threads(Ctx& top);
  UOpPtr work_groups(Ctx& top);
  // GROUP_REDUCE: each thread's `partial` through shared memory, combined with `op`.
  UOpPtr group_combine(Op op, const UOpPtr& partial);
  int pick_vector_axis() const;
  UOpPtr make_range(int axis, const UOpPtr& parent, int64_t id);
  UOpPtr coord(const Ctx& ctx, const std::vector<int64_t>& c, int axis, int lane) const;
  std::pair<UOpPtr, UOpPtr> index(const ShapeTracker& st,
                                  const Ctx& ctx,
                                  const std::vector<int64_t>& c,
                                  int lane) const;
  UOpPtr sym_view_index(const SymView& v,
                        bool last,
                        const UOpPtr& idx,
                        const Ctx& ctx,
                        const std::vector<int64_t>& c,
                        int lane,
                        const std::function<void(UOpPtr)>& add_valid) const;
  Val lower(const UOpPtr& n, const Ctx& ctx, const std::vector<int64_t>& c);
  // `gate`, when given, is and-ed into the validity of every element loaded; `after`, when
  // given, is the BARRIER a shared-memory load runs after.
  Val lower_load(const UOpPtr& n,
                 const Ctx& ctx,
                 const std::vector<int64_t>& c,
                 const UOpPtr& gate = nullptr,
                 const UOpPtr& after = nullptr);
  // STAGED: the work-group's copies of every staged load's tile for the reduction context
  // `inner` (its loops made), into shared memory; returns the BARRIER after them.
  UOpPtr stage_tiles(const Ctx& inner);
  // A new shared-memory array of `elems` elements of `t` (distinct from every other one).
  UOpPtr define_local(DType t, int64_t elems) {
    return UOp::make(Op::DEFINE_LOCAL, t.as_ptr(), {UOp::index_const(next_local_++)}, elems);
  }
  Val lower_reduce(const UOpPtr& n, const Ctx& ctx, const std::vector<int64_t>& c);
  // The body of reduction `n` at its one-hot axes' indices (0 where one is out of range).
  Val lower_one_hot(const UOpPtr& n,
                    const std::vector<OneHotAxis>& hot,
                    const Ctx& inner,
                    const std::vector<int64_t>& c);
  bool has_outer_reduce() const { return k_.count(AxisKind::kOuterReduce) > 0; }
  Val accumulate(const UOpPtr& store, Val v, const Ctx& ctx, const std::vector<int64_t>& c);
  std::vector<UOpPtr> lower_store(const UOpPtr& n, const Ctx& ctx, const std::vector<int64_t>& c);
  UOpPtr widen(const Val& v) const;
  UOpPtr combine(Op op, std::vector<UOpPtr> vals) const;

  const Kernel& k_;
  const TargetInfo& t_;
  int vaxis_ = -1;
  int width_ = 1;
  int next_ctx_ = 1;
  int64_t next_loop_id_ = 0;
  int64_t next_local_ = 0;
  UOpPtr guard_;         // GPU targets: the bounds-check RANGE enclosing every loop, or null
  UOpPtr group_thread_;  // a GROUP_REDUCE kernel: the thread's index in its work-group
  // STAGED: per staged LOAD, the VIEW of its tile (a DEFINE_LOCAL) over the kernel shape, with
  // stride 0 off the tile's axes: what the LOAD reads instead of its buffer.
  std::map<const UOp*, UOpPtr> tiles_;
  std::array<int64_t, 3> grid_{1, 1, 1}, block_{1, 1, 1};
  std::map<std::tuple<const UOp*, int, std::vector<int64_t>>, Val> memo_;
  std::map<std::pair<const UOp*, int>, Ctx> reduce_ctx_;
};

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

// Every thread stores its partial result at its index in a shared array; after a barrier,
// thread 0 alone reduces the array, and what follows (the store) runs in thread 0 alone: the
// reduction's loop sits in a bounds check that only thread 0 passes, which encloses the rest.
// On a target with warps (TargetInfo::warp_size), 32-bit partials are first combined across
// each warp by butterfly exchanges (SHFL_XOR), after which every lane holds its warp's total:
// the shared array then holds one entry per warp.
UOpPtr Lowerer::group_combine(Op op, const UOpPtr& partial) {
  int64_t n = k_.shape()[k_.first(AxisKind::kGroupReduce)];
  DType t = partial->dtype();
  UOpPtr value = partial, slot = group_thread_;
  int64_t warp = t_.warp_size;
  if (warp > 1 && t.count == 1 && !t.ptr && t.itemsize() == 4) {
    int64_t lanes = std::min(n, warp);
    for (int64_t mask = lanes / 2; mask >= 1; mask /= 2)
      value = UOp::alu(op, {value, UOp::make(Op::SHFL_XOR, t, {value}, mask)});
    n = std::max<int64_t>(1, n / warp);
    slot = n == 1 ? UOp::index_const(0) : group_thread_ / warp;  // same value from every lane
  }
  UOpPtr local = define_local(t, n);
  UOpPtr put =
      UOp::make(Op::STORE, dtypes::kVoid, {UOp::make(Op::INDEX, t.as_ptr(), {local, slot}), value});
  UOpPtr barrier = UOp::make(Op::BARRIER, dtypes::kVoid, {put});
  std::vector<UOpPtr> first_src{group_thread_, UOp::index_const(1)};  // thread 0 only
  if (guard_) first_src.push_back(guard_);
  UOpPtr first = UOp::make(Op::RANGE, dtypes::kIndex, std::move(first_src), -1 - next_loop_id_++);
  std::vector<UOpPtr> range_src{UOp::index_const(0), UOp::index_const(n), first};
  UOpPtr r = UOp::make(Op::RANGE, dtypes::kIndex, std::move(range_src), next_loop_id_++);
  UOpPtr get = UOp::make(Op::LOAD, t, {UOp::make(Op::INDEX, t.as_ptr(), {local, r}), barrier});
  return UOp::make(Op::REDUCE, t, {get, r}, static_cast<int64_t>(op));
}

// Every thread of the work-group (tid = its linear index over the LOCAL axes, T threads)
// copies elements tid, tid + T, ... (those below the tile's size) of each tile: the staged load's
// elements over the axes it walks among LOCAL, STAGED, UNROLL and UPCAST, at the work-group's
// GLOBAL and this iteration's REDUCE coordinates. The tile is laid out with its axes ordered by
// decreasing stride in the buffer, so neighbouring threads copy neighbouring elements. A barrier at
// the top of each iteration keeps the copies from overwriting a tile that slower threads still
// read.
UOpPtr Lowerer::stage_tiles(const Ctx& inner) {
  constexpr int64_t kMaxSharedBytes = 48 * 1024;
  int staged_axis = k_.first(AxisKind::kStaged);
  if (!t_.gpu || !t_.has_local)
    fail("lower",
         k_.str() + ": STAGE needs shared memory, which target " + t_.name + " does not have");
  UOpPtr tid = UOp::index_const(0);
  int64_t threads = 1;
  for (int a = 0; a < k_.ndim(); a++)
    if (kind(a) == AxisKind::kLocal) {
      tid = tid * k_.shape()[a] + inner.loops[a];
      threads *= k_.shape()[a];
    }
  // The loops over tiles (none with more than one iteration: no barrier needed). The barrier's
  // scope is the innermost: it runs at the top of every tile step.
  std::vector<UOpPtr> outer_loops;
  for (int a = 0; a < k_.ndim(); a++)
    if (kind(a) == AxisKind::kReduce && k_.shape()[a] > 1) outer_loops.push_back(inner.loops[a]);
  UOpPtr top = outer_loops.empty() ? nullptr : UOp::make(Op::BARRIER, dtypes::kVoid, outer_loops);
  std::vector<UOpPtr> copies;
  int64_t bytes = 0;
  for (const UOp* load : k_.staged_loads(staged_axis)) {
    const auto& st = load->src(0)->arg_as<ShapeTracker>();
    std::vector<int> axes;  // the tile's axes, outermost first
    for (int a = 0; a < k_.ndim(); a++)
      if ((kind(a) == AxisKind::kLocal || kind(a) == AxisKind::kStaged || is_expand(a)) &&
          Kernel::depends_on(st, a))
        axes.push_back(a);
    auto key = [&](int a) {  // non-affine (-1) sorts first
      int64_t s = Kernel::stride(st, a);
      return s < 0 ? INT64_MAX : std::abs(s);
    };
    std::stable_sort(axes.begin(), axes.end(), [&](int x, int y) { return key(x) > key(y); });
    int64_t elems = 1;
    for (int a : axes) elems *= k_.shape()[a];
    DType t = load->dtype();
    bytes += elems * std::max(1, t.itemsize());
    if (bytes > kMaxSharedBytes)
      fail("lower", k_.str() + ": staged tiles of " + std::to_string(bytes) + " bytes exceed the " +
                        std::to_string(kMaxSharedBytes) +
                        " bytes of shared memory a work-group may use");
    UOpPtr local = define_local(t, elems);
    std::vector<int64_t> strides(k_.ndim(), 0);
    int64_t inner_size = 1;
    for (size_t i = axes.size(); i-- > 0;) {
      strides[axes[i]] = inner_size;
      inner_size *= k_.shape()[axes[i]];
    }
    tiles_[load] = UOp::make(Op::VIEW, t, {local}, strided(k_.shape(), std::move(strides)));
    // Each thread copies `w` neighbours at once (a 16-byte access where aligned) when the
    // tile's innermost axis is contiguous in the buffer and the shares come out even.
    int64_t w = 1;
    bool plain = st.views.size() == 1 && !st.views[0].mask && !st.views[0].sym;
    if (plain && !axes.empty() && Kernel::stride(st, axes.back()) == 1 && !dtypes::is_bool(t))
      for (int64_t x = 16 / std::max(1, t.itemsize()); x >= 2 && w == 1; x /= 2)
        if (k_.shape()[axes.back()] % x == 0 && elems % (threads * x) == 0) w = x;
    std::vector<int64_t> c(k_.ndim(), 0);
    for (int64_t j = 0; j * threads * w < elems; j++) {
      UOpPtr e = j == 0 ? tid : tid + j * threads;
      if (w > 1) e = e * w;
      if ((j + 1) * threads * w > elems) {  // the threads past the tile's end copy nothing
        std::vector<UOpPtr> src{e, -maximum(-(e + 1), -UOp::index_const(elems))};
        if (!outer_loops.empty()) src.push_back(outer_loops.back());
        e = UOp::make(Op::RANGE, dtypes::kIndex, std::move(src), -1 - next_loop_id_++);
      }
      Ctx at = inner;
      at.id = next_ctx_++;
      at.vector_active = false;
      at.expand_from_loops = true;
      at.staged = nullptr;
      int64_t below = 1;
      for (size_t i = axes.size(); i-- > 0;) {
        int64_t size = k_.shape()[axes[i]];
        UOpPtr x = below == 1 ? e : e / below;
        at.loops[axes[i]] = i == 0 ? x : x % size;
        below *= size;
      }
      UOpPtr v;
      if (w == 1) {
        v = lower_load(load->self(), at, c).u;
      } else {  // one view, unmasked (`plain`): no valid
        const UOpPtr& buf = load->src(0)->src(0);
        UOpPtr idx = index(st, at, c, 0).first;
        v = UOp::make(Op::LOAD, t.vec(static_cast<int>(w)),
                      {UOp::make(Op::INDEX, buf->dtype(), {buf, idx})});
      }
      UOpPtr ix = UOp::make(Op::INDEX, local->dtype(), {local, e});
      copies.push_back(top ? UOp::make(Op::STORE, dtypes::kVoid, {ix, v, top})
                           : UOp::make(Op::STORE, dtypes::kVoid, {ix, v}));
    }
  }
  return UOp::make(Op::BARRIER, dtypes::kVoid, std::move(copies));
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

// One thread per element of the thread axes, flattened in axis order: the element index is
// gidx0 * block + lidx0. When the grid overshoots, a RANGE of one iteration (none past the
// end) encloses the kernel body as its bounds check. Returns that RANGE or null.
UOpPtr Lowerer::gpu_threads(Ctx& top) {
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
  std::vector<int> axes;
  int64_t n = 1;
  for (int a = 0; a < k_.ndim(); a++)
    if (is_thread_axis(a)) {
      axes.push_back(a);
      n *= k_.shape()[a];
    }
  CHECK(t_.max_block > 0 && std::has_single_bit(static_cast<unsigned>(t_.max_block)))
      << "TargetInfo::max_block " << t_.max_block << " is not a power of two";
  if (k_.count(AxisKind::kLocal)) return work_groups(top);
  int64_t block = std::min<int64_t>(t_.max_block,
                                    static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(n))));
  int64_t grid = std::max<int64_t>(1, (n + block - 1) / block);  // no elements: one idle thread
  // GROUP_REDUCE: one work-group per output element, its threads along the group axis.
  int group = k_.first(AxisKind::kGroupReduce);
  if (group < k_.ndim()) {
    if (k_.symbolic()) fail("lower", k_.str() + ": GROUP with symbolic sizes is not supported");
    block = k_.shape()[group];
    if (block > t_.max_block)
      fail("lower", k_.str() + ": GROUP of " + std::to_string(block) +
                        " threads exceeds the work-group limit " + std::to_string(t_.max_block) +
                        " of target " + t_.name);
    grid = std::max<int64_t>(1, n);
    group_thread_ = UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{"lidx0", 0, block - 1});
    top.loops[group] = group_thread_;
  }
  if (grid > kMaxGridX)
    fail("lower", k_.str() + ": " + std::to_string(n) + " threads need " + std::to_string(grid) +
                      " blocks of " + std::to_string(block) + ", more than the grid limit " +
                      std::to_string(kMaxGridX));
  grid_ = {grid, 1, 1};
  block_ = {block, 1, 1};
  UOpPtr idx = UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{"gidx0", 0, grid - 1});
  if (!group_thread_)
    idx = idx * block + UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{"lidx0", 0, block - 1});
  int64_t threads = group_thread_ ? grid : grid * block;  // output elements the launch covers
  UOpPtr guard;
  Sym n_sym = n;  // the thread count as a Sym (symbolic axes: at most its max n)
  if (k_.symbolic()) {
    n_sym = 1;
    for (int a : axes) n_sym = n_sym * k_.sym_shape()[a];
  }
  if (threads > n || !n_sym.is_const()) {
    UOpPtr end = -maximum(-(idx + 1), -sym_index(n_sym));  // min(idx + 1, n)
    guard = UOp::make(Op::RANGE, dtypes::kIndex, {idx, end}, -1 - next_loop_id_++);
    idx = guard;
  }
  int64_t inner = 1;
  Sym inner_sym = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    if (!n_sym.is_const()) {
      UOpPtr c = inner_sym == Sym(1) ? idx : idx / sym_index(inner_sym);
      top.loops[axes[i]] = i == 0 ? c : c % axis_size(k_, axes[i]);
      inner_sym = inner_sym * k_.sym_shape()[axes[i]];
      continue;
    }
    int64_t size = k_.shape()[axes[i]];
    UOpPtr c = inner == 1 ? idx : idx / inner;
    top.loops[axes[i]] = i == 0 ? c : c % size;
    inner *= size;
  }
  return guard;
}

// LOCAL axes: the work-group is exactly the LOCAL axes (the innermost is dimension x of the
// block, the next y, then z), the grid exactly the GLOBAL axes (the innermost is x, the next y,
// the rest flattened into z; all of them into x where y or z would pass 65535). No thread is
// past the end, so there is no bounds check: every thread reaches every barrier.
UOpPtr Lowerer::work_groups(Ctx& top) {
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1, kMaxGridYz = 65535;
  std::vector<int> locals, globals;
  for (int a = 0; a < k_.ndim(); a++) (kind(a) == AxisKind::kLocal ? locals : globals).push_back(a);
  std::erase_if(globals, [&](int a) { return kind(a) != AxisKind::kGlobal; });
  if (k_.symbolic())
    fail("lower", k_.str() + ": LOCAL work-groups with symbolic sizes are not supported");
  if (locals.size() > 3)
    fail("lower", k_.str() + ": " + std::to_string(locals.size()) +
                      " LOCAL axes; a work-group has at most 3 dimensions");
  int64_t threads = 1;
  for (int a : locals) threads *= k_.shape()[a];
  if (threads > t_.max_block)
    fail("lower", k_.str() + ": a work-group of " + std::to_string(threads) +
                      " threads (the LOCAL axes) exceeds the limit " +
                      std::to_string(t_.max_block) + " of target " + t_.name);
  for (size_t i = 0; i < locals.size(); i++) {
    int d = static_cast<int>(locals.size() - 1 - i);
    block_[d] = k_.shape()[locals[i]];
    top.loops[locals[i]] = UOp::make(Op::SPECIAL, dtypes::kIndex, {},
                                     VarArg{"lidx" + std::to_string(d), 0, block_[d] - 1});
  }
  // dims[d]: the GLOBAL axes of grid dimension d, outermost first.
  std::array<std::vector<int>, 3> dims;
  for (size_t i = 0; i < globals.size(); i++)  // outermost first: the outer ones share z
    dims[std::min<size_t>(globals.size() - 1 - i, 2)].push_back(globals[i]);
  auto size_of = [&](const std::vector<int>& axes) {
    int64_t n = 1;
    for (int a : axes) n *= k_.shape()[a];
    return n;
  };
  if (size_of(dims[1]) > kMaxGridYz || size_of(dims[2]) > kMaxGridYz) dims = {globals, {}, {}};
  if (size_of(dims[0]) > kMaxGridX)
    fail("lower", k_.str() + ": " + std::to_string(size_of(dims[0])) +
                      " work-groups, more than the grid limit " + std::to_string(kMaxGridX));
  for (int d = 0; d < 3; d++) {
    grid_[d] = size_of(dims[d]);
    UOpPtr id = UOp::make(Op::SPECIAL, dtypes::kIndex, {},
                          VarArg{"gidx" + std::to_string(d), 0, grid_[d] - 1});
    int64_t inner = 1;
    for (size_t i = dims[d].size(); i-- > 0;) {
      int64_t size = k_.shape()[dims[d][i]];
      UOpPtr c = inner == 1 ? id : id / inner;
      top.loops[dims[d][i]] = i == 0 ? c : c % size;
      inner *= size;
    }
  }
  return nullptr;
}

}  // namespace

Lowered lower_to_ranges(const Kernel& k, const TargetInfo& target) {
  return Lowerer(k, target).run();
}

}  // namespace baregrad::compiler
