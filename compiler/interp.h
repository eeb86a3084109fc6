// Reference interpreter for scalar UOp expression graphs: the oracle that tests compare passes
// and renderers against. ALU semantics are exactly exec_alu_float / exec_alu_int of uop.h.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "compiler/uop.h"

namespace baregrad::compiler {

// One scalar value. Integer and bool dtypes keep `i` (wrapped to the dtype; uint64 as its bit
// pattern) and float dtypes keep `f` (rounded to the dtype); the other field mirrors it.
struct Value {
  DType dtype;
  double f = 0;
  int64_t i = 0;
};

// Values of DEFINE_VAR / SPECIAL nodes, by name.
using VarValues = std::unordered_map<std::string, int64_t>;
// Values bound to arbitrary nodes by identity; a bound node is not evaluated further.
using NodeValues = std::unordered_map<const UOp*, double>;

// The value of `u`: CONST, DEFINE_VAR / SPECIAL (from `vars`), ALU ops, CAST, BITCAST and
// any node bound in `inputs`. Throws baregrad::Error("interp", ...) on anything else (a
// vector dtype, an unbound variable, an unsupported op). Each node is evaluated once.
Value eval(const UOpPtr& u, const VarValues& vars = {}, const NodeValues* inputs = nullptr);
// eval() as a double (ints converted exactly where representable; uint64 as unsigned).
double eval_float(const UOpPtr& u, const VarValues& vars = {}, const NodeValues* inputs = nullptr);
// eval() as an int64 (floats truncated toward zero; uint64 as its bit pattern).
int64_t eval_int(const UOpPtr& u, const VarValues& vars = {}, const NodeValues* inputs = nullptr);

// `v` converted to `to` with C semantics: float->int truncates toward zero (nan gives 0,
// values beyond int64 saturate, then wrap to the dtype); anything->bool is != 0.
Value convert(const Value& v, DType to);
// The bits of `v` reinterpreted as `to`; the two dtypes must have the same size.
Value reinterpret(const Value& v, DType to);
// `x` as a Value of dtype `t` (rounded / converted to it like convert()).
Value make_value(DType t, double x);
// `x` as a Value of dtype `t` (wrapped to an int dtype, rounded to a float dtype).
Value make_int_value(DType t, int64_t x);

}  // namespace baregrad::compiler
