// The composed creation ops (eye, linspace, *_like) against host references, and the seeded
// random helpers' (rand_like, randint, normal) determinism and distributions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

TEST(ExtraOps, CreationHelpers) {
  EXPECT_EQ(Tensor::eye(3).to_vector(), (Vec{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  Tensor e = Tensor::eye(2, 4, dtypes::kInt32);
  EXPECT_EQ(e.dtype(), dtypes::kInt32);
  EXPECT_EQ(e.to_vector(), (Vec{1, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(Tensor::eye(3, 1).to_vector(), (Vec{1, 0, 0}));
  EXPECT_EQ(Tensor::eye(0).shape(), (Shape{0, 0}));
  expect_near(Tensor::linspace(0, 1, 5, kF64).to_vector(), {0, 0.25, 0.5, 0.75, 1}, 0, 0);
  expect_near(Tensor::linspace(5, -1, 4).to_vector(), {5, 3, 1, -1});
  Vec third = Tensor::linspace(0.1, 0.7, 7, kF64).to_vector();
  for (int i = 0; i < 7; i++) EXPECT_NEAR(third[i], 0.1 + 0.1 * i, 1e-15);
  EXPECT_EQ(third.back(), 0.7);  // the stop exactly
  EXPECT_EQ(Tensor::linspace(3, 9, 1).to_vector(), Vec{3});
  EXPECT_EQ(Tensor::linspace(3, 9, 0).shape(), Shape{0});
  EXPECT_EQ(Tensor::linspace(0, 3, 4, dtypes::kInt32).to_vector(), (Vec{0, 1, 2, 3}));
  Tensor t = Tensor::from_data({1, 2, 3, 4, 5, 6}, {2, 3}, dtypes::kInt16);
  for (auto [z, v] : {std::pair{Tensor::zeros_like(t), 0.0},
                      {Tensor::ones_like(t), 1.0},
                      {Tensor::full_like(t, -7), -7.0}}) {
    EXPECT_EQ(z.shape(), t.shape());
    EXPECT_EQ(z.dtype(), dtypes::kInt16);
    EXPECT_EQ(z.to_vector(), Vec(6, v));
  }
}

TEST(ExtraOps, RandomHelpersAreSeededAndDistributed) {
  const int64_t n = 20000;
  Tensor::manual_seed(42);
  Vec a = Tensor::randint({n}, -3, 4).to_vector(), na = Tensor::normal({n}, 2, 0.5).to_vector();
  Tensor::manual_seed(42);
  EXPECT_EQ(Tensor::randint({n}, -3, 4).to_vector(), a);
  EXPECT_EQ(Tensor::normal({n}, 2, 0.5).to_vector(), na);
  Tensor::manual_seed(43);
  EXPECT_NE(Tensor::randint({n}, -3, 4).to_vector(), a);
  std::map<double, int> hist;
  for (double v : a) hist[v]++;
  ASSERT_EQ(hist.size(), 7u);  // every value of [-3, 4), nothing else
  EXPECT_EQ(hist.begin()->first, -3);
  EXPECT_EQ(hist.rbegin()->first, 3);
  for (auto [v, c] : hist) EXPECT_NEAR(c, n / 7.0, 5 * std::sqrt(n / 7.0)) << v;
  double mean = 0, var = 0;
  for (double v : na) mean += v / n;
  for (double v : na) var += (v - mean) * (v - mean) / n;
  EXPECT_NEAR(mean, 2, 0.02);
  EXPECT_NEAR(std::sqrt(var), 0.5, 0.02);
  EXPECT_EQ(Tensor::randint({2, 3}, 0, 2, dtypes::kUint8).dtype(), dtypes::kUint8);
  Tensor like = Tensor::rand_like(Tensor::zeros({100, 3}, kF64));
  EXPECT_EQ(like.shape(), (Shape{100, 3}));
  EXPECT_EQ(like.dtype(), kF64);
  Vec u = like.to_vector();
  EXPECT_GE(*std::min_element(u.begin(), u.end()), 0);
  EXPECT_LT(*std::max_element(u.begin(), u.end()), 1);
}

}  // namespace
}  // namespace baregrad::tensor
