// The composed movement ops of tensor_shape.cc (cat, stack, split, chunk, repeat, roll, pad_mode,
// slice, ...) against host references, their errors, and their gradients against central finite
// differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

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

// Host pad of a 2-D (r, c) array: negative amounts crop first, then each mode maps an outside
// coordinate back inside.
Vec pad_ref(const Vec& x,
            Shape s,
            std::vector<std::pair<int64_t, int64_t>> p,
            const std::string& m) {
  int64_t r0 = std::max<int64_t>(-p[0].first, 0), c0 = std::max<int64_t>(-p[1].first, 0);
  int64_t rn = s[0] - r0 - std::max<int64_t>(-p[0].second, 0);
  int64_t cn = s[1] - c0 - std::max<int64_t>(-p[1].second, 0);
  int64_t rb = std::max<int64_t>(p[0].first, 0), cb = std::max<int64_t>(p[1].first, 0);
  int64_t ro = rn + rb + std::max<int64_t>(p[0].second, 0);
  int64_t co = cn + cb + std::max<int64_t>(p[1].second, 0);
  auto map = [&](int64_t i, int64_t n) -> int64_t {
    if (i >= 0 && i < n) return i;
    if (m == "reflect") return i < 0 ? -i : 2 * (n - 1) - i;
    if (m == "replicate") return std::clamp<int64_t>(i, 0, n - 1);
    if (m == "circular") return (i % n + n) % n;
    return -1;
  };
  Vec out;
  for (int64_t i = 0; i < ro; i++)
    for (int64_t j = 0; j < co; j++) {
      int64_t a = map(i - rb, rn), b = map(j - cb, cn);
      out.push_back(a < 0 || b < 0 ? 2.5 : x[(a + r0) * s[1] + b + c0]);
    }
  return out;
}

TEST(ExtraOps, PadModesMatchReference) {
  Shape s{4, 5};
  Vec x = rnd(20, 44);
  Tensor t = Tensor::from_data(x, s, kF64);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> pads = {
      {{1, 2}, {3, 0}}, {{0, 0}, {4, 4}}, {{3, 3}, {1, 1}}, {{-1, 2}, {2, -2}}, {{0, 0}, {0, 0}}};
  for (const char* mode : {"constant", "reflect", "replicate", "circular"})
    for (auto& p : pads) {
      SCOPED_TRACE(std::string(mode) + " " + std::to_string(p[0].first) + "," +
                   std::to_string(p[0].second) + "," + std::to_string(p[1].first) + "," +
                   std::to_string(p[1].second));
      Tensor y = t.pad_mode(p, mode, 2.5);
      Vec want = pad_ref(x, s, p, mode);
      EXPECT_EQ(y.numel(), static_cast<int64_t>(want.size()));
      expect_near(y.to_vector(), want, 0, 0);
    }
  Tensor b = Tensor::from_data({1, 0, 1}, {3}, dtypes::kBool);
  EXPECT_EQ(b.pad_mode({{2, 1}}, "reflect").to_vector(), (Vec{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(b.pad_mode({{1, 1}}, "constant").to_vector(), (Vec{0, 1, 0, 1, 0}));
  EXPECT_EQ(b.pad_mode({{1, 1}}, "constant", 1).dtype(), dtypes::kBool);
  EXPECT_EQ(Tensor::zeros({2, 0}).pad_mode({{1, 1}, {0, 0}}, "reflect").shape(), (Shape{4, 0}));
}

// Python's slice.indices(n) and the elements it picks.
std::vector<int64_t> py_slice(int64_t n,
                              std::optional<int64_t> start,
                              std::optional<int64_t> stop,
                              int64_t step) {
  auto norm = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t i = *v < 0 ? *v + n : *v;
    return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t b = norm(start, step > 0 ? 0 : n - 1), e = norm(stop, step > 0 ? n : -1);
  std::vector<int64_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

TEST(ExtraOps, SliceAndIndexMatchPython) {
  Shape s{3, 7, 2};
  Vec a = rnd(42, 52);
  Tensor t = Tensor::from_data(a, s, kF64);
  using O = std::optional<int64_t>;
  std::vector<std::tuple<O, O, int64_t>> slices = {
      {0, 7, 1},    {1, 6, 2},     {O{}, O{}, 3}, {-5, O{}, 1}, {O{}, O{}, -1}, {5, 1, -2},
      {-1, -8, -3}, {10, -20, -1}, {3, 3, 1},     {4, 2, 1},    {O{}, 2, -1},   {-100, 100, 4}};
  for (auto [b, e, st] : slices) {
    SCOPED_TRACE(std::to_string(b.value_or(999)) + ":" + std::to_string(e.value_or(999)) + ":" +
                 std::to_string(st));
    std::vector<int64_t> pick = py_slice(7, b, e, st);
    Vec want;
    for (int64_t i = 0; i < 3; i++)
      for (int64_t k : pick)
        for (int64_t j = 0; j < 2; j++) want.push_back(a[(i * 7 + k) * 2 + j]);
    Tensor y = t.slice(-2, b, e, st);
    EXPECT_EQ(y.shape(), (Shape{3, static_cast<int64_t>(pick.size()), 2}));
    EXPECT_EQ(y.to_vector(), want);
  }
  EXPECT_EQ(t.slice(0, -1, O{}, -1).to_vector(), t.flip({0}).to_vector());
  EXPECT_EQ(Tensor::zeros({0}).slice(0, O{}, O{}, -2).shape(), Shape{0});
  EXPECT_EQ(t.index({1, -1, 0}).shape(), Shape{});
  EXPECT_EQ(t.index({1, -1, 0}).to_vector(), Vec{a[(1 * 7 + 6) * 2]});
  EXPECT_EQ(t.index({-3}).shape(), (Shape{7, 2}));
  EXPECT_EQ(t.index({-3}).to_vector(), Vec(a.begin(), a.begin() + 14));
  EXPECT_EQ(t.index({}).shape(), s);
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
