#include "compiler/symbolic.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "compiler/interp.h"
#include "compiler/symbolic_index.h"

namespace baregrad::compiler {
namespace {

bool int_like(DType t) { return !t.ptr && (dtypes::is_int(t) || dtypes::is_bool(t)); }
bool int_like(const UOp* u) { return int_like(u->dtype()); }

std::vector<Op> alu_ops() {
  std::vector<Op> out;
  for (int i = 0; i < kNumOps; i++)
    if (is_alu(static_cast<Op>(i))) out.push_back(static_cast<Op>(i));
  return out;
}

bool float_only(Op op) {
  return op == Op::EXP2 || op == Op::LOG2 || op == Op::SIN || op == Op::SQRT || op == Op::RECIP ||
         op == Op::TRUNC || op == Op::FDIV || op == Op::POW;
}
bool int_only(Op op) {
  return op == Op::IDIV || op == Op::MOD || op == Op::AND || op == Op::OR || op == Op::XOR ||
         op == Op::SHL || op == Op::SHR;
}

Value const_val(const UOp* c) {
  DType t = c->dtype().base();
  return dtypes::is_float(t) ? make_value(t, c->const_value()) : make_int_value(t, c->const_int());
}

UOpPtr const_of(DType t, const Value& v) {
  return dtypes::is_float(v.dtype) ? UOp::cnst(t, v.f) : UOp::cnst_int(t, v.i);
}

UOpPtr fold_consts(const Match& m) {
  const UOp* n = m.node.get();
  for (auto& s : n->src())
    if (!s->is_const()) return nullptr;
  DType out = n->dtype();
  if (n->op() == Op::CAST) return const_of(out, convert(const_val(n->src(0).get()), out.base()));
  if (n->op() == Op::BITCAST) {
    if (n->src(0)->dtype().itemsize() != out.itemsize()) return nullptr;
    return const_of(out, reinterpret(const_val(n->src(0).get()), out.base()));
  }
  if (static_cast<int>(n->src().size()) != op_arity(n->op())) return nullptr;
  DType edt = n->src(n->op() == Op::WHERE ? 1 : 0)->dtype().base();
  if (dtypes::is_float(edt)) {
    if (int_only(n->op())) return nullptr;
    std::vector<double> xs;
    for (auto& s : n->src()) xs.push_back(s->const_value());
    return UOp::cnst(out, exec_alu_float(n->op(), edt, xs));
  }
  if (float_only(n->op())) return nullptr;
  if ((n->op() == Op::IDIV || n->op() == Op::MOD) && n->src(1)->const_int() == 0) return nullptr;
  std::vector<int64_t> xs;
  for (auto& s : n->src()) xs.push_back(s->const_int());
  return UOp::cnst_int(out, exec_alu_int(n->op(), edt, xs));
}

UPat x_where(std::function<bool(const UOp*)> pred) { return UPat::var("x").where(std::move(pred)); }
UPat ints_x() {
  return x_where([](const UOp* u) { return int_like(u); });
}
UPat c_where(std::function<bool(const UOp*)> pred) {
  return UPat::cvar("c").where(std::move(pred));
}
// A CONST of an int / bool dtype whose every bit is set (-1 wrapped to the dtype).
bool all_ones(const UOp* c) {
  return int_like(c) && c->const_int() == wrap_int(c->dtype().base(), -1);
}
bool is_pos_zero(const UOp* c) {
  if (!dtypes::is_float(c->dtype())) return c->const_int() == 0;
  return c->const_value() == 0 && !std::signbit(c->const_value());
}
bool is_neg_zero(const UOp* c) {
  return dtypes::is_float(c->dtype()) && c->const_value() == 0 && std::signbit(c->const_value());
}

RewriteFn keep(const char* name) {
  return [name](const Match& m) { return m[name]; };
}
RewriteFn zero() {
  return [](const Match& m) { return UOp::cnst_int(m.node->dtype(), 0); };
}

std::vector<std::pair<UPat, RewriteFn>> simple_rules() {
  std::vector<std::pair<UPat, RewriteFn>> r;
  auto binop = [](Op op, UPat a, UPat b) { return alu_pat(op, {std::move(a), std::move(b)}); };
  r.push_back({UPat::ops(alu_ops()).where([](const UOp* n) {
                 for (auto& s : n->src())
                   if (!s->is_const()) return false;
                 return !n->src().empty();
               }),
               fold_consts});
  // x+0 (ints), x+(-0.0) (floats), x-0, x*1, x*0 (ints), x//1, x/1.0, x%1
  r.push_back({binop(Op::ADD, ints_x(), UPat::cnst(0)), keep("x")});
  r.push_back({binop(Op::ADD, UPat::var("x"), c_where(is_neg_zero)), keep("x")});
  r.push_back({binop(Op::SUB, UPat::var("x"), c_where(is_pos_zero)), keep("x")});
  r.push_back({binop(Op::MUL, UPat::var("x"), UPat::cnst(1)), keep("x")});
  r.push_back({binop(Op::MUL, ints_x(), UPat::cnst(0)), zero()});
  r.push_back({binop(Op::IDIV, ints_x(), UPat::cnst(1)), keep("x")});
  r.push_back({binop(Op::FDIV, UPat::var("x"), UPat::cnst(1)), keep("x")});
  r.push_back({binop(Op::MOD, ints_x(), UPat::cnst(1)), zero()});
  // x-x, x^x -> 0; x<x, x!=x -> false; x==x -> true (ints); max(x,x), x&x, x|x -> x
  r.push_back({UPat::ops({Op::SUB, Op::XOR}, std::vector<UPat>{ints_x(), UPat::var("x")}), zero()});
  r.push_back(
      {UPat::ops({Op::CMPLT, Op::CMPNE}, std::vector<UPat>{ints_x(), UPat::var("x")}), zero()});
  r.push_back({binop(Op::CMPEQ, ints_x(), UPat::var("x")),
               [](const Match& m) { return UOp::cnst_int(m.node->dtype(), 1); }});
  r.push_back(
      {UPat::ops({Op::MAX, Op::AND, Op::OR}, std::vector<UPat>{UPat::var("x"), UPat::var("x")}),
       keep("x")});
  // and/or/xor with constants (ints and bool)
  r.push_back({binop(Op::AND, ints_x(), UPat::cnst(0)), zero()});
  r.push_back({binop(Op::OR, ints_x(), UPat::cnst(0)), keep("x")});
  r.push_back({binop(Op::XOR, ints_x(), UPat::cnst(0)), keep("x")});
  r.push_back({binop(Op::AND, UPat::var("x"), c_where(all_ones)), keep("x")});
  r.push_back({binop(Op::OR, UPat::var("x"), c_where(all_ones)), keep("c")});
  // -(-x) -> x
  r.push_back(
      {UPat::op(Op::NEG, std::vector<UPat>{UPat::op(Op::NEG, std::vector<UPat>{UPat::var("x")})}),
       keep("x")});
  // where(const, a, b); where(c, x, x)
  r.push_back(
      {UPat::op(Op::WHERE, std::vector<UPat>{UPat::cvar("c"), UPat::var("a"), UPat::var("b")}),
       [](const Match& m) { return m["c"]->const_value() != 0 ? m["a"] : m["b"]; }});
  r.push_back({UPat::op(Op::WHERE, std::vector<UPat>{UPat::var(), UPat::var("x"), UPat::var("x")}),
               keep("x")});
  // cast to the same dtype
  r.push_back({UPat::op(Op::CAST, std::vector<UPat>{UPat::var("x")}).where([](const UOp* n) {
                 return n->dtype() == n->src(0)->dtype();
               }),
               keep("x")});
  return r;
}

}  // namespace

const PatternMatcher& symbolic_simple() {
  static const PatternMatcher* pm = new PatternMatcher(simple_rules(), "symbolic_simple");
  return *pm;
}

const PatternMatcher& symbolic() {
  static const PatternMatcher* pm =
      new PatternMatcher(symbolic_simple() + PatternMatcher(index_rules(), "symbolic_index"));
  return *pm;
}

UOpPtr simplify(const UOpPtr& u) {
  RewriteOptions opts;
  opts.fixed_point = true;
  UOpPtr out = graph_rewrite(u, symbolic(), opts);
  size_t before = u->size(), after = out->size();
  if (after <= before) return out;
  // NOTE: a rule never grows the node it rewrites, but new nodes can outnumber removed ones
  // when the old subterms stay shared elsewhere; symbolic_simple never adds more than it drops.
  BG_LOG(2) << "simplify: " << before << " -> " << after << " nodes; using symbolic_simple";
  return graph_rewrite(u, symbolic_simple(), opts);
}

namespace {

constexpr int64_t kMaxDivisor = int64_t{1} << 30;

int64_t divisor_of(const UOp* u, std::unordered_map<const UOp*, int64_t>& memo) {
  if (auto it = memo.find(u); it != memo.end()) return it->second;
  auto d = [&](int i) { return divisor_of(u->src(i).get(), memo); };
  auto const_src = [&](int i) -> const UOp* {
    const UOp* s = u->src(i).get();
    return s->is_const() && dtypes::is_int(s->dtype()) ? s : nullptr;
  };
  int64_t out = 1;
  if (!dtypes::is_int(u->dtype()) || u->dtype().count != 1 || u->dtype().ptr) {
    out = 1;
  } else if (u->op() == Op::CONST) {
    uint64_t v = static_cast<uint64_t>(u->const_int());
    out = v == 0 ? kMaxDivisor : std::min<int64_t>(kMaxDivisor, int64_t{1} << std::countr_zero(v));
  } else if (u->op() == Op::ADD || u->op() == Op::SUB || u->op() == Op::MAX) {
    out = std::min(d(0), d(1));
  } else if (u->op() == Op::WHERE) {
    out = std::min(d(1), d(2));
  } else if (u->op() == Op::MUL) {
    out = std::min<int64_t>(kMaxDivisor, d(0) * d(1));  // both are at most 2^30
  } else if (u->op() == Op::NEG) {
    out = d(0);
  } else if (u->op() == Op::SHL && const_src(1)) {
    int64_t k = const_src(1)->const_int();
    out = k >= 0 && k < 31 ? std::min<int64_t>(kMaxDivisor, d(0) << k) : 1;
  } else if (u->op() == Op::MOD) {  // x - trunc(x / m) * m: both terms are multiples
    out = std::min(d(0), d(1));
  } else if (u->op() == Op::IDIV && const_src(1)) {  // exact: x / c == x >> log2(c)
    int64_t c = const_src(1)->const_int(), x = d(0);
    out = c > 0 && std::has_single_bit(static_cast<uint64_t>(c)) && x % c == 0 ? x / c : 1;
  } else if (u->op() == Op::AND) {  // a result bit is set only where both operands have it
    out = std::max(d(0), d(1));
  } else if (u->op() == Op::CAST && dtypes::is_int(u->src(0)->dtype())) {
    out = d(0);  // truncation to 32 bits keeps divisors up to 2^30
  }
  memo.emplace(u, out);
  return out;
}

}  // namespace

int64_t known_divisor(const UOp* u) {
  std::unordered_map<const UOp*, int64_t> memo;
  return divisor_of(u, memo);
}

}  // namespace baregrad::compiler
