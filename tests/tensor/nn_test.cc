// nn layers against float64 host references and finite differences, and named state through
// safetensors (nn_state.h).
#include "tensor/nn.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "tensor/nn_state.h"
#include "tensor/optim.h"
#include "tensor/state.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {

using namespace test_util;  // NOLINT(google-build-using-namespace)

Tensor f64(const Vec& v, Shape s) { return Tensor::from_data(v, std::move(s), kF64); }

// x normalised within groups (group[i] is element i's group), the variance biased; with `rms`
// only divided by sqrt(mean(x^2) + eps). Writes each group's mean and variance when asked.
Vec normalize_ref(const Vec& x,
                  const std::vector<int64_t>& group,
                  double eps,
                  bool rms = false,
                  Vec* means = nullptr,
                  Vec* vars = nullptr) {
  int64_t g = *std::max_element(group.begin(), group.end()) + 1;
  Vec sum(g, 0), sq(g, 0), cnt(g, 0), out(x.size());
  for (size_t i = 0; i < x.size(); i++) sum[group[i]] += rms ? 0 : x[i], cnt[group[i]] += 1;
  for (int64_t j = 0; j < g; j++) sum[j] /= cnt[j];
  for (size_t i = 0; i < x.size(); i++) sq[group[i]] += std::pow(x[i] - sum[group[i]], 2);
  for (int64_t j = 0; j < g; j++) sq[j] /= cnt[j];
  for (size_t i = 0; i < x.size(); i++)
    out[i] = (x[i] - sum[group[i]]) / std::sqrt(sq[group[i]] + eps);
  if (means) *means = sum;
  if (vars) *vars = sq;
  return out;
}

// Index of the channel (axis 1) of each element of an (n, c, s...) tensor of `size` elements.
std::vector<int64_t> channel_of(size_t size, int64_t c, int64_t s) {
  std::vector<int64_t> g(size);
  for (size_t i = 0; i < size; i++) g[i] = (i / s) % c;
  return g;
}

// y[i] = x[i] * w[ch[i]] + b[ch[i]].
Vec affine_ref(Vec x, const std::vector<int64_t>& ch, const Vec& w, const Vec& b) {
  for (size_t i = 0; i < x.size(); i++) x[i] = x[i] * w[ch[i]] + (b.empty() ? 0 : b[ch[i]]);
  return x;
}

TEST(NnNorm, BatchNormTrainEvalAndRunningStats) {
  nn::BatchNorm2d bn(2);
  Vec w = rnd(2, 1), b = rnd(2, 2), x1 = rnd(24, 3), x2 = rnd(24, 4);
  bn.weight = f64(w, {2});
  bn.bias = f64(b, {2});
  auto ch = channel_of(24, 2, 4);
  Vec m1, v1, m2, v2;
  Vec want = affine_ref(normalize_ref(x1, ch, 1e-5, false, &m1, &v1), ch, w, b);
  expect_near(bn(f64(x1, {3, 2, 2, 2})).to_vector(), want, 1e-12, 1e-12);
  normalize_ref(x2, ch, 1e-5, false, &m2, &v2);
  (void)bn(f64(x2, {3, 2, 2, 2}));
  // Two momentum-0.1 steps from (0, 1); the running variance is unbiased (n = 12 per channel).
  Vec rm(2), rv(2);
  for (int c = 0; c < 2; c++) {
    rm[c] = 0.9 * (0.1 * m1[c]) + 0.1 * m2[c];
    rv[c] = 0.9 * (0.9 + 0.1 * v1[c] * 12 / 11) + 0.1 * v2[c] * 12 / 11;
  }
  EXPECT_EQ(bn.running_mean.dtype(), dtypes::kFloat32);
  expect_near(bn.running_mean.to_vector(), rm, 1e-6, 1e-6);
  expect_near(bn.running_var.to_vector(), rv, 1e-6, 1e-6);
  EXPECT_EQ(bn.num_batches_tracked.to_vector(), Vec{2});
  bn.training = false;
  Vec erm = bn.running_mean.to_vector(), erv = bn.running_var.to_vector(), ev(24);
  for (size_t i = 0; i < 24; i++)
    ev[i] = (x1[i] - erm[ch[i]]) / std::sqrt(erv[ch[i]] + 1e-5) * w[ch[i]] + b[ch[i]];
  // NOTE: running_var + eps and its rsqrt are computed in the stats' float32, as tinygrad.
  expect_near(bn(f64(x1, {3, 2, 2, 2})).to_vector(), ev, 1e-6, 1e-6);
  EXPECT_EQ(bn.num_batches_tracked.to_vector(), Vec{2});  // eval leaves the stats alone
  // 1-D: (N, C) and (N, C, L), weight 1 and bias 0 by default.
  nn::BatchNorm1d bn1(3);
  Vec y = rnd(12, 5);
  expect_near(bn1(f64(y, {4, 3})).to_vector(), normalize_ref(y, channel_of(12, 3, 1), 1e-5), 1e-6);
  expect_near(bn1(f64(y, {2, 3, 2})).to_vector(), normalize_ref(y, channel_of(12, 3, 2), 1e-5),
              1e-6);
}

TEST(NnNorm, LayerRmsAndGroupNormMatchReference) {
  Vec x = rnd(24, 1), w = rnd(12, 2), b = rnd(12, 3);
  nn::LayerNorm ln(Shape{3, 4});
  ln.weight = f64(w, {3, 4});
  ln.bias = f64(b, {3, 4});
  std::vector<int64_t> row(24), col(24);
  for (size_t i = 0; i < 24; i++) row[i] = i / 12, col[i] = i % 12;
  expect_near(ln(f64(x, {2, 3, 4})).to_vector(), affine_ref(normalize_ref(x, row, 1e-5), col, w, b),
              1e-12, 1e-12);
  nn::LayerNorm plain(4, 1e-3, false);
  EXPECT_TRUE(plain.parameters().empty());
  for (size_t i = 0; i < 24; i++) row[i] = i / 4;
  expect_near(plain(f64(x, {6, 4})).to_vector(), normalize_ref(x, row, 1e-3), 1e-12, 1e-12);

  nn::RMSNorm rms(4);
  rms.weight = f64({0.5, -1, 2, 1.5}, {4});
  for (size_t i = 0; i < 24; i++) col[i] = i % 4;
  expect_near(rms(f64(x, {2, 3, 4})).to_vector(),
              affine_ref(normalize_ref(x, row, 1e-6, true), col, {0.5, -1, 2, 1.5}, {}), 1e-12,
              1e-12);

  nn::GroupNorm gn(2, 4);
  gn.weight = f64(rnd(4, 4), {4});
  gn.bias = f64(rnd(4, 5), {4});
  std::vector<int64_t> grp(24);
  for (size_t i = 0; i < 24; i++) grp[i] = i / 6;  // (2, 4, 3): 2 channels * 3 per group
  expect_near(gn(f64(x, {2, 4, 3})).to_vector(),
              affine_ref(normalize_ref(x, grp, 1e-5), channel_of(24, 4, 3), rnd(4, 4), rnd(4, 5)),
              1e-12, 1e-12);
}

TEST(NnLayers, EmbeddingPicksRowsAndZeroForOutOfRange) {
  Tensor::manual_seed(3);
  nn::Embedding e(5, 3);
  Vec w = e.weight.to_vector();
  double bound = std::sqrt(6.0 / 8);
  for (double v : w) EXPECT_LE(std::fabs(v), bound);
  Tensor idx = Tensor::from_data({4, 0, 2, 2, 5, 1}, {2, 3}, dtypes::kInt32);
  Tensor y = e(idx);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 3}));
  Vec want;
  for (int i : {4, 0, 2, 2, -1, 1})
    for (int j = 0; j < 3; j++) want.push_back(i < 0 ? 0 : w[i * 3 + j]);
  expect_near(y.to_vector(), want, 0, 0);
}

// Direct loops: conv1d (n, c, l) * (o, c/g, k) and conv_transpose2d (n, c, h, w) * (c, o/g, k, k).
struct Conv {
  int64_t n, c, h, w, o, k, s, p, op, d, g;
};

Vec conv1d_ref(const Conv& q, const Vec& x, const Vec& w, const Vec& b, int64_t* ol) {
  int64_t cg = q.c / q.g, og = q.o / q.g;
  *ol = (q.w + 2 * q.p - q.d * (q.k - 1) - 1) / q.s + 1;
  Vec out(q.n * q.o * *ol);
  for (int64_t n = 0; n < q.n; n++)
    for (int64_t o = 0; o < q.o; o++)
      for (int64_t z = 0; z < *ol; z++) {
        double acc = b[o];
        for (int64_t ci = 0; ci < cg; ci++)
          for (int64_t j = 0; j < q.k; j++) {
            int64_t zz = z * q.s + j * q.d - q.p;
            if (zz >= 0 && zz < q.w)
              acc += x[(n * q.c + o / og * cg + ci) * q.w + zz] * w[(o * cg + ci) * q.k + j];
          }
        out[(n * q.o + o) * *ol + z] = acc;
      }
  return out;
}

Vec conv_t_ref(const Conv& q, const Vec& x, const Vec& w, const Vec& b, int64_t* oh, int64_t* ow) {
  int64_t cg = q.c / q.g, og = q.o / q.g;
  *oh = (q.h - 1) * q.s - 2 * q.p + q.d * (q.k - 1) + q.op + 1;
  *ow = (q.w - 1) * q.s - 2 * q.p + q.d * (q.k - 1) + q.op + 1;
  Vec out(q.n * q.o * *oh * *ow);
  for (int64_t n = 0; n < q.n; n++)
    for (int64_t o = 0; o < q.o; o++)
      for (int64_t i = 0; i < *oh * *ow; i++) out[(n * q.o + o) * *oh * *ow + i] = b[o];
  for (int64_t n = 0; n < q.n; n++)
    for (int64_t c = 0; c < q.c; c++)
      for (int64_t i = 0; i < q.h; i++)
        for (int64_t j = 0; j < q.w; j++)
          for (int64_t oo = 0; oo < og; oo++)
            for (int64_t ki = 0; ki < q.k; ki++)
              for (int64_t kj = 0; kj < q.k; kj++) {
                int64_t y = i * q.s - q.p + ki * q.d, z = j * q.s - q.p + kj * q.d;
                if (y < 0 || y >= *oh || z < 0 || z >= *ow) continue;
                int64_t o = c / cg * og + oo;
                out[((n * q.o + o) * *oh + y) * *ow + z] +=
                    x[((n * q.c + c) * q.h + i) * q.w + j] *
                    w[((c * og + oo) * q.k + ki) * q.k + kj];
              }
  return out;
}

TEST(NnLayers, Conv1dMatchesDirectLoops) {
  for (Conv q : {Conv{2, 3, 1, 7, 4, 3, 1, 1, 0, 1, 1}, Conv{1, 4, 1, 9, 6, 3, 2, 2, 0, 2, 2}}) {
    nn::Conv1d conv(q.c, q.o, q.k, q.s, q.p, q.d, q.g);
    ASSERT_EQ(conv.weight.shape(), (Shape{q.o, q.c / q.g, q.k}));
    Vec x = rnd(q.n * q.c * q.w, 1), w = conv.weight.to_vector(), b = conv.bias->to_vector();
    int64_t ol;
    Vec want = conv1d_ref(q, x, w, b, &ol);
    Tensor y = conv(f64(x, {q.n, q.c, q.w}));
    ASSERT_EQ(y.shape(), (Shape{q.n, q.o, ol}));
    expect_near(y.to_vector(), want, 1e-6);
  }
}

TEST(NnLayers, ConvTranspose2dMatchesDirectLoops) {
  // stride 2 padding 1 output_padding 1; with groups; dilation; padding past the kernel (crop).
  for (Conv q : {Conv{2, 3, 3, 4, 2, 3, 2, 1, 1, 1, 1}, Conv{1, 4, 3, 3, 6, 3, 2, 1, 1, 1, 2},
                 Conv{1, 2, 4, 3, 2, 2, 1, 0, 1, 2, 1}, Conv{1, 2, 4, 4, 4, 2, 3, 2, 2, 1, 2}}) {
    SCOPED_TRACE("s" + std::to_string(q.s) + " p" + std::to_string(q.p) + " op" +
                 std::to_string(q.op) + " d" + std::to_string(q.d) + " g" + std::to_string(q.g));
    Vec x = rnd(q.n * q.c * q.h * q.w, 1), w = rnd(q.c * q.o / q.g * q.k * q.k, 2), b = rnd(q.o, 3);
    int64_t oh, ow;
    Vec want = conv_t_ref(q, x, w, b, &oh, &ow);
    nn::ConvTranspose2d layer(q.c, q.o, q.k, q.s, q.p, q.op, q.d, q.g);
    ASSERT_EQ(layer.weight.shape(), (Shape{q.c, q.o / q.g, q.k, q.k}));
    layer.weight = f64(w, {q.c, q.o / q.g, q.k, q.k});
    layer.bias = f64(b, {q.o});
    Tensor y = layer(f64(x, {q.n, q.c, q.h, q.w}));
    ASSERT_EQ(y.shape(), (Shape{q.n, q.o, oh, ow}));
    expect_near(y.to_vector(), want, 1e-12, 1e-12);
  }
}

TEST(NnLayers, GradientsMatchFiniteDifferences) {
  nn::BatchNorm bn(2);
  check_grad("batchnorm train",
             [&](auto& t) {
               bn.weight = t[1];
               bn.bias = t[2];
               bn.training = true;
               return bn(t[0]);
             },
             {{3, 2, 2}, {2}, {2}});
  check_grad("batchnorm eval",
             [&](auto& t) {
               bn.weight = t[1];
               bn.bias = t[2];
               bn.training = false;
               return bn(t[0]);
             },
             {{2, 2, 2}, {2}, {2}});
  nn::LayerNorm ln(3);
  check_grad("layernorm",
             [&](auto& t) {
               ln.weight = t[1];
               ln.bias = t[2];
               return ln(t[0]);
             },
             {{2, 3}, {3}, {3}});
  nn::RMSNorm rms(3);
  check_grad("rmsnorm",
             [&](auto& t) {
               rms.weight = t[1];
               return rms(t[0]);
             },
             {{2, 3}, {3}});
  nn::GroupNorm gn(2, 4);
  check_grad("groupnorm",
             [&](auto& t) {
               gn.weight = t[1];
               gn.bias = t[2];
               return gn(t[0]);
             },
             {{1, 4, 2}, {4}, {4}});
  nn::Embedding emb(4, 2);
  Tensor idx = Tensor::from_data({3, 0, 3}, {3}, dtypes::kInt32);
  check_grad("embedding",
             [&](auto& t) {
               emb.weight = t[0];
               return emb(idx);
             },
             {{4, 2}});
  nn::Conv1d c1(2, 2, 2, 2, 1, 1, 2);
  check_grad("conv1d",
             [&](auto& t) {
               c1.weight = t[1];
               c1.bias = t[2];
               return c1(t[0]);
             },
             {{1, 2, 4}, {2, 1, 2}, {2}});
  nn::ConvTranspose2d ct(2, 2, 2, 2, 1, 1, 1, 2);
  check_grad("conv_transpose2d",
             [&](auto& t) {
               ct.weight = t[1];
               ct.bias = t[2];
               return ct(t[0]);
             },
             {{1, 2, 2, 2}, {2, 1, 2, 2}, {2}});
}

TEST(NnLayers, Misuse) {
  Tensor x = Tensor::zeros({1, 2, 3, 3});
  expect_error([&] { (void)nn::conv_transpose2d(x, Tensor::zeros({2, 1, 2, 2}), {}, 2, 0, 2); },
               "[conv_transpose2d] stride 2, padding 0, output_padding 2");
  expect_error([&] { (void)nn::conv_transpose2d(x, Tensor::zeros({3, 1, 2, 2})); },
               "channels do not match");
  expect_error([&] { (void)nn::Embedding(3, 2)(Tensor::zeros({2})); }, "must be integers");
  expect_error([&] { (void)nn::LayerNorm(4)(x); }, "[LayerNorm] input of shape (1, 2, 3, 3)");
  expect_error([&] { (void)nn::BatchNorm(3)(x); }, "[BatchNorm] input of shape (1, 2, 3, 3)");
  expect_error([&] { (void)nn::BatchNorm(2)(Tensor::zeros({1, 2})); }, "more than one value");
  expect_error([&] { nn::GroupNorm(3, 4); }, "[GroupNorm] 4 channels cannot be split");
  expect_error([&] { nn::Conv1d(3, 4, 2, 1, 0, 1, 2); }, "[Conv1d] 3 -> 4 channels");
}

// A model with every layer kind; forward() in eval mode mixes them all.
struct Net {
  nn::Embedding emb{5, 4};
  nn::Conv1d c1{4, 4, 3, 1, 1};
  nn::LayerNorm ln{4};
  nn::RMSNorm rms{4};
  nn::Linear fc{4, 3};
  nn::Conv2d c2{3, 4, 3, 1, 1};
  nn::BatchNorm bn{4};
  nn::GroupNorm gn{2, 4};
  nn::ConvTranspose2d up{4, 2, 3, 2, 1, 1};

  nn::StateDict state() const {
    nn::StateDict sd;
    sd.add("emb", emb).add("c1", c1).add("ln", ln).add("rms", rms).add("fc", fc);
    return sd.add("c2", c2).add("bn", bn).add("gn", gn).add("up", up);
  }
  Tensor operator()(const Tensor& idx, const Tensor& img) {
    Tensor h = c1(emb(idx).permute({0, 2, 1})).permute({0, 2, 1});
    Tensor a = fc(rms(ln(h)));
    return Tensor::cat({a.flatten(), up(gn(bn(c2(img)))).flatten()});
  }
};

class NnStateTest : public ::testing::Test {
 protected:
  std::string path() const {
    return std::filesystem::path(::testing::TempDir()) /
           ("nn_test_" + std::to_string(::getpid()) + ".safetensors");
  }
  void TearDown() override { std::filesystem::remove(path()); }
};

TEST_F(NnStateTest, RoundTripThroughSafetensorsGivesIdenticalOutputs) {
  Tensor::manual_seed(1);
  Net a;
  Tensor idx = Tensor::from_data({1, 4, 0, 2, 3, 3}, {2, 3}, dtypes::kInt32);
  Tensor img = Tensor::randn({2, 3, 3, 3});
  nn::StateDict sd = a.state();
  std::vector<Tensor> params = nn::get_parameters(sd);
  EXPECT_EQ(params.size(), 16u);  // 19 entries less bn's running_mean, running_var, count
  SGD opt(params, 0.1);  // one step moves every parameter (and bn's statistics) off its init
  a(idx, img).square().sum().backward();
  opt.step();
  a.bn.training = false;
  Vec want = a(idx, img).to_vector();

  auto state = nn::get_state_dict(sd);
  EXPECT_EQ(state.size(), 19u);
  for (const char* k :
       {"emb.weight", "c1.bias", "ln.weight", "rms.weight", "fc.weight", "bn.running_mean",
        "bn.running_var", "bn.num_batches_tracked", "gn.bias", "up.weight", "up.bias"})
    EXPECT_EQ(state.count(k), 1u) << k;
  safe_save(state, path());
  Tensor::manual_seed(2);
  Net b;
  b.bn.training = false;
  EXPECT_NE(b(idx, img).to_vector(), want);
  nn::load_state_dict(b.state(), safe_load(path()));
  EXPECT_EQ(b(idx, img).to_vector(), want);
  EXPECT_EQ(b.bn.num_batches_tracked.to_vector(), Vec{1});
  EXPECT_EQ(b.bn.running_var.to_vector(), a.bn.running_var.to_vector());
}

TEST(NnState, StrictLoadListsEveryProblemAndAssignsNothing) {
  nn::Linear lin(3, 2);
  nn::BatchNorm bn(2);
  nn::StateDict sd;
  sd.add("lin", lin).add("bn", bn);
  auto m = nn::get_state_dict(sd);
  m.erase("lin.bias");
  m.erase("bn.running_var");
  m.insert_or_assign("bn.weight", Tensor::full({2}, 5));
  m.insert_or_assign("lin.weight", Tensor::zeros({2, 4}));
  m.insert_or_assign("extra", Tensor::zeros({1}));
  m.insert_or_assign("zz.w", Tensor::zeros({1}));
  expect_error([&] { nn::load_state_dict(sd, m); },
               "[load_state_dict] missing keys: lin.bias, bn.running_var; unexpected keys: "
               "extra, zz.w; shape mismatches: lin.weight (checkpoint (2, 4), model (2, 3))");
  EXPECT_EQ(bn.weight->to_vector(), (Vec{1, 1}));
  // Non-strict skips missing and extra keys, but a mismatch still throws.
  expect_error([&] { nn::load_state_dict(sd, m, false); },
               "[load_state_dict] shape mismatches: lin.weight");
  m.insert_or_assign("bn.bias", Tensor::zeros({2}, kF64));
  m.insert_or_assign("lin.weight", Tensor::zeros({2, 3}));
  expect_error([&] { nn::load_state_dict(sd, m, false); },
               "dtype mismatches: bn.bias (checkpoint float64, model float32)");
  m.erase("bn.bias");
  nn::load_state_dict(sd, m, false);
  EXPECT_EQ(bn.weight->to_vector(), (Vec{5, 5}));
  EXPECT_EQ(lin.weight.to_vector(), Vec(6, 0));
  expect_error([&] { sd.add("lin", lin); }, "[StateDict] duplicate name \"lin.weight\"");
}

}  // namespace
}  // namespace baregrad::tensor
