// The composed elementwise ops and activations of tensor_elementwise.cc against float64 host
// references, and their gradients against central finite differences in float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

double gelu_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double softplus_ref(double x, double b) { return std::log1p(std::exp(b * x)) / b; }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

TEST(MoreOps, ActivationsMatchReference) {
  Vec a = rnd(64, 1, -7, 7);
  a.insert(a.end(), {0, -3, 3, 6, -6, 0.5, -1, 1});
  Tensor t = Tensor::from_data(a, {8, 9});
  const double sa = 1.6732632423543772, ss = 1.0507009873554805;
  std::vector<std::tuple<const char*, Tensor, std::function<double(double)>>> cases = {
      {"abs", t.abs(), [](double x) { return std::fabs(x); }},
      {"sign", t.sign(), [](double x) { return double((x > 0) - (x < 0)); }},
      {"tanh", t.tanh(), [](double x) { return std::tanh(x); }},
      {"leaky_relu", t.leaky_relu(), [](double x) { return x < 0 ? 0.01 * x : x; }},
      {"leaky_relu(0.2)", t.leaky_relu(0.2), [](double x) { return x < 0 ? 0.2 * x : x; }},
      {"gelu", t.gelu(), gelu_ref},
      {"quick_gelu", t.quick_gelu(), [](double x) { return x * sigmoid_ref(1.702 * x); }},
      {"silu", t.silu(), [](double x) { return x * sigmoid_ref(x); }},
      {"softplus", t.softplus(), [](double x) { return softplus_ref(x, 1); }},
      {"softplus(2)", t.softplus(2), [](double x) { return softplus_ref(x, 2); }},
      {"mish", t.mish(), [](double x) { return x * std::tanh(softplus_ref(x, 1)); }},
      {"elu", t.elu(), [](double x) { return x > 0 ? x : std::expm1(x); }},
      {"elu(0.5)", t.elu(0.5), [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); }},
      {"selu", t.selu(), [&](double x) { return ss * (x > 0 ? x : sa * std::expm1(x)); }},
      {"hardswish", t.hardswish(), [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; }},
      {"relu6", t.relu6(), [](double x) { return std::clamp(x, 0.0, 6.0); }},
      {"hardtanh", t.hardtanh(), [](double x) { return std::clamp(x, -1.0, 1.0); }},
      {"hardtanh(-0.5, 2)", t.hardtanh(-0.5, 2), [](double x) { return std::clamp(x, -.5, 2.); }},
      {"clamp", t.clamp(-2, 0.5), [](double x) { return std::clamp(x, -2.0, 0.5); }},
  };
  for (auto& [name, y, f] : cases) {
    SCOPED_TRACE(name);
    Vec want;
    for (double x : a) want.push_back(f(x));
    EXPECT_EQ(y.shape(), (Shape{8, 9}));
    expect_near(y.to_vector(), want);
  }
  // Large |x| stays finite; NaN keeps through sign and abs.
  Tensor big = Tensor::from_data({-200, 200, NAN}, {3});
  expect_near(big.softplus().to_vector(), {0, 200, NAN});
  expect_near(big.sign().to_vector(), {-1, 1, NAN});
  expect_near(big.abs().to_vector(), {200, 200, NAN});
  Tensor i = Tensor::from_data({-3, 0, 5}, {3}, dtypes::kInt32);
  EXPECT_EQ(i.abs().dtype(), dtypes::kInt32);
  EXPECT_EQ(i.abs().to_vector(), (Vec{3, 0, 5}));
  EXPECT_EQ(i.sign().to_vector(), (Vec{-1, 0, 1}));
  EXPECT_EQ(Tensor::zeros({0, 3}).gelu().shape(), (Shape{0, 3}));
}

TEST(MoreOps, PowMatchesReference) {
  // Negative bases with integer exponents, 0 ** 0, non-integer exponents of negative bases.
  Vec b = {-2, -0.5, 0, 1.5}, e = {-2, -1, 0, 1, 2, 3, 0.5};
  Tensor y = Tensor::from_data(b, {4, 1}, kF64).pow(Tensor::from_data(e, {7}, kF64));
  Vec want;
  for (double x : b)
    for (double p : e) want.push_back(std::pow(x, p));
  EXPECT_EQ(y.shape(), (Shape{4, 7}));
  expect_near(y.to_vector(), want, 1e-12, 1e-12);
  Vec pb = rnd(20, 2, 0.1, 3), pe = rnd(20, 3, -2, 2), pw;
  for (size_t k = 0; k < pb.size(); k++) pw.push_back(std::pow(pb[k], pe[k]));
  Tensor f32 = Tensor::from_data(pb, {20}).pow(Tensor::from_data(pe, {20}));
  EXPECT_EQ(f32.dtype(), dtypes::kFloat32);
  expect_near(f32.to_vector(), pw);
  // pow(double): exact-multiply paths, sqrt paths, reciprocal paths and the general one.
  Vec x = rnd(12, 4, -2, 2);
  x.push_back(0);
  Tensor tx = Tensor::from_data(x, {13}, kF64);
  for (double p : {0.0, 1.0, 2.0, 3.0, 5.0, 0.5, 2.5, -1.0, -2.0, -0.5, 1.7}) {
    SCOPED_TRACE("pow " + std::to_string(p));
    Vec w;
    for (double v : x) w.push_back(std::pow(v, p));
    expect_near(tx.pow(p).to_vector(), w, 1e-12, 1e-12);
  }
  Tensor ib = Tensor::from_data({2, 3, -2, 5, -3}, {5}, dtypes::kInt32);
  Tensor ip = ib.pow(Tensor::from_data({10, 5, 3, 0, 19}, {5}, dtypes::kInt32));
  EXPECT_EQ(ip.dtype(), dtypes::kInt32);
  EXPECT_EQ(ip.to_vector(), (Vec{1024, 243, -8, 1, -1162261467}));
  Tensor neg1 = Tensor::from_data({-1, -1, -1}, {3}, dtypes::kInt32);
  EXPECT_EQ(Tensor::from_data({2, 1, -1}, {3}, dtypes::kInt32).pow(neg1).to_vector(),
            (Vec{0, 1, -1}));
  EXPECT_EQ(ib.pow(3).dtype(), dtypes::kInt32);
  EXPECT_EQ(ib.pow(3).to_vector(), (Vec{8, 27, -8, 125, -27}));
}

TEST(MoreOps, ComparisonsLogicalAndLerp) {
  Vec a = ints(12, 5, 3), b = ints(4, 6, 3);
  Tensor ta = Tensor::from_data(a, {3, 4}), tb = Tensor::from_data(b, {4}, dtypes::kInt32);
  Vec gt, ge, le;
  for (int i = 0; i < 12; i++) {
    gt.push_back(a[i] > b[i % 4]);
    ge.push_back(a[i] >= b[i % 4]);
    le.push_back(a[i] <= b[i % 4]);
  }
  EXPECT_EQ(ta.gt(tb).dtype(), dtypes::kBool);
  EXPECT_EQ(ta.gt(tb).to_vector(), gt);
  EXPECT_EQ(ta.ge(tb).to_vector(), ge);
  EXPECT_EQ(ta.le(tb).to_vector(), le);
  Tensor p = Tensor::from_data({1, 0, 1}, {3, 1}, dtypes::kBool);
  Tensor q = Tensor::from_data({1, 0}, {2}, dtypes::kBool);
  EXPECT_EQ(p.logical_and(q).shape(), (Shape{3, 2}));
  EXPECT_EQ(p.logical_and(q).to_vector(), (Vec{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(p.logical_or(q).to_vector(), (Vec{1, 1, 1, 0, 1, 1}));
  EXPECT_EQ(p.logical_not().to_vector(), (Vec{0, 1, 0}));
  Tensor f = Tensor::from_data({0, -2.5, 0.25}, {3});
  EXPECT_EQ(f.logical_not().dtype(), dtypes::kBool);
  EXPECT_EQ(f.logical_not().to_vector(), (Vec{1, 0, 0}));
  Vec s = rnd(6, 7), e = rnd(3, 8), w = rnd(2, 9, 0, 1), lw, lc;
  Tensor ts = Tensor::from_data(s, {2, 3}), te = Tensor::from_data(e, {3});
  for (int i = 0; i < 6; i++) {
    lw.push_back(s[i] + (e[i % 3] - s[i]) * w[i / 3]);
    lc.push_back(s[i] + (e[i % 3] - s[i]) * 0.25);
  }
  expect_near(ts.lerp(te, Tensor::from_data(w, {2, 1})).to_vector(), lw);
  expect_near(ts.lerp(te, 0.25).to_vector(), lc);
}

TEST(MoreGrad, Elementwise) {
  check_grad("abs", [](auto& t) { return t[0].abs(); }, {{6}});
  check_grad("sign", [](auto& t) { return t[0].sign() + t[0]; }, {{6}});
  check_grad("pow tensor", [](auto& t) { return t[0].pow(t[1]); }, {{2, 3}, {3}}, 0.5, 2);
  // An integer-valued tensor exponent on negative bases: d/dbase is finite (d/dexp is NaN there, as
  // torch's log(base), so the exponent is a constant here).
  check_grad("pow int tensor",
             [](auto& t) {
               return t[0].pow(Tensor::full(t[0].shape(), 3.0, t[0].dtype(), t[0].device()));
             },
             {{5}});
  for (double p : {2.0, 3.0, 2.5, -1.5, 0.7})
    check_grad("pow double", [p](auto& t) { return t[0].pow(p); }, {{5}}, 0.5, 2);
  check_grad("clamp", [](auto& t) { return t[0].clamp(-1, 0.5); }, {{8}});
  check_grad("lerp", [](auto& t) { return t[0].lerp(t[1], t[2]); }, {{2, 3}, {3}, {2, 1}});
  check_grad("lerp double", [](auto& t) { return t[0].lerp(t[1], 0.3); }, {{4}, {4}});
  check_grad("tanh", [](auto& t) { return t[0].tanh(); }, {{5}});
  check_grad("leaky_relu", [](auto& t) { return t[0].leaky_relu(0.1); }, {{6}});
  check_grad("gelu", [](auto& t) { return t[0].gelu(); }, {{6}}, -4, 4);
  check_grad("quick_gelu", [](auto& t) { return t[0].quick_gelu(); }, {{6}}, -4, 4);
  check_grad("silu", [](auto& t) { return t[0].silu(); }, {{6}}, -4, 4);
  check_grad("softplus", [](auto& t) { return t[0].softplus(2); }, {{6}}, -4, 4);
  check_grad("mish", [](auto& t) { return t[0].mish(); }, {{6}}, -4, 4);
  check_grad("elu", [](auto& t) { return t[0].elu(0.7); }, {{6}});
  check_grad("selu", [](auto& t) { return t[0].selu(); }, {{6}});
  check_grad("hardswish", [](auto& t) { return t[0].hardswish(); }, {{8}}, -5, 5);
  check_grad("relu6", [](auto& t) { return t[0].relu6(); }, {{8}}, -2, 8);
  check_grad("hardtanh", [](auto& t) { return t[0].hardtanh(); }, {{8}});
}

}  // namespace
}  // namespace baregrad::tensor

namespace baregrad::tensor {
namespace {
using namespace test_util;

// Tensor::scalar_op, what Python's `t + 1` calls: each op and its reflected form against a
// float64 host reference, the gradient reaching the tensor (and nothing for the number), and an
// unknown op named in the error.
TEST(ScalarOp, EachOpAndItsReflectionMatchTheReference) {
  Vec a = rnd(16, 7, -3, 3);
  a[3] = 0.5;  // equal to the number: the comparisons' boundary
  const double v = 0.5;
  struct Case {
    const char* op;
    std::function<double(double, double)> f;
  };
  std::vector<Case> cases = {
      {"add", [](double x, double y) { return x + y; }},
      {"sub", [](double x, double y) { return x - y; }},
      {"mul", [](double x, double y) { return x * y; }},
      {"maximum", [](double x, double y) { return std::max(x, y); }},
      {"minimum", [](double x, double y) { return std::min(x, y); }},
      {"lt", [](double x, double y) { return double(x < y); }},
      {"le", [](double x, double y) { return double(x <= y); }},
      {"gt", [](double x, double y) { return double(x > y); }},
      {"ge", [](double x, double y) { return double(x >= y); }},
      {"eq", [](double x, double y) { return double(x == y); }},
      {"ne", [](double x, double y) { return double(x != y); }},
  };
  Tensor t = Tensor::from_data(a, {4, 4});
  for (const Case& c : cases)
    for (bool reverse : {false, true}) {
      Vec want(a.size());
      for (size_t i = 0; i < a.size(); i++) want[i] = reverse ? c.f(v, a[i]) : c.f(a[i], v);
      SCOPED_TRACE(std::string(c.op) + (reverse ? " reversed" : ""));
      Tensor out = t.scalar_op(c.op, v, reverse);
      EXPECT_EQ(out.shape(), (Shape{4, 4}));
      expect_near(out.to_vector(), want);
    }
}

TEST(ScalarOp, ZeroDimAndSizeOneDimsBroadcastTheNumber) {
  Tensor s = Tensor::from_data({2}, {});
  EXPECT_EQ(s.scalar_op("sub", 5, true).shape(), Shape{});
  expect_near(s.scalar_op("sub", 5, true).to_vector(), {3});
  Vec a = rnd(6, 3);
  Tensor t = Tensor::from_data(a, {3, 1, 2});
  Tensor out = t.scalar_op("maximum", 0.25) * 2.0;  // read through the stride-0 view, then fused on
  EXPECT_EQ(out.shape(), (Shape{3, 1, 2}));
  Vec want(a.size());
  for (size_t i = 0; i < a.size(); i++) want[i] = 2 * std::max(a[i], 0.25);
  expect_near(out.to_vector(), want);
  expect_near(t.transpose(0, 2).scalar_op("add", 1).to_vector(),
              {a[0] + 1, a[2] + 1, a[4] + 1, a[1] + 1, a[3] + 1, a[5] + 1});
}

TEST(ScalarOp, GradientReachesTheTensorOnly) {
  Tensor x = Tensor::from_data({1, 2, 3}, {3});
  x.requires_grad_();
  x.scalar_op("sub", 10, /*reverse=*/true).scalar_op("mul", 3).sum().backward();  // 3 * (10 - x)
  expect_near(x.grad()->to_vector(), {-3, -3, -3});
}

TEST(ScalarOp, AnUnknownOpIsAValueErrorNamingIt) {
  Tensor x = Tensor::from_data({1, 2}, {2});
  try {
    x.scalar_op("pow", 2);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    EXPECT_NE(e.message().find("unknown op 'pow'"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace baregrad::tensor
