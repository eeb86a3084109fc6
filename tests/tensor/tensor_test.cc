// Tensor ops on the CPU device against float64 references computed on the host.
#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "base/error.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

// Calls f(index) for every multi-index of `s` in row-major order.
void each_index(const Shape& s, const std::function<void(const std::vector<int64_t>&)>& f) {
  std::vector<int64_t> idx(s.size(), 0);
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  for (int64_t flat = 0; flat < n; flat++) {
    int64_t r = flat;
    for (int i = static_cast<int>(s.size()) - 1; i >= 0; i--) {
      idx[i] = r % s[i];
      r /= s[i];
    }
    f(idx);
  }
}

TEST(Tensor, BroadcastArithmeticMatchesReference) {
  auto a = rnd(3 * 4, 1), b = rnd(4, 2), c = rnd(3, 3);
  Tensor ta = Tensor::from_data(a, {3, 4}), tb = Tensor::from_data(b, {4}),
         tc = Tensor::from_data(c, {3, 1});
  Tensor y = ((ta * tb + tc) / (tb * tb + 1.0)).relu() - 0.5;
  std::vector<double> want;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      want.push_back(std::max(0.0, (a[i * 4 + j] * b[j] + c[i]) / (b[j] * b[j] + 1)) - 0.5);
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  expect_near(y.to_vector(), want);
}

TEST(Tensor, UnaryMathMatchesReference) {
  auto a = rnd(64, 4, 0.1, 3);
  Tensor t = Tensor::from_data(a, {8, 8});
  std::vector<std::pair<Tensor, std::function<double(double)>>> cases = {
      {t.exp(), [](double x) { return std::exp(x); }},
      {t.log(), [](double x) { return std::log(x); }},
      {t.sqrt(), [](double x) { return std::sqrt(x); }},
      {t.sin(), [](double x) { return std::sin(x); }},
      {t.sigmoid(), [](double x) { return 1 / (1 + std::exp(-x)); }},
      {t.reciprocal(), [](double x) { return 1 / x; }},
  };
  for (size_t c = 0; c < cases.size(); c++) {
    std::vector<double> want;
    for (double x : a) want.push_back(cases[c].second(x));
    SCOPED_TRACE("case " + std::to_string(c));
    expect_near(cases[c].first.to_vector(), want);
  }
}

TEST(Tensor, DtypePromotionAndCasts) {
  Tensor i = Tensor::from_data({1, 2, 3}, {3}, dtypes::kInt32);
  Tensor f = Tensor::from_data({0.5, 0.5, 0.5}, {3}, dtypes::kFloat16);
  EXPECT_EQ((i + f).dtype(), dtypes::kFloat16);
  EXPECT_EQ((i + 1.0).dtype(), dtypes::kInt32);
  EXPECT_EQ((i + 1.5).dtype(), dtypes::kFloat32);
  EXPECT_EQ((i / i).dtype(), dtypes::kFloat32);
  EXPECT_EQ(i.lt(f).dtype(), dtypes::kBool);
  Tensor u8 = Tensor::from_data({250, 3}, {2}, dtypes::kUint8);
  EXPECT_EQ((u8 + u8).to_vector(), (std::vector<double>{244, 6}));  // wraps like uint8
  EXPECT_EQ(u8.sum().dtype(), dtypes::kUint32);
  EXPECT_EQ(u8.sum().to_vector(), std::vector<double>{253});
  expect_near((i + f).to_vector(), {1.5, 2.5, 3.5});
}

TEST(Tensor, ReductionsOverEveryAxis) {
  Shape s{3, 4, 5};
  auto a = rnd(60, 5);
  Tensor t = Tensor::from_data(a, s);
  for (int axis = -3; axis < 3; axis++) {
    int ax = axis < 0 ? axis + 3 : axis;
    Shape out = s;
    out[ax] = 1;
    std::vector<double> sum(20 * 3 / s[ax] * 1, 0), mx(sum.size(), -INFINITY);
    auto os = strides(out);
    each_index(s, [&](const std::vector<int64_t>& i) {
      int64_t o = 0;
      for (int d = 0; d < 3; d++) o += (d == ax ? 0 : i[d]) * os[d];
      double v = a[i[0] * 20 + i[1] * 5 + i[2]];
      sum[o] += v;
      mx[o] = std::max(mx[o], v);
    });
    SCOPED_TRACE("axis " + std::to_string(axis));
    expect_near(t.sum({axis}).to_vector(), sum);
    expect_near(t.max({axis}, true).to_vector(), mx);
    std::vector<double> mean = sum;
    for (auto& m : mean) m /= static_cast<double>(s[ax]);
    expect_near(t.mean({axis}).to_vector(), mean);
  }
  double total = 0;
  for (double v : a) total += v;
  expect_near(t.sum().to_vector(), {total});
  EXPECT_EQ(t.sum().shape(), Shape{});
  EXPECT_EQ(t.sum({0, 2}, true).shape(), (Shape{1, 4, 1}));
}

TEST(Tensor, MovementOpsMatchReference) {
  auto a = rnd(24, 6);
  Tensor t = Tensor::from_data(a, {2, 3, 4});
  // permute (2, 0, 1), then flip axis 1, pad the last axis by (1, 2), shrink the first.
  Tensor y =
      t.permute({2, 0, 1}).flip({1}).pad({{0, 0}, {0, 0}, {1, 2}}).shrink({{1, 3}, {0, 2}, {0, 6}});
  ASSERT_EQ(y.shape(), (Shape{2, 2, 6}));
  std::vector<double> want;
  each_index(y.shape(), [&](const std::vector<int64_t>& i) {
    int64_t k = i[0] + 1, n = 1 - i[1], c = i[2] - 1;  // undo shrink, flip, pad
    want.push_back(c < 0 || c >= 3 ? 0 : a[n * 12 + c * 4 + k]);
  });
  expect_near(y.to_vector(), want);
  // reshape of a permuted view, expand, then arithmetic on it.
  Tensor z = t.transpose(0, 2).reshape({4, 6}).unsqueeze(0).expand({2, 4, 6}) * 2.0;
  std::vector<double> wz;
  for (int r = 0; r < 2; r++)
    each_index({4, 3, 2}, [&](const std::vector<int64_t>& i) {
      wz.push_back(2 * a[i[2] * 12 + i[1] * 4 + i[0]]);
    });
  expect_near(z.to_vector(), wz);
}

TEST(Tensor, MatmulMatchesReference) {
  for (auto [n, k, m] : {std::tuple<int, int, int>{5, 7, 3}, {32, 64, 48}}) {
    auto a = rnd(n * k, 7), b = rnd(k * m, 8);
    Tensor y = Tensor::from_data(a, {n, k}).matmul(Tensor::from_data(b, {k, m}));
    std::vector<double> want(n * m, 0);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < m; j++)
        for (int x = 0; x < k; x++) want[i * m + j] += a[i * k + x] * b[x * m + j];
    expect_near(y.to_vector(), want, 1e-5);
  }
  // batched with a broadcast batch dim, and a vector operand
  auto a = rnd(2 * 3 * 4, 9), b = rnd(4 * 5, 10), v = rnd(4, 11);
  Tensor ta = Tensor::from_data(a, {2, 3, 4});
  Tensor yb = ta.matmul(Tensor::from_data(b, {4, 5}));
  EXPECT_EQ(yb.shape(), (Shape{2, 3, 5}));
  std::vector<double> want(30, 0), wv(6, 0);
  for (int z = 0; z < 2; z++)
    for (int i = 0; i < 3; i++)
      for (int x = 0; x < 4; x++) {
        for (int j = 0; j < 5; j++)
          want[z * 15 + i * 5 + j] += a[z * 12 + i * 4 + x] * b[x * 5 + j];
        wv[z * 3 + i] += a[z * 12 + i * 4 + x] * v[x];
      }
  expect_near(yb.to_vector(), want, 1e-5);
  expect_near(ta.matmul(Tensor::from_data(v, {4})).to_vector(), wv, 1e-5);
}

TEST(Tensor, SoftmaxMatchesReference) {
  auto a = rnd(4 * 10, 12, -5, 5);
  Tensor x = Tensor::from_data(a, {4, 10});
  Tensor e = (x - x.max({-1}, true)).exp();
  Tensor sm = e / e.sum({-1}, true);
  std::vector<double> want;
  for (int r = 0; r < 4; r++) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < 10; c++) m = std::max(m, a[r * 10 + c]);
    for (int c = 0; c < 10; c++) s += std::exp(a[r * 10 + c] - m);
    for (int c = 0; c < 10; c++) want.push_back(std::exp(a[r * 10 + c] - m) / s);
  }
  expect_near(sm.to_vector(), want);
}

TEST(Tensor, CreationOps) {
  EXPECT_EQ(Tensor::arange(0, 5).to_vector(), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Tensor::arange(1, 2, 0.25, dtypes::kFloat32).to_vector(),
            (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(Tensor::full({2, 2}, 3).to_vector(), (std::vector<double>{3, 3, 3, 3}));
  EXPECT_EQ(Tensor::zeros({0, 3}).numel(), 0);
  EXPECT_TRUE(Tensor::zeros({0, 3}).to_vector().empty());
  EXPECT_EQ((Tensor::ones({3}) * 2.0).sum().to_vector(), std::vector<double>{6});
}

TEST(Tensor, BadInputGivesClearErrors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  expect_error([&] { (void)(a + b); }, "[add] cannot broadcast (2, 3) and (4,)");
  expect_error([&] { (void)a.matmul(Tensor::zeros({4, 2})); },
               "[matmul] inner dims differ: (2, 3) @ (4, 2) (3 vs 4)");
  expect_error([&] { (void)a.reshape({4, 2}); }, "[reshape]");
  expect_error([&] { (void)a.sum({2}); }, "[sum] axis 2 out of range for shape (2, 3)");
  expect_error([&] { (void)a.permute({0}); }, "[permute]");
  expect_error([&] { (void)Tensor::from_data({1, 2, 3}, {2, 2}); },
               "[from_data] 3 values for shape (2, 2) (4 elements)");
  expect_error([&] { (void)a.expand({4, 3}); }, "[expand]");
}

}  // namespace
}  // namespace baregrad::tensor
