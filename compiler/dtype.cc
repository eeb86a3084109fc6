#include "compiler/dtype.h"

#include <cmath>
#include <iterator>
#include <limits>

#include "base/check.h"

namespace baregrad::compiler {
namespace {

struct ScalarInfo {
  const char* name;
  int size;
  uint32_t up;  // direct successors in the promotion lattice (bit per Scalar)
};

constexpr uint32_t bit(Scalar s) { return 1u << static_cast<int>(s); }

// NOTE: the lattice is tinygrad's: ints climb to int64/uint64, which both promote to the
// half floats, and every float climbs to float64. The fp8s climb to the half floats; an int with
// an fp8 gives the fp8 (tinygrad's path through its weak float), see least_upper_dtype.
constexpr ScalarInfo kInfo[] = {
    {"void", 0, 0},
    {"bool", 1, bit(Scalar::kInt8) | bit(Scalar::kUint8)},
    {"int8", 1, bit(Scalar::kInt16)},
    {"uint8", 1, bit(Scalar::kInt16) | bit(Scalar::kUint16)},
    {"int16", 2, bit(Scalar::kInt32)},
    {"uint16", 2, bit(Scalar::kInt32) | bit(Scalar::kUint32)},
    {"int32", 4, bit(Scalar::kInt64)},
    {"uint32", 4, bit(Scalar::kInt64) | bit(Scalar::kUint64)},
    {"int64", 8, bit(Scalar::kFloat16) | bit(Scalar::kBFloat16)},
    {"uint64", 8, bit(Scalar::kFloat16) | bit(Scalar::kBFloat16)},
    {"fp8e4m3", 1, bit(Scalar::kFloat16) | bit(Scalar::kBFloat16)},
    {"fp8e5m2", 1, bit(Scalar::kFloat16) | bit(Scalar::kBFloat16)},
    {"fp8e4m3fnuz", 1, bit(Scalar::kFloat16) | bit(Scalar::kBFloat16)},
    {"fp8e5m2fnuz", 1, bit(Scalar::kFloat16) | bit(Scalar::kBFloat16)},
    {"float16", 2, bit(Scalar::kFloat32)},
    {"bfloat16", 2, bit(Scalar::kFloat32)},
    {"float32", 4, bit(Scalar::kFloat64)},
    {"float64", 8, 0},
};
static_assert(std::size(kInfo) == kNumScalars, "one row per Scalar");

uint32_t ancestors(Scalar s) {
  uint32_t out = bit(s);
  uint32_t up = kInfo[static_cast<int>(s)].up;
  for (int i = 0; i < kNumScalars; i++)
    if (up & (1u << i)) out |= ancestors(static_cast<Scalar>(i));
  return out;
}

}  // namespace

int DType::scalar_size() const { return kInfo[static_cast<int>(scalar)].size; }
int DType::itemsize() const { return ptr ? 8 : scalar_size() * count; }

std::string DType::name() const {
  std::string s = kInfo[static_cast<int>(scalar)].name;
  if (count > 1) s += "x" + std::to_string(count);
  if (ptr) s += addr == AddrSpace::kGlobal ? "*" : addr == AddrSpace::kLocal ? "*local" : "*reg";
  return s;
}

namespace dtypes {
bool is_float(DType t) { return t.scalar >= Scalar::kFp8e4m3; }
bool is_int(DType t) { return t.scalar >= Scalar::kInt8 && t.scalar <= Scalar::kUint64; }
bool is_unsigned(DType t) {
  return t.scalar == Scalar::kUint8 || t.scalar == Scalar::kUint16 || t.scalar == Scalar::kUint32 ||
         t.scalar == Scalar::kUint64;
}
bool is_bool(DType t) { return t.scalar == Scalar::kBool; }

const DType* all(int* n) {
  static const DType kAll[] = {kBool,        kInt8,    kUint8,    kInt16,   kUint16,  kInt32,
                               kUint32,      kInt64,   kUint64,   kFp8e4m3, kFp8e5m2, kFp8e4m3fnuz,
                               kFp8e5m2fnuz, kFloat16, kBFloat16, kFloat32, kFloat64};
  *n = sizeof(kAll) / sizeof(kAll[0]);
  return kAll;
}

DType from_name(const std::string& name) {
  for (int i = 1; i < kNumScalars; i++)
    if (name == kInfo[i].name) return DType{static_cast<Scalar>(i)};
  return kVoid;
}

double min_value(DType t) {
  switch (t.scalar) {
    case Scalar::kBool:
      return 0;
    case Scalar::kInt8:
      return -128;
    case Scalar::kInt16:
      return -32768;
    case Scalar::kInt32:
      return -2147483648.0;
    case Scalar::kInt64:
      return -9223372036854775808.0;
    case Scalar::kFp8e4m3:
      return -448.0;
    case Scalar::kFp8e5m2:
    case Scalar::kFp8e5m2fnuz:
      return -57344.0;
    case Scalar::kFp8e4m3fnuz:
      return -240.0;
    case Scalar::kFloat16:
      return -65504.0;
    case Scalar::kBFloat16:
      return -3.3895313892515355e38;
    case Scalar::kFloat32:
      return -std::numeric_limits<float>::max();
    case Scalar::kFloat64:
      return -std::numeric_limits<double>::max();
    default:
      return 0;  // unsigned
  }
}

double max_value(DType t) {
  switch (t.scalar) {
    case Scalar::kBool:
      return 1;
    case Scalar::kInt8:
      return 127;
    case Scalar::kUint8:
      return 255;
    case Scalar::kInt16:
      return 32767;
    case Scalar::kUint16:
      return 65535;
    case Scalar::kInt32:
      return 2147483647.0;
    case Scalar::kUint32:
      return 4294967295.0;
    case Scalar::kInt64:
      return 9223372036854775807.0;
    case Scalar::kUint64:
      return 18446744073709551615.0;
    case Scalar::kFp8e4m3:
      return 448.0;
    case Scalar::kFp8e5m2:
    case Scalar::kFp8e5m2fnuz:
      return 57344.0;
    case Scalar::kFp8e4m3fnuz:
      return 240.0;
    case Scalar::kFloat16:
      return 65504.0;
    case Scalar::kBFloat16:
      return 3.3895313892515355e38;
    case Scalar::kFloat32:
      return std::numeric_limits<float>::max();
    case Scalar::kFloat64:
      return std::numeric_limits<double>::max();
    default:
      return 0;
  }
}
}  // namespace dtypes

DType least_upper_dtype(DType a, DType b) {
  CHECK(!a.ptr && !b.ptr && a.count == 1 && b.count == 1) << a.name() << ", " << b.name();
  if (a.scalar == b.scalar) return a;
  if (dtypes::is_fp8(a) && (dtypes::is_int(b) || dtypes::is_bool(b))) return a;
  if (dtypes::is_fp8(b) && (dtypes::is_int(a) || dtypes::is_bool(a))) return b;
  uint32_t common = ancestors(a.scalar) & ancestors(b.scalar);
  for (int i = 0; i < kNumScalars; i++)
    if (common & (1u << i)) return DType{static_cast<Scalar>(i)};
  UNREACHABLE() << "no common dtype for " << a.name() << " and " << b.name();
}

DType least_upper_float(DType t) { return dtypes::is_float(t) ? t : dtypes::kFloat32; }

}  // namespace baregrad::compiler
