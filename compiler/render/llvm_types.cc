#include "compiler/render/llvm_types.h"

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "base/check.h"
#include "base/format.h"

namespace baregrad::compiler {
namespace {

std::string scalar_type(Scalar s, bool memory) {
  switch (s) {
    case Scalar::kBool:
      return memory ? "i8" : "i1";
    case Scalar::kInt8:
    case Scalar::kUint8:
    case Scalar::kFp8e4m3:  // bytes only: lower_fp8 computes in float32
    case Scalar::kFp8e5m2:
    case Scalar::kFp8e4m3fnuz:
    case Scalar::kFp8e5m2fnuz:
      return "i8";
    case Scalar::kInt16:
    case Scalar::kUint16:
      return "i16";
    case Scalar::kInt32:
    case Scalar::kUint32:
      return "i32";
    case Scalar::kInt64:
    case Scalar::kUint64:
      return "i64";
    case Scalar::kFloat16:
      return "half";
    case Scalar::kBFloat16:
      return "bfloat";
    case Scalar::kFloat32:
      return "float";
    case Scalar::kFloat64:
      return "double";
    case Scalar::kVoid:
      return "void";
  }
  UNREACHABLE() << "scalar type " << static_cast<int>(s);
}

uint16_t bfloat_bits(double v) {
  float f = static_cast<float>(v);
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

std::string llvm_type(DType t, bool memory) {
  if (t.ptr) return "ptr";
  std::string s = scalar_type(t.scalar, memory);
  if (t.count == 1) return s;
  return "<" + std::to_string(t.count) + " x " + s + ">";
}

std::string llvm_suffix(DType t) {
  std::string s;
  switch (t.scalar) {
    case Scalar::kFloat16:
      s = "f16";
      break;
    case Scalar::kBFloat16:
      s = "bf16";
      break;
    case Scalar::kFloat32:
      s = "f32";
      break;
    case Scalar::kFloat64:
      s = "f64";
      break;
    default:
      s = scalar_type(t.scalar, false);
      break;
  }
  if (t.ptr) s = "p0";
  return t.count == 1 ? s : "v" + std::to_string(t.count) + s;
}

std::string llvm_float_literal(DType t, double v) {
  switch (t.scalar) {
    case Scalar::kFloat16:
      return hex_padded("0xH", std::bit_cast<uint16_t>(static_cast<_Float16>(v)), 4);
    case Scalar::kBFloat16:
      return hex_padded("0xR", bfloat_bits(v), 4);
    case Scalar::kFloat32:
      return hex_padded("0x", std::bit_cast<uint64_t>(static_cast<double>(static_cast<float>(v))),
                        16);
    case Scalar::kFloat64:
      return hex_padded("0x", std::bit_cast<uint64_t>(v), 16);
    default:
      UNREACHABLE() << "float literal of " << t.name();
  }
}

std::string llvm_int_literal(DType t, int64_t v) {
  switch (t.scalar) {
    case Scalar::kBool:
      return v ? "true" : "false";
    case Scalar::kInt8:
    case Scalar::kUint8:
      return std::to_string(static_cast<int8_t>(v));
    case Scalar::kInt16:
    case Scalar::kUint16:
      return std::to_string(static_cast<int16_t>(v));
    case Scalar::kInt32:
    case Scalar::kUint32:
      return std::to_string(static_cast<int32_t>(v));
    case Scalar::kInt64:
    case Scalar::kUint64:
      return std::to_string(v);
    default:
      UNREACHABLE() << "int literal of " << t.name();
  }
}

std::string llvm_splat_text(DType t, const std::string& scalar) {
  if (t.count == 1) return scalar;
  std::string elem = llvm_type(t.base()) + " " + scalar;
  std::string out = "<";
  for (int i = 0; i < t.count; i++) out += (i ? ", " : "") + elem;
  return out + ">";
}

std::string llvm_splat(DType t, double v) {
  bool f = dtypes::is_float(t);
  return llvm_splat_text(
      t, f ? llvm_float_literal(t, v) : llvm_int_literal(t, static_cast<int64_t>(v)));
}

std::string llvm_const(const UOp& c) {
  CHECK(c.op() == Op::CONST) << op_name(c.op());
  DType t = c.dtype();
  if (dtypes::is_float(t)) return llvm_splat_text(t, llvm_float_literal(t, c.const_value()));
  return llvm_splat_text(t, llvm_int_literal(t, c.const_int()));
}

std::string llvm_global(const std::string& name) {
  bool plain = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char ch : name) {
    plain &= std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '$' ||
             ch == '-';
  }
  if (plain) return "@" + name;
  CHECK(name.find('"') == std::string::npos && name.find('\\') == std::string::npos) << name;
  return "@\"" + name + "\"";
}

}  // namespace baregrad::compiler
