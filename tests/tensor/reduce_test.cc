// The reductions of tensor_reduce.cc (argmax, any/all, var/std, logsumexp, cumsum, cumprod, prod)
// against float64 host references, and their gradients against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

// Host reference of a reduction along `axis`: f(values of one lane) per (outer, inner).
Vec reduce_ref(const Vec& a, const Shape& s, int axis, const std::function<double(Vec)>& f) {
  Lanes l(s, axis);
  Vec out;
  for (int64_t o = 0; o < l.outer; o++)
    for (int64_t i = 0; i < l.inner; i++) {
      Vec lane;
      for (int64_t k = 0; k < l.n; k++) lane.push_back(a[l.at(o, k, i)]);
      out.push_back(f(lane));
    }
  return out;
}

TEST(MoreOps, ArgmaxArgminTakeTheFirstIndexOnEveryAxis) {
  Shape s{3, 4, 5};
  Vec a = ints(60, 10, 4);
  auto first = [](bool mx) {
    return [mx](Vec v) {
      size_t best = 0;
      for (size_t k = 1; k < v.size(); k++)
        if (mx ? v[k] > v[best] : v[k] < v[best]) best = k;
      return static_cast<double>(best);
    };
  };
  for (DType dt : {dtypes::kFloat32, dtypes::kInt32}) {
    Tensor t = Tensor::from_data(a, s, dt);
    for (int axis = -3; axis < 3; axis++) {
      SCOPED_TRACE("axis " + std::to_string(axis) + " " + dt.name());
      Tensor am = t.argmax(axis);
      EXPECT_EQ(am.dtype(), dtypes::kInt32);
      EXPECT_EQ(am.to_vector(), reduce_ref(a, s, axis, first(true)));
      EXPECT_EQ(t.argmin(axis).to_vector(), reduce_ref(a, s, axis, first(false)));
    }
  }
  Tensor t = Tensor::from_data(a, s);
  EXPECT_EQ(t.argmax(1, true).shape(), (Shape{3, 1, 5}));
  EXPECT_EQ(t.argmax().shape(), Shape{});
  EXPECT_EQ(t.argmax().to_vector(), Vec{first(true)(a)});
  EXPECT_EQ(t.argmin().to_vector(), Vec{first(false)(a)});
  Tensor bools = Tensor::from_data({0, 1, 1, 0, 0, 0}, {2, 3}, dtypes::kBool);
  EXPECT_EQ(bools.argmax(1).to_vector(), (Vec{1, 0}));
  EXPECT_EQ(bools.argmin(-1).to_vector(), (Vec{0, 0}));
  EXPECT_EQ(Tensor::ones({4, 1}).argmax(1).to_vector(), (Vec{0, 0, 0, 0}));
}

TEST(MoreOps, AnyAllVarStdLogsumexp) {
  Tensor m = Tensor::from_data({0, 0, 0, 1, 0, 2, 3, 4, 5}, {3, 3});
  EXPECT_EQ(m.any({1}).dtype(), dtypes::kBool);
  EXPECT_EQ(m.any({1}).to_vector(), (Vec{0, 1, 1}));
  EXPECT_EQ(m.all({-1}).to_vector(), (Vec{0, 0, 1}));
  EXPECT_EQ(m.any({0}, true).to_vector(), (Vec{1, 1, 1}));
  EXPECT_EQ(m.all().to_vector(), Vec{0});
  EXPECT_EQ(Tensor::zeros({0}).all().to_vector(), Vec{1});
  EXPECT_EQ(Tensor::zeros({0}).any().to_vector(), Vec{0});
  Shape s{3, 4, 5};
  Vec a = rnd(60, 11, -3, 3);
  Tensor t = Tensor::from_data(a, s, kF64);
  auto var = [](double corr) {
    return [corr](Vec v) {
      double mean = 0, ss = 0;
      for (double x : v) mean += x / static_cast<double>(v.size());
      for (double x : v) ss += (x - mean) * (x - mean);
      return ss / (static_cast<double>(v.size()) - corr);
    };
  };
  auto lse = [](Vec v) {
    double s = 0;
    for (double x : v) s += std::exp(x);
    return std::log(s);
  };
  for (int axis : {-1, 0, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    expect_near(t.var({axis}).to_vector(), reduce_ref(a, s, axis, var(1)), 1e-12, 1e-12);
    expect_near(t.var({axis}, false, 0).to_vector(), reduce_ref(a, s, axis, var(0)), 1e-12, 1e-9);
    Vec sd = reduce_ref(a, s, axis, var(1));
    for (double& x : sd) x = std::sqrt(x);
    expect_near(t.std({axis}).to_vector(), sd, 1e-12, 1e-9);
    expect_near(t.logsumexp({axis}).to_vector(), reduce_ref(a, s, axis, lse), 1e-12, 1e-9);
  }
  EXPECT_EQ(t.var({0, 2}, true).shape(), (Shape{1, 4, 1}));
  expect_near(t.var().to_vector(), {var(1)(a)}, 1e-12, 1e-9);
  // Large and -inf entries stay finite / exact.
  Tensor big = Tensor::from_data({1000, 1000, -INFINITY, -INFINITY}, {2, 2});
  expect_near(big.logsumexp({1}).to_vector(), {1000 + std::log(2.0), -INFINITY});
  EXPECT_EQ(big.logsumexp({}, true).shape(), (Shape{1, 1}));
  expect_near(Tensor::ones({1}).var().to_vector(), {NAN});  // 0 / max(0, 1 - 1)
}

TEST(MoreOps, CumsumAndProd) {
  Shape s{3, 4, 5};
  Vec a = rnd(60, 12);
  Tensor t = Tensor::from_data(a, s);
  for (int axis = -3; axis < 3; axis++) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Lanes l(s, axis);
    Vec want = a;
    for (int64_t o = 0; o < l.outer; o++)
      for (int64_t k = 1; k < l.n; k++)
        for (int64_t i = 0; i < l.inner; i++) want[l.at(o, k, i)] += want[l.at(o, k - 1, i)];
    EXPECT_EQ(t.cumsum(axis).shape(), s);
    expect_near(t.cumsum(axis).to_vector(), want);
  }
  Tensor bools = Tensor::from_data({1, 0, 1, 1}, {4}, dtypes::kBool);
  EXPECT_EQ(bools.cumsum().dtype(), dtypes::kInt32);
  EXPECT_EQ(bools.cumsum().to_vector(), (Vec{1, 1, 2, 3}));
  EXPECT_EQ(Tensor::zeros({0, 3}).cumsum(0).shape(), (Shape{0, 3}));
  EXPECT_EQ(Tensor::zeros({3, 0}).cumsum(1).to_vector(), Vec{});
  // prod: zeros, signs, odd lengths, integers exactly, empty axes give 1.
  Vec p = rnd(3 * 7, 13, -2, 2);
  p[5] = 0;
  Tensor tp = Tensor::from_data(p, {3, 7}, kF64);
  Vec rows = reduce_ref(p, {3, 7}, 1, [](Vec v) {
    double r = 1;
    for (double x : v) r *= x;
    return r;
  });
  expect_near(tp.prod({-1}).to_vector(), rows, 1e-14, 1e-12);
  expect_near(tp.prod({1}, true).to_vector(), rows, 1e-14, 1e-12);
  EXPECT_EQ(tp.prod({1}, true).shape(), (Shape{3, 1}));
  expect_near(tp.prod().to_vector(), {rows[0] * rows[1] * rows[2]}, 1e-14, 1e-12);
  Tensor ti = Tensor::from_data({3, -7, 11, 13, 17, 19, -23, 2, 1}, {9}, dtypes::kInt32);
  EXPECT_EQ(ti.prod().dtype(), dtypes::kInt32);
  EXPECT_EQ(ti.prod().to_vector(), Vec{44618574});
  EXPECT_EQ(Tensor::zeros({2, 0}).prod({1}).to_vector(), (Vec{1, 1}));
  EXPECT_EQ(Tensor::from_data({2.5}, {1}).prod().to_vector(), Vec{2.5});
}

TEST(ExtraOps, CumprodFlattenUnflatten) {
  Shape s{3, 4, 5};
  Vec a = rnd(60, 43, -1.5, 1.5);
  a[7] = 0;
  Tensor t = Tensor::from_data(a, s, kF64);
  for (int axis = -3; axis < 3; axis++) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Lanes l(s, axis);
    Vec want = a;
    for (int64_t o = 0; o < l.outer; o++)
      for (int64_t k = 1; k < l.n; k++)
        for (int64_t i = 0; i < l.inner; i++) want[l.at(o, k, i)] *= want[l.at(o, k - 1, i)];
    expect_near(t.cumprod(axis).to_vector(), want, 1e-15, 1e-12);
  }
  Tensor ti = Tensor::from_data({2, -3, 4, 5}, {4}, dtypes::kInt32);
  EXPECT_EQ(ti.cumprod().to_vector(), (Vec{2, -6, -24, -120}));
  EXPECT_EQ(Tensor::zeros({2, 0}).cumprod(1).shape(), (Shape{2, 0}));
  EXPECT_EQ(Tensor::full({}, 3).cumprod().to_vector(), Vec{3});
  Tensor f = Tensor::zeros({2, 3, 4, 5});
  EXPECT_EQ(f.flatten(1).shape(), (Shape{2, 60}));
  EXPECT_EQ(f.flatten(1, 2).shape(), (Shape{2, 12, 5}));
  EXPECT_EQ(f.flatten(-3, -2).shape(), (Shape{2, 12, 5}));
  EXPECT_EQ(f.flatten(2, 2).shape(), f.shape());
  EXPECT_EQ(Tensor::full({}, 1).flatten(0).shape(), Shape{1});
  EXPECT_EQ(t.flatten(0, 1).to_vector(), a);
  EXPECT_EQ(f.unflatten(1, {3, 1}).shape(), (Shape{2, 3, 1, 4, 5}));
  EXPECT_EQ(f.unflatten(-1, {-1, 5}).shape(), (Shape{2, 3, 4, 1, 5}));
  EXPECT_EQ(t.flatten(1).unflatten(1, {4, 5}).to_vector(), a);
}

TEST(MoreGrad, Reductions) {
  check_grad("var", [](auto& t) { return t[0].var({1}); }, {{3, 4}});
  check_grad("var all", [](auto& t) { return t[0].var({}, true, 0); }, {{2, 3}});
  check_grad("std", [](auto& t) { return t[0].std({0, 2}); }, {{2, 3, 2}});
  check_grad("logsumexp", [](auto& t) { return t[0].logsumexp({-1}); }, {{3, 4}});
  check_grad("cumsum", [](auto& t) { return t[0].cumsum(0); }, {{4, 3}});
  check_grad("cumsum last", [](auto& t) { return t[0].cumsum(-1); }, {{2, 5}});
  check_grad("prod", [](auto& t) { return t[0].prod({1}); }, {{3, 5}});
  check_grad("prod all", [](auto& t) { return t[0].prod(); }, {{2, 3}});
}

}  // namespace
}  // namespace baregrad::tensor
