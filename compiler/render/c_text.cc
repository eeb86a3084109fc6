#include "compiler/render/c_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>

#include "base/check.h"

namespace baregrad::compiler::ctext {
namespace {

// Shortest %g text that `exact` accepts, always spelled as a floating literal.
template <class Exact>
std::string shortest(double v, Exact exact) {
  char buf[40] = {};
  for (int p = 1; p <= 17; p++) {
    std::snprintf(buf, sizeof(buf), "%.*g", p, v);
    if (exact(std::strtod(buf, nullptr))) break;
  }
  std::string s = buf;
  return s.find_first_of(".e") == std::string::npos ? s + ".0" : s;
}

}  // namespace

const char* scalar_ctype(Scalar s) {
  // fp8: only bytes reach a renderer (lower_fp8 computes in float32)
  static constexpr const char* kNames[] = {"void",     "_Bool",   "int8_t",   "uint8_t", "int16_t",
                                           "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t",
                                           "uint8_t",  "uint8_t", "uint8_t",  "uint8_t", "_Float16",
                                           "__bf16",   "float",   "double"};
  static_assert(std::size(kNames) == kNumScalars, "one C type per Scalar");
  return kNames[static_cast<int>(s)];
}

// OpenCL C's scalar types. half and bfloat16 live in float registers holding values rounded to
// their format (OpenCL C 1.2 computes in half only under cl_khr_fp16); fp8 is bytes.
const char* cl_scalar_type(Scalar s) {
  static constexpr const char* kNames[] = {"void",  "bool",  "char",  "uchar", "short", "ushort",
                                           "int",   "uint",  "long",  "ulong", "uchar", "uchar",
                                           "uchar", "uchar", "float", "float", "float", "double"};
  static_assert(std::size(kNames) == kNumScalars, "one OpenCL C type per Scalar");
  return kNames[static_cast<int>(s)];
}

// Stem of vector typedef names, OpenCL style: float4_v, uchar16_v, bfloat8_v.
const char* vector_stem(Scalar s) {
  static constexpr const char* kStems[] = {"void",  "bool",  "char", "uchar",  "short", "ushort",
                                           "int",   "uint",  "long", "ulong",  "uchar", "uchar",
                                           "uchar", "uchar", "half", "bfloat", "float", "double"};
  static_assert(std::size(kStems) == kNumScalars, "one stem per Scalar");
  return kStems[static_cast<int>(s)];
}

// A floating literal of scalar type `s` holding round_to(s, v), in OpenCL C when `cl`: half and
// bfloat16 are float there.
std::string cl_float_literal(Scalar s, double v);
std::string float_literal(Scalar s, double v, bool cl) {
  if (cl) return cl_float_literal(s, v);
  // NOTE: clang folds the cast with round-to-nearest-even, exactly like round_to().
  if (s == Scalar::kBFloat16) return "(__bf16)" + float_literal(Scalar::kFloat32, v);
  bool dbl = s == Scalar::kFloat64, half = s == Scalar::kFloat16;
  v = round_to(DType{s}, v);
  if (std::isnan(v) || std::isinf(v)) {
    std::string t = std::isnan(v) ? (dbl ? "__builtin_nan(\"\")" : "__builtin_nanf(\"\")")
                                  : (v < 0 ? "-" : "") +
                                        std::string(dbl ? "__builtin_inf()" : "__builtin_inff()");
    return half ? "(_Float16)" + t : t;
  }
  const char* suffix = dbl ? "" : half ? "f16" : "f";
  if (v == std::trunc(v) && std::abs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", v);
    return buf + std::string(suffix);
  }
  return shortest(v,
                  [&](double x) {
                    return dbl    ? x == v
                           : half ? static_cast<double>(static_cast<_Float16>(x)) == v
                                  : static_cast<double>(static_cast<float>(x)) == v;
                  }) +
         suffix;
}

std::string cl_float_literal(Scalar s, double v) {
  bool dbl = s == Scalar::kFloat64;
  v = round_to(DType{s}, v);
  if (std::isnan(v)) return dbl ? "(double)NAN" : "NAN";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + (dbl ? "(double)INFINITY" : "INFINITY");
  std::string f = float_literal(dbl ? Scalar::kFloat64 : Scalar::kFloat32, v);
  return f;  // half and bfloat16 values are exact in float
}

// `cl`: OpenCL C spells 64-bit literals with L (long is 64-bit there).
std::string int_literal(Scalar s, int64_t v, bool cl) {
  if (s == Scalar::kBool) return v ? "1" : "0";
  if (s == Scalar::kUint64) return std::to_string(static_cast<uint64_t>(v)) + (cl ? "UL" : "ull");
  if (s == Scalar::kUint32) return std::to_string(static_cast<uint32_t>(v)) + "u";
  if (v == std::numeric_limits<int64_t>::min())
    return cl ? "(-9223372036854775807L - 1)" : "(-9223372036854775807ll - 1)";
  if (v == std::numeric_limits<int32_t>::min()) return "(-2147483647 - 1)";
  return std::to_string(v);
}

// OpenCL C's element type in global memory: half through vload_half / vstore_half (core
// without cl_khr_fp16), bfloat16 as its 16-bit pattern, bool as a byte.
const char* cl_memory_type(Scalar s) {
  if (s == Scalar::kFloat16) return "half";
  if (s == Scalar::kBFloat16) return "ushort";
  if (s == Scalar::kBool) return "uchar";
  return cl_scalar_type(s);
}

// The helper functions a body may call (Writer::helpers_), in dependency order: the C dialect
// uses to_bf16 only.
struct Helper {
  const char* name;
  const char* c;   // clang's C
  const char* cl;  // OpenCL C
};
constexpr Helper kHelpers[] = {
    {"to_bf16",
     "static inline __bf16 to_bf16(float x) {\n"
     "  uint32_t u;\n"
     "  __builtin_memcpy(&u, &x, 4);\n"
     "  u = x != x ? u | 0x400000u : u + 0x7fffu + ((u >> 16) & 1u);\n"
     "  uint16_t h = (uint16_t)(u >> 16);\n"
     "  __bf16 r;\n"
     "  __builtin_memcpy(&r, &h, 2);\n"
     "  return r;\n"
     "}\n",
     "static float to_bf16(float x) {  // rounds to nearest even, keeps NaNs quiet\n"
     "  uint u = as_uint(x);\n"
     "  u = x != x ? u | 0x400000u : u + 0x7fffu + ((u >> 16) & 1u);\n"
     "  return as_float(u & 0xffff0000u);\n"
     "}\n"},
    {"to_bf16_d", nullptr,
     "static float to_bf16_d(double x) {  // round to odd in float, then once to bfloat16\n"
     "  float f = convert_float_rtz(x);\n"
     "  return to_bf16(as_float(as_uint(f) | ((double)f != x && x == x ? 1u : 0u)));\n"
     "}\n"},
    {"to_half", nullptr,
     "static float to_half(float x) {\n"
     "  ushort h;\n"
     "  vstore_half_rte(x, 0, (half*)&h);\n"
     "  return vload_half(0, (half*)&h);\n"
     "}\n"},
    {"to_half_d", nullptr,
     "static float to_half_d(double x) {\n"
     "  ushort h;\n"
     "  vstore_half_rte(x, 0, (half*)&h);\n"
     "  return vload_half(0, (half*)&h);\n"
     "}\n"},
    {"half_bits", nullptr,
     "static ushort half_bits(float x) {\n"
     "  ushort h;\n"
     "  vstore_half_rte(x, 0, (half*)&h);\n"
     "  return h;\n"
     "}\n"},
    {"half_from_bits", nullptr,
     "static float half_from_bits(ushort h) { return vload_half(0, (half*)&h); }\n"},
};

std::string helper_functions(const std::set<std::string>& used, bool cl) {
  std::string out;
  for (const Helper& h : kHelpers)
    if (used.count(h.name) || (h.name == std::string("to_bf16") && used.count("to_bf16_d"))) {
      CHECK(cl ? h.cl : h.c) << "C renderer: no " << h.name << " helper in this dialect";
      out += cl ? h.cl : h.c;
    }
  return out;
}

// Whether the program computes in or converts through double (OpenCL's cl_khr_fp64).
bool uses_double(const ProgramSpec& spec, const std::set<std::string>& helpers) {
  if (helpers.count("to_half_d") || helpers.count("to_bf16_d")) return true;
  return std::any_of(spec.uops.begin(), spec.uops.end(), [](const UOpPtr& u) {
    return u->dtype().scalar == Scalar::kFloat64 ||
           std::any_of(u->src().begin(), u->src().end(),
                       [](const UOpPtr& x) { return x->dtype().scalar == Scalar::kFloat64; });
  });
}

}  // namespace baregrad::compiler::ctext
