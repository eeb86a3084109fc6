#include "compiler/spec.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace baregrad::compiler {
namespace {

constexpr size_t kMaxArgChars = 40;

std::string describe(const UOp* n) {
  std::string s = std::string(op_name(n->op())) + " " + n->dtype().name();
  std::string a = arg_str(n->arg());
  if (a.size() > kMaxArgChars) a = a.substr(0, kMaxArgChars) + "...";
  return a.empty() ? s : s + " " + a;
}

Status bad(const UOp* n, const std::string& rule) {
  return internal("spec: " + describe(n) + " " + rule);
}

std::string dtype_list(const UOp* n) {
  std::string s = "(";
  for (size_t i = 0; i < n->src().size(); i++) s += (i ? ", " : "") + n->src(i)->dtype().name();
  return s + ")";
}

// Allowed source counts of variadic ops, inclusive.
std::pair<size_t, size_t> variadic_arity(Op op) {
  switch (op) {
    case Op::INDEX:
      return {2, 3};
    case Op::LOAD:
      return {1, 2};
    case Op::STORE:
      return {2, 3};
    case Op::DEFINE_LOCAL:
      return {0, 1};
    case Op::RANGE:
      return {2, 3};
    case Op::SINK:
      return {0, SIZE_MAX};
    default:
      return {1, SIZE_MAX};
  }
}

bool int_only(Op op) {
  return op == Op::IDIV || op == Op::MOD || op == Op::AND || op == Op::OR || op == Op::XOR ||
         op == Op::SHL || op == Op::SHR;
}
bool float_only(Op op) {
  return op == Op::EXP2 || op == Op::LOG2 || op == Op::SIN || op == Op::SQRT || op == Op::RECIP ||
         op == Op::FDIV || op == Op::POW;
}
bool is_bool_vec(DType t, int lanes) { return dtypes::is_bool(t) && !t.ptr && t.count == lanes; }

Status verify_alu(const UOp* n) {
  DType t = n->dtype();
  for (auto& s : n->src())
    if (s->dtype().ptr) return bad(n, "has a pointer source " + dtype_list(n));
  if (t.ptr || t.scalar == Scalar::kVoid) return bad(n, "has a non-value dtype");
  Op op = n->op();
  if (op == Op::CAST) {
    if (n->src(0)->dtype().count != t.count) return bad(n, "changes the lane count");
    return {};
  }
  if (op == Op::BITCAST) {
    if (n->src(0)->dtype().itemsize() != t.itemsize())
      return bad(n, "bitcasts between sizes " + dtype_list(n));
    return {};
  }
  size_t first = op == Op::WHERE ? 1 : 0;
  DType operand = n->src(first)->dtype();
  for (size_t i = first; i < n->src().size(); i++)
    if (n->src(i)->dtype() != operand)
      return bad(n, "has sources of different dtypes " + dtype_list(n));
  if (op == Op::WHERE && !is_bool_vec(n->src(0)->dtype(), t.count))
    return bad(n, "has a condition that is not bool " + dtype_list(n));
  if (is_comparison(op)) {
    if (!is_bool_vec(t, operand.count)) return bad(n, "is a comparison that does not give bool");
    return {};
  }
  if (t != operand) return bad(n, "has a dtype different from its sources " + dtype_list(n));
  if (dtypes::is_float(t) && int_only(op)) return bad(n, "is an integer op on floats");
  if (!dtypes::is_float(t) && float_only(op)) return bad(n, "is a float op on integers");
  return {};
}

Status verify_const(const UOp* n) {
  DType t = n->dtype();
  const Arg& a = n->arg();
  if (t.ptr || t.scalar == Scalar::kVoid) return bad(n, "CONST has a non-value dtype");
  bool ok = dtypes::is_float(t)  ? std::holds_alternative<double>(a)
            : dtypes::is_bool(t) ? std::holds_alternative<bool>(a)
                                 : std::holds_alternative<int64_t>(a);
  if (!ok) return bad(n, "has an arg whose type does not match the dtype kind");
  return {};
}

Status verify_var(const UOp* n) {
  if (!std::holds_alternative<VarArg>(n->arg())) return bad(n, "has no {name, min, max} arg");
  if (n->dtype() != dtypes::kIndex) return bad(n, "is not int64");
  const VarArg& v = n->arg_as<VarArg>();
  if (v.min > v.max) return bad(n, "has min > max");
  return {};
}

Status verify_other(const UOp* n) {
  auto src_is = [&](size_t i, Op op) { return n->src().size() > i && n->src(i)->op() == op; };
  switch (n->op()) {
    case Op::CONST:
      return verify_const(n);
    case Op::DEFINE_VAR:
    case Op::SPECIAL:
      return verify_var(n);
    case Op::DEFINE_GLOBAL:
      if (!n->dtype().ptr) return bad(n, "has a dtype that is not a pointer");
      if (!std::holds_alternative<int64_t>(n->arg()) || n->arg_as<int64_t>() < 0)
        return bad(n, "has an arg that is not an int64 slot");
      return {};
    case Op::DEFINE_LOCAL:
      if (!n->dtype().ptr) return bad(n, "has a dtype that is not a pointer");
      if (!std::holds_alternative<int64_t>(n->arg()) || n->arg_as<int64_t>() < 1)
        return bad(n, "has an arg that is not a positive element count");
      if (n->src().size() == 1 && !src_is(0, Op::CONST))
        return bad(n, "is told apart by something other than a CONST");
      return {};
    case Op::BARRIER:
      for (auto& s : n->src())
        if (s->op() != Op::RANGE &&
            (s->op() != Op::STORE || s->src(0)->src(0)->op() != Op::DEFINE_LOCAL))
          return bad(n, "waits for something other than a shared-memory STORE or a RANGE");
      return {};
    case Op::SHFL_XOR: {
      DType t = n->dtype();
      if (t != n->src(0)->dtype() || t.ptr || t.count != 1 || t.itemsize() != 4)
        return bad(n, "exchanges something other than a 32-bit scalar " + dtype_list(n));
      if (!std::holds_alternative<int64_t>(n->arg()) || n->arg_as<int64_t>() < 1 ||
          n->arg_as<int64_t>() > 16)
        return bad(n, "has a lane mask outside 1..16");
      return {};
    }
    case Op::STORE:
      if (n->src().size() == 3 && !src_is(2, Op::BARRIER))
        return bad(n, "runs after something other than a BARRIER");
      return {};
    case Op::IOTA:
      if (!n->dtype().ptr || !dtypes::is_int(n->dtype().base()))
        return bad(n, "has a dtype that is not a pointer to an int type");
      return {};
    case Op::VIEW:
      if (!std::holds_alternative<ShapeTracker>(n->arg())) return bad(n, "has no ShapeTracker");
      if (n->arg_as<ShapeTracker>().views.empty()) return bad(n, "has an empty ShapeTracker");
      return {};
    case Op::REDUCE_AXIS: {
      if (!std::holds_alternative<ReduceArg>(n->arg())) return bad(n, "has no ReduceArg");
      Op r = n->arg_as<ReduceArg>().op;
      if (r != Op::ADD && r != Op::MUL && r != Op::MAX) return bad(n, "reduces with a bad op");
      if (n->dtype() != n->src(0)->dtype()) return bad(n, "changes the dtype " + dtype_list(n));
      return {};
    }
    case Op::RANGE:
      if (n->dtype() != dtypes::kIndex || n->src(0)->dtype() != dtypes::kIndex ||
          n->src(1)->dtype() != dtypes::kIndex)
        return bad(n, "has bounds or dtype that are not int64 " + dtype_list(n));
      if (n->src().size() == 3 && !src_is(2, Op::RANGE))
        return bad(n, "has an enclosing source that is not a RANGE");
      return {};
    case Op::ENDRANGE:
      if (!src_is(0, Op::RANGE)) return bad(n, "does not close a RANGE");
      return {};
    case Op::ACC_LOAD:
    case Op::ACC_STORE:
      if (!src_is(0, Op::DEFINE_ACC)) return bad(n, "does not target a DEFINE_ACC");
      return {};
    case Op::GEP:
      if (!std::holds_alternative<int64_t>(n->arg()) || n->arg_as<int64_t>() < 0 ||
          n->arg_as<int64_t>() >= n->src(0)->dtype().count)
        return bad(n, "extracts a lane outside its source " + dtype_list(n));
      if (n->dtype() != n->src(0)->dtype().base()) return bad(n, "is not the source's scalar");
      return {};
    case Op::VECTORIZE:
      for (auto& s : n->src())
        if (s->dtype() != n->dtype().base()) return bad(n, "has a lane of another dtype");
      if (n->dtype().count != n->src().size()) return bad(n, "lane count != source count");
      return {};
    default:
      return {};
  }
}

// Walks a kernel AST below its STOREs; `scope` holds the axes reduced by enclosing REDUCE_AXIS.
class AstChecker {
 public:
  explicit AstChecker(std::vector<int64_t> out) : out_(std::move(out)), full_(out_) {}

  Status view(const UOp* v, uint64_t scope, const UOp* user) {
    if (v->op() != Op::VIEW) return bad(user, "does not go through a VIEW");
    if (v->src(0)->op() != Op::DEFINE_GLOBAL && v->src(0)->op() != Op::IOTA)
      return bad(v, "is not a view of a DEFINE_GLOBAL or IOTA");
    const std::vector<int64_t>& shape = v->arg_as<ShapeTracker>().shape();
    if (shape.size() != out_.size())
      return bad(v, "has " + std::to_string(shape.size()) + " dims, the kernel has " +
                        std::to_string(out_.size()));
    for (size_t i = 0; i < shape.size(); i++) {
      bool reduced = scope >> i & 1;
      if (reduced && !full_known_[i]) full_[i] = shape[i], full_known_[i] = true;
      int64_t want = reduced ? full_[i] : out_[i];
      if (shape[i] != want)
        return bad(v, "has dim " + std::to_string(i) + " = " + std::to_string(shape[i]) +
                          ", the kernel has " + std::to_string(want));
    }
    DType elem = v->src(0)->dtype();
    elem.ptr = false;
    elem.addr = AddrSpace::kGlobal;
    if (user->op() == Op::LOAD && user->dtype() != elem)
      return bad(user, "loads a different dtype than its buffer's " + elem.name());
    if (user->op() == Op::STORE && v->src(0)->op() == Op::IOTA)
      return bad(user, "stores into an IOTA");
    if (user->op() == Op::STORE && user->src(1)->dtype() != elem)
      return bad(user,
                 "stores " + user->src(1)->dtype().name() + " into a buffer of " + elem.name());
    return {};
  }

  Status walk(const UOp* n, uint64_t scope) {
    if (!seen_.insert({n, scope}).second) return {};
    switch (n->op()) {
      case Op::CONST:
      case Op::DEFINE_VAR:
        return {};
      case Op::LOAD:
        if (n->src().size() != 1) return bad(n, "has extra sources in a kernel AST");
        return view(n->src(0).get(), scope, n);
      case Op::REDUCE_AXIS: {
        uint64_t axes = 0;
        for (int a : n->arg_as<ReduceArg>().axes) {
          if (a < 0 || a >= static_cast<int>(out_.size()))
            return bad(n, "reduces axis " + std::to_string(a) + " outside the kernel's " +
                              std::to_string(out_.size()) + " dims");
          if ((axes | scope) >> a & 1)
            return bad(n, "reduces axis " + std::to_string(a) + " twice");
          axes |= uint64_t{1} << a;
        }
        reduced_ |= axes;
        return walk(n->src(0).get(), scope | axes);
      }
      default:
        if (!is_alu(n->op())) return bad(n, "is not allowed below a STORE in a kernel AST");
        for (auto& s : n->src()) RETURN_IF_ERROR(walk(s.get(), scope));
        return {};
    }
  }

  // Reduced axes must have size 1 in the stored shape.
  Status check_reduced(const UOp* store) const {
    for (size_t i = 0; i < out_.size(); i++)
      if ((reduced_ >> i & 1) && out_[i] != 1)
        return bad(store,
                   "has size " + std::to_string(out_[i]) + " on reduced axis " + std::to_string(i));
    return {};
  }

 private:
  std::vector<int64_t> out_, full_;
  std::vector<bool> full_known_ = std::vector<bool>(64, false);
  uint64_t reduced_ = 0;
  std::set<std::pair<const UOp*, uint64_t>> seen_;
};

}  // namespace

Status verify_kernel_ast(const UOpPtr& sink) {
  if (sink->op() != Op::SINK) return bad(sink.get(), "is not a SINK");
  if (sink->src().empty()) return bad(sink.get(), "has no STOREs");
  RETURN_IF_ERROR(verify_expr(sink));
  for (auto& s : sink->src()) {
    if (s->op() != Op::STORE) return bad(sink.get(), "has a source that is not a STORE");
    if (s->src().size() != 2) return bad(s.get(), "runs after a BARRIER in a kernel AST");
  }
  const UOp* first = sink->src(0)->src(0).get();
  if (first->op() != Op::VIEW) return bad(sink->src(0).get(), "does not go through a VIEW");
  std::vector<int64_t> shape = first->arg_as<ShapeTracker>().shape();
  if (shape.size() > 64) return bad(first, "has more than 64 dims");
  AstChecker check(shape);
  for (auto& st : sink->src()) {
    RETURN_IF_ERROR(check.view(st->src(0).get(), 0, st.get()));
    RETURN_IF_ERROR(check.walk(st->src(1).get(), 0));
  }
  return check.check_reduced(sink->src(0).get());
}

Status verify_node(const UOp* n) {
  int arity = op_arity(n->op());
  size_t have = n->src().size();
  if (arity >= 0 && have != static_cast<size_t>(arity))
    return bad(n, "has " + std::to_string(have) + " sources, expected " + std::to_string(arity));
  if (arity < 0) {
    auto [lo, hi] = variadic_arity(n->op());
    if (have < lo || have > hi) return bad(n, "has " + std::to_string(have) + " sources");
  }
  for (auto& s : n->src())
    if (!s) return bad(n, "has a null source");
  return is_alu(n->op()) ? verify_alu(n) : verify_other(n);
}

Status verify_expr(const UOpPtr& root) {
  for (const UOp* n : root->toposort()) RETURN_IF_ERROR(verify_node(n));
  return {};
}

Status verify_lowered(const UOpPtr& sink) {
  for (const UOp* n : sink->toposort()) {
    RETURN_IF_ERROR(verify_node(n));
    Op op = n->op();
    if (op == Op::VIEW || op == Op::REDUCE_AXIS || op == Op::IOTA)
      return bad(n, "survives lowering");
    if ((op == Op::LOAD || op == Op::STORE) && n->src(0)->op() != Op::INDEX)
      return bad(n, "does not go through INDEX");
    if (op == Op::STORE && n->src(0)->src().size() > 2) return bad(n, "stores through a valid");
    if (op != Op::INDEX) continue;
    if (!n->src(0)->dtype().ptr) return bad(n, "indexes a non-pointer " + dtype_list(n));
    if (n->src(1)->dtype().scalar != Scalar::kInt64 || n->src(1)->dtype().ptr)
      return bad(n, "has an index that is not int64 " + dtype_list(n));
    if (n->src().size() == 3 && !dtypes::is_bool(n->src(2)->dtype()))
      return bad(n, "has a valid that is not bool " + dtype_list(n));
  }
  return {};
}

Status verify_linear(const std::vector<UOpPtr>& uops) {
  std::unordered_map<const UOp*, size_t> pos;
  std::vector<const UOp*> open;
  std::unordered_set<const UOp*> closed;
  for (size_t i = 0; i < uops.size(); i++) {
    const UOp* n = uops[i].get();
    RETURN_IF_ERROR(verify_node(n));
    if (!pos.emplace(n, i).second) return bad(n, "appears twice in the program");
    for (auto& s : n->src()) {
      if (!pos.count(s.get())) return bad(n, "uses " + describe(s.get()) + " before it is defined");
      if (closed.count(s.get()) && n->op() != Op::ENDRANGE)
        return bad(n, "uses " + describe(s.get()) + " after its ENDRANGE");
    }
    if (n->op() == Op::RANGE) open.push_back(n);
    if (n->op() == Op::ENDRANGE) {
      if (open.empty() || open.back() != n->src(0).get())
        return bad(n, "does not close the innermost open RANGE");
      closed.insert(open.back());
      open.pop_back();
    }
  }
  if (!open.empty()) return bad(open.back(), "is never closed by an ENDRANGE");
  return {};
}

}  // namespace baregrad::compiler
