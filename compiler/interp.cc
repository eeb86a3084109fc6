#include "compiler/interp.h"

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"
#include "base/error.h"
#include "compiler/fp8.h"

namespace baregrad::compiler {
namespace {

constexpr double kTwo63 = 9223372036854775808.0;
constexpr double kTwo64 = 18446744073709551616.0;

[[noreturn]] void fail_node(const UOp* n, const std::string& why) {
  fail("interp", std::string(op_name(n->op())) + " " + n->dtype().name() + ": " + why);
}

double as_double(const Value& v) {
  if (dtypes::is_float(v.dtype)) return v.f;
  if (dtypes::is_unsigned(v.dtype)) return static_cast<double>(static_cast<uint64_t>(v.i));
  return static_cast<double>(v.i);
}

// Truncates toward zero and saturates to int64 (uint64 for unsigned targets, as bits).
int64_t float_to_bits(double f, bool to_unsigned) {
  if (std::isnan(f)) return 0;
  double t = std::trunc(f);
  if (to_unsigned && t >= kTwo63) {
    if (t >= kTwo64) return -1;
    return static_cast<int64_t>(static_cast<uint64_t>(t));
  }
  if (t >= kTwo63) return std::numeric_limits<int64_t>::max();
  if (t < -kTwo63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(t);
}

// NOTE: float32 and float64 round the integer once; the half types round through float32.
double int_to_float(DType to, int64_t i, bool from_unsigned) {
  uint64_t u = static_cast<uint64_t>(i);
  if (to.scalar == Scalar::kFloat64)
    return from_unsigned ? static_cast<double>(u) : static_cast<double>(i);
  float f = from_unsigned ? static_cast<float>(u) : static_cast<float>(i);
  return round_to(to, f);
}

uint64_t to_bits(const Value& v) {
  switch (v.dtype.scalar) {
    case Scalar::kFloat64:
      return std::bit_cast<uint64_t>(v.f);
    case Scalar::kFloat32:
      return std::bit_cast<uint32_t>(static_cast<float>(v.f));
    case Scalar::kFloat16:
      return std::bit_cast<uint16_t>(static_cast<_Float16>(v.f));
    case Scalar::kBFloat16:
      return std::bit_cast<uint32_t>(static_cast<float>(v.f)) >> 16;
    case Scalar::kFp8e4m3:
    case Scalar::kFp8e5m2:
    case Scalar::kFp8e4m3fnuz:
    case Scalar::kFp8e5m2fnuz:
      return fp8_encode(v.dtype, v.f);
    default: {
      int bits = v.dtype.scalar_size() * 8;
      uint64_t u = static_cast<uint64_t>(v.i);
      return bits >= 64 ? u : u & ((uint64_t{1} << bits) - 1);
    }
  }
}

Value from_bits(DType to, uint64_t b) {
  switch (to.scalar) {
    case Scalar::kFloat64:
      return make_value(to, std::bit_cast<double>(b));
    case Scalar::kFloat32:
      return make_value(to, std::bit_cast<float>(static_cast<uint32_t>(b)));
    case Scalar::kFloat16:
      return make_value(to, static_cast<double>(std::bit_cast<_Float16>(static_cast<uint16_t>(b))));
    case Scalar::kBFloat16:
      return make_value(to, std::bit_cast<float>(static_cast<uint32_t>(b << 16)));
    case Scalar::kFp8e4m3:
    case Scalar::kFp8e5m2:
    case Scalar::kFp8e4m3fnuz:
    case Scalar::kFp8e5m2fnuz:
      return make_value(to, fp8_decode(to, static_cast<uint8_t>(b)));
    default:
      return make_int_value(to, static_cast<int64_t>(b));
  }
}

bool int_alu_supported(Op op) {
  switch (op) {
    case Op::EXP2:
    case Op::LOG2:
    case Op::SIN:
    case Op::SQRT:
    case Op::RECIP:
    case Op::TRUNC:
    case Op::FDIV:
    case Op::POW:
      return false;
    default:
      return true;
  }
}

bool float_alu_supported(Op op) {
  switch (op) {
    case Op::IDIV:
    case Op::MOD:
    case Op::AND:
    case Op::OR:
    case Op::XOR:
    case Op::SHL:
    case Op::SHR:
      return false;
    default:
      return true;
  }
}

Value eval_alu(const UOp* n, const std::vector<const Value*>& xs) {
  if (static_cast<int>(xs.size()) != op_arity(n->op())) fail_node(n, "wrong number of sources");
  DType edt = xs[n->op() == Op::WHERE ? 1 : 0]->dtype;
  if (dtypes::is_float(edt)) {
    if (!float_alu_supported(n->op())) fail_node(n, "not defined on floats");
    std::vector<double> v;
    for (const Value* x : xs) v.push_back(as_double(*x));
    return make_value(n->dtype(), exec_alu_float(n->op(), edt, v));
  }
  if (!int_alu_supported(n->op())) fail_node(n, "not defined on ints");
  std::vector<int64_t> v;
  for (const Value* x : xs) v.push_back(x->i);
  return make_int_value(n->dtype(), exec_alu_int(n->op(), edt, v));
}

Value eval_node(const UOp* n, const std::vector<const Value*>& xs, const VarValues& vars) {
  switch (n->op()) {
    case Op::CONST: {
      const Arg& a = n->arg();
      if (auto* d = std::get_if<double>(&a)) return make_value(n->dtype(), *d);
      if (auto* b = std::get_if<bool>(&a)) return make_int_value(n->dtype(), *b);
      return make_int_value(n->dtype(), std::get<int64_t>(a));
    }
    case Op::DEFINE_VAR:
    case Op::SPECIAL: {
      const std::string& name = n->arg_as<VarArg>().name;
      auto it = vars.find(name);
      if (it == vars.end()) fail_node(n, "no value for variable '" + name + "'");
      return make_int_value(n->dtype(), it->second);
    }
    case Op::CAST:
      return convert(*xs.at(0), n->dtype());
    case Op::BITCAST:
      return reinterpret(*xs.at(0), n->dtype());
    default:
      if (is_alu(n->op())) return eval_alu(n, xs);
      fail_node(n, "op not supported by the interpreter (bind it in inputs)");
  }
}

}  // namespace

Value make_value(DType t, double x) {
  if (dtypes::is_float(t)) return Value{t, round_to(t, x), 0};
  if (dtypes::is_bool(t)) return Value{t, x != 0 ? 1.0 : 0.0, x != 0};
  return convert(Value{dtypes::kFloat64, x, 0}, t);
}

Value make_int_value(DType t, int64_t x) {
  if (dtypes::is_float(t)) return Value{t, int_to_float(t, x, false), 0};
  Value v{t, 0, wrap_int(t, x)};
  v.f = as_double(v);
  return v;
}

Value convert(const Value& v, DType to) {
  if (dtypes::is_float(v.dtype)) {
    if (dtypes::is_float(to)) return Value{to, round_to(to, v.f), 0};
    if (dtypes::is_bool(to)) return make_int_value(to, v.f != 0);
    return make_int_value(to, float_to_bits(v.f, dtypes::is_unsigned(to)));
  }
  if (dtypes::is_float(to))
    return Value{to, int_to_float(to, v.i, dtypes::is_unsigned(v.dtype)), 0};
  return make_int_value(to, v.i);
}

Value reinterpret(const Value& v, DType to) {
  if (v.dtype.itemsize() != to.itemsize())
    fail("interp", "BITCAST " + v.dtype.name() + " -> " + to.name() + ": sizes differ");
  return from_bits(to, to_bits(v));
}

Value eval(const UOpPtr& u, const VarValues& vars, const NodeValues* inputs) {
  std::unordered_map<const UOp*, Value> memo;
  std::vector<std::pair<const UOp*, size_t>> stack{{u.get(), 0}};
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i == 0 && memo.count(n)) {
      stack.pop_back();
      continue;
    }
    if (i == 0 && inputs) {
      if (auto it = inputs->find(n); it != inputs->end()) {
        memo.emplace(n, make_value(n->dtype(), it->second));
        stack.pop_back();
        continue;
      }
    }
    if (i == 0 && (n->dtype().count != 1 || n->dtype().ptr))
      fail_node(n, "only scalar values are supported");
    if (i < n->src().size()) {
      const UOp* s = n->src(i++).get();
      if (!memo.count(s)) stack.push_back({s, 0});
      continue;
    }
    std::vector<const Value*> xs;
    for (auto& s : n->src()) xs.push_back(&memo.at(s.get()));
    Value v = eval_node(n, xs, vars);
    memo.emplace(n, v);
    stack.pop_back();
  }
  return memo.at(u.get());
}

double eval_float(const UOpPtr& u, const VarValues& vars, const NodeValues* inputs) {
  return as_double(eval(u, vars, inputs));
}

int64_t eval_int(const UOpPtr& u, const VarValues& vars, const NodeValues* inputs) {
  Value v = eval(u, vars, inputs);
  return dtypes::is_float(v.dtype) ? float_to_bits(v.f, false) : v.i;
}

}  // namespace baregrad::compiler
