#include "tests/kernels/reference.h"

#include <cmath>
#include <functional>

#include "base/check.h"

namespace baregrad::testing {
using namespace compiler;

namespace {
// Element index of kernel coordinates `x` through `st`, or -1 when masked out.
int64_t view_index(const ShapeTracker& st, const std::vector<int64_t>& x) {
  std::vector<int64_t> coords = x;
  int64_t idx = 0;
  for (size_t vi = st.views.size(); vi-- > 0;) {
    const View& v = st.views[vi];
    if (vi + 1 < st.views.size()) {
      coords.assign(v.shape.size(), 0);
      for (size_t d = v.shape.size(); d-- > 0;) {
        coords[d] = idx % v.shape[d];
        idx /= v.shape[d];
      }
    }
    idx = v.offset;
    for (size_t d = 0; d < v.shape.size(); d++) {
      int64_t c = v.shape[d] == 1 ? 0 : coords[d];
      if (v.mask && (c < (*v.mask)[d].first || c >= (*v.mask)[d].second)) return -1;
      idx += c * v.strides[d];
    }
  }
  return idx;
}

// Rounds floats and wraps integers to `t`, as the hardware stores them.
double to_dtype(DType t, double v) {
  if (dtypes::is_float(t)) return round_to(t, v);
  if (!dtypes::is_int(t)) return v;
  int64_t i = wrap_int(t, static_cast<int64_t>(v));
  return dtypes::is_unsigned(t) && t.itemsize() == 8 ? static_cast<double>(static_cast<uint64_t>(i))
                                                     : static_cast<double>(i);
}

double apply(Op op, DType dt, const std::vector<double>& a) {
  bool f = dtypes::is_float(dt);
  switch (op) {
    case Op::ADD:
      return a[0] + a[1];
    case Op::SUB:
      return a[0] - a[1];
    case Op::MUL:
      return a[0] * a[1];
    case Op::FDIV:
      return a[0] / a[1];
    case Op::MAX:
      return std::isnan(a[0]) || std::isnan(a[1]) ? NAN : std::max(a[0], a[1]);
    case Op::NEG:
      return -a[0];
    case Op::SQRT:
      return std::sqrt(a[0]);
    case Op::RECIP:
      return 1.0 / a[0];
    case Op::EXP2:
      return std::exp2(a[0]);
    case Op::LOG2:
      return std::log2(a[0]);
    case Op::SIN:
      return std::sin(a[0]);
    case Op::CMPLT:
      return a[0] < a[1];
    case Op::CMPNE:
      return a[0] != a[1];
    case Op::CMPEQ:
      return a[0] == a[1];
    case Op::AND:  // bool operands only (the tests' masks)
      CHECK(dtypes::is_bool(dt)) << "reference: AND of " << dt.name();
      return a[0] != 0 && a[1] != 0;
    case Op::WHERE:
      return a[0] != 0 ? a[1] : a[2];
    case Op::MULACC:
      return a[0] * a[1] + a[2];
    case Op::IDIV:
      return f ? a[0] / a[1] : std::trunc(a[0] / a[1]);
    default:
      UNREACHABLE() << "reference: " << op_name(op);
  }
  return 0;
}
}  // namespace

void reference_run(const UOpPtr& ast, std::vector<std::vector<double>>& bufs) {
  std::vector<int64_t> full;
  for (const UOp* n : ast->toposort())
    if (n->op() == Op::VIEW) {
      const auto& s = n->arg_as<ShapeTracker>().shape();
      if (full.empty()) full.assign(s.size(), 1);
      for (size_t i = 0; i < s.size(); i++) full[i] = std::max(full[i], s[i]);
    }
  std::vector<int64_t> x(full.size(), 0);
  std::function<double(const UOp*)> eval = [&](const UOp* n) -> double {
    switch (n->op()) {
      case Op::CONST:
        return n->const_value();
      case Op::LOAD: {
        const UOp* view = n->src(0).get();
        int64_t i = view_index(view->arg_as<ShapeTracker>(), x);
        if (view->src(0)->op() == Op::IOTA) return i < 0 ? 0.0 : static_cast<double>(i);
        return i < 0 ? 0.0 : bufs[view->src(0)->arg_as<int64_t>()][i];
      }
      case Op::CAST: {
        double v = eval(n->src(0).get());
        if (dtypes::is_float(n->dtype())) return round_to(n->dtype(), v);
        if (dtypes::is_bool(n->dtype())) return v != 0;
        return static_cast<double>(wrap_int(n->dtype(), static_cast<int64_t>(v)));
      }
      case Op::REDUCE_AXIS: {
        const auto& r = n->arg_as<ReduceArg>();
        std::vector<int64_t> saved = x;
        double acc = r.op == Op::ADD ? 0 : r.op == Op::MUL ? 1 : -INFINITY;
        std::function<void(size_t)> loop = [&](size_t k) {
          if (k == r.axes.size()) {
            acc = apply(r.op, n->dtype(), {acc, eval(n->src(0).get())});
            return;
          }
          for (int64_t i = 0; i < full[r.axes[k]]; i++) {
            x[r.axes[k]] = i;
            loop(k + 1);
          }
        };
        loop(0);
        x = saved;
        return acc;
      }
      default: {  // each op rounds to its dtype, as the hardware does
        std::vector<double> a;
        for (auto& s : n->src()) a.push_back(eval(s.get()));
        double v = apply(n->op(), n->src(0)->dtype(), a);
        return to_dtype(n->dtype(), v);
      }
    }
  };
  std::vector<int> reduced;
  for (const UOp* n : ast->toposort())
    if (n->op() == Op::REDUCE_AXIS) reduced = n->arg_as<ReduceArg>().axes;
  std::function<void(size_t)> each = [&](size_t d) {
    if (d == full.size()) {
      for (auto& st : ast->src()) {
        const UOp* view = st->src(0).get();
        double v = eval(st->src(1).get());
        DType dt = view->dtype().base();
        v = to_dtype(dt, v);
        bufs[view->src(0)->arg_as<int64_t>()][view_index(view->arg_as<ShapeTracker>(), x)] = v;
      }
      return;
    }
    bool red = std::count(reduced.begin(), reduced.end(), static_cast<int>(d)) > 0;
    for (int64_t i = 0; i < (red ? 1 : full[d]); i++) {
      x[d] = i;
      each(d + 1);
    }
  };
  each(0);
}

}  // namespace baregrad::testing
