// Dtype and op semantics that used to give silent wrong answers (issue 16): NaN in argmax,
// order of extreme ints in min, bool subtraction, float ops on bool/int inputs, IEEE pow at
// special values, writes through views and backward after assign. Oracles: the C library
// (std::pow), float64 host references and the values each op is defined to give.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Semantics, ArgmaxArgminTakeTheFirstNan) {
  Tensor a = Tensor::from_data({1, kNan, 3, kNan}, {4});
  EXPECT_EQ(a.argmax().to_vector(), Vec{1});
  EXPECT_EQ(a.argmin().to_vector(), Vec{1});
  Tensor m = Tensor::from_data({1, 2, kNan, 5, 4, 3}, {2, 3});
  EXPECT_EQ(m.argmax(1).to_vector(), (Vec{2, 0}));
  EXPECT_EQ(m.argmin(0).to_vector(), (Vec{0, 0, 0}));
}

TEST(Semantics, MinOrdersExtremeInts) {
  // -x wraps at int8's -128 and reverses nothing in uint8
  Tensor i8 = Tensor::from_data({5, -128, 0, 127}, {4}, dtypes::kInt8);
  EXPECT_EQ(i8.min().to_vector(), Vec{-128});
  EXPECT_EQ(i8.argmin().to_vector(), Vec{1});
  Tensor u8 = Tensor::from_data({1, 0, 200, 255}, {4}, dtypes::kUint8);
  EXPECT_EQ(u8.min().to_vector(), Vec{0});
  EXPECT_EQ(u8.minimum(Tensor::from_data({0, 1, 255, 3}, {4}, dtypes::kUint8)).to_vector(),
            (Vec{0, 0, 200, 3}));
  EXPECT_EQ(Tensor::from_data({1, 0, 1}, {3}, dtypes::kBool).min().to_vector(), Vec{0});
  EXPECT_EQ(u8.clamp(-1, 1).to_vector(), (Vec{1, 0, 1, 1}));
  EXPECT_EQ(i8.relu6().to_vector(), (Vec{5, 0, 0, 6}));
}

TEST(Semantics, BoolSubtractionThrows) {
  Tensor b = Tensor::from_data({1, 0}, {2}, dtypes::kBool);
  expect_error([&] { (void)(b - b); }, "[sub] subtraction of two bool tensors");
}

TEST(Semantics, FloatOpsOfBoolAndSmallIntsComputeInFloat) {
  auto softmax_ref = [](Vec x) {
    double s = 0;
    for (double& v : x) s += (v = std::exp(v));
    for (double& v : x) v /= s;
    return x;
  };
  Tensor b = Tensor::from_data({1, 0}, {2}, dtypes::kBool);
  expect_near(b.softmax().to_vector(), softmax_ref({1, 0}));
  Tensor u8 = Tensor::from_data({1, 0, 3}, {3}, dtypes::kUint8);
  expect_near(u8.softmax().to_vector(), softmax_ref({1, 0, 3}));
  expect_near(u8.log_softmax().to_vector(),
              Vec{std::log(softmax_ref({1, 0, 3})[0]), std::log(softmax_ref({1, 0, 3})[1]),
                  std::log(softmax_ref({1, 0, 3})[2])});
  Tensor i8 = Tensor::from_data({-128, 127}, {2}, dtypes::kInt8);
  EXPECT_TRUE(dtypes::is_float(i8.hardswish().dtype()));
  expect_near(i8.hardswish().to_vector(), Vec{0, 127});
}

TEST(Semantics, PowFollowsIeeeAtSpecialValues) {
  const Vec special{0, -0.0, 1, -1, kInf, -kInf, kNan, 0.5, -0.5, 2, -2, 3, -3, -1.5, 2.5};
  Vec bs, es, want;
  for (double b : special)
    for (double e : special) {
      bs.push_back(b);
      es.push_back(e);
      want.push_back(std::pow(static_cast<float>(b), static_cast<float>(e)));
    }
  auto check = [&](const Vec& got, const char* form) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) {
      SCOPED_TRACE(std::string(form) + ": " + std::to_string(bs[i]) + " ** " +
                   std::to_string(es[i]));
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << got[i];
        continue;
      }
      if (std::isinf(want[i])) {
        EXPECT_EQ(got[i], want[i]);
        continue;
      }
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i])) << got[i];
      if (want[i] == 0) {
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i]));
      }
    }
  };
  Shape s{static_cast<int64_t>(bs.size())};
  check(Tensor::from_data(bs, s).pow(Tensor::from_data(es, s)).to_vector(), "tensor ** tensor");
  Vec scalar;
  for (size_t i = 0; i < bs.size(); i++)
    scalar.push_back(Tensor::from_data({bs[i]}, {1}).pow(es[i]).to_vector()[0]);
  check(scalar, "tensor ** scalar");
}

TEST(Semantics, WriteThroughViewsReachesTheBase) {
  Tensor b = Tensor::from_data({0, 1, 2, 3, 4, 5}, {2, 3}).contiguous();
  Tensor t = b.transpose();  // (3, 2): t[0, 1] is b[1, 0]
  t.shrink({{0, 1}, {1, 2}}).write_view(Tensor::full({1, 1}, 50));
  EXPECT_EQ(b.to_vector(), (Vec{0, 1, 2, 50, 4, 5}));
  EXPECT_EQ(t.to_vector(), (Vec{0, 50, 1, 4, 2, 5}));
  Tensor row = b.shrink({{1, 2}, {0, 3}}).flip({1});  // b[1, ::-1]
  row.assign(Tensor::from_data({7, 8, 9}, {1, 3}));
  EXPECT_EQ(b.to_vector(), (Vec{0, 1, 2, 9, 8, 7}));
}

TEST(Semantics, WriteThroughUnwritableViewsThrows) {
  Tensor b = Tensor::from_data({1, 2}, {2}).contiguous();
  expect_error([&] { b.reshape({1, 2}).expand({3, 2}).write_view(Tensor::zeros({3, 2})); },
               "[setitem] cannot write through this view");
  expect_error([&] { b.pad({{1, 1}}).write_view(Tensor::zeros({4})); },
               "[setitem] cannot write through this view");
  EXPECT_EQ(b.to_vector(), (Vec{1, 2}));
}

TEST(Semantics, WriteThroughAViewOfAnAssignedBufferThrows) {
  Tensor b = Tensor::from_data({1, 2}, {2});
  Tensor v = b.flip({0});
  b.assign(Tensor::from_data({3, 4}, {2}));  // a whole buffer: b gets a new base in place
  expect_error([&] { v.write_view(Tensor::zeros({2})); }, "assign() has overwritten");
  EXPECT_EQ(b.to_vector(), (Vec{3, 4}));
}

TEST(Semantics, OtherViewsOfAReplacedConstantThrowWhenRead) {
  Tensor z = Tensor::zeros({2, 3});
  Tensor t = z.transpose();
  z.write_view(Tensor::full({2, 3}, 1));
  EXPECT_EQ(z.to_vector(), Vec(6, 1));
  expect_error([&] { t.to_vector(); }, "a view of a constant tensor");
}

// Lazy work still reading a buffer when assign() overwrites it sees the old contents. Work no
// larger than the buffer is computed before the write; larger work (activations an autograd
// graph holds) stays lazy and reads a copy made before the write. Oracle: the values by hand.
TEST(Semantics, LazyReadersOfAnAssignedBufferKeepTheOldValue) {
  Tensor w = Tensor::from_data({1, 2, 3}, {3}).contiguous().realize();
  Tensor big = Tensor::ones({64, 3}) * w.reshape({1, 3});  // 192 elements, larger than w
  Tensor small = w.sum();
  w.assign(Tensor::from_data({10, 20, 30}, {3}));
  EXPECT_FALSE(big.lazy().base->realized);  // not computed by the assign
  EXPECT_TRUE(small.lazy().base->realized);
  EXPECT_EQ(w.to_vector(), (Vec{10, 20, 30}));
  EXPECT_EQ(small.to_vector(), (Vec{6}));
  std::vector<double> got = big.to_vector();
  for (size_t i = 0; i < got.size(); i++) EXPECT_EQ(got[i], double(i % 3 + 1)) << i;
  // A second assign copies again; the first copy is what `big` still reads.
  Tensor big2 = Tensor::ones({64, 3}) * w.reshape({1, 3});
  w.assign(Tensor::from_data({7, 8, 9}, {3}));
  EXPECT_EQ(big.to_vector()[4], 2);
  EXPECT_EQ(big2.to_vector()[4], 20);
  EXPECT_EQ(w.to_vector(), (Vec{7, 8, 9}));
}

// A small lazy accumulator that reads a buffer assigned every step is computed at each assign,
// so its graph (and the buffers it holds) stays one step deep.
TEST(Semantics, AnAccumulatorOfAnAssignedBufferStaysBounded) {
  Tensor w = Tensor::from_data({1, 2}, {2}).contiguous().realize();
  Tensor acc = Tensor::zeros({});
  double want = 0;
  for (int step = 0; step < 20; step++) {
    acc = acc + w.sum();
    want += 3.0 * (step + 1);
    w.assign(w + Tensor::from_data({1, 2}, {2}));
    EXPECT_TRUE(acc.lazy().base->realized) << step;
  }
  EXPECT_EQ(acc.to_vector(), (Vec{want}));
}

TEST(Semantics, BackwardAfterAssignThrows) {
  Tensor x = Tensor::from_data({2}, {1});
  x.requires_grad_();
  Tensor y = (x * x).sum();
  x.assign(Tensor::from_data({5}, {1}));
  expect_error([&] { y.backward(); }, "[backward] input 0 of mul");
  Tensor w = Tensor::from_data({3}, {1}).contiguous();
  w.realize();
  Tensor y2 = (x * w).sum();
  w.write_view(Tensor::from_data({4}, {1}));
  expect_error([&] { y2.backward(); }, "was modified by assign() or setitem");
}

}  // namespace
}  // namespace baregrad::tensor
