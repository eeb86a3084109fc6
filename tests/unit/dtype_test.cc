#include "compiler/dtype.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace baregrad::compiler {
namespace {

using namespace dtypes;  // NOLINT: dtype constants read better unqualified here

// Direct successors in tinygrad's promotion lattice, written out by hand.
const std::map<std::string, std::vector<std::string>>& lattice() {
  static const std::map<std::string, std::vector<std::string>> kUp = {
      {"bool", {"int8", "uint8"}},
      {"int8", {"int16"}},
      {"uint8", {"int16", "uint16"}},
      {"int16", {"int32"}},
      {"uint16", {"int32", "uint32"}},
      {"int32", {"int64"}},
      {"uint32", {"int64", "uint64"}},
      {"int64", {"float16", "bfloat16"}},
      {"uint64", {"float16", "bfloat16"}},
      {"float16", {"float32"}},
      {"bfloat16", {"float32"}},
      {"float32", {"float64"}},
      {"float64", {}},
  };
  return kUp;
}
const std::vector<std::string> kPriority = {"bool",     "int8",    "uint8",  "int16",  "uint16",
                                            "int32",    "uint32",  "int64",  "uint64", "float16",
                                            "bfloat16", "float32", "float64"};

std::set<std::string> ancestors(const std::string& t) {
  std::set<std::string> out{t};
  for (const auto& up : lattice().at(t))
    for (const auto& a : ancestors(up)) out.insert(a);
  return out;
}

// The lowest-priority common ancestor, from the hand-written lattice.
std::string expected_lub(const std::string& a, const std::string& b) {
  std::set<std::string> x = ancestors(a), y = ancestors(b);
  for (const auto& t : kPriority)
    if (x.count(t) && y.count(t)) return t;
  return "none";
}

TEST(DType, LeastUpperDtypeMatchesHandTable) {
  struct Case {
    DType a, b, want;
  };
  const Case cases[] = {
      {kInt8, kUint8, kInt16},         {kInt8, kUint16, kInt32},
      {kInt8, kUint32, kInt64},        {kInt8, kUint64, kFloat16},
      {kInt16, kUint16, kInt32},       {kInt32, kUint32, kInt64},
      {kInt64, kUint64, kFloat16},     {kUint8, kUint16, kUint16},
      {kUint8, kInt32, kInt32},        {kUint32, kUint64, kUint64},
      {kInt64, kFloat16, kFloat16},    {kInt64, kBFloat16, kBFloat16},
      {kFloat16, kBFloat16, kFloat32}, {kBool, kInt8, kInt8},
      {kBool, kFloat64, kFloat64},     {kBool, kUint64, kUint64},
      {kFloat32, kFloat64, kFloat64},  {kInt32, kFloat16, kFloat16},
      {kUint16, kInt16, kInt32},       {kUint8, kInt64, kInt64},
      {kInt16, kUint32, kInt64},       {kUint16, kUint64, kUint64},
      {kInt8, kInt64, kInt64},         {kBFloat16, kInt8, kBFloat16},
      {kFloat16, kFloat64, kFloat64},  {kUint8, kFloat32, kFloat32},
      {kUint64, kBFloat16, kBFloat16}, {kFp8e4m3, kFp8e5m2, kFloat16},
      {kFp8e4m3, kFloat16, kFloat16},  {kFp8e5m2, kBFloat16, kBFloat16},
      {kFp8e4m3, kFloat32, kFloat32},  {kInt32, kFp8e5m2, kFp8e5m2},
      {kBool, kFp8e4m3, kFp8e4m3},     {kUint64, kFp8e4m3, kFp8e4m3},
  };
  for (const Case& c : cases)
    EXPECT_EQ(least_upper_dtype(c.a, c.b), c.want) << c.a.name() << " + " << c.b.name();
}

TEST(DType, LeastUpperDtypeIsLowestCommonAncestorForEveryPair) {
  for (const auto& a : kPriority)
    for (const auto& b : kPriority)
      EXPECT_EQ(least_upper_dtype(from_name(a), from_name(b)).name(), expected_lub(a, b))
          << a << " + " << b;
}

TEST(DType, LeastUpperDtypeIsSymmetricAndIdempotent) {
  int n;
  const DType* all_types = all(&n);
  ASSERT_EQ(n, 17);  // every Scalar but void
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(least_upper_dtype(all_types[i], all_types[i]), all_types[i]);
    for (int j = 0; j < n; j++)
      EXPECT_EQ(least_upper_dtype(all_types[i], all_types[j]),
                least_upper_dtype(all_types[j], all_types[i]));
  }
}

TEST(DType, ItemsizeOfScalarsVectorsAndPointers) {
  const std::map<std::string, int> sizes = {
      {"bool", 1},        {"int8", 1},       {"uint8", 1},   {"int16", 2},   {"uint16", 2},
      {"int32", 4},       {"uint32", 4},     {"int64", 8},   {"uint64", 8},  {"float16", 2},
      {"bfloat16", 2},    {"float32", 4},    {"float64", 8}, {"fp8e4m3", 1}, {"fp8e5m2", 1},
      {"fp8e4m3fnuz", 1}, {"fp8e5m2fnuz", 1}};
  for (const auto& [name, size] : sizes) EXPECT_EQ(from_name(name).itemsize(), size) << name;
  EXPECT_EQ(kFloat32.vec(4).itemsize(), 16);
  EXPECT_EQ(kFloat32.vec(4).scalar_size(), 4);
  EXPECT_EQ(kInt8.as_ptr().itemsize(), 8);
}

TEST(DType, NamesRoundTrip) {
  for (const auto& name : kPriority) EXPECT_EQ(from_name(name).name(), name);
  EXPECT_EQ(from_name("float"), kVoid);
  EXPECT_EQ(kFloat32.vec(4).name(), "float32x4");
  EXPECT_EQ(kFloat32.as_ptr().name(), "float32*");
  EXPECT_EQ(kFloat32.as_ptr(AddrSpace::kLocal).name(), "float32*local");
}

TEST(DType, KindPredicatesAndLimits) {
  EXPECT_TRUE(is_float(kBFloat16));
  EXPECT_FALSE(is_float(kInt64));
  EXPECT_TRUE(is_int(kUint64));
  EXPECT_FALSE(is_int(kBool));
  EXPECT_TRUE(is_unsigned(kUint8));
  EXPECT_FALSE(is_unsigned(kInt8));
  EXPECT_TRUE(is_bool(kBool));
  EXPECT_EQ(least_upper_float(kInt32), kFloat32);
  EXPECT_EQ(least_upper_float(kFloat16), kFloat16);
  EXPECT_EQ(min_value(kInt8), -128);
  EXPECT_EQ(max_value(kUint16), 65535);
  EXPECT_EQ(max_value(kFloat16), 65504);
  EXPECT_TRUE(is_float(kFp8e4m3) && is_fp8(kFp8e5m2) && !is_fp8(kFloat16));
  EXPECT_EQ(max_value(kFp8e4m3), 448);
  EXPECT_EQ(min_value(kFp8e5m2), -57344);
  EXPECT_EQ(kFloat32.vec(4).base(), kFloat32);
}

}  // namespace
}  // namespace baregrad::compiler
