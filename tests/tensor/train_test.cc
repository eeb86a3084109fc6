// Random generation, losses, optimizers and a small end-to-end training run.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "base/error.h"
#include "tensor/nn.h"
#include "tensor/optim.h"

namespace baregrad::tensor {
namespace {

TEST(Random, SeededAndDistributed) {
  Tensor::manual_seed(42);
  auto a = Tensor::rand({1000}).to_vector();
  auto b = Tensor::randn({10000}).to_vector();
  Tensor::manual_seed(42);
  EXPECT_EQ(Tensor::rand({1000}).to_vector(), a);
  EXPECT_NE(Tensor::rand({1000}).to_vector(), a);  // the next call draws new numbers
  for (double x : a) ASSERT_TRUE(x >= 0 && x < 1) << x;
  double mean = 0, var = 0;
  for (double x : b) mean += x / b.size();
  for (double x : b) var += (x - mean) * (x - mean) / b.size();
  EXPECT_NEAR(mean, 0, 0.05);
  EXPECT_NEAR(var, 1, 0.05);
}

TEST(Loss, CrossEntropyMatchesReferenceAndGradient) {
  std::vector<double> logits = {1, 2, 0.5, -1, 0, 3};
  Tensor x = Tensor::from_data(logits, {2, 3}, dtypes::kFloat64);
  x.requires_grad_();
  Tensor y = Tensor::from_data({1, 2}, {2}, dtypes::kInt32);
  Tensor loss = x.sparse_categorical_crossentropy(y);
  double want = 0;
  std::vector<double> grad(6);
  for (int r = 0; r < 2; r++) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < 3; c++) m = std::max(m, logits[r * 3 + c]);
    for (int c = 0; c < 3; c++) s += std::exp(logits[r * 3 + c] - m);
    int label = r == 0 ? 1 : 2;
    want += -(logits[r * 3 + label] - m - std::log(s)) / 2;
    for (int c = 0; c < 3; c++)
      grad[r * 3 + c] = (std::exp(logits[r * 3 + c] - m) / s - (c == label)) / 2;
  }
  EXPECT_NEAR(loss.to_vector()[0], want, 1e-12);
  loss.backward();
  auto g = x.grad()->to_vector();
  for (int i = 0; i < 6; i++) EXPECT_NEAR(g[i], grad[i], 1e-12) << i;
}

TEST(Optim, SgdAndAdamMatchReferenceUpdates) {
  std::vector<double> w0 = {0.5, -1.5, 2};
  auto run = [&](bool adam) {
    Tensor w = Tensor::from_data(w0, {3}, dtypes::kFloat64);
    w.requires_grad_();
    std::unique_ptr<Optimizer> opt;
    if (adam)
      opt = std::make_unique<Adam>(std::vector<Tensor>{w}, 0.1);
    else
      opt = std::make_unique<SGD>(std::vector<Tensor>{w}, 0.1, 0.9);
    for (int i = 0; i < 3; i++) {
      opt->zero_grad();
      (w * w).sum().backward();  // gradient 2w
      opt->step();
    }
    return w.to_vector();
  };
  // host references
  std::vector<double> sgd = w0, vel(3, 0), adam = w0, m(3, 0), v(3, 0);
  for (int t = 1; t <= 3; t++)
    for (int i = 0; i < 3; i++) {
      double g = 2 * sgd[i];
      vel[i] = 0.9 * vel[i] + g;
      sgd[i] -= 0.1 * vel[i];
      double ga = 2 * adam[i];
      m[i] = 0.9 * m[i] + 0.1 * ga;
      v[i] = 0.999 * v[i] + 0.001 * ga * ga;
      adam[i] -= 0.1 * (m[i] / (1 - std::pow(0.9, t))) /
                 (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
    }
  auto got_sgd = run(false), got_adam = run(true);
  for (int i = 0; i < 3; i++) {
    EXPECT_NEAR(got_sgd[i], sgd[i], 1e-12);
    EXPECT_NEAR(got_adam[i], adam[i], 1e-12);
  }
}

TEST(Optim, LambMatchesReferenceUpdates) {
  std::vector<double> w0 = {0.5, -1.5, 2}, w = w0, m(3, 0), v(3, 0);
  Tensor wt = Tensor::from_data(w0, {3}, dtypes::kFloat64);
  wt.requires_grad_();
  LAMB opt({wt}, 0.1, 0.9, 0.999, 1e-6, 0.01);
  for (int t = 1; t <= 3; t++) {
    opt.zero_grad();
    (wt * wt * wt).sum().backward();  // gradient 3w^2
    opt.step();
    std::vector<double> r(3);
    double pn = 0, rn = 0;
    for (int i = 0; i < 3; i++) {
      double g = 3 * w[i] * w[i];
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      r[i] = (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-6) +
             0.01 * w[i];
      pn += w[i] * w[i];
      rn += r[i] * r[i];
    }
    double ratio = std::sqrt(pn) / std::sqrt(rn);
    for (int i = 0; i < 3; i++) w[i] -= 0.1 * ratio * r[i];
  }
  auto got = wt.to_vector();
  for (int i = 0; i < 3; i++) EXPECT_NEAR(got[i], w[i], 1e-12) << i;
}

// A loss read after step() is the loss of the parameters it was built from, as in eager code.
TEST(Optim, LossReadAfterStepSeesTheOldParameters) {
  Tensor w = Tensor::from_data({1, 2, 3}, {3}, dtypes::kFloat64);
  w.requires_grad_();
  Adam opt({w}, 0.5);
  Tensor loss = (w * w).sum();
  loss.backward();
  opt.step();
  EXPECT_EQ(loss.to_vector()[0], 14.0);
  EXPECT_NE(w.to_vector()[0], 1.0);
}

TEST(Optim, Misuse) {
  Tensor a = Tensor::zeros({2});
  try {
    SGD opt({a});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("[optimizer] parameter 0 of shape (2,) does not require grad"),
        std::string::npos)
        << e.what();
  }
  Tensor w = Tensor::ones({2}), unused = Tensor::ones({3});
  w.requires_grad_();
  unused.requires_grad_();
  SGD opt({w, unused});
  (w * 2.0).sum().backward();
  try {
    opt.step();
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[step] parameter 1 of shape (3,) has no gradient"),
              std::string::npos)
        << e.what();
  }
}

// Two Gaussian blobs: a 2-layer MLP with Adam separates them.
TEST(Train, MlpLearnsTwoBlobs) {
  Tensor::manual_seed(0);
  const int n = 256;
  std::vector<double> xs, ys;
  Tensor noise = Tensor::randn({n, 2});
  auto nv = noise.to_vector();
  for (int i = 0; i < n; i++) {
    int label = i % 2;
    xs.push_back(nv[2 * i] * 0.5 + (label ? 1.5 : -1.5));
    xs.push_back(nv[2 * i + 1] * 0.5 + (label ? -1.0 : 1.0));
    ys.push_back(label);
  }
  Tensor x = Tensor::from_data(xs, {n, 2}), y = Tensor::from_data(ys, {n}, dtypes::kInt32);
  nn::Linear l1(2, 16), l2(16, 2);
  std::vector<Tensor> params = l1.parameters();
  for (auto& p : l2.parameters()) params.push_back(p);
  Adam opt(params, 0.05);
  double first = 0, last = 0;
  for (int step = 0; step < 40; step++) {
    opt.zero_grad();
    Tensor loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y);
    loss.backward();
    opt.step();
    double l = loss.to_vector()[0];
    if (step == 0) first = l;
    last = l;
  }
  auto pred = l2(l1(x).relu()).to_vector();
  int correct = 0;
  for (int i = 0; i < n; i++) correct += (pred[2 * i + 1] > pred[2 * i]) == (ys[i] == 1);
  EXPECT_LT(last, first / 4);
  EXPECT_GE(correct, n * 97 / 100) << "accuracy " << correct << "/" << n;
}

// The learning rate is a device tensor every step reads: a new rate (set_lr, or an assign into
// lr()) gives the reference update and builds no new kernel.
TEST(Optim, ChangingTheLearningRateBuildsNoKernel) {
  Tensor w = Tensor::from_data({0.5, -1.5, 2}, {3}, dtypes::kFloat64);
  w.requires_grad_();
  SGD opt({w}, 0.1);
  std::vector<double> ref = {0.5, -1.5, 2};
  auto step = [&](double want_lr) {
    double lr = opt.lr().to_vector()[0];  // the float32 rate the step reads
    EXPECT_NEAR(lr, want_lr, 1e-6 * want_lr);
    opt.zero_grad();
    (w * w).sum().backward();  // gradient 2w
    opt.step();
    for (double& r : ref) r -= lr * 2 * r;
  };
  step(0.1);
  opt.set_lr(0.25 / 0.9);
  opt.lr().assign(opt.lr() * 0.9);  // both ways of changing it have run once
  step(0.25);
  auto& dev = *w.lazy().base->device;
  size_t built = dev.program_cache_stats().built;
  double lr = 0.25;
  for (int i = 0; i < 20; i++) {
    lr *= 0.9;
    if (i % 2)
      opt.set_lr(lr);
    else
      opt.lr().assign(opt.lr() * 0.9);
    step(lr);
  }
  EXPECT_EQ(dev.program_cache_stats().built, built);
  std::vector<double> got = w.to_vector();
  for (int i = 0; i < 3; i++) EXPECT_NEAR(got[i], ref[i], 1e-9 * std::abs(ref[i]) + 1e-12) << i;
}

}  // namespace
}  // namespace baregrad::tensor
