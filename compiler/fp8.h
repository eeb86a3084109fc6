// The OCP 8-bit floats (OFP8, v1.0): host conversions, the reference the IR lowering matches.
//   fp8e4m3 (E4M3FN): bias 7, 3 mantissa bits, no infinity, NaN = S.1111.111, max +-448.
//   fp8e5m2 (E5M2):   bias 15, 2 mantissa bits, IEEE-like: inf S.11111.00, NaN S.11111.xx,
//                     max +-57344.
// And the FNUZ formats (AMD's and Graphcore's; PyTorch's float8_*fnuz): every exponent finite, no
// infinity, no negative zero, one NaN at 0x80 (the -0 code):
//   fp8e4m3fnuz: bias 8, 3 mantissa bits, max +-240;   fp8e5m2fnuz: bias 16, 2, max +-57344.
// For them, NaN, infinities and overflow all give 0x80, and a value rounding to zero gives 0x00.
// Encoding rounds the exact value once to nearest even, subnormals included. Non-saturating
// (the spec's default mode, as PyTorch): a value that rounds above the largest finite becomes
// NaN (e4m3) or infinity (e5m2), as do infinities; NaN becomes S.1111111 keeping its sign.
#pragma once

#include <cstdint>

#include "compiler/dtype.h"

namespace baregrad::compiler {

// Layout of one fp8 format (`t` must be an fp8 dtype).
struct Fp8Format {
  int mant;           // mantissa bits
  int bias;           // exponent bias
  int max_code;       // magnitude bits of the largest finite value
  int overflow_code;  // magnitude bits of what overflow gives (NaN for e4m3, inf for e5m2);
                      // FNUZ: 0x80, the whole code
};
Fp8Format fp8_format(DType t);

// The fp8 code of `v` rounded once to nearest even.
uint8_t fp8_encode(DType t, double v);
// The exact value of fp8 code `code` (NaN, +-inf and -0 included).
double fp8_decode(DType t, uint8_t code);
// `v` rounded to the fp8 grid: fp8_decode(fp8_encode(v)).
double fp8_round(DType t, double v);

}  // namespace baregrad::compiler
