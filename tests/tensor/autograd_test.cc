// Every differentiable op's gradient against central finite differences in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "base/error.h"
#include "tensor/counters.h"
#include "tensor/schedule.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

TEST(Autograd, Elementwise) {
  check_grad("add", [](auto& t) { return t[0] + t[1]; }, {{3, 4}, {4}});
  check_grad("sub", [](auto& t) { return t[0] - t[1]; }, {{3, 1}, {3, 4}});
  check_grad("mul", [](auto& t) { return t[0] * t[1]; }, {{2, 3}, {2, 3}});
  check_grad("div", [](auto& t) { return t[0] / (t[1] * t[1] + 1.0); }, {{4}, {4}});
  check_grad("neg", [](auto& t) { return -t[0]; }, {{5}});
  check_grad("maximum", [](auto& t) { return t[0].maximum(t[1]); }, {{6}, {6}});
  check_grad("relu", [](auto& t) { return t[0].relu(); }, {{7}});
  check_grad("where", [](auto& t) { return Tensor::where(t[0].lt(t[1]), t[0] * 2.0, t[1]); },
             {{6}, {6}});
}

TEST(Autograd, Transcendental) {
  check_grad("exp", [](auto& t) { return t[0].exp(); }, {{5}});
  check_grad("log", [](auto& t) { return t[0].log(); }, {{5}}, 0.5, 3);
  check_grad("sqrt", [](auto& t) { return t[0].sqrt(); }, {{5}}, 0.5, 3);
  check_grad("sin", [](auto& t) { return t[0].sin(); }, {{5}});
  check_grad("reciprocal", [](auto& t) { return t[0].reciprocal(); }, {{5}}, 0.5, 3);
  check_grad("sigmoid", [](auto& t) { return t[0].sigmoid(); }, {{5}});
}

TEST(Autograd, Movement) {
  check_grad("reshape", [](auto& t) { return t[0].reshape({3, 2}) * 3.0; }, {{2, 3}});
  check_grad("permute", [](auto& t) { return t[0].permute({2, 0, 1}); }, {{2, 3, 2}});
  check_grad("expand", [](auto& t) { return t[0].expand({3, 4}); }, {{3, 1}});
  check_grad("pad", [](auto& t) { return t[0].pad({{1, 2}, {0, 1}}); }, {{2, 3}});
  check_grad("shrink", [](auto& t) { return t[0].shrink({{1, 3}, {0, 2}}); }, {{3, 3}});
  check_grad("flip", [](auto& t) { return t[0].flip({0}); }, {{3, 2}});
  check_grad("transpose+contiguous", [](auto& t) { return t[0].transpose().contiguous(); },
             {{2, 3}});
}

TEST(Autograd, Reductions) {
  check_grad("sum", [](auto& t) { return t[0].sum({1}); }, {{3, 4}});
  check_grad("mean", [](auto& t) { return t[0].mean({0}, true); }, {{3, 4}});
  check_grad("max", [](auto& t) { return t[0].max({1}); }, {{3, 4}});
  check_grad("min", [](auto& t) { return t[0].min(); }, {{3, 4}});
}

TEST(Autograd, CompositeOps) {
  check_grad("matmul", [](auto& t) { return t[0].matmul(t[1]); }, {{3, 4}, {4, 2}});
  check_grad("softmax",
             [](auto& t) {
               Tensor e = (t[0] - t[0].max({-1}, true)).exp();
               return e / e.sum({-1}, true);
             },
             {{2, 5}});
  check_grad("mlp", [](auto& t) { return (t[0].matmul(t[1]) + t[2]).relu().sum({1}); },
             {{4, 3}, {3, 5}, {5}});
}

// gradient() builds a differentiable graph (tinygrad's gradient is a graph too): the gradient of
// a first gradient against central differences of that first gradient.
TEST(Autograd, SecondOrderThroughGradient) {
  auto d = [](std::function<Tensor(const Tensor&)> f) {
    return [f](const std::vector<Tensor>& t) { return f(t[0]).sum().gradient({t[0]})[0]; };
  };
  check_grad("d2 cube", d([](const Tensor& x) { return x * x * x; }), {{5}});
  check_grad("d2 exp", d([](const Tensor& x) { return x.exp(); }), {{5}});
  check_grad("d2 sin", d([](const Tensor& x) { return x.sin() * x; }), {{5}});
  check_grad("d2 cos", d([](const Tensor& x) { return x.cos(); }), {{5}});
  check_grad("d2 log", d([](const Tensor& x) { return (x * x + 1.0).log(); }), {{5}});
  check_grad("d2 sqrt recip", d([](const Tensor& x) { return (x * x + 1.0).sqrt().reciprocal(); }),
             {{5}});
  check_grad("d2 sigmoid", d([](const Tensor& x) { return x.sigmoid(); }), {{5}});
  check_grad("d2 div", d([](const Tensor& x) { return x / (x * x + 2.0); }), {{5}});
  check_grad("d2 pow", d([](const Tensor& x) { return (x * x + 1.0).pow(x * 0.5 + 1.0); }), {{5}});
  check_grad("d2 pow scalar", d([](const Tensor& x) { return (x * x + 1.0).pow(2.5); }), {{5}});
  check_grad("d2 matmul softmax", d([](const Tensor& x) {
               return x.reshape({2, 3}).matmul(x.reshape({3, 2})).softmax(1);
             }),
             {{6}});
  check_grad("mixed",
             [](const std::vector<Tensor>& t) {
               return (t[0] * t[1].exp()).sum().gradient({t[1]})[0] * t[0];
             },
             {{4}, {4}});
}

TEST(Autograd, GradientAccumulatesAndGradientApiLeavesGradAlone) {
  Tensor x = Tensor::from_data({1, 2, 3}, {3}, kF64);
  x.requires_grad_();
  (x * x).sum().backward();
  Tensor first = *x.grad();
  EXPECT_EQ(first.to_vector(), (std::vector<double>{2, 4, 6}));
  (x * 2.0).sum().backward();
  EXPECT_EQ(x.grad()->to_vector(), (std::vector<double>{4, 6, 8}));  // 2x + 2
  // Accumulated into the same tensor (tinygrad's t.grad.assign(t.grad + g)).
  EXPECT_TRUE(x.grad()->same(first));
  EXPECT_EQ(first.to_vector(), (std::vector<double>{4, 6, 8}));
  Tensor y = Tensor::from_data({1, 1}, {2}, kF64);
  y.requires_grad_();
  // x is not in the graph: zeros, as tinygrad's gradient gives.
  for (bool materialize : {false, true}) {
    auto g = (y * 3.0).sum().gradient({y, x}, materialize);
    EXPECT_EQ(g[0].to_vector(), (std::vector<double>{3, 3}));
    EXPECT_EQ(g[1].to_vector(), (std::vector<double>{0, 0, 0}));
  }
  EXPECT_FALSE(y.grad());
}

// retain_grad(): backward() fills the grad of a computed tensor too, beside the leaves'.
TEST(Autograd, RetainGradFillsComputedTensors) {
  Tensor w = Tensor::from_data({1, 2, 3}, {3}, kF64);
  w.requires_grad_();
  Tensor h = w * w, u = w * 4.0;
  h.retain_grad();
  (h * 3.0 + u).sum().backward();
  EXPECT_EQ(h.grad()->to_vector(), (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(w.grad()->to_vector(), (std::vector<double>{10, 16, 22}));  // 6w + 4
  EXPECT_FALSE(u.grad());                                               // not retained
}

// tinygrad's tri-state requires_grad: undecided (the default) tensors get gradients too;
// requires_grad=false and detach() stop them.
TEST(Autograd, UndecidedTensorsGetGradients) {
  Tensor x = Tensor::from_data({1, 2}, {2}, kF64), w = Tensor::from_data({3, 4}, {2}, kF64);
  EXPECT_EQ(x.requires_grad_state(), std::nullopt);
  EXPECT_FALSE(x.requires_grad());
  Tensor loss = (x * w * 2.0).sum();
  EXPECT_EQ(loss.requires_grad_state(), std::nullopt);
  auto g = loss.gradient({x, w});
  EXPECT_EQ(g[0].to_vector(), (std::vector<double>{6, 8}));
  EXPECT_EQ(g[1].to_vector(), (std::vector<double>{2, 4}));
  EXPECT_FALSE(x.grad());
  loss.backward();  // every float leaf that is not requires_grad=false
  EXPECT_EQ(x.grad()->to_vector(), (std::vector<double>{6, 8}));
  EXPECT_EQ(w.grad()->to_vector(), (std::vector<double>{2, 4}));

  Tensor off = Tensor::from_data({5, 6}, {2}, kF64);
  off.requires_grad_(false);
  Tensor l2 = (off * x + w.detach()).sum();
  EXPECT_EQ(l2.gradient({x})[0].to_vector(), (std::vector<double>{5, 6}));
  EXPECT_THROW(l2.gradient({off}), Error);  // requires_grad=false: no gradient reaches it
  EXPECT_EQ(w.detach().requires_grad_state(), std::optional<bool>(false));
  EXPECT_THROW((off * 2.0).sum().backward(), Error);  // nothing in its graph can have one
  // An op mixing requires_grad=true and undecided inputs requires grad.
  Tensor on = Tensor::from_data({1, 1}, {2}, kF64);
  on.requires_grad_();
  EXPECT_EQ((on * x).requires_grad_state(), std::optional<bool>(true));
  // Integer tensors have no gradient and record nothing.
  Tensor i = Tensor::from_data({1, 2}, {2}, dtypes::kInt32);
  EXPECT_TRUE((i + i).is_leaf());
}

// realize() ends an undecided history, as tinygrad's realize replaces the graph by the buffer:
// the activations behind a forward-only result are freed, and a loop feeding its realized
// output back in keeps nothing of the earlier steps alive.
TEST(Autograd, RealizeDropsUndecidedHistory) {
  Tensor x = Tensor::from_data({1, 2}, {2}, kF64);
  Tensor y = (x * 3.0).exp();
  EXPECT_FALSE(y.is_leaf());
  y.realize();
  EXPECT_TRUE(y.is_leaf());
  // x is no longer in y's graph. tinygrad gives zeros; the cut is said instead (zeros when
  // asked to materialize them).
  try {
    y.sum().gradient({x});
    ADD_FAILURE() << "gradient through a realized undecided tensor did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("which realize() cut"), std::string::npos) << e.what();
  }
  EXPECT_EQ(y.sum().gradient({x}, true)[0].to_vector(), (std::vector<double>{0, 0}));
  // requires_grad=true keeps the history through realize (PyTorch's semantics).
  Tensor p = Tensor::from_data({1, 2}, {2}, kF64);
  p.requires_grad_();
  Tensor q = (p * 3.0).sum();
  q.realize();
  EXPECT_EQ(q.gradient({p})[0].to_vector(), (std::vector<double>{3, 3}));
  // A view of a realized buffer is not a computed value: its history stays.
  Tensor v = x.reshape({2, 1});
  v.realize();
  EXPECT_EQ((v * 2.0).sum().gradient({x})[0].to_vector(), (std::vector<double>{2, 2}));

  int64_t before = counters().mem_used.load();
  Tensor h = Tensor::full({1 << 16}, 1.0);
  for (int step = 0; step < 64; step++) h = (h * 0.5 + 1.0).realize();
  // 64 steps of 256 KiB: without the cut every step's buffer would stay alive.
  EXPECT_LT(counters().mem_used.load() - before, 8 * (int64_t{1} << 18));
  EXPECT_NEAR(h.to_vector()[0], 2.0, 1e-6);
}

// relu's gradient is masked by its output: once the output is stored, the backward does not
// compute the matmul under it again (with a bias, the matmul is fused into relu's kernel and
// stored nowhere). Oracle: the schedule has one reduction (the weight gradient), and the
// gradient is x^T (2 relu(xw + b)) by hand in float64.
TEST(Autograd, ReluBackwardReadsTheOutputNotTheInput) {
  Tensor x = Tensor::rand({64, 64}).realize(), w = Tensor::rand({64, 64}) - 0.5;
  Tensor b = Tensor::rand({64}).realize() - 0.5;
  w.requires_grad_();
  w.realize();
  b.realize();
  Tensor y = (x.matmul(w) + b).relu();
  y.realize();
  Tensor g = (y * y).sum().gradient({w})[0];
  int reductions = 0;
  for (const ScheduleItem& item : create_schedule({g.lazy()}))
    for (const compiler::UOp* n : item.ast->toposort()) reductions += n->op() == Op::REDUCE_AXIS;
  EXPECT_EQ(reductions, 1);
  std::vector<double> xs = x.to_vector(), ws = w.to_vector(), bs = b.to_vector();
  std::vector<double> gs = g.to_vector();
  for (int64_t i : {0, 100, 4095}) {
    int64_t k = i / 64, j = i % 64;
    double want = 0;
    for (int64_t r = 0; r < 64; r++) {
      double z = bs[j];
      for (int64_t c = 0; c < 64; c++) z += xs[r * 64 + c] * ws[c * 64 + j];
      want += xs[r * 64 + k] * 2 * std::max(z, 0.0);
    }
    EXPECT_NEAR(gs[i], want, 1e-4 * (1 + std::abs(want))) << i;
  }
}

TEST(Autograd, Misuse) {
  Tensor x = Tensor::from_data({1, 2, 3}, {3}, kF64);
  x.requires_grad_();
  try {
    (x * 2.0).backward();
    ADD_FAILURE() << "backward on a non-scalar did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "[backward] called on a non-scalar tensor of shape (3,) without a gradient"),
              std::string::npos)
        << e.what();
  }
  try {
    Tensor::from_data({1}, {1}, dtypes::kInt32).requires_grad_();
    ADD_FAILURE() << "int requires_grad did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[requires_grad] only float tensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace baregrad::tensor
