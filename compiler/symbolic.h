// Symbolic simplification of scalar and index math, as PatternMatchers for graph_rewrite.
//
// Every rule is exact for all values inside the operands' vmin/vmax bounds (C truncating
// IDIV/MOD; ints wrap like the original; floats are only touched where IEEE results are
// identical), and no rule makes the node it rewrites larger (UOp::size()).
#pragma once

#include "compiler/pattern.h"

namespace baregrad::compiler {

// Constant folding of ALU ops, CAST and BITCAST on CONSTs (never a division / modulo by zero)
// and local identities: x+0, x-0, x*1, x*0 (ints), x//1, x%1, x-x (ints), -(-x), WHERE with a
// constant condition or equal branches, x<x / x!=x / x==x (ints), AND/OR/XOR with constants or
// equal operands, CAST to the same dtype.
const PatternMatcher& symbolic_simple();

// symbolic_simple() plus index math: CONSTs moved to the right of commutative ops, sums
// normalised (constants combined, like terms collected, nothing grows), int64 values whose
// bounds are a single point replaced by it, IDIV / MOD by positive constants folded using
// bounds, nested IDIV / MOD merged, comparisons decided by bounds or normalised
// (x*c<d, x+c<d, x//c<d to x<d'), MAX decided by bounds.
const PatternMatcher& symbolic();

// graph_rewrite with symbolic() to a fixed point; the result computes the same values for
// every input inside the variables' bounds and never has more nodes than `u`.
UOpPtr simplify(const UOpPtr& u);

// The largest power of two, at most 2^30, known to divide every value integer `u` takes
// (1 when nothing is known; 2^30 for the constant 0). From constants through ADD, SUB, MUL,
// SHL, NEG, MAX, WHERE, MOD and exact IDIV by powers of two, AND and CAST between ints: a
// vector access at index `u` is aligned to that many elements (renderers use it to prove the
// alignment of 16-byte loads and stores).
int64_t known_divisor(const UOp* u);

}  // namespace baregrad::compiler
