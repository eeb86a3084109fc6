// conv2d and pooling against direct float64 loops, and their gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/error.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {

const DType kF64 = dtypes::kFloat64;

std::vector<double> rnd(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad, dil, groups;
};

std::vector<double> conv_ref(const ConvCase& p,
                             const std::vector<double>& x,
                             const std::vector<double>& wt,
                             const std::vector<double>& b,
                             int64_t* oh_out,
                             int64_t* ow_out) {
  int64_t cg = p.c / p.groups, og = p.o / p.groups;
  int64_t oh = (p.h + 2 * p.pad - p.dil * (p.k - 1) - 1) / p.stride + 1;
  int64_t ow = (p.w + 2 * p.pad - p.dil * (p.k - 1) - 1) / p.stride + 1;
  *oh_out = oh;
  *ow_out = ow;
  std::vector<double> out(p.n * p.o * oh * ow, 0);
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t o = 0; o < p.o; o++)
      for (int64_t y = 0; y < oh; y++)
        for (int64_t z = 0; z < ow; z++) {
          double acc = b.empty() ? 0 : b[o];
          int64_t g = o / og;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t i = 0; i < p.k; i++)
              for (int64_t j = 0; j < p.k; j++) {
                int64_t yy = y * p.stride + i * p.dil - p.pad,
                        zz = z * p.stride + j * p.dil - p.pad;
                if (yy < 0 || yy >= p.h || zz < 0 || zz >= p.w) continue;
                int64_t c = g * cg + ci;
                acc += x[((n * p.c + c) * p.h + yy) * p.w + zz] *
                       wt[((o * cg + ci) * p.k + i) * p.k + j];
              }
          out[((n * p.o + o) * oh + y) * ow + z] = acc;
        }
  return out;
}

TEST(Conv, Conv2dMatchesDirectLoops) {
  for (ConvCase p : {ConvCase{2, 3, 7, 6, 4, 3, 1, 1, 1, 1}, ConvCase{1, 4, 9, 9, 6, 3, 2, 0, 1, 2},
                     ConvCase{2, 2, 8, 7, 2, 2, 1, 2, 2, 1}, ConvCase{1, 1, 5, 5, 1, 5, 1, 0, 1, 1},
                     ConvCase{1, 3, 10, 8, 3, 3, 3, 1, 2, 3}}) {
    SCOPED_TRACE("conv " + std::to_string(p.c) + "->" + std::to_string(p.o) + " k" +
                 std::to_string(p.k) + " s" + std::to_string(p.stride) + " p" +
                 std::to_string(p.pad) + " d" + std::to_string(p.dil) + " g" +
                 std::to_string(p.groups));
    auto x = rnd(p.n * p.c * p.h * p.w, 1), w = rnd(p.o * p.c / p.groups * p.k * p.k, 2),
         b = rnd(p.o, 3);
    int64_t oh, ow;
    auto want = conv_ref(p, x, w, b, &oh, &ow);
    Tensor y = Tensor::from_data(x, {p.n, p.c, p.h, p.w}, kF64)
                   .conv2d(Tensor::from_data(w, {p.o, p.c / p.groups, p.k, p.k}, kF64),
                           Tensor::from_data(b, {p.o}, kF64), p.stride, p.pad, p.dil, p.groups);
    ASSERT_EQ(y.shape(), (Shape{p.n, p.o, oh, ow}));
    auto got = y.to_vector();
    for (size_t i = 0; i < got.size(); i++) ASSERT_NEAR(got[i], want[i], 1e-12) << i;
  }
}

TEST(Conv, PoolingMatchesDirectLoops) {
  auto x = rnd(2 * 3 * 6 * 7, 4);
  Tensor t = Tensor::from_data(x, {2, 3, 6, 7}, kF64);
  for (auto [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 1}, {3, 2}}) {
    int64_t oh = (6 - k) / s + 1, ow = (7 - k) / s + 1;
    std::vector<double> mx, av;
    for (int64_t nc = 0; nc < 6; nc++)
      for (int64_t y = 0; y < oh; y++)
        for (int64_t z = 0; z < ow; z++) {
          double m = -INFINITY, sum = 0;
          for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < k; j++) {
              double v = x[(nc * 6 + y * s + i) * 7 + z * s + j];
              m = std::max(m, v);
              sum += v;
            }
          mx.push_back(m);
          av.push_back(sum / (k * k));
        }
    auto gm = t.max_pool2d(k, s).to_vector(), ga = t.avg_pool2d(k, s).to_vector();
    ASSERT_EQ(gm.size(), mx.size());
    for (size_t i = 0; i < mx.size(); i++) {
      ASSERT_EQ(gm[i], mx[i]) << "max k" << k << " s" << s << " at " << i;
      ASSERT_NEAR(ga[i], av[i], 1e-12) << "avg k" << k << " s" << s << " at " << i;
    }
  }
}

TEST(Conv, GradientsMatchFiniteDifferences) {
  ConvCase p{1, 2, 5, 5, 2, 3, 2, 1, 1, 1};
  auto x = rnd(50, 5), w = rnd(36, 6), wl = rnd(2 * 3 * 3, 7);
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv, Tensor* xt,
                  Tensor* wt) {
    Tensor a = Tensor::from_data(xv, {1, 2, 5, 5}, kF64),
           b = Tensor::from_data(wv, {2, 2, 3, 3}, kF64);
    if (xt) {
      a.requires_grad_();
      b.requires_grad_();
      *xt = a;
      *wt = b;
    }
    Tensor y = a.conv2d(b, std::nullopt, p.stride, p.pad).relu().max_pool2d(2, 1);
    return (y * Tensor::from_data(std::vector<double>(wl.begin(), wl.begin() + y.numel()),
                                  y.shape(), kF64))
        .sum();
  };
  Tensor xt = Tensor::zeros({1}), wt = Tensor::zeros({1});
  loss(x, w, &xt, &wt).backward();
  auto gx = xt.grad()->to_vector(), gw = wt.grad()->to_vector();
  const double eps = 1e-6;
  for (size_t i = 0; i < x.size(); i++) {
    auto xp = x, xm = x;
    xp[i] += eps;
    xm[i] -= eps;
    double num = (loss(xp, w, nullptr, nullptr).to_vector()[0] -
                  loss(xm, w, nullptr, nullptr).to_vector()[0]) /
                 (2 * eps);
    ASSERT_NEAR(gx[i], num, 1e-5) << "x " << i;
  }
  for (size_t i = 0; i < w.size(); i++) {
    auto wp = w, wm = w;
    wp[i] += eps;
    wm[i] -= eps;
    double num = (loss(x, wp, nullptr, nullptr).to_vector()[0] -
                  loss(x, wm, nullptr, nullptr).to_vector()[0]) /
                 (2 * eps);
    ASSERT_NEAR(gw[i], num, 1e-5) << "w " << i;
  }
}

TEST(Conv, BadShapesAreNamed) {
  Tensor x = Tensor::zeros({1, 3, 8, 8});
  try {
    (void)x.conv2d(Tensor::zeros({4, 2, 3, 3}));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[conv2d] input (1, 3, 8, 8) has 3 channels; weight "
                                         "(4, 2, 3, 3) with groups=1 expects 2"),
              std::string::npos)
        << e.what();
  }
  try {
    (void)x.max_pool2d(9);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[pool] window 9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace baregrad::tensor
