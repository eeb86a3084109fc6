// Tensor::operator[] against a host oracle that evaluates numpy/tinygrad indexing element by
// element, hand-checked arrays for the tricky layouts, gradients against finite differences and
// the error messages of misuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;
using Kind = Idx::Kind;
using Opt = std::optional<int64_t>;

// One index entry with host values, convertible to an Idx.
struct H {
  Kind kind = Kind::kNone;
  int64_t v = 0;
  Opt start, stop;
  int64_t step = 1;
  Shape shape;  // kTensor
  std::vector<int64_t> vals;
  DType dtype = dtypes::kInt32;
};
H make(Kind kind) {
  H h;
  h.kind = kind;
  return h;
}
H I(int64_t v) {
  H h = make(Kind::kInt);
  h.v = v;
  return h;
}
H S(Opt start = {}, Opt stop = {}, int64_t step = 1) {
  H h = make(Kind::kSlice);
  h.start = start, h.stop = stop, h.step = step;
  return h;
}
H T(Shape shape, std::vector<int64_t> vals, DType dtype = dtypes::kInt32) {
  H h = make(Kind::kTensor);
  h.shape = std::move(shape), h.vals = std::move(vals), h.dtype = dtype;
  return h;
}
const H kNone = make(Kind::kNone);
const H kEll = make(Kind::kEllipsis);

std::vector<Idx> to_idx(const std::vector<H>& hs) {
  std::vector<Idx> r;
  for (const auto& h : hs) {
    switch (h.kind) {
      case Kind::kInt:
        r.push_back(h.v);
        break;
      case Kind::kSlice:
        r.push_back(Idx::slice(h.start, h.stop, h.step));
        break;
      case Kind::kNone:
        r.push_back(Idx::none());
        break;
      case Kind::kEllipsis:
        r.push_back(Idx::ellipsis());
        break;
      case Kind::kTensor: {
        Vec v(h.vals.begin(), h.vals.end());
        r.push_back(Tensor::from_data(v, h.shape, h.dtype));
        break;
      }
    }
  }
  return r;
}

// The positions Python's range(*slice(start, stop, step).indices(n)) visits.
std::vector<int64_t> slice_positions(int64_t n, Opt start, Opt stop, int64_t step) {
  std::vector<int64_t> out;
  auto clamp = [&](int64_t i, int64_t lo, int64_t hi) {
    return i < 0 ? std::max(lo, i + n) : std::min(i, hi);
  };
  if (step > 0) {
    int64_t b = start ? clamp(*start, 0, n) : 0, e = stop ? clamp(*stop, 0, n) : n;
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    int64_t b = start ? clamp(*start, -1, n - 1) : n - 1, e = stop ? clamp(*stop, -1, n - 1) : -1;
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

struct Ref {
  Shape shape;
  Vec values;
};

// x[idx] by enumerating output coordinates: each output element names its source element.
// Ints are basic indices; the broadcast tensor dims sit at the first tensor entry when the tensor
// entries are adjacent among the non-int entries, else in front. Out-of-range tensor values give 0.
Ref reference(const Shape& xs, const Vec& xv, const std::vector<H>& idx) {
  int used = 0;
  for (const auto& h : idx) used += h.kind != Kind::kNone && h.kind != Kind::kEllipsis;
  std::vector<H> full;
  bool ell = false;
  for (const auto& h : idx) {
    if (h.kind != Kind::kEllipsis) {
      full.push_back(h);
      continue;
    }
    ell = true;
    for (size_t k = used; k < xs.size(); k++) full.push_back(S());
  }
  if (!ell)
    for (size_t k = used; k < xs.size(); k++) full.push_back(S());
  // Per entry: its input axis (-1 for none) and the slice positions.
  std::vector<int> axis_of;
  std::vector<std::vector<int64_t>> pos(full.size());
  Shape big;
  std::vector<int> tensor_slots;  // indices of tensor entries among the non-int entries
  int ax = 0, slot = 0;
  for (size_t e = 0; e < full.size(); e++) {
    const H& h = full[e];
    axis_of.push_back(h.kind == Kind::kNone ? -1 : ax++);
    if (h.kind == Kind::kSlice) pos[e] = slice_positions(xs[axis_of[e]], h.start, h.stop, h.step);
    if (h.kind == Kind::kTensor) {
      tensor_slots.push_back(slot);
      if (h.shape.size() > big.size()) big.insert(big.begin(), h.shape.size() - big.size(), 1);
      for (size_t i = 0; i < h.shape.size(); i++) {
        int64_t& b = big[big.size() - h.shape.size() + i];
        b = b == 1 ? h.shape[i] : b;
      }
    }
    if (h.kind != Kind::kInt) slot++;
  }
  bool adjacent = tensor_slots.empty() || tensor_slots.back() - tensor_slots.front() + 1 ==
                                              static_cast<int>(tensor_slots.size());
  // Output dims: -1 marks the broadcast group, else the entry it comes from.
  std::vector<int> layout;
  if (!adjacent) layout.push_back(-1);
  for (size_t e = 0; e < full.size(); e++) {
    if (full[e].kind == Kind::kInt) continue;
    if (full[e].kind != Kind::kTensor)
      layout.push_back(static_cast<int>(e));
    else if (adjacent && static_cast<int>(layout.size()) == tensor_slots.front())
      layout.push_back(-1);
  }
  Ref r;
  for (int l : layout) {
    if (l == -1)
      r.shape.insert(r.shape.end(), big.begin(), big.end());
    else
      r.shape.push_back(full[l].kind == Kind::kNone ? 1 : static_cast<int64_t>(pos[l].size()));
  }
  for (int64_t flat = 0; flat < count(r.shape); flat++) {
    Shape coord(r.shape.size());
    for (int64_t d = static_cast<int64_t>(r.shape.size()) - 1, f = flat; d >= 0; d--)
      coord[d] = f % r.shape[d], f /= r.shape[d];
    std::vector<int64_t> src(xs.size()), bcoord;
    size_t c = 0;
    for (int l : layout) {
      if (l == -1) {
        bcoord.assign(coord.begin() + c, coord.begin() + c + big.size());
        c += big.size();
      } else {
        if (full[l].kind == Kind::kSlice) src[axis_of[l]] = pos[l][coord[c]];
        c++;
      }
    }
    bool hit = true;
    for (size_t e = 0; e < full.size(); e++) {
      const H& h = full[e];
      int64_t n = axis_of[e] < 0 ? 1 : xs[axis_of[e]];
      if (h.kind == Kind::kInt) src[axis_of[e]] = h.v < 0 ? h.v + n : h.v;
      if (h.kind != Kind::kTensor) continue;
      int64_t off = 0;  // the tensor's element at bcoord, broadcast (right-aligned, size-1 dims)
      for (size_t i = 0; i < h.shape.size(); i++) {
        int64_t b = bcoord[big.size() - h.shape.size() + i];
        off = off * h.shape[i] + (h.shape[i] == 1 ? 0 : b);
      }
      int64_t v = h.vals[off] < 0 ? h.vals[off] + n : h.vals[off];
      hit = hit && v >= 0 && v < n;
      src[axis_of[e]] = v;
    }
    int64_t off = 0;
    for (size_t d = 0; d < xs.size(); d++) off = off * xs[d] + src[d];
    r.values.push_back(hit ? xv[off] : 0.0);
  }
  return r;
}

Vec iota(int64_t n) {
  Vec v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

// x = 0, 1, 2, ... of shape `xs`: x[idx] and the oracle both give `want` of `want_shape`.
void expect_index(const Shape& xs,
                  const std::vector<H>& idx,
                  const Shape& want_shape,
                  const Vec& want) {
  Vec xv = iota(count(xs));
  Ref r = reference(xs, xv, idx);
  EXPECT_EQ(shape_str(r.shape), shape_str(want_shape)) << "oracle";
  EXPECT_EQ(r.values, want) << "oracle";
  Tensor y = Tensor::from_data(xv, xs)[to_idx(idx)];
  EXPECT_EQ(shape_str(y.shape()), shape_str(want_shape));
  EXPECT_EQ(y.to_vector(), want);
}

TEST(IndexBasic, IntsSelectAndDropAxes) {
  {
    SCOPED_TRACE("x[1, -1]");
    expect_index({2, 3, 4}, {I(1), I(-1)}, {4}, {20, 21, 22, 23});
  }
  {
    SCOPED_TRACE("x[1, 2, 3] is a scalar");
    expect_index({2, 3, 4}, {I(1), I(2), I(3)}, {}, {23});
  }
  {
    SCOPED_TRACE("x[-2, ..., -1]");
    expect_index({2, 3, 4}, {I(-2), kEll, I(-1)}, {3}, {3, 7, 11});
  }
  Tensor x = Tensor::from_data(iota(6), {2, 3});
  EXPECT_EQ(x[1].shape(), (Shape{3}));
  EXPECT_EQ(x[1].to_vector(), (Vec{3, 4, 5}));
  EXPECT_EQ(x[1][-1].to_vector(), (Vec{5}));
  EXPECT_EQ((x[{1, 0}].shape()), (Shape{}));
}

TEST(IndexBasic, SlicesWithStepsMatchPython) {
  {
    SCOPED_TRACE("a[::-2]");
    expect_index({5}, {S({}, {}, -2)}, {3}, {4, 2, 0});
  }
  {
    SCOPED_TRACE("x[:, ::-1, 1::2]");
    expect_index({2, 3, 4}, {S(), S({}, {}, -1), S(1, {}, 2)}, {2, 3, 2},
                 {9, 11, 5, 7, 1, 3, 21, 23, 17, 19, 13, 15});
  }
  {
    SCOPED_TRACE("a[-2:-6:-2] and clamped bounds a[-100:100:3]");
    expect_index({5}, {S(-2, -6, -2)}, {2}, {3, 1});
    expect_index({5}, {S(-100, 100, 3)}, {2}, {0, 3});
  }
  {
    SCOPED_TRACE("0-size slices");
    expect_index({2, 3, 4}, {S(), S(2, 1)}, {2, 0, 4}, {});
    expect_index({3}, {S(5, {})}, {0}, {});
    expect_index({3}, {S(0, 3, -1)}, {0}, {});
  }
}

TEST(IndexBasic, NoneAndEllipsisInsertAndFillAxes) {
  {
    SCOPED_TRACE("x[None, ..., 1, None]");
    expect_index({2, 3, 4}, {kNone, kEll, I(1), kNone}, {1, 2, 3, 1}, {1, 5, 9, 13, 17, 21});
  }
  {
    SCOPED_TRACE("x[..., None] and x[...] keep everything");
    expect_index({2, 2}, {kEll, kNone}, {2, 2, 1}, {0, 1, 2, 3});
    expect_index({2, 2}, {kEll}, {2, 2}, {0, 1, 2, 3});
  }
  {
    SCOPED_TRACE("x[0, None, ::2, ...]");
    expect_index({2, 3, 2}, {I(0), kNone, S({}, {}, 2), kEll}, {1, 2, 2}, {0, 1, 4, 5});
  }
  {
    SCOPED_TRACE("scalar[None, ...]");
    expect_index({}, {kNone, kEll}, {1}, {0});
  }
}

TEST(IndexAdvanced, TensorIndicesPickAndBroadcast) {
  {
    SCOPED_TRACE("a[t] with 2-D t and negative values");
    expect_index({5}, {T({2, 2}, {-1, 0, 2, -5})}, {2, 2}, {4, 0, 2, 0});
  }
  {
    SCOPED_TRACE("x[t] keeps the trailing axes");
    expect_index({3, 2}, {T({4}, {2, 0, 2, -2})}, {4, 2}, {4, 5, 0, 1, 4, 5, 2, 3});
  }
  {
    SCOPED_TRACE("adjacent x[:, t (2, 1), u (2)] goes in place as (2, 2)");
    expect_index({2, 3, 4}, {S(), T({2, 1}, {0, 2}), T({2}, {1, 3})}, {2, 2, 2},
                 {1, 3, 9, 11, 13, 15, 21, 23});
  }
  {
    SCOPED_TRACE("non-adjacent x[t, :, u] moves the indexed dims to the front");
    expect_index({2, 3, 4}, {T({2}, {1, 0}), S(), T({2}, {3, 2})}, {2, 3}, {15, 19, 23, 2, 6, 10});
  }
  {
    SCOPED_TRACE("non-adjacent x[:, t, None, u] also leads");
    expect_index({2, 2, 2}, {S(), T({2}, {1, 0}), kNone, T({1}, {1})}, {2, 2, 1}, {3, 7, 1, 5});
  }
  {
    SCOPED_TRACE("ints are basic (torch, tinygrad): x[1, :, t] keeps the slice first");
    expect_index({2, 3, 2}, {I(1), S(), T({2}, {1, 0})}, {3, 2}, {7, 6, 9, 8, 11, 10});
  }
  {
    SCOPED_TRACE("x[t, u] with a 0-d u");
    expect_index({3, 4}, {T({2}, {2, 1}), T({}, {-1})}, {2}, {11, 7});
  }
  {
    SCOPED_TRACE("out-of-range tensor values give 0");
    expect_index({3}, {T({3}, {4, 1, -4})}, {3}, {0, 1, 0});
  }
  {
    SCOPED_TRACE("empty index tensor");
    expect_index({3, 2}, {T({0}, {})}, {0, 2}, {});
  }
}

TEST(IndexAdvanced, IndexDtypesAndValueDtypes) {
  Tensor a = Tensor::from_data(iota(200), {200}, dtypes::kInt32);
  // int8 -1 wraps to 199: the index is widened before adding the axis size.
  Tensor i8 = Tensor::from_data({-1, 100}, {2}, dtypes::kInt8);
  Tensor got = a[i8];
  EXPECT_EQ(got.dtype(), dtypes::kInt32);
  EXPECT_EQ(got.to_vector(), (Vec{199, 100}));
  Tensor u8 = Tensor::from_data({199, 3}, {2}, dtypes::kUint8);
  EXPECT_EQ(a[u8].to_vector(), (Vec{199, 3}));
  Tensor i64 = Tensor::from_data({-200, 7}, {2}, dtypes::kInt64);
  EXPECT_EQ(a[i64].to_vector(), (Vec{0, 7}));
  Tensor b = Tensor::from_data({1, 0, 1}, {3}, dtypes::kBool);
  Tensor bi = b[Tensor::from_data({1, 2, 0}, {3}, dtypes::kInt32)];
  EXPECT_EQ(bi.dtype(), dtypes::kBool);
  EXPECT_EQ(bi.to_vector(), (Vec{0, 1, 1}));
}

// Random index lists (ints, slices of every step sign, none, one ellipsis, broadcasting tensors
// with some out-of-range values) on 3-D and 4-D inputs against the oracle. Counts the lists whose
// tensors are split by another entry, so the sweep is known to cover that layout.
TEST(IndexAdvanced, RandomIndexListsMatchTheOracle) {
  std::mt19937_64 rng(42);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int split = 0;
  for (int c = 0; c < 100; c++) {
    Shape xs = c % 2 ? Shape{3, 4, 5} : Shape{2, 3, 2, 4};
    Shape big = c % 4 == 3 ? Shape{} : c % 2 ? Shape{2} : Shape{2, 3};
    // Entries for the first k axes, an optional ellipsis, entries for the last m axes; nones
    // anywhere.
    int nd = static_cast<int>(xs.size());
    bool ell = pick(0, 2) == 0;
    int k = static_cast<int>(pick(1, nd)), m = ell ? static_cast<int>(pick(0, nd - k)) : 0;
    std::vector<int> axes;
    for (int d = 0; d < k; d++) axes.push_back(d);
    if (ell) axes.push_back(-1);
    for (int d = nd - m; d < nd; d++) axes.push_back(d);
    std::vector<H> idx;
    for (int a : axes) {
      if (pick(0, 5) == 0) idx.push_back(kNone);
      if (a < 0) {
        idx.push_back(kEll);
        continue;
      }
      int64_t n = xs[a], kind = pick(0, 9);
      if (kind <= 1) {
        idx.push_back(I(pick(-n, n - 1)));
      } else if (kind <= 4) {
        auto bound = [&]() -> Opt { return pick(0, 3) == 0 ? Opt{} : Opt{pick(-n - 1, n + 1)}; };
        int64_t step = pick(1, 3) * (pick(0, 1) ? 1 : -1);
        idx.push_back(S(bound(), bound(), step));
      } else {
        Shape s(big.begin() + pick(0, static_cast<int64_t>(big.size())), big.end());
        for (auto& d : s)
          if (pick(0, 2) == 0) d = 1;
        std::vector<int64_t> vals(count(s));
        for (auto& v : vals) v = pick(0, 9) == 0 ? pick(-n - 2, n + 1) : pick(-n, n - 1);
        idx.push_back(T(s, vals));
      }
    }
    if (pick(0, 5) == 0) idx.push_back(kNone);
    std::vector<int> slots;  // positions of the tensors among the non-int entries
    for (int e = 0, slot = 0; e < static_cast<int>(idx.size()); e++) {
      if (idx[e].kind == Kind::kTensor) slots.push_back(slot);
      slot += idx[e].kind != Kind::kInt;
    }
    split += slots.size() > 1 && slots.back() - slots.front() + 1 > static_cast<int>(slots.size());
    Vec xv = rnd(count(xs), 1000 + c);
    Ref want = reference(xs, xv, idx);
    std::string desc = "case " + std::to_string(c);
    SCOPED_TRACE(desc);
    Tensor y = Tensor::from_data(xv, xs)[to_idx(idx)];
    ASSERT_EQ(shape_str(y.shape()), shape_str(want.shape));
    expect_near(y.to_vector(), want.values, 0, 0);
  }
  EXPECT_GE(split, 10);
}

TEST(IndexGrad, IndexingMatchesFiniteDifferences) {
  auto t = [](Shape s, Vec v) { return Tensor::from_data(v, s, dtypes::kInt32); };
  check_grad("x[t, :, u] with repeated picks",
             [&](const std::vector<Tensor>& x) {
               return x[0][{t({3}, {1, 0, 1}), Idx::slice(), t({3}, {-1, 2, -1})}];
             },
             {{2, 3, 4}});
  check_grad(
      "x[::-2, 1, None]",
      [&](const std::vector<Tensor>& x) { return x[0][{Idx::slice({}, {}, -2), 1, Idx::none()}]; },
      {{5, 3}});
  check_grad("x[None, ..., t]",
             [&](const std::vector<Tensor>& x) {
               return x[0][{Idx::none(), Idx::ellipsis(), t({2, 1}, {0, 2})}];
             },
             {{2, 3}});
}

TEST(IndexErrors, MisuseNamesTheProblem) {
  Tensor x = Tensor::from_data(iota(24), {2, 3, 4});
  expect_error([&] { x[{0, 3}]; }, "[getitem] index 3 is out of bounds for axis 1 with size 3");
  expect_error([&] { x[-3]; }, "[getitem] index -3 is out of bounds for axis 0 with size 2");
  expect_error([&] { x[{Idx::ellipsis(), 0, Idx::ellipsis()}]; },
               "[getitem] an index can only have a single ellipsis");
  expect_error([&] { x[{0, 0, 0, Idx::none(), 0}]; },
               "[getitem] too many indices: 4 for a tensor of shape (2, 3, 4)");
  expect_error([&] { Tensor::from_data({1}, {})[0]; },
               "[getitem] too many indices: 1 for a tensor of shape ()");
  Tensor f = Tensor::from_data({0, 1}, {2});
  expect_error([&] { x[f]; }, "[getitem] index tensors must have an integer dtype, got float32");
  Tensor b = Tensor::from_data({0, 1}, {2}, dtypes::kBool);
  expect_error([&] { x[b]; }, "[getitem] bool (mask) index tensors are not supported");
  Tensor i2 = Tensor::from_data({0, 1}, {2}, dtypes::kInt32);
  Tensor i3 = Tensor::from_data({0, 1, 0}, {3}, dtypes::kInt32);
  expect_error([&] { x[{i2, i3}]; }, "[getitem] index tensors cannot be broadcast together");
  expect_error([&] { x[{Idx::slice(0, 2, 0)}]; }, "[getitem] slice step is 0 for axis 0");
}

TEST(ExtraOps, ScatterMatchesReference) {
  Shape s{3, 4, 5};
  Vec x = rnd(60, 41);
  Tensor t = Tensor::from_data(x, s, kF64);
  for (int axis = -3; axis < 3; axis++) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    int ax = axis < 0 ? axis + 3 : axis;
    Shape is{2, 3, 4}, ss{3, 3, 5};  // index smaller than self (outside axis) and src
    Vec idx(count(is)), src = rnd(count(ss), 42);
    for (size_t k = 0; k < idx.size(); k++) idx[k] = static_cast<double>((k * 7 + 3) % s[ax]);
    idx[5] = -1, idx[6] = 99;  // out of range: skipped
    Vec want = x;              // in row-major order, so a later duplicate overwrites
    Shape ist = strides(is), sst = strides(ss), st = strides(s);
    for (int64_t k = 0; k < count(is); k++) {
      Shape c = {k / ist[0], k / ist[1] % is[1], k % is[2]};
      int64_t src_off = c[0] * sst[0] + c[1] * sst[1] + c[2];
      c[ax] = static_cast<int64_t>(idx[k]);
      if (c[ax] >= 0 && c[ax] < s[ax]) want[c[0] * st[0] + c[1] * st[1] + c[2]] = src[src_off];
    }
    Tensor it = Tensor::from_data(idx, is, dtypes::kInt32);
    expect_near(t.scatter(axis, it, Tensor::from_data(src, ss, kF64)).to_vector(), want, 0, 0);
  }
  Tensor b = Tensor::zeros({4}, dtypes::kInt32);
  Tensor dup = Tensor::from_data({1, 3, 1}, {3}, dtypes::kInt64);
  EXPECT_EQ(b.scatter(0, dup, Tensor::from_data({5, 6, 7}, {3}, dtypes::kInt32)).to_vector(),
            (Vec{0, 7, 0, 6}));  // the last duplicate wins
  EXPECT_EQ(b.scatter(0, Tensor::zeros({0}, dtypes::kInt32), b).to_vector(), Vec(4, 0));
}

}  // namespace
}  // namespace baregrad::tensor
