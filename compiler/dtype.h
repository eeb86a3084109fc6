// Element types of the UOp IR: scalars, short vectors of them, and pointers to them.
#pragma once

#include <cstdint>
#include <string>

namespace baregrad::compiler {

// Scalar kinds in promotion priority order (tinygrad's lattice; see least_upper_dtype).
enum class Scalar : uint8_t {
  kVoid,
  kBool,
  kInt8,
  kUint8,
  kInt16,
  kUint16,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFp8e4m3,      // OCP float8 E4M3FN: no infinity, one NaN per sign (0x7f/0xff), max 448
  kFp8e5m2,      // OCP float8 E5M2: IEEE-like, with infinities and NaNs, max 57344
  kFp8e4m3fnuz,  // E4M3FNUZ (AMD/Graphcore): bias 8, no infinity, no -0, one NaN (0x80), max 240
  kFp8e5m2fnuz,  // E5M2FNUZ: bias 16, no infinity, no -0, one NaN (0x80), max 57344
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};
constexpr int kNumScalars = 18;

// Where a pointer points; GPU targets add shared memory later.
enum class AddrSpace : uint8_t { kGlobal, kLocal, kReg };

// A value type: `count` lanes of `scalar`, or a pointer to such elements.
struct DType {
  Scalar scalar = Scalar::kVoid;
  uint16_t count = 1;
  bool ptr = false;
  AddrSpace addr = AddrSpace::kGlobal;

  constexpr bool operator==(const DType&) const = default;
  // The same element type with `n` lanes.
  constexpr DType vec(int n) const { return DType{scalar, static_cast<uint16_t>(n), ptr, addr}; }
  // The scalar element type (no lanes, no pointer).
  constexpr DType base() const { return DType{scalar, 1, false, AddrSpace::kGlobal}; }
  // A pointer to elements of this type.
  constexpr DType as_ptr(AddrSpace a = AddrSpace::kGlobal) const {
    return DType{scalar, count, true, a};
  }
  // Size in bytes of one element (all lanes); pointers are 8 bytes.
  int itemsize() const;
  // Size in bytes of one lane.
  int scalar_size() const;
  std::string name() const;
};

namespace dtypes {
constexpr DType kVoid{Scalar::kVoid};
constexpr DType kBool{Scalar::kBool};
constexpr DType kInt8{Scalar::kInt8};
constexpr DType kUint8{Scalar::kUint8};
constexpr DType kInt16{Scalar::kInt16};
constexpr DType kUint16{Scalar::kUint16};
constexpr DType kInt32{Scalar::kInt32};
constexpr DType kUint32{Scalar::kUint32};
constexpr DType kInt64{Scalar::kInt64};
constexpr DType kUint64{Scalar::kUint64};
constexpr DType kFp8e4m3{Scalar::kFp8e4m3};
constexpr DType kFp8e5m2{Scalar::kFp8e5m2};
constexpr DType kFp8e4m3fnuz{Scalar::kFp8e4m3fnuz};
constexpr DType kFp8e5m2fnuz{Scalar::kFp8e5m2fnuz};
constexpr DType kFloat16{Scalar::kFloat16};
constexpr DType kBFloat16{Scalar::kBFloat16};
constexpr DType kFloat32{Scalar::kFloat32};
constexpr DType kFloat64{Scalar::kFloat64};
// The index type of kernel index math.
constexpr DType kIndex = kInt64;

bool is_float(DType t);
bool is_int(DType t);  // signed or unsigned integer, not bool
bool is_unsigned(DType t);
bool is_bool(DType t);
// The 8-bit floats: stored as bytes, computed in float32 (compiler/fp8.h has the conversions).
constexpr bool is_fp8(DType t) {
  return t.scalar >= Scalar::kFp8e4m3 && t.scalar <= Scalar::kFp8e5m2fnuz;
}
// The FNUZ fp8s: finite only, a single zero and a single NaN (0x80).
constexpr bool is_fp8_fnuz(DType t) {
  return t.scalar == Scalar::kFp8e4m3fnuz || t.scalar == Scalar::kFp8e5m2fnuz;
}
// Every scalar dtype except void, in priority order.
const DType* all(int* n);
// Parses "float32", "int8", ... ; returns kVoid when unknown.
DType from_name(const std::string& name);
// Smallest value and largest finite value representable, as doubles.
double min_value(DType t);
double max_value(DType t);
}  // namespace dtypes

// The dtype two operands promote to (tinygrad's least_upper_dtype over its lattice).
DType least_upper_dtype(DType a, DType b);
// The float type an op producing floats from `t` yields (ints -> float32).
DType least_upper_float(DType t);

}  // namespace baregrad::compiler
