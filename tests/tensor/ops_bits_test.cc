// The ops of tensor_bits.cc (bitwise, shifts, Python // and %, rounding, trig, classification)
// against host references, per dtype, and the gradients of the differentiable ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

const DType kIntTypes[] = {dtypes::kInt8, dtypes::kInt32, dtypes::kUint8, dtypes::kInt64};

// `v` wrapped to `t`'s width and signedness (two's complement).
int64_t wrap(DType t, int64_t v) {
  int bits = t.itemsize() * 8;
  if (bits == 64) return v;
  uint64_t m = (uint64_t{1} << bits) - 1, u = static_cast<uint64_t>(v) & m;
  if (!dtypes::is_unsigned(t) && (u >> (bits - 1))) return static_cast<int64_t>(u | ~m);
  return static_cast<int64_t>(u);
}

// Random values of `t`: its full range for 8 bits, +-2**20 (int32) or +-2**40 (int64) else.
Vec int_values(DType t, size_t n, uint64_t seed, bool nonzero = false) {
  std::mt19937_64 rng(seed);
  int bits = t.itemsize() * 8;
  int64_t lo = dtypes::is_unsigned(t) ? 0
               : bits == 8            ? -127
                                      : -(int64_t{1} << (bits == 32 ? 20 : 40));
  int64_t hi = dtypes::is_unsigned(t) ? 255 : -lo;
  std::uniform_int_distribution<int64_t> d(lo, hi);
  Vec v(n);
  for (auto& x : v) {
    int64_t i = d(rng);
    while (nonzero && i == 0) i = d(rng);
    x = static_cast<double>(i);
  }
  return v;
}

using IntOp = std::function<int64_t(int64_t, int64_t)>;
using TensorOp = std::function<Tensor(const Tensor&, const Tensor&)>;

// op(a, b) on the device against the wrapped host reference, for every int dtype.
void check_int_binary(const char* name, const TensorOp& op, const IntOp& ref, bool nonzero_b) {
  for (DType t : kIntTypes) {
    SCOPED_TRACE(std::string(name) + " " + t.name());
    Vec a = int_values(t, 48, 1), b = int_values(t, 48, 2, nonzero_b);
    a.insert(a.end(), {7, 7, 6, 0});
    b.insert(b.end(), {2, 7, 3, 5});
    if (!dtypes::is_unsigned(t)) {
      a.insert(a.end(), {-7, 7, -7, -6, 0, -1});
      b.insert(b.end(), {2, -2, -2, 3, -3, 5});
    }
    Shape s = {static_cast<int64_t>(a.size())};
    Tensor ta = Tensor::from_data(a, s, t), tb = Tensor::from_data(b, s, t);
    Tensor out = op(ta, tb);
    EXPECT_EQ(out.dtype(), t);
    Vec got = out.to_vector(), want(a.size());
    for (size_t i = 0; i < a.size(); i++)
      want[i] =
          static_cast<double>(wrap(t, ref(static_cast<int64_t>(a[i]), static_cast<int64_t>(b[i]))));
    EXPECT_EQ(got, want);
  }
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

TEST(BitsOps, BitwiseMatchReference) {
  check_int_binary(
      "and", [](auto& a, auto& b) { return a.bitwise_and(b); },
      [](int64_t a, int64_t b) { return a & b; }, false);
  check_int_binary(
      "or", [](auto& a, auto& b) { return a.bitwise_or(b); },
      [](int64_t a, int64_t b) { return a | b; }, false);
  check_int_binary(
      "xor", [](auto& a, auto& b) { return a.bitwise_xor(b); },
      [](int64_t a, int64_t b) { return a ^ b; }, false);
  check_int_binary(
      "not", [](auto& a, auto&) { return a.bitwise_not(); }, [](int64_t a, int64_t) { return ~a; },
      false);
}

TEST(BitsOps, BitwiseOfBools) {
  Tensor a = Tensor::from_data({0, 0, 1, 1}, {4}, dtypes::kBool);
  Tensor b = Tensor::from_data({0, 1, 0, 1}, {4}, dtypes::kBool);
  EXPECT_EQ(a.bitwise_and(b).dtype(), dtypes::kBool);
  EXPECT_EQ(a.bitwise_and(b).to_vector(), (Vec{0, 0, 0, 1}));
  EXPECT_EQ(a.bitwise_or(b).to_vector(), (Vec{0, 1, 1, 1}));
  EXPECT_EQ(a.bitwise_xor(b).to_vector(), (Vec{0, 1, 1, 0}));
  EXPECT_EQ(a.bitwise_not().to_vector(), (Vec{1, 1, 0, 0}));
}

TEST(BitsOps, BitwiseBroadcastsAndPromotes) {
  Tensor a = Tensor::from_data({1, 2, 3, 4, 5, 6}, {2, 3}, dtypes::kInt8);
  Tensor b = Tensor::from_data({3, 1, 6}, {3}, dtypes::kInt32);
  Tensor c = a.bitwise_or(b);
  EXPECT_EQ(c.dtype(), dtypes::kInt32);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.to_vector(), (Vec{3, 3, 7, 7, 5, 6}));
}

TEST(BitsOps, ShiftsMatchReference) {
  for (DType t : kIntTypes) {
    SCOPED_TRACE(t.name());
    Vec a = int_values(t, 40, 3);
    Tensor ta = Tensor::from_data(a, {40}, t);
    for (int n : {0, 1, 3, 7}) {
      Vec got_l = ta.lshift(n).to_vector(), got_r = ta.rshift(n).to_vector();
      for (size_t i = 0; i < a.size(); i++) {
        auto x = static_cast<int64_t>(a[i]);
        int64_t l = static_cast<int64_t>(static_cast<uint64_t>(x) << n);
        EXPECT_EQ(got_l[i], static_cast<double>(wrap(t, l))) << x << " << " << n;
        EXPECT_EQ(got_r[i], static_cast<double>(x >> n)) << x << " >> " << n;
      }
    }
  }
}

TEST(BitsOps, IntegerDivisionFollowsPython) {
  check_int_binary("idiv", [](auto& a, auto& b) { return a.idiv(b); }, floor_div, true);
  check_int_binary("mod", [](auto& a, auto& b) { return a.mod(b); }, floor_mod, true);
  // Python: -7 // 2 == -4, 7 // -2 == -4, -7 % 2 == 1, 7 % -2 == -1.
  Tensor a = Tensor::from_data({-7, 7, -7, 7, -6}, {5}, dtypes::kInt32);
  Tensor b = Tensor::from_data({2, -2, -2, 2, 3}, {5}, dtypes::kInt32);
  EXPECT_EQ(a.idiv(b).to_vector(), (Vec{-4, -4, 3, 3, -2}));
  EXPECT_EQ(a.mod(b).to_vector(), (Vec{1, -1, -1, 1, 0}));
}

TEST(BitsOps, FloatDivisionFloors) {
  for (DType t : {dtypes::kFloat32, dtypes::kFloat64}) {
    SCOPED_TRACE(t.name());
    Vec a = rnd(40, 4, -10, 10), b = rnd(40, 5, 0.5, 3);
    for (size_t i = 0; i < b.size(); i += 2) b[i] = -b[i];
    Tensor ta = Tensor::from_data(a, {40}, t), tb = Tensor::from_data(b, {40}, t);
    Vec q = ta.idiv(tb).to_vector(), r = ta.mod(tb).to_vector();
    for (size_t i = 0; i < a.size(); i++) {
      double fq = std::floor(a[i] / b[i]);
      EXPECT_EQ(q[i], fq) << a[i] << " // " << b[i];
      EXPECT_NEAR(r[i], a[i] - fq * b[i], 1e-5) << a[i] << " % " << b[i];
      EXPECT_TRUE(r[i] == 0 || (r[i] < 0) == (b[i] < 0)) << a[i] << " % " << b[i];
    }
  }
}

TEST(BitsOps, RoundingMatchesReference) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Vec v = {0.5,   1.5,       2.5,        -0.5,        -1.5,       -2.5,      3.7,        -3.7,
           0,     -0.25,     0.4999999,  -0.4999999,  2.49999999, 4194304.5, -4194303.5, 1e20,
           -1e20, 8388607.5, 1e15 + 0.5, -1e15 - 0.5, 0.49999997, inf,       -inf,       nan};
  for (DType t : {dtypes::kFloat32, dtypes::kFloat64}) {
    SCOPED_TRACE(t.name());
    Vec x = v;
    if (t == dtypes::kFloat32)
      for (auto& e : x) e = static_cast<float>(e);
    Tensor tx = Tensor::from_data(x, {static_cast<int64_t>(x.size())}, t);
    Vec rtrunc(x.size()), rfloor(x.size()), rceil(x.size()), rround(x.size());
    for (size_t i = 0; i < x.size(); i++) {
      rtrunc[i] = std::trunc(x[i]);
      rfloor[i] = std::floor(x[i]);
      rceil[i] = std::ceil(x[i]);
      rround[i] = std::nearbyint(x[i]);  // the default mode: to nearest, ties to even
    }
    expect_near(tx.trunc().to_vector(), rtrunc, 0, 0);
    expect_near(tx.floor().to_vector(), rfloor, 0, 0);
    expect_near(tx.ceil().to_vector(), rceil, 0, 0);
    expect_near(tx.round().to_vector(), rround, 0, 0);
    EXPECT_EQ(tx.round().dtype(), t);
  }
  Tensor i = Tensor::from_data({-3, 4}, {2}, dtypes::kInt32);
  EXPECT_EQ(i.round().to_vector(), (Vec{-3, 4}));
  EXPECT_EQ(i.floor().dtype(), dtypes::kInt32);
}

TEST(BitsOps, TrigMatchesReference) {
  for (DType t : {dtypes::kFloat32, dtypes::kFloat64}) {
    SCOPED_TRACE(t.name());
    Vec x = rnd(64, 6, -6, 6);
    Tensor tx = Tensor::from_data(x, {8, 8}, t);
    Vec c(x.size()), s(x.size());
    for (size_t i = 0; i < x.size(); i++) c[i] = std::cos(x[i]), s[i] = std::tan(x[i]);
    expect_near(tx.cos().to_vector(), c, 1e-5, 1e-4);
    expect_near(tx.tan().to_vector(), s, 1e-4, 1e-3);
  }
  EXPECT_EQ(Tensor::from_data({0}, {1}, dtypes::kInt32).cos().dtype(), dtypes::kFloat32);
}

TEST(BitsOps, Classification) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  for (DType t : {dtypes::kFloat32, dtypes::kFloat64}) {
    SCOPED_TRACE(t.name());
    Tensor x = Tensor::from_data({0, -1.5, inf, -inf, nan, 1e30}, {6}, t);
    EXPECT_EQ(x.isnan().dtype(), dtypes::kBool);
    EXPECT_EQ(x.isnan().to_vector(), (Vec{0, 0, 0, 0, 1, 0}));
    EXPECT_EQ(x.isinf().to_vector(), (Vec{0, 0, 1, 1, 0, 0}));
    EXPECT_EQ(x.isinf(true, false).to_vector(), (Vec{0, 0, 1, 0, 0, 0}));
    EXPECT_EQ(x.isinf(false, true).to_vector(), (Vec{0, 0, 0, 1, 0, 0}));
    EXPECT_EQ(x.isfinite().to_vector(), (Vec{1, 1, 0, 0, 0, 1}));
  }
  Tensor i = Tensor::from_data({1, -2}, {2}, dtypes::kInt32);
  EXPECT_EQ(i.isnan().to_vector(), (Vec{0, 0}));
  EXPECT_EQ(i.isfinite().to_vector(), (Vec{1, 1}));
}

TEST(BitsOps, WrongDtypesThrow) {
  Tensor f = Tensor::from_data({1, 2}, {2}, dtypes::kFloat32);
  Tensor i = Tensor::from_data({1, 2}, {2}, dtypes::kInt32);
  Tensor b = Tensor::from_data({1, 0}, {2}, dtypes::kBool);
  expect_error([&] { f.bitwise_and(i); }, "[bitwise_and] needs int or bool tensors, got float32");
  expect_error([&] { i.bitwise_or(f); }, "got int32 and float32");
  expect_error([&] { f.bitwise_xor(f); }, "bitwise_xor");
  expect_error([&] { f.bitwise_not(); }, "bitwise_not");
  expect_error([&] { f.lshift(1); }, "[lshift] needs an int tensor, got float32");
  expect_error([&] { b.rshift(1); }, "[rshift] needs an int tensor, got bool");
  expect_error([&] { i.lshift(32); }, "out of range");
  expect_error([&] { i.rshift(-1); }, "out of range");
}

TEST(BitsOps, Gradients) {
  check_grad("cos", [](const std::vector<Tensor>& x) { return x[0].cos(); }, {{3, 4}}, -4, 4);
  check_grad("tan", [](const std::vector<Tensor>& x) { return x[0].tan(); }, {{3, 4}}, -1, 1);
  // Rounding contributes a zero gradient.
  check_grad("rounding",
             [](const std::vector<Tensor>& x) {
               return x[0].floor() + x[0].ceil() + x[0].round() + x[0].trunc() + x[0] * 2.0;
             },
             {{3, 4}});
}

// Integer division never reaches the hardware's trapping cases, on either CPU backend.
TEST(BitsOps, IntegerDivisionByZeroAndOverflowDoNotTrap) {
  for (DType t : {dtypes::kInt32, dtypes::kInt8, dtypes::kUint8}) {
    bool s = !dtypes::is_unsigned(t);
    double lo = s ? dtypes::min_value(t) : 7;
    double neg = s ? -7.0 : 14.0, m1 = s ? -1.0 : 1.0;
    Tensor x = Tensor::from_data({7.0, neg, lo, 5.0}, {4}, t);
    Tensor y = Tensor::from_data({0.0, 0.0, m1, 0.0}, {4}, t);
    auto q = x.idiv(y).to_vector(), r = x.mod(y).to_vector();
    EXPECT_EQ(q[0], 0) << t.name();
    EXPECT_EQ(q[3], 0) << t.name();
    EXPECT_EQ(r[0], 0) << t.name();
    if (s) {
      EXPECT_EQ(q[2], lo) << t.name();  // -INT_MIN wraps to INT_MIN
      EXPECT_EQ(r[2], 0) << t.name();
    }
  }
}

}  // namespace
}  // namespace baregrad::tensor
