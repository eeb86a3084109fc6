// Every differentiable op's gradient against central finite differences in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "base/error.h"
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

TEST(Autograd, GradientAccumulatesAndGradientApiLeavesGradAlone) {
  Tensor x = Tensor::from_data({1, 2, 3}, {3}, kF64);
  x.requires_grad_();
  (x * x).sum().backward();
  (x * 2.0).sum().backward();
  EXPECT_EQ(x.grad()->to_vector(), (std::vector<double>{4, 6, 8}));  // 2x + 2
  Tensor y = Tensor::from_data({1, 1}, {2}, kF64);
  y.requires_grad_();
  auto g = (y * 3.0).sum().gradient({y, x});
  EXPECT_EQ(g[0].to_vector(), (std::vector<double>{3, 3}));
  EXPECT_EQ(g[1].to_vector(), (std::vector<double>{0, 0, 0}));
  EXPECT_FALSE(y.grad());
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
