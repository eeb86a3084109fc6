#include "compiler/opt/kernel.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "base/check.h"
#include "base/error.h"
#include "compiler/view_ops.h"

namespace baregrad::compiler {

const char* axis_kind_name(AxisKind k) {
  static const char* kNames[] = {"global", "local",        "reduce",       "unroll",
                                 "upcast", "outer_reduce", "group_reduce", "staged"};
  return kNames[static_cast<int>(k)];
}

int axis_rank(AxisKind k) {
  if (k == AxisKind::kOuterReduce) return 0;
  // After REDUCE (a moved axis goes after those of equal rank).
  if (k == AxisKind::kGroupReduce || k == AxisKind::kStaged) return 2;
  return static_cast<int>(k) + (k >= AxisKind::kUnroll);
}

std::string Opt::str() const {
  static const char* kNames[] = {"UPCAST",       "UNROLL", "LOCAL",    "SWAP",
                                 "SPLIT_REDUCE", "GROUP",  "GROUPTOP", "STAGE"};
  return std::string(kNames[static_cast<int>(op)]) + "(" + std::to_string(axis) + ", " +
         std::to_string(amt) + ")";
}

namespace {
// The symbolic form of `v` (its shadow, or its ints).
SymView sym_of(const View& v) { return v.sym ? *v.sym : SymView::of(v); }

bool full_mask(const View& v, int axis) {
  if (v.sym) {
    if (!v.sym->mask) return true;
    auto& [lo, hi] = (*v.sym->mask)[axis];
    return lo == Sym(0) && hi == v.sym->shape[axis];
  }
  if (!v.mask) return true;
  auto [lo, hi] = (*v.mask)[axis];
  return lo == 0 && hi == v.shape[axis];
}

// `f` applied to the shadow of `v` too (a shadow that ends up constant is dropped).
template <class F>
View with_sym(View out, const View& v, const F& f) {
  if (!v.sym) return out;
  out.sym.reset();
  SymView s = f(*v.sym);
  if (s.is_symbolic()) out.sym = std::make_shared<const SymView>(std::move(s));
  return out;
}

template <class V>
V permute_fields(const V& v, const std::vector<int>& perm) {
  V out = v;
  for (size_t i = 0; i < perm.size(); i++) {
    out.shape[i] = v.shape[perm[i]];
    out.strides[i] = v.strides[perm[i]];
    if (v.mask) (*out.mask)[i] = (*v.mask)[perm[i]];
  }
  return out;
}

View permute_view(const View& v, const std::vector<int>& perm) {
  return with_sym(permute_fields(v, perm), v,
                  [&](const SymView& s) { return permute_fields(s, perm); });
}

// Splits dim `axis` into (n / amt, amt); a dim of size 1 (reduced away) splits into (1, 1).
// Kernel::legal keeps symbolic sizes from being split: `n` is a constant in the shadow too.
template <class V, class N>
V split_fields(const V& v, int axis, N n, int64_t amt) {
  V out = v;
  auto s = v.strides[axis];
  bool one = n == 1;
  out.shape[axis] = one ? N(1) : N(n / amt);
  out.strides[axis] = one ? decltype(s)(0) : s * amt;
  out.shape.insert(out.shape.begin() + axis + 1, one ? N(1) : N(amt));
  out.strides.insert(out.strides.begin() + axis + 1, one ? decltype(s)(0) : s);
  if (out.mask) {
    (*out.mask)[axis] = {N(0), out.shape[axis]};
    out.mask->insert(out.mask->begin() + axis + 1, {N(0), out.shape[axis + 1]});
  }
  return out;
}

View split_view(const View& v, int axis, int64_t amt) {
  View out = split_fields(v, axis, v.shape[axis], amt);
  return with_sym(out, v, [&](const SymView& sv) {
    SymView r = split_fields(sv, axis, sv.shape[axis].const_value(), amt);
    return r;
  });
}

template <class V>
V merge_fields(const V& v, int axis) {
  V out = v;
  out.shape[axis] = v.shape[axis] * v.shape[axis + 1];
  out.strides[axis] = v.strides[axis + 1];
  out.shape.erase(out.shape.begin() + axis + 1);
  out.strides.erase(out.strides.begin() + axis + 1);
  if (out.mask) {
    (*out.mask)[axis] = {std::remove_cvref_t<decltype(out.shape[axis])>(0), out.shape[axis]};
    out.mask->erase(out.mask->begin() + axis + 1);
  }
  return out;
}

View merge_view(const View& v, int axis) {
  return with_sym(merge_fields(v, axis), v,
                  [&](const SymView& s) { return merge_fields(s, axis); });
}

bool is_view(const UOp* n) { return n->op() == Op::VIEW; }

// `n` is LOAD(VIEW(IOTA)) whose value is the coordinate of kernel axis `axis` itself.
bool is_axis_iota(const UOp* n, int axis, int64_t size) {
  if (n->op() != Op::LOAD || n->src(0)->src(0)->op() != Op::IOTA) return false;
  const ShapeTracker& st = n->src(0)->arg_as<ShapeTracker>();
  if (st.views.size() != 1) return false;
  const View& v = st.views[0];
  if (v.sym || v.mask || v.offset != 0 || v.shape[axis] != size || v.strides[axis] != 1)
    return false;
  for (size_t d = 0; d < v.shape.size(); d++)
    if (static_cast<int>(d) != axis && v.shape[d] != 1 && v.strides[d] != 0) return false;
  return true;
}

}  // namespace

bool constant_along(const UOp* n, int axis) {
  for (const UOp* u : n->toposort()) {
    if (u->op() == Op::REDUCE_AXIS) return false;
    if (!is_view(u)) continue;
    const View& v = u->arg_as<ShapeTracker>().views.back();
    if (v.shape[axis] == 1) continue;
    if (v.sym ? v.sym->strides[axis] != Sym(0) : v.strides[axis] != 0) return false;
    if (v.mask && ((*v.mask)[axis].first != 0 || (*v.mask)[axis].second != v.shape[axis]))
      return false;
  }
  return true;
}

std::vector<OneHotAxis> one_hot_axes(const UOp* reduce, const std::vector<int64_t>& shape) {
  const ReduceArg& r = reduce->arg_as<ReduceArg>();
  if (r.op != Op::ADD) return {};
  const UOp* body = reduce->src(0).get();
  while (body->op() == Op::CAST) body = body->src(0).get();
  if (body->op() != Op::WHERE || body->src(2)->op() != Op::CONST) return {};
  const UOp* zero = body->src(2).get();
  if (dtypes::is_float(zero->dtype())  ? zero->arg_as<double>() != 0.0
      : dtypes::is_bool(zero->dtype()) ? zero->arg_as<bool>()
                                       : zero->arg_as<int64_t>() != 0)
    return {};
  std::vector<const UOp*> terms, stack{body->src(0).get()};
  while (!stack.empty()) {
    const UOp* t = stack.back();
    stack.pop_back();
    // a && b, also as the scheduler's where(a, b, false)
    bool where_and = t->op() == Op::WHERE && t->src(2)->op() == Op::CONST &&
                     dtypes::is_bool(t->src(2)->dtype()) && !t->src(2)->arg_as<bool>();
    if ((t->op() == Op::AND || where_and) && dtypes::is_bool(t->dtype())) {
      stack.push_back(t->src(1).get());
      stack.push_back(t->src(0).get());
    } else {
      terms.push_back(t);
    }
  }
  std::vector<OneHotAxis> out;
  for (const UOp* t : terms) {
    if (t->op() != Op::CMPEQ || !dtypes::is_int(t->src(0)->dtype())) continue;
    for (int side = 0; side < 2; side++) {
      const UOp* e = t->src(1 - side).get();
      int axis = -1;
      for (int a : r.axes)
        if (shape[a] > 1 && is_axis_iota(t->src(side).get(), a, shape[a])) axis = a;
      if (axis < 0 ||
          std::any_of(out.begin(), out.end(), [&](const OneHotAxis& o) { return o.axis == axis; }))
        continue;
      out.push_back({axis, UOpPtr(e)});
      break;
    }
  }
  // Each index must not depend on any axis collapsed with it (it is computed once for all).
  for (const OneHotAxis& o : out)
    for (const OneHotAxis& p : out)
      if (!constant_along(o.index.get(), p.axis)) return {};
  return out;
}

std::vector<OneHotAxis> Kernel::one_hot_axes() const {
  std::vector<OneHotAxis> out;
  for (const UOp* n : ast_->toposort())
    if (n->op() == Op::REDUCE_AXIS)
      for (OneHotAxis& h : compiler::one_hot_axes(n, shape_)) out.push_back(std::move(h));
  return out;
}

Kernel::Kernel(const UOpPtr& ast) : ast_(ast) {
  std::vector<int> reduce_axes;
  bool have_reduce = false, have_view = false;
  for (const UOp* n : ast->toposort()) {
    if (is_view(n)) {
      const auto& st = n->arg_as<ShapeTracker>();
      if (!have_view) shape_.assign(st.shape().size(), 1);
      have_view = true;
      if (st.shape().size() != shape_.size())
        fail("kernel", "views of different rank: " + st.str());
      for (size_t i = 0; i < shape_.size(); i++) shape_[i] = std::max(shape_[i], st.shape()[i]);
    }
    if (n->op() == Op::REDUCE_AXIS) {
      auto axes = n->arg_as<ReduceArg>().axes;
      std::sort(axes.begin(), axes.end());
      if (have_reduce && axes != reduce_axes)
        fail("kernel", "reductions over different axes in one kernel are not supported");
      reduce_axes = axes;
      have_reduce = true;
    }
  }
  if (!have_view) fail("kernel", "kernel AST has no views");
  split_for_single_views(reduce_axes);
  init_sym_shape();
  std::vector<int> perm;
  for (int i = 0; i < ndim(); i++)
    if (!std::count(reduce_axes.begin(), reduce_axes.end(), i)) perm.push_back(i);
  for (int a : reduce_axes) perm.push_back(a);
  std::vector<int64_t> permuted;
  std::vector<Sym> sym_permuted;
  for (int a : perm) {
    permuted.push_back(shape_[a]);
    if (symbolic_) sym_permuted.push_back(sym_shape_[a]);
  }
  shape_ = permuted;
  sym_shape_ = sym_permuted;
  kinds_.assign(ndim(), AxisKind::kGlobal);
  for (size_t i = ndim() - reduce_axes.size(); i < kinds_.size(); i++)
    kinds_[i] = AxisKind::kReduce;
  permute(perm);
  merge_dims();
}

namespace {

// The common refinement of two factorizations of one element count: for each axis of `a`, the
// sizes it splits into so that every axis of `b` is a run of whole pieces too; nullopt when the
// prefix products of `a` and `b` do not divide one another ((6, 4) against (4, 6)).
std::optional<std::vector<std::vector<int64_t>>> refine(const std::vector<int64_t>& a,
                                                        const std::vector<int64_t>& b) {
  std::vector<int64_t> cuts;  // every prefix product of b, then walked against a's
  int64_t p = 1;
  for (int64_t d : b) cuts.push_back(p *= d);
  std::vector<std::vector<int64_t>> out(a.size());
  int64_t at = 1, end = 1;
  size_t c = 0;
  for (size_t i = 0; i < a.size(); i++) {
    end *= a[i];
    if (a[i] == 1) {
      out[i] = {1};
      continue;
    }
    while (c < cuts.size() && cuts[c] <= at) c++;
    while (at < end) {
      int64_t next = c < cuts.size() && cuts[c] < end ? cuts[c] : end;
      if (next % at != 0) return std::nullopt;
      out[i].push_back(next / at);
      at = next;
      while (c < cuts.size() && cuts[c] <= at) c++;
    }
  }
  return out;
}

}  // namespace

// A load through two views (an upsampled or windowed reshape of a strided view) makes every
// index a division and modulo by the merged sizes: the maximum of 2x2 windows seen as rows of
// 20 decodes y / 2 and x / 2 at each element. Where the last view only reshapes the one before
// (contiguous, no mask), the kernel's axes split into the common refinement of both shapes,
// (.., 20, 20) -> (.., 10, 2, 10, 2), under which the stack is one strided view; merge_dims
// later joins whatever is contiguous again. Nothing changes unless every such stack becomes
// one view and no other view gains one.
void Kernel::split_for_single_views(std::vector<int>& reduce_axes) {
  std::vector<std::vector<int64_t>> pieces(shape_.size());
  for (size_t i = 0; i < shape_.size(); i++) pieces[i] = {shape_[i]};
  bool split = false;
  const std::vector<const UOp*> topo = ast_->toposort();
  for (const UOp* n : topo) {
    if (!is_view(n)) continue;
    const ShapeTracker& st = n->arg_as<ShapeTracker>();
    for (const View& v : st.views)
      if (v.sym) return;
    if (st.views.size() < 2 || st.shape() != shape_ || !st.views.back().is_contiguous()) continue;
    std::vector<int64_t> flat;
    for (const auto& p : pieces) flat.insert(flat.end(), p.begin(), p.end());
    auto r = refine(flat, st.views[st.views.size() - 2].shape);
    if (!r) continue;
    size_t f = 0;
    for (auto& p : pieces) {
      std::vector<int64_t> next;
      for (size_t j = 0; j < p.size(); j++, f++)
        next.insert(next.end(), (*r)[f].begin(), (*r)[f].end());
      split |= next.size() > p.size();
      p = std::move(next);
    }
  }
  if (!split || std::count(shape_.begin(), shape_.end(), 0)) return;
  std::vector<int> first(shape_.size() + 1, 0);  // axis i becomes [first[i], first[i + 1])
  for (size_t i = 0; i < shape_.size(); i++)
    first[i + 1] = first[i] + static_cast<int>(pieces[i].size());
  std::vector<int> new_reduce;
  for (int a : reduce_axes)
    for (int j = first[a]; j < first[a + 1]; j++) new_reduce.push_back(j);
  std::unordered_map<const UOp*, ShapeTracker> trackers;
  for (const UOp* n : topo) {
    if (!is_view(n)) continue;
    const ShapeTracker& st = n->arg_as<ShapeTracker>();
    std::vector<int64_t> shape;
    for (size_t i = 0; i < shape_.size(); i++)
      for (int64_t d : pieces[i]) shape.push_back(st.shape()[i] == 1 ? 1 : d);
    ShapeTracker t = simplify(reshape(st, shape));
    if (t.views.size() > 1 && (st.views.size() == 1 || t.views.size() >= st.views.size()))
      return;  // it would not become simpler: keep the AST as it is
    trackers.emplace(n, std::move(t));
  }
  rebuild([&](const UOp* n) { return trackers.at(n); }, new_reduce);
  shape_.clear();
  for (const auto& p : pieces) shape_.insert(shape_.end(), p.begin(), p.end());
  reduce_axes = new_reduce;
}

// Every axis's size as a Sym: the one size other than 1 its views agree on. A kernel whose
// views disagree about a symbolic size is rejected (the scheduler builds it for the current
// values instead).
void Kernel::init_sym_shape() {
  for (const UOp* n : ast_->toposort()) {
    if (!is_view(n)) continue;
    const View& v = n->arg_as<ShapeTracker>().views.back();
    if (!v.sym) continue;
    if (!symbolic_) sym_shape_ = to_syms(shape_);
    symbolic_ = true;
    for (size_t i = 0; i < shape_.size(); i++)
      if (!v.sym->shape[i].is_const()) sym_shape_[i] = v.sym->shape[i];
  }
  if (!symbolic_) return;
  for (const UOp* n : ast_->toposort()) {
    if (!is_view(n)) continue;
    SymView v = sym_of(n->arg_as<ShapeTracker>().views.back());
    for (size_t i = 0; i < shape_.size(); i++)
      if (v.shape[i] != Sym(1) && v.shape[i] != sym_shape_[i])
        fail("kernel", "views disagree on the size of axis " + std::to_string(i) + ": " +
                           v.shape[i].str() + " and " + sym_shape_[i].str());
  }
}

int Kernel::count(AxisKind kind) const {
  return static_cast<int>(std::count(kinds_.begin(), kinds_.end(), kind));
}
int Kernel::first(AxisKind kind) const {
  for (int i = 0; i < ndim(); i++)
    if (kinds_[i] == kind) return i;
  return ndim();
}

namespace {
std::vector<ShapeTracker> views_of(const UOpPtr& ast, Op op) {
  std::vector<ShapeTracker> out;
  for (const UOp* n : ast->toposort())
    if (n->op() == op) out.push_back(n->src(0)->arg_as<ShapeTracker>());
  return out;
}
}  // namespace

std::vector<ShapeTracker> Kernel::load_views() const { return views_of(ast_, Op::LOAD); }
std::vector<ShapeTracker> Kernel::store_views() const { return views_of(ast_, Op::STORE); }

std::vector<ShapeTracker> Kernel::views() const {
  std::vector<ShapeTracker> loads = load_views(), stores = store_views();
  loads.insert(loads.end(), stores.begin(), stores.end());
  return loads;
}

bool Kernel::vector_axis(int axis, bool scatter) const {
  // What a reduction reads runs every iteration; other loads and the stores once per output.
  std::unordered_set<const UOp*> reduced;
  const std::vector<const UOp*> topo = ast_->toposort();
  if (scatter)
    for (const UOp* n : topo)
      if (n->op() == Op::REDUCE_AXIS)
        for (const UOp* m : n->toposort()) reduced.insert(m);
  bool unit = false;
  for (const UOp* n : topo) {
    if (n->op() != Op::LOAD && n->op() != Op::STORE) continue;
    int64_t s = stride(n->src(0)->arg_as<ShapeTracker>(), axis);
    bool per_output = !reduced.empty() && (n->op() == Op::STORE || !reduced.contains(n));
    if (s < 0 || (s > 1 && !per_output)) return false;
    unit |= s == 1;
  }
  return unit && unmasked(axis);
}

int64_t Kernel::stride(const ShapeTracker& st, int axis) {
  if (st.views.size() != 1) return -1;
  if (const auto& s = st.views[0].sym) {
    if (s->shape[axis] == Sym(1)) return 0;
    return s->strides[axis].is_const() ? s->strides[axis].const_value() : -1;
  }
  return st.views[0].shape[axis] == 1 ? 0 : st.views[0].strides[axis];
}

bool Kernel::depends_on(const ShapeTracker& st, int axis) {
  const View& v = st.views.back();
  if (v.sym) return true;
  if (v.shape[axis] == 1) return false;
  if (v.strides[axis] != 0) return true;
  return v.mask && ((*v.mask)[axis].first > 0 || (*v.mask)[axis].second < v.shape[axis]);
}

bool Kernel::unmasked(int axis) const {
  for (const auto& st : views())
    if (!full_mask(st.views.back(), axis)) return false;
  return true;
}

// Rebuilds the AST with `f` applied to the last view of every VIEW; REDUCE_AXIS args are
// recomputed from kinds_, which the caller has already updated to the new shape.
void Kernel::map_views(const std::function<View(const View&)>& f) {
  std::vector<int> reduce_axes;
  for (int i = 0; i < ndim(); i++)
    if (kinds_[i] == AxisKind::kReduce || kinds_[i] == AxisKind::kUnroll ||
        kinds_[i] == AxisKind::kOuterReduce || kinds_[i] == AxisKind::kGroupReduce ||
        kinds_[i] == AxisKind::kStaged)
      reduce_axes.push_back(i);
  rebuild(
      [&](const UOp* n) {
        ShapeTracker st = n->arg_as<ShapeTracker>();
        st.views.back() = f(st.views.back());
        return st;
      },
      reduce_axes);
}

void Kernel::rebuild(const std::function<ShapeTracker(const UOp*)>& view_of,
                     const std::vector<int>& reduce_axes) {
  std::unordered_map<const UOp*, UOpPtr> out;
  for (const UOp* n : ast_->toposort()) {
    std::vector<UOpPtr> src;
    for (auto& s : n->src()) src.push_back(out.at(s.get()));
    if (is_view(n)) {
      out[n] = UOp::make(Op::VIEW, n->dtype(), std::move(src), view_of(n));
    } else if (n->op() == Op::REDUCE_AXIS) {
      ReduceArg r{n->arg_as<ReduceArg>().op, reduce_axes};
      out[n] = UOp::make(Op::REDUCE_AXIS, n->dtype(), std::move(src), std::move(r));
    } else {
      out[n] = n->with_src(std::move(src));
    }
  }
  ast_ = out.at(ast_.get());
}

void Kernel::permute(const std::vector<int>& perm) {
  map_views([&](const View& v) { return permute_view(v, perm); });
}

void Kernel::merge_dims() {
  for (int i = ndim() - 2; i >= 0; i--) {
    if (kinds_[i] != kinds_[i + 1]) continue;
    // Symbolic sizes stay separate axes (loops that end at a launch scalar).
    bool ok = !sym_axis(i) && !sym_axis(i + 1);
    for (const auto& st : views()) {
      const View& v = st.views.back();
      ok &= full_mask(v, i) && full_mask(v, i + 1);
      if (v.sym)
        ok &= v.sym->strides[i] == v.sym->strides[i + 1] * v.sym->shape[i + 1];
      else
        ok &= v.strides[i] == v.strides[i + 1] * v.shape[i + 1];
    }
    if (!ok) continue;
    shape_[i] *= shape_[i + 1];
    shape_.erase(shape_.begin() + i + 1);
    if (symbolic_) {
      sym_shape_[i] = sym_shape_[i] * sym_shape_[i + 1];
      sym_shape_.erase(sym_shape_.begin() + i + 1);
    }
    kinds_.erase(kinds_.begin() + i + 1);
    map_views([&](const View& v) { return merge_view(v, i); });
  }
}

bool Kernel::legal(const Opt& o, std::string* why) const {
  auto no = [&](std::string msg) {
    if (why) *why = std::move(msg);
    return false;
  };
  if (o.axis < 0 || o.axis >= ndim())
    return no("axis out of range for shape of rank " + std::to_string(ndim()));
  AxisKind k = kinds_[o.axis];
  if (o.op == OptOp::kSwap) {
    if (o.amt < 0 || o.amt >= ndim()) return no("second axis out of range");
    AxisKind k2 = kinds_[o.amt];
    bool outer = is_outer_loop(k) && is_outer_loop(k2);
    if (!outer && (k2 != k || (k != AxisKind::kReduce && k != AxisKind::kLocal)))
      return no("only loop axes of the same block can be swapped");
    if ((o.axis == 0 || o.amt == 0) && (k != AxisKind::kGlobal || k2 != AxisKind::kGlobal))
      return no("the first loop must stay an output (GLOBAL) loop");
    return true;
  }
  if (o.op == OptOp::kSplitReduce) {
    std::string why_not;
    if (!accumulates_in_output(&why_not)) return no(why_not);
  }
  // GROUP, GROUPTOP and STAGE transform the kernel's one reduction.
  int reduces = 0;
  if (o.op == OptOp::kGroup || o.op == OptOp::kGroupTop || o.op == OptOp::kStage)
    for (const UOp* n : ast_->toposort()) reduces += n->op() == Op::REDUCE_AXIS;
  if (o.op == OptOp::kGroup || o.op == OptOp::kGroupTop) {
    if (reduces != 1)
      return no("GROUP needs exactly one reduction in the kernel, it has " +
                std::to_string(reduces));
    if (count(AxisKind::kGroupReduce) || count(AxisKind::kLocal) || count(AxisKind::kUpcast) ||
        count(AxisKind::kOuterReduce))
      return no("GROUP cannot join GROUP_REDUCE, LOCAL, UPCAST or OUTER_REDUCE axes");
    if (o.amt < 2 || (o.amt & (o.amt - 1)) != 0 || o.amt > 1024)
      return no("GROUP needs a power of two from 2 to 1024 threads");
  }
  if (o.op == OptOp::kStage) {
    if (reduces != 1)
      return no("STAGE needs one reduction, the kernel has " + std::to_string(reduces));
    if (!count(AxisKind::kLocal)) return no("STAGE needs a LOCAL axis (a work-group)");
    if (count(AxisKind::kGroupReduce) || count(AxisKind::kOuterReduce) || count(AxisKind::kStaged))
      return no("STAGE cannot join GROUP_REDUCE, OUTER_REDUCE or STAGED axes");
    if (!one_hot_axes().empty()) return no("STAGE cannot join a one-hot sum");
    if (k == AxisKind::kReduce && staged_loads(o.axis).empty())
      return no("no load of the reduction walks the axis and is shared along a LOCAL axis");
  }
  if ((o.op == OptOp::kUpcast || o.op == OptOp::kLocal || o.op == OptOp::kSplitReduce) &&
      count(AxisKind::kGroupReduce))
    return no("a kernel with a GROUP_REDUCE axis takes no UPCAST, LOCAL or OUTER_REDUCE axes");
  if (o.op == OptOp::kSplitReduce && count(AxisKind::kStaged))
    return no("a kernel with a STAGED axis takes no OUTER_REDUCE axis");
  AxisKind need = o.op == OptOp::kUnroll || o.op == OptOp::kSplitReduce || o.op == OptOp::kGroup ||
                          o.op == OptOp::kGroupTop || o.op == OptOp::kStage
                      ? AxisKind::kReduce
                      : AxisKind::kGlobal;
  if (k != need)
    return no(std::string("axis is ") + axis_kind_name(k) + ", needs " + axis_kind_name(need));
  if (sym_axis(o.axis)) return no("axis has the symbolic size " + sym_shape_[o.axis].str());
  if (k == AxisKind::kReduce)
    for (const OneHotAxis& h : one_hot_axes())
      if (h.axis == o.axis) return no("axis is a one-hot sum, lowered to one load");
  if (o.amt <= 1 || shape_[o.axis] % o.amt != 0)
    return no("amount does not divide the axis size " + std::to_string(shape_[o.axis]));
  if (!unmasked(o.axis)) return no("axis is masked (padded)");
  return true;
}

void Kernel::apply(const Opt& o) {
  std::string why;
  if (!legal(o, &why)) fail("opt", o.str() + " on " + str() + ": " + why);
  std::vector<int> perm(ndim());
  std::iota(perm.begin(), perm.end(), 0);
  if (o.op == OptOp::kSwap) {
    std::swap(perm[o.axis], perm[o.amt]);
    std::swap(shape_[o.axis], shape_[o.amt]);
    if (symbolic_) std::swap(sym_shape_[o.axis], sym_shape_[o.amt]);
    std::swap(kinds_[o.axis], kinds_[o.amt]);
    permute(perm);
    applied_.push_back(o);
    return;
  }
  // Split in place into (outer, inner); one part takes a new kind and moves to the end of
  // that kind's block: the inner part for UPCAST / UNROLL / LOCAL, the outer for SPLIT_REDUCE.
  bool outer_moves = o.op == OptOp::kSplitReduce || o.op == OptOp::kGroupTop;
  // The inner part's size: `amt`, except for GROUPTOP, whose outer part is `amt`.
  const int64_t split = o.op == OptOp::kGroupTop ? shape_[o.axis] / o.amt : o.amt;
  AxisKind moved_kind = o.op == OptOp::kUpcast                              ? AxisKind::kUpcast
                        : o.op == OptOp::kUnroll                            ? AxisKind::kUnroll
                        : o.op == OptOp::kLocal                             ? AxisKind::kLocal
                        : o.op == OptOp::kGroup || o.op == OptOp::kGroupTop ? AxisKind::kGroupReduce
                        : o.op == OptOp::kStage                             ? AxisKind::kStaged
                                                : AxisKind::kOuterReduce;
  shape_[o.axis] /= split;
  shape_.insert(shape_.begin() + o.axis + 1, split);
  if (symbolic_) {
    sym_shape_[o.axis] = shape_[o.axis];
    sym_shape_.insert(sym_shape_.begin() + o.axis + 1, Sym(split));
  }
  kinds_.insert(kinds_.begin() + o.axis + 1, kinds_[o.axis]);
  int moved = outer_moves ? o.axis : o.axis + 1;
  kinds_[moved] = moved_kind;
  int dest = 0;  // the moved dim goes after every other dim whose kind sorts before it
  for (int i = 0; i < ndim(); i++)
    dest += i != moved && axis_rank(kinds_[i]) <= axis_rank(moved_kind);
  std::vector<int> order(ndim());
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + moved);
  order.insert(order.begin() + dest, moved);
  std::vector<int64_t> new_shape;
  std::vector<Sym> new_sym;
  std::vector<AxisKind> new_kinds;
  for (int i : order) {
    new_shape.push_back(shape_[i]);
    if (symbolic_) new_sym.push_back(sym_shape_[i]);
    new_kinds.push_back(kinds_[i]);
  }
  shape_ = new_shape;
  sym_shape_ = new_sym;
  kinds_ = new_kinds;
  map_views([&](const View& v) { return split_view(v, o.axis, split); });
  permute(order);
  applied_.push_back(o);
}

std::vector<const UOp*> Kernel::staged_loads(int axis) const {
  std::vector<const UOp*> out;
  std::unordered_set<const UOp*> reduced;
  for (const UOp* n : ast_->toposort())
    if (n->op() == Op::REDUCE_AXIS)
      for (const UOp* m : n->toposort()) reduced.insert(m);
  for (const UOp* n : ast_->toposort()) {
    if (n->op() != Op::LOAD || !reduced.contains(n) || n->src(0)->src(0)->op() != Op::DEFINE_GLOBAL)
      continue;
    const ShapeTracker& st = n->src(0)->arg_as<ShapeTracker>();
    bool shared = false;
    for (int a = 0; a < ndim(); a++) shared |= kinds_[a] == AxisKind::kLocal && !depends_on(st, a);
    if (shared && depends_on(st, axis)) out.push_back(n);
  }
  return out;
}

bool Kernel::accumulates_in_output(std::string* why) const {
  std::vector<const UOp*> stored;
  for (auto& st : ast_->src()) {
    if (st->src(1)->op() != Op::REDUCE_AXIS) {
      *why = "a STORE stores an expression of a reduction, not the reduction itself";
      return false;
    }
    stored.push_back(st->src(0)->src(0).get());
  }
  for (const UOp* n : ast_->toposort())
    if (n->op() == Op::LOAD && std::count(stored.begin(), stored.end(), n->src(0)->src(0).get())) {
      *why = "the kernel loads a buffer it stores";
      return false;
    }
  return true;
}

std::string Kernel::str() const {
  std::ostringstream os;
  os << "(";
  for (int i = 0; i < ndim(); i++)
    os << (i ? ", " : "") << (sym_axis(i) ? sym_shape_[i].str() : std::to_string(shape_[i])) << ":"
       << (kinds_[i] == AxisKind::kGroupReduce ? 'G' : axis_kind_name(kinds_[i])[0]);
  os << ")";
  return os.str();
}

}  // namespace baregrad::compiler
