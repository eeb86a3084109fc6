// fp8 in kernels: storage only. Before lowering, a kernel AST's fp8 buffers become uint8 buffers,
// every fp8 value is computed in float32 (held on the fp8 grid), loads decode a byte and stores
// encode one, all with integer bit manipulation, so every backend runs fp8 without fp8 types.
// Encoding matches compiler/fp8.h bit for bit: one round to nearest even from float32 (from
// float64 for float64 sources), subnormals kept, overflow to NaN (e4m3) / inf (e5m2).
#pragma once

#include "compiler/uop.h"

namespace baregrad::compiler {

// The kernel AST `sink` with no fp8 dtype left (itself when it has none).
UOpPtr lower_fp8(const UOpPtr& sink);

// The uint8 fp8 code of float32 or float64 `x` (scalar), rounded once to nearest even.
UOpPtr fp8_encode_uop(DType fp8, const UOpPtr& x);
// The float32 value of the uint8 fp8 code `code` (scalar).
UOpPtr fp8_decode_uop(DType fp8, const UOpPtr& code);

}  // namespace baregrad::compiler
