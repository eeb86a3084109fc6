// base/checked.h: int64 arithmetic that reports overflow, and the element count of a shape.
#include "base/checked.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "base/error.h"

namespace baregrad {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(Checked, MulAddSubAtTheLimits) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_EQ(checked_mul(int64_t{1} << 32, int64_t{1} << 32), std::nullopt);
  EXPECT_EQ(checked_mul(kMax, 1), kMax);
  EXPECT_EQ(checked_mul(kMax, 2), std::nullopt);
  EXPECT_EQ(checked_mul(kMin, -1), std::nullopt);
  EXPECT_EQ(checked_mul(-3, 4), -12);
  EXPECT_EQ(checked_add(kMax - 1, 1), kMax);
  EXPECT_EQ(checked_add(kMax, 1), std::nullopt);
  EXPECT_EQ(checked_add(kMin, -1), std::nullopt);
  EXPECT_EQ(checked_sub(kMin + 1, 1), kMin);
  EXPECT_EQ(checked_sub(kMin, 1), std::nullopt);
  EXPECT_EQ(checked_sub(0, kMin), std::nullopt);
}

TEST(Checked, NumelOfShapes) {
  using S = std::vector<int64_t>;
  EXPECT_EQ(checked_numel(S{}), 1);
  EXPECT_EQ(checked_numel(S{2, 3, 4}), 24);
  EXPECT_EQ(checked_numel(S{int64_t{1} << 31, int64_t{1} << 32}), std::nullopt);  // 2**63
  EXPECT_EQ(checked_numel(S{int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
  EXPECT_EQ(checked_numel(S{kMax}), kMax);
  EXPECT_EQ(checked_numel(S{kMax, 2}), std::nullopt);
  EXPECT_EQ(checked_numel(S{int64_t{1} << 32, int64_t{1} << 32}), std::nullopt);
  EXPECT_EQ(checked_numel(S{3, -1}), std::nullopt);
  EXPECT_EQ(checked_numel(S{0, 5}), 0);
  // A zero size does not excuse the others: every partial product must fit.
  EXPECT_EQ(checked_numel(S{0, int64_t{1} << 40, int64_t{1} << 40}), std::nullopt);
  EXPECT_EQ(checked_numel(S{int64_t{1} << 40, 0, int64_t{1} << 20}), 0);
}

TEST(Checked, FailNamesTheOpAndTheSizes) {
  using S = std::vector<int64_t>;
  try {
    numel_or_fail("reshape", S{int64_t{1} << 32, int64_t{1} << 32});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[reshape] shape (4294967296, 4294967296) has more than 2**63-1 elements");
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
  }
  try {
    numel_or_fail("full", S{2, -3});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[full] shape (2, -3) has a negative size");
  }
  EXPECT_EQ(numel_or_fail("x", S{5}), 5);
  try {
    bytes_or_fail("empty", S{int64_t{1} << 62}, int64_t{1} << 62, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[empty] shape (4611686018427387904,) of 4-byte elements needs more than "
                 "2**63-1 bytes");
    EXPECT_EQ(e.kind(), ErrorKind::kMemory);
  }
  EXPECT_EQ(bytes_or_fail("empty", S{1 << 20}, 1 << 20, 8), int64_t{8} << 20);
  try {
    add_or_fail("pad", "padding (a, b)", kMax, 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[pad] padding (a, b): 9223372036854775807 + 3 does not fit int64");
  }
  EXPECT_THROW(mul_or_fail("repeat", "r", kMax, 2), Error);
  EXPECT_EQ(mul_or_fail("repeat", "r", 6, 7), 42);
}

}  // namespace
}  // namespace baregrad
