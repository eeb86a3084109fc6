// What C and OpenCL C spell for the C renderer's writer (c_source.cc): type names, literals,
// and the helper functions a kernel's text may need. Internal to compiler/render.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "compiler/program.h"

namespace baregrad::compiler::ctext {

// clang's C type of a scalar (fp8: bytes, computed as float32 by lower_fp8).
const char* scalar_ctype(Scalar s);
// OpenCL C's scalar types. half and bfloat16 live in float registers holding values rounded to
// their format (OpenCL C 1.2 computes in half only under cl_khr_fp16); fp8 is bytes.
const char* cl_scalar_type(Scalar s);
// OpenCL C's element type in global memory: half through vload_half / vstore_half (core
// without cl_khr_fp16), bfloat16 as its 16-bit pattern, bool as a byte.
const char* cl_memory_type(Scalar s);
// Stem of vector typedef names, OpenCL style: float4_v, uchar16_v, bfloat8_v.
const char* vector_stem(Scalar s);
// A floating literal of scalar type `s` holding round_to(s, v), in OpenCL C when `cl`: half and
// bfloat16 are float there.
std::string float_literal(Scalar s, double v, bool cl = false);
// `cl`: OpenCL C spells 64-bit literals with L (long is 64-bit there).
std::string int_literal(Scalar s, int64_t v, bool cl = false);

// The text of the helper functions named in `used` (to_bf16, to_half, ...), in dependency
// order, in OpenCL C when `cl`; CHECK-fails for a helper the dialect lacks.
std::string helper_functions(const std::set<std::string>& used, bool cl);
// Whether the program computes in or converts through double (OpenCL's cl_khr_fp64).
bool uses_double(const ProgramSpec& spec, const std::set<std::string>& helpers);

}  // namespace baregrad::compiler::ctext
