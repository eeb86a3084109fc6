// Expands EXP2, LOG2, SIN and POW into plain ALU ops (polynomials, bit manipulation, an integer
// Payne-Hanek reduction), any lane count. float32 uses only float32/int ops, no float64.
// Max error over the full range (tests/unit/transcendental_test.cc, reference ALU semantics):
//   float32: exp2 0.77, log2 0.77, sin 0.82, pow 0.78 ulp. float16/bfloat16: via float32, 0.5 ulp.
//   float64: exp2 0.76, log2 0.76, pow 0.76 ulp; sin 0.81 ulp for |x| < 1.6e9, beyond that an
//   absolute error of ~2e-3 at 1e10 growing to O(1) past ~1e13 (results stay in [-1, 1]).
// Edge cases are C99 Annex F's (denormal results and inputs included; pow(-1, +-inf) = 1).
// NOTE: the double-float steps need IEEE ops; FMA contraction of single-use products is harmless,
// reassociation is not.
#pragma once

#include "compiler/pattern.h"

namespace baregrad::compiler {

// Rules rewriting float EXP2, LOG2, SIN and POW into ops from {ADD, SUB, MUL, FDIV, NEG, MAX,
// CMPLT, CMPNE, WHERE, TRUNC, CAST, BITCAST, AND, OR, SHL, SHR}.
const PatternMatcher& pm_transcendental();
// `sink` with every float EXP2, LOG2, SIN and POW expanded.
UOpPtr rewrite_transcendentals(const UOpPtr& sink);

// The expansion of one op on a float value (float16/bfloat16 go through float32).
UOpPtr expand_exp2(const UOpPtr& x);
UOpPtr expand_log2(const UOpPtr& x);
UOpPtr expand_sin(const UOpPtr& x);
UOpPtr expand_pow(const UOpPtr& x, const UOpPtr& y);

}  // namespace baregrad::compiler
