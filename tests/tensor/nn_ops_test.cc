// The ops of tensor_nn.cc (losses, dropout, attention, einsum) against float64 host references,
// their gradients against central finite differences, and the errors of the composed ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

// Host einsum over explicit labels (no "..."): loops over every assignment of every label.
Vec einsum_ref(const std::vector<std::string>& terms,
               const std::string& out,
               const std::vector<Vec>& data,
               const std::vector<Shape>& shapes) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); i++)
    for (size_t d = 0; d < terms[i].size(); d++) size[terms[i][d]] = shapes[i][d];
  std::vector<char> letters;
  Shape dims;
  for (auto [c, n] : size) letters.push_back(c), dims.push_back(n);
  Shape out_shape;
  for (char c : out) out_shape.push_back(size[c]);
  Vec r(count(out_shape), 0.0);
  for (int64_t flat = 0; flat < count(dims); flat++) {
    std::map<char, int64_t> at;
    for (int64_t k = static_cast<int64_t>(letters.size()) - 1, f = flat; k >= 0; k--)
      at[letters[k]] = f % dims[k], f /= dims[k];
    double p = 1;
    for (size_t i = 0; i < terms.size(); i++) {
      Shape st = strides(shapes[i]);
      int64_t off = 0;
      for (size_t d = 0; d < terms[i].size(); d++) off += at[terms[i][d]] * st[d];
      p *= data[i][off];
    }
    Shape ost = strides(out_shape);
    int64_t off = 0;
    for (size_t d = 0; d < out.size(); d++) off += at[out[d]] * ost[d];
    r[off] += p;
  }
  return r;
}

TEST(ExtraOps, EinsumMatchesReference) {
  struct Case {
    std::string formula, out;  // out: the output labels for the reference
    std::vector<std::string> terms;
    std::vector<Shape> shapes;
  };
  std::vector<Case> cases = {
      {"ij,jk->ik", "ik", {"ij", "jk"}, {{3, 4}, {4, 5}}},
      {"ij,jk", "ik", {"ij", "jk"}, {{3, 4}, {4, 2}}},
      {"bij,bjk->bik", "bik", {"bij", "bjk"}, {{2, 3, 4}, {2, 4, 2}}},
      {"ij->ji", "ji", {"ij"}, {{3, 4}}},
      {"ji", "ij", {"ji"}, {{3, 4}}},  // implicit output: sorted, so a transpose
      {"i,i->", "", {"i", "i"}, {{5}, {5}}},
      {"i,i", "", {"i", "i"}, {{5}, {5}}},
      {"ij->", "", {"ij"}, {{3, 4}}},
      {"ij->j", "j", {"ij"}, {{3, 4}}},
      {"i,j->ij", "ij", {"i", "j"}, {{3}, {4}}},
      {"bhqd,bhkd->bhqk", "bhqk", {"bhqd", "bhkd"}, {{2, 2, 3, 4}, {2, 2, 5, 4}}},
      {"ab,bc,cd->da", "da", {"ab", "bc", "cd"}, {{2, 3}, {3, 2}, {2, 4}}},
      {" ik , kj -> ij ", "ij", {"ik", "kj"}, {{2, 3}, {3, 2}}},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.formula);
    std::vector<Vec> data;
    std::vector<Tensor> ts;
    for (size_t i = 0; i < c.shapes.size(); i++) {
      data.push_back(rnd(count(c.shapes[i]), 20 + i));
      ts.push_back(Tensor::from_data(data.back(), c.shapes[i], kF64));
    }
    expect_near(Tensor::einsum(c.formula, ts).to_vector(),
                einsum_ref(c.terms, c.out, data, c.shapes), 1e-12, 1e-12);
  }
  // "...": batch dims broadcast, right-aligned; implicit output puts them first. Size 1 too.
  Vec a = rnd(2 * 3 * 4, 30), b = rnd(4 * 2, 31);
  Tensor ta = Tensor::from_data(a, {2, 3, 4}, kF64), tb = Tensor::from_data(b, {1, 4, 2}, kF64);
  Vec want = ta.matmul(tb).to_vector();
  expect_near(Tensor::einsum("...ij,...jk->...ik", {ta, tb}).to_vector(), want);
  expect_near(Tensor::einsum("...ij,...jk", {ta, tb}).to_vector(), want);
  EXPECT_EQ(Tensor::einsum("...ij,...jk", {ta, tb}).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(Tensor::einsum("i...->...i", {ta}).shape(), (Shape{3, 4, 2}));
  Tensor row = ta.index({0}), one = Tensor::full({1}, b[6], kF64);
  expect_near(Tensor::einsum("ij,j->i", {row, one}).to_vector(), (row * b[6]).sum({1}).to_vector());
}

TEST(ExtraOps, DropoutAndMaskedFill) {
  const int64_t n = 20000;
  Vec x = rnd(n, 40, 1, 2);
  Tensor t = Tensor::from_data(x, {n / 4, 4});
  Tensor::manual_seed(5);
  Vec d = t.dropout(0.25).to_vector();
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; i++) {
    dropped += d[i] == 0;
    if (d[i] != 0) {
      ASSERT_NEAR(d[i], x[i] / 0.75, 1e-6) << i;
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.25, 0.015);
  Tensor::manual_seed(5);
  EXPECT_EQ(t.dropout(0.25).to_vector(), d);  // seeded
  EXPECT_EQ(t.dropout(0.25, false).to_vector(), x);
  EXPECT_EQ(t.dropout(0).to_vector(), x);
  EXPECT_EQ(t.dropout(1).to_vector(), Vec(n, 0));
  Tensor m = Tensor::from_data({1, 0, 1}, {3}, dtypes::kBool);
  Tensor v = Tensor::from_data({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(v.masked_fill(m, -1).to_vector(), (Vec{-1, 2, -1, -1, 5, -1}));
  Tensor i = Tensor::from_data({1, 2, 3, 4}, {2, 2}, dtypes::kInt32);
  Tensor fi = i.masked_fill(Tensor::from_data({0, 1}, {2, 1}, dtypes::kInt32), 9);
  EXPECT_EQ(fi.dtype(), dtypes::kInt32);
  EXPECT_EQ(fi.to_vector(), (Vec{1, 2, 9, 9}));
}

TEST(ExtraOps, LossesMatchReference) {
  Vec p = rnd(12, 45, 0.02, 0.98), y = rnd(12, 46, 0, 1), z = rnd(12, 47, -30, 30);
  z[0] = 200, z[1] = -200;  // saturated logits stay finite
  double bce = 0, bcel = 0, mse = 0;
  for (int i = 0; i < 12; i++) {
    bce -= (y[i] * std::log(p[i]) + (1 - y[i]) * std::log(1 - p[i])) / 12;
    bcel += (std::max(z[i], 0.0) - z[i] * y[i] + std::log1p(std::exp(-std::fabs(z[i])))) / 12;
    mse += (p[i] - y[i]) * (p[i] - y[i]) / 12;
  }
  Tensor tp = Tensor::from_data(p, {3, 4}, kF64), ty = Tensor::from_data(y, {3, 4}, kF64);
  expect_near(tp.binary_cross_entropy(ty).to_vector(), {bce}, 1e-12, 1e-12);
  expect_near(Tensor::from_data(z, {3, 4}, kF64).binary_cross_entropy_with_logits(ty).to_vector(),
              {bcel}, 1e-12, 1e-12);
  expect_near(tp.mse(ty).to_vector(), {mse}, 1e-12, 1e-12);
  EXPECT_EQ(tp.mse(ty).shape(), Shape{});
  // Certain predictions: log(0) clamps at -100 (torch), 0 * log(0) is 0, not NaN.
  Tensor certain = Tensor::from_data({0, 1}, {2});
  expect_near(certain.binary_cross_entropy(Tensor::from_data({0, 1}, {2})).to_vector(), {0});
  expect_near(certain.binary_cross_entropy(Tensor::from_data({1, 1}, {2})).to_vector(), {50});
  Tensor bools = Tensor::from_data({1, 1}, {2}, dtypes::kBool);
  expect_near(certain.binary_cross_entropy(bools).to_vector(), {50});
  expect_near(certain.binary_cross_entropy_with_logits(bools).to_vector(),
              {(std::log(2.0) + std::log1p(std::exp(-1.0))) / 2});
  expect_near(tp.mse(Tensor::full({4}, 0.5, kF64)).to_vector(), {[&] {
                double r = 0;
                for (double v : p) r += (v - 0.5) * (v - 0.5) / 12;
                return r;
              }()});
}

// Host attention for one (L, d) x (S, d) x (S, dv) head; mask(i, j) is added to the logits.
Vec attention_ref(const Vec& q,
                  const Vec& k,
                  const Vec& v,
                  int64_t l,
                  int64_t s,
                  int64_t d,
                  int64_t dv,
                  const std::function<double(int64_t, int64_t)>& mask) {
  Vec out(l * dv, 0.0);
  for (int64_t i = 0; i < l; i++) {
    Vec w(s);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < s; j++) {
      double dot = 0;
      for (int64_t c = 0; c < d; c++) dot += q[i * d + c] * k[j * d + c];
      w[j] = dot / std::sqrt(static_cast<double>(d)) + mask(i, j);
      mx = std::max(mx, w[j]);
    }
    for (double& e : w) sum += (e = std::exp(e - mx));
    for (int64_t j = 0; j < s; j++)
      for (int64_t c = 0; c < dv; c++) out[i * dv + c] += w[j] / sum * v[j * dv + c];
  }
  return out;
}

TEST(ExtraOps, AttentionMatchesReference) {
  const int64_t l = 4, s = 5, d = 3, dv = 2;
  Vec q = rnd(2 * l * d, 48), k = rnd(2 * s * d, 49), v = rnd(2 * s * dv, 50);
  Vec fm = rnd(l * s, 51, -1, 1), bm(l * s);
  for (int64_t i = 0; i < l * s; i++) bm[i] = (i * 5 + 1) % 3 != 0 || i % s == 0;
  Tensor tq = Tensor::from_data(q, {2, l, d}, kF64), tk = Tensor::from_data(k, {2, s, d}, kF64);
  Tensor tv = Tensor::from_data(v, {2, s, dv}, kF64);
  auto none = [](int64_t, int64_t) { return 0.0; };
  auto causal = [](int64_t i, int64_t j) { return j > i ? -INFINITY : 0.0; };
  auto flt = [&](int64_t i, int64_t j) { return fm[i * s + j]; };
  auto boo = [&](int64_t i, int64_t j) { return bm[i * s + j] ? 0.0 : -INFINITY; };
  std::vector<std::tuple<const char*, Tensor, std::function<double(int64_t, int64_t)>>> cases = {
      {"plain", tq.scaled_dot_product_attention(tk, tv), none},
      {"causal", tq.scaled_dot_product_attention(tk, tv, std::nullopt, true), causal},
      {"float mask", tq.scaled_dot_product_attention(tk, tv, Tensor::from_data(fm, {l, s}, kF64)),
       flt},
      {"bool mask",
       tq.scaled_dot_product_attention(tk, tv, Tensor::from_data(bm, {l, s}, dtypes::kBool)), boo},
  };
  for (auto& [name, y, mask] : cases) {
    SCOPED_TRACE(name);
    EXPECT_EQ(y.shape(), (Shape{2, l, dv}));
    Vec got = y.to_vector(), want;
    for (int64_t b = 0; b < 2; b++) {
      Vec part = attention_ref(Vec(q.begin() + b * l * d, q.begin() + (b + 1) * l * d),
                               Vec(k.begin() + b * s * d, k.begin() + (b + 1) * s * d),
                               Vec(v.begin() + b * s * dv, v.begin() + (b + 1) * s * dv), l, s, d,
                               dv, mask);
      want.insert(want.end(), part.begin(), part.end());
    }
    expect_near(got, want, 1e-12, 1e-12);
  }
}

TEST(ExtraOps, BadInputGivesClearErrors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  Tensor i32 = Tensor::zeros({2, 3}, dtypes::kInt32);
  expect_error([] { (void)Tensor::eye(-1); }, "[eye] negative size -1");
  expect_error([] { (void)Tensor::linspace(0, 1, -2); }, "[linspace] steps -2 is negative");
  expect_error([] { (void)Tensor::linspace(0, 1, 2, dtypes::kBool); }, "[linspace] bool dtype");
  expect_error([&] { (void)Tensor::rand_like(i32); }, "[rand_like] needs a float tensor, got int");
  expect_error([] { (void)Tensor::randint({2}, 0, 2, dtypes::kFloat32); },
               "[randint] dtype must be an integer, got float");
  expect_error([] { (void)Tensor::randint({2}, 3, 3); }, "[randint] empty range [3, 3)");
  expect_error([] { (void)Tensor::normal({2}, 0, 1, dtypes::kInt32); },
               "[normal] dtype must be a float, got int");
  expect_error([&] { (void)a.dropout(1.5); }, "[dropout] p = 1.5");
  expect_error([&] { (void)a.masked_fill(b, 1); },
               "[masked_fill] cannot broadcast (2, 3) and (4,)");
  expect_error([&] { (void)a.scatter(2, i32, a); }, "[scatter] axis 2 out of range");
  expect_error([&] { (void)a.scatter(0, a, a); }, "[scatter] index must be an integer tensor");
  expect_error([&] { (void)a.scatter(0, i32, i32); },
               "[scatter] src dtype int32 differs from float32");
  expect_error([&] { (void)a.scatter(0, Tensor::zeros({3, 3}, dtypes::kInt32), a); },
               "[scatter] index (3, 3), src (2, 3) into (2, 3): index exceeds dim 0");
  expect_error([&] { (void)a.scatter(1, Tensor::zeros({3}, dtypes::kInt32), a); }, "ndims differ");
  expect_error([&] { (void)a.cumprod(-3); }, "[cumprod] axis -3 out of range for shape (2, 3)");
  expect_error([&] { (void)a.flatten(1, 0); }, "[flatten] start 1 after end 0 for (2, 3)");
  expect_error([&] { (void)a.flatten(2); }, "[flatten] axis 2 out of range");
  expect_error([&] { (void)a.unflatten(1, {2, 2}); },
               "[unflatten] sizes (2, 2) do not split axis 1 of (2, 3)");
  expect_error([&] { (void)a.pad_mode({{1, 1}, {1, 1}}, "wrap"); },
               "[pad_mode] unknown mode 'wrap'");
  expect_error([&] { (void)a.pad_mode({{1, 1}}, "reflect"); },
               "[pad_mode] 1 (before, after) pairs for shape (2, 3)");
  expect_error([&] { (void)a.pad_mode({{2, 0}, {0, 0}}, "reflect"); },
               "padding (2, 0) of dim 0 (size 2) in mode reflect: needs padding < size");
  expect_error([&] { (void)a.pad_mode({{0, 0}, {0, 4}}, "circular"); }, "wraps around");
  expect_error([&] { (void)a.pad_mode({{-3, 0}, {0, 0}}, "constant"); },
               "[pad_mode] negative padding crops more than dim 0 of (2, 3)");
  expect_error([&] { (void)a.binary_cross_entropy(b); }, "[binary_cross_entropy] cannot broadcast");
  expect_error([&] { (void)a.binary_cross_entropy_with_logits(b); },
               "[binary_cross_entropy_with_logits] cannot broadcast (2, 3) and (4,)");
  expect_error([&] { (void)a.mse(b); }, "[mse] cannot broadcast (2, 3) and (4,)");
  const char* sdpa = "[scaled_dot_product_attention] query (2, 3), key (4,), value (2, 3)";
  expect_error([&] { (void)a.scaled_dot_product_attention(b, a); }, sdpa);
  expect_error([&] { (void)a.scaled_dot_product_attention(Tensor::zeros({2, 4}), a); },
               "query and key dims differ");
  expect_error([&] { (void)a.scaled_dot_product_attention(a, Tensor::zeros({3, 3})); },
               "key and value lengths differ");
  expect_error([&] { (void)a.scaled_dot_product_attention(a, a, Tensor::zeros({2, 2}), true); },
               "attn_mask given with is_causal");
  expect_error([&] { (void)a.scaled_dot_product_attention(a, a, Tensor::zeros({3, 2})); },
               "[scaled_dot_product_attention] cannot broadcast (2, 2) and (3, 2)");
  expect_error([&] { (void)Tensor::einsum("ii->i", {Tensor::zeros({3, 3})}); },
               "[einsum] repeated index 'i' in term 'ii' (diagonals are not supported)");
  expect_error([&] { (void)Tensor::einsum("ij,jk->ik", {a}); },
               "[einsum] 'ij,jk->ik' has 2 terms for 1 operands");
  expect_error([&] { (void)Tensor::einsum("ij,jk->ik", {a, a}); },
               "[einsum] index 'j' has sizes 3 and 2 (operand 1 of shape (2, 3))");
  expect_error([&] { (void)Tensor::einsum("ijk->i", {a}); },
               "[einsum] term 'ijk' does not fit operand 0 of shape (2, 3)");
  expect_error([&] { (void)Tensor::einsum("ij->iz", {a}); }, "output index 'z' is unknown");
  expect_error([&] { (void)Tensor::einsum("i1->i", {b}); }, "[einsum] bad character '1'");
  expect_error([&] { (void)a.slice(0, 0, 1, 0); }, "[slice] step is 0");
  expect_error([&] { (void)a.slice(-3, 0, 1); }, "[slice] axis -3 out of range");
  expect_error([&] { (void)a.index({0, 3}); },
               "[index] index 3 is out of bounds for dim 1 of (2, 3)");
  expect_error([&] { (void)a.index({0, 0, 0}); }, "[index] 3 indices for shape (2, 3)");
}

TEST(ExtraGrad, ComposedOpsMatchFiniteDifferences) {
  Tensor mask = Tensor::from_data({1, 0, 0, 1, 1, 0}, {2, 3}, dtypes::kBool);
  check_grad("masked_fill", [&](auto& t) { return t[0].masked_fill(mask, 3); }, {{2, 3}});
  Tensor idx = Tensor::from_data({2, 0, 2, 1, 1, 3}, {2, 3}, dtypes::kInt32);
  check_grad("scatter", [&](auto& t) { return t[0].scatter(1, idx, t[1]); }, {{3, 4}, {2, 4}});
  check_grad("cumprod", [](auto& t) { return t[0].cumprod(1); }, {{2, 5}});
  check_grad("cumprod first", [](auto& t) { return t[0].cumprod(-2); }, {{4, 2}});
  for (const char* mode : {"constant", "reflect", "replicate", "circular"})
    check_grad(mode, [mode](auto& t) { return t[0].pad_mode({{2, 1}, {-1, 2}}, mode, 1.5); },
               {{3, 4}});
  check_grad("flatten", [](auto& t) { return t[0].flatten(0, 1).unflatten(0, {3, 2}); },
             {{2, 3, 2}});
  check_grad("bce", [](auto& t) { return t[0].binary_cross_entropy(t[1]); }, {{6}, {6}}, 0.1, 0.9);
  check_grad(
      "bce logits", [](auto& t) { return t[0].binary_cross_entropy_with_logits(t[1]); }, {{6}, {6}},
      -4, 4);
  check_grad("mse", [](auto& t) { return t[0].mse(t[1]); }, {{2, 3}, {3}});
  check_grad(
      "attention",
      [](auto& t) { return t[0].scaled_dot_product_attention(t[1], t[2], std::nullopt, true); },
      {{2, 3, 2}, {2, 4, 2}, {2, 4, 3}});
  check_grad("attention mask",
             [](auto& t) { return t[0].scaled_dot_product_attention(t[1], t[2], t[3]); },
             {{3, 2}, {4, 2}, {4, 2}, {3, 4}});
  check_grad("einsum", [](auto& t) { return Tensor::einsum("bij,jk->bki", {t[0], t[1]}); },
             {{2, 3, 2}, {2, 4}});
  check_grad("slice", [](auto& t) { return t[0].slice(1, -1, 0, -2); }, {{2, 6}});
  check_grad("index", [](auto& t) { return t[0].index({-1, 1}) * t[0]; }, {{2, 3}});
}

TEST(ExtraGrad, DropoutScalesTheKeptGradient) {
  Vec x = rnd(400, 53);
  Tensor t = Tensor::from_data(x, {400}).requires_grad_();
  Tensor::manual_seed(9);
  Tensor y = t.dropout(0.5);
  y.sum().backward();
  Vec out = y.to_vector(), g = t.grad()->to_vector();
  for (size_t i = 0; i < x.size(); i++) EXPECT_EQ(g[i], out[i] == 0 ? 0 : 2) << i;
}

}  // namespace
}  // namespace baregrad::tensor
