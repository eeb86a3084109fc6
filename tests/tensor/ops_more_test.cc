// The ops of tensor_more.cc against float64 host references, and their gradients against
// central finite differences in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <random>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

// Small integers in [0, k): many ties.
Vec ints(size_t n, uint64_t seed, int k) {
  std::mt19937_64 rng(seed);
  Vec v(n);
  for (auto& x : v) x = static_cast<double>(rng() % k);
  return v;
}

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

TEST(MoreOps, CatStackSplitChunk) {
  Vec a = rnd(6, 14), b = rnd(2, 15);
  Tensor ta = Tensor::from_data(a, {2, 3}), tb = Tensor::from_data(b, {2, 1});
  Tensor tc = Tensor::from_data({4, 5}, {2, 1}, dtypes::kInt32);
  Tensor c = Tensor::cat({ta, Tensor::zeros({2, 0}), tb, tc}, -1);
  EXPECT_EQ(c.shape(), (Shape{2, 5}));
  EXPECT_EQ(c.dtype(), dtypes::kFloat32);
  expect_near(c.to_vector(), {a[0], a[1], a[2], b[0], 4, a[3], a[4], a[5], b[1], 5});
  expect_near(Tensor::cat({ta, ta}, 0).to_vector(),
              {a[0], a[1], a[2], a[3], a[4], a[5], a[0], a[1], a[2], a[3], a[4], a[5]});
  Tensor bo = Tensor::from_data({1, 0}, {2}, dtypes::kBool);
  EXPECT_EQ(Tensor::cat({bo, bo}).dtype(), dtypes::kBool);
  EXPECT_EQ(Tensor::cat({bo, bo}).to_vector(), (Vec{1, 0, 1, 0}));
  Tensor st = Tensor::stack({tb, tb * 2.0}, -1);
  EXPECT_EQ(st.shape(), (Shape{2, 1, 2}));
  expect_near(st.to_vector(), {b[0], 2 * b[0], b[1], 2 * b[1]});
  EXPECT_EQ(Tensor::stack({ta, ta}).shape(), (Shape{2, 2, 3}));
  auto parts = ta.split({1, 0, 2}, -1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].shape(), (Shape{2, 0}));
  expect_near(parts[2].to_vector(), {a[1], a[2], a[4], a[5]});
  auto by2 = Tensor::arange(0, 5).split(2);
  ASSERT_EQ(by2.size(), 3u);
  EXPECT_EQ(by2[2].to_vector(), Vec{4});
  std::vector<size_t> counts;
  for (auto [n, k] : {std::pair{5, 3}, {4, 3}, {6, 3}, {1, 4}})
    counts.push_back(Tensor::arange(0, n).chunk(k).size());
  EXPECT_EQ(counts, (std::vector<size_t>{3, 2, 3, 1}));
  EXPECT_EQ(Tensor::arange(0, 5).chunk(3)[2].to_vector(), Vec{4});
  EXPECT_EQ(Tensor::zeros({0}).chunk(2).size(), 2u);
  EXPECT_EQ(Tensor::zeros({0}).split(3).size(), 1u);
}

TEST(MoreOps, RepeatRollGatherOneHot) {
  Tensor t = Tensor::from_data({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = t.repeat({2, 1, 2});
  EXPECT_EQ(r.shape(), (Shape{2, 2, 6}));
  Vec want;
  for (int z = 0; z < 2; z++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 6; j++) want.push_back(1 + i * 3 + j % 3);
  EXPECT_EQ(r.to_vector(), want);
  EXPECT_EQ(t.repeat({0, 1}).shape(), (Shape{0, 3}));
  EXPECT_EQ(t.roll(1, 1).to_vector(), (Vec{3, 1, 2, 6, 4, 5}));
  EXPECT_EQ(t.roll(-4, -1).to_vector(), (Vec{2, 3, 1, 5, 6, 4}));
  EXPECT_EQ(t.roll(7, 0).to_vector(), (Vec{4, 5, 6, 1, 2, 3}));
  EXPECT_EQ(t.roll(2).to_vector(), (Vec{5, 6, 1, 2, 3, 4}));
  EXPECT_EQ(Tensor::zeros({0, 2}).roll(3, 0).shape(), (Shape{0, 2}));
  Tensor idx = Tensor::from_data({2, 0, 1, 1}, {2, 2}, dtypes::kInt64);
  EXPECT_EQ(t.gather(1, idx).to_vector(), (Vec{3, 1, 5, 5}));
  EXPECT_EQ(t.gather(-2, Tensor::from_data({1, 0}, {1, 2}, dtypes::kInt32)).to_vector(),
            (Vec{4, 2}));
  Tensor ti = Tensor::from_data({7, 8, 9}, {3}, dtypes::kInt16);
  EXPECT_EQ(ti.gather(0, Tensor::from_data({2, 2}, {2}, dtypes::kInt32)).dtype(), dtypes::kInt16);
  Tensor labels = Tensor::from_data({2, 0, 1}, {3}, dtypes::kInt32);
  EXPECT_EQ(labels.one_hot().shape(), (Shape{3, 3}));
  EXPECT_EQ(labels.one_hot(4).dtype(), dtypes::kInt32);
  EXPECT_EQ(labels.one_hot(4).to_vector(), (Vec{0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0}));
}

TEST(MoreOps, BadInputGivesClearErrors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  expect_error([&] { (void)a.gt(b); }, "[gt] cannot broadcast (2, 3) and (4,)");
  expect_error([&] { (void)a.pow(b); }, "[pow] cannot broadcast (2, 3) and (4,)");
  expect_error([&] { (void)a.lerp(a, b); }, "[lerp] cannot broadcast (2, 3) and (4,)");
  expect_error([&] { (void)a.argmax(2); }, "[argmax] axis 2 out of range for shape (2, 3)");
  expect_error([&] { (void)Tensor::zeros({2, 0}).argmin(1); },
               "[argmin] axis 1 of (2, 0) is empty");
  expect_error([&] { (void)a.var({0, -2}); }, "[var] repeated axis for shape (2, 3)");
  expect_error([&] { (void)a.cumsum(-3); }, "[cumsum] axis -3 out of range for shape (2, 3)");
  expect_error([&] { (void)a.prod({5}); }, "[prod] axis 5 out of range");
  expect_error([&] { (void)Tensor::cat({a, Tensor::zeros({3, 3})}, 1); },
               "[cat] shapes (2, 3) and (3, 3) differ outside axis 1");
  expect_error([&] { (void)Tensor::cat({}, 0); }, "[cat] no tensors");
  expect_error([&] { (void)Tensor::stack({a, b}); }, "[stack] shapes (2, 3) and (4,) differ");
  expect_error([&] { (void)a.split({1, 1}, 1); },
               "[split] sizes (1, 1) sum to 2, but axis 1 of (2, 3) has 3");
  expect_error([&] { (void)a.split(int64_t{0}); }, "[split] size 0 is not positive");
  expect_error([&] { (void)a.chunk(0); }, "[chunk] chunks 0 is not positive");
  expect_error([&] { (void)a.repeat({2}); }, "[repeat] repeats (2,) for shape (2, 3)");
  expect_error([&] { (void)a.roll(1, 2); }, "[roll] axis 2 out of range");
  expect_error([&] { (void)a.gather(0, a); },
               "[gather] index must be an integer tensor, got float");
  expect_error([&] { (void)a.gather(0, Tensor::zeros({2}, dtypes::kInt32)); },
               "[gather] index of shape (2,) for a tensor of shape (2, 3): ndims differ");
  expect_error([&] { (void)a.gather(0, Tensor::zeros({1, 4}, dtypes::kInt32)); }, "exceeds dim 1");
  expect_error([&] { (void)a.one_hot(3); }, "[one_hot] needs an integer tensor, got float");
}

TEST(MoreGrad, Elementwise) {
  check_grad("abs", [](auto& t) { return t[0].abs(); }, {{6}});
  check_grad("sign", [](auto& t) { return t[0].sign() + t[0]; }, {{6}});
  check_grad("pow tensor", [](auto& t) { return t[0].pow(t[1]); }, {{2, 3}, {3}}, 0.5, 2);
  check_grad("pow int tensor", [](auto& t) { return t[0].pow(t[1] * 0.0 + 3.0); }, {{5}, {5}});
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

TEST(MoreGrad, Movement) {
  check_grad("cat", [](auto& t) { return Tensor::cat({t[0], t[1], t[0]}, 1); }, {{2, 3}, {2, 1}});
  check_grad("stack", [](auto& t) { return Tensor::stack({t[0], t[1]}, 1); }, {{2, 3}, {2, 3}});
  check_grad("split",
             [](auto& t) {
               auto p = t[0].split({1, 3}, -1);
               return p[1].sum({1}, true) * p[0];
             },
             {{2, 4}});
  check_grad("chunk",
             [](auto& t) {
               auto p = t[0].chunk(2, 0);
               return p[0] * p[1];
             },
             {{4, 2}});
  check_grad("repeat", [](auto& t) { return t[0].repeat({2, 1, 3}); }, {{2, 2}});
  check_grad("roll", [](auto& t) { return t[0].roll(2, 1); }, {{2, 3}});
  check_grad("gather",
             [](auto& t) {
               return t[0].gather(1, Tensor::from_data({2, 0, 0, 1, 1, 1}, {2, 3}, dtypes::kInt32));
             },
             {{2, 4}});
}

}  // namespace
}  // namespace baregrad::tensor
