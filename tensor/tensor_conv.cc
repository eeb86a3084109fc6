// Convolution and pooling from sliding-window views: movement ops that leave the windows one
// strided view of their input (o*s + k*d per axis), so kernels index them without decoding a
// stack of views.
#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {
namespace {

using Grads = std::vector<std::optional<Tensor>>;
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Windows of size k, stride s and dilation d over the last n axes (sizes i) of a tensor; the
// axes before them (`lead`) are kept. o is the number of windows per axis.
struct Windows {
  Shape lead;
  std::vector<int64_t> i, o, k, s, d;
  int n() const { return static_cast<int>(k.size()); }
  // `lead` followed by f(j) for each window axis j.
  template <class F>
  Shape shape(F f) const {
    Shape out = lead;
    for (int j = 0; j < n(); j++)
      for (int64_t v : f(j)) out.push_back(v);
    return out;
  }
  // Full ranges of `lead` followed by f(j) for each window axis j (a shrink's argument).
  template <class F>
  Ranges ranges(F f) const {
    return with_lead(f, true);
  }
  // No padding of `lead`, then f(j) for each window axis j (a pad's argument).
  template <class F>
  Ranges pads(F f) const {
    return with_lead(f, false);
  }
  template <class F>
  Ranges with_lead(F f, bool full) const {
    Ranges out;
    for (int64_t v : lead) out.emplace_back(0, full ? v : 0);
    for (int j = 0; j < n(); j++)
      for (auto r : f(j)) out.push_back(r);
    return out;
  }
  // (.., a0, b0, a1, b1, ..) -> (.., b0, b1, .., a0, a1, ..) when `second_first`, else
  // (.., a0, a1, .., b0, b1, ..).
  std::vector<int> order(bool second_first) const {
    std::vector<int> out(lead.size());
    std::iota(out.begin(), out.end(), 0);
    int l = static_cast<int>(lead.size());
    for (int pass = 0; pass < 2; pass++)
      for (int j = 0; j < n(); j++) out.push_back(l + 2 * j + ((pass == 0) == second_first));
    return out;
  }
};

// k <= s, d = 1: pad or cut each axis to o*s, split it as (o, s) and keep the first k of s.
Tensor disjoint_windows(const Tensor& x, const Windows& w) {
  Tensor t = x.pad(w.pads([&](int j) {
                return Ranges{{0, std::max<int64_t>(0, w.o[j] * w.s[j] - w.i[j])}};
              }))
                 .shrink(w.ranges([&](int j) { return Ranges{{0, w.o[j] * w.s[j]}}; }))
                 .reshape(w.shape([&](int j) { return Shape{w.o[j], w.s[j]}; }))
                 .shrink(w.ranges([&](int j) { return Ranges{{0, w.o[j]}, {0, w.k[j]}}; }));
  return t.permute(w.order(false));
}

// tinygrad's _pool for overlapping windows: repeat each axis r times and cut it into k rows of
// R = f*i + d (f >= 1, R >= o*s), so row a starts a*d past a copy boundary and column b*s of it
// reads x[a*d + b*s] (< i: it never runs into the next copy). Every step splits, shrinks or
// broadcasts dims, so the result is one strided view (o*s + k*d) of x's view.
Tensor repeat_windows(const Tensor& x, const Windows& w) {
  std::vector<int64_t> R(w.n()), r(w.n());
  for (int j = 0; j < w.n(); j++) {
    int64_t i = w.i[j], f = std::max<int64_t>(1, (w.o[j] * w.s[j] - w.d[j] + i - 1) / i);
    R[j] = f * i + w.d[j];
    r[j] = (w.k[j] * R[j] + i - 1) / i;
  }
  Tensor t = x.reshape(w.shape([&](int j) { return Shape{1, w.i[j]}; }))
                 .expand(w.shape([&](int j) { return Shape{r[j], w.i[j]}; }))
                 .reshape(w.shape([&](int j) { return Shape{r[j] * w.i[j]}; }))
                 .shrink(w.ranges([&](int j) { return Ranges{{0, w.k[j] * R[j]}}; }))
                 .reshape(w.shape([&](int j) { return Shape{w.k[j], R[j]}; }))
                 .shrink(w.ranges([&](int j) { return Ranges{{0, w.k[j]}, {0, w.o[j] * w.s[j]}}; }))
                 .reshape(w.shape([&](int j) { return Shape{w.k[j], w.o[j], w.s[j]}; }))
                 .shrink(w.ranges([&](int j) { return Ranges{{0, w.k[j]}, {0, w.o[j]}, {0, 1}}; }))
                 .reshape(w.shape([&](int j) { return Shape{w.k[j], w.o[j]}; }));
  return t.permute(w.order(true));
}

// The gradient of stride-1 windows: each window position (tap) of `g` (.., o.., k..) shifted
// back to where it was read and the taps summed. Every tap is one padded view of `g`; the
// autograd of repeat_windows would instead reduce over the copies through a stack of views.
Tensor unit_stride_window_grad(const Tensor& g, const Windows& w) {
  int64_t taps = 1;
  for (int64_t k : w.k) taps *= k;
  std::vector<Tensor> terms;
  for (int64_t t = 0; t < taps; t++) {
    std::vector<int64_t> a(w.n());
    for (int64_t j = w.n(), rest = t; j-- > 0; rest /= w.k[j]) a[j] = rest % w.k[j];
    Ranges cut;
    for (int64_t v : w.lead) cut.emplace_back(0, v);
    for (int j = 0; j < w.n(); j++) cut.emplace_back(0, w.o[j]);
    for (int j = 0; j < w.n(); j++) cut.emplace_back(a[j], a[j] + 1);
    terms.push_back(
        g.shrink(cut).reshape(w.shape([&](int j) { return Shape{w.o[j]}; })).pad(w.pads([&](int j) {
          int64_t before = a[j] * w.d[j];
          return Ranges{{before, w.i[j] - w.o[j] - before}};
        })));
  }
  while (terms.size() > 1) {  // a balanced sum: a shallow graph
    std::vector<Tensor> next;
    for (size_t t = 0; t + 1 < terms.size(); t += 2) next.push_back(terms[t] + terms[t + 1]);
    if (terms.size() % 2) next.push_back(terms.back());
    terms = std::move(next);
  }
  return terms[0];
}

// `x` (N, C, H, W) padded by `p` zeros on both spatial axes, written to memory by a kernel of
// its own. The windows of a masked (padded) view need a second view, since the valid (o, k)
// pairs of a window axis are not a box, and the kernels would decode every load through it.
Tensor padded_in_memory(const Tensor& x, int64_t p) {
  return x.pad({{0, 0}, {0, 0}, {p, p}, {p, p}}).contiguous();
}

// On CPU targets a convolution's register tile is output channels (vector lanes) by output
// positions, the right shape whatever the image width (rows of 6, 10 or 20 fill no 16-lane
// vector): each weight vector load feeds every position of the tile and each input element
// loaded feeds every lane. The lanes need the weights contiguous along the output channels, so
// (O, C, KH, KW) is copied once to (C, KH, KW, O) memory (a small kernel) and seen as before.
// GPU targets run a thread per output and keep the layout they were given; so does a
// convolution of under kMinLaneMacs multiply-adds, where the copy's launch costs about what the
// lanes save (measured with the digits model of bench 'cnn step': 64 images of 8x8, 4.7M).
constexpr double kMinLaneMacs = 1 << 23;

Tensor channels_last_weight(const Tensor& w, int64_t groups, double macs) {
  const auto& dev = w.lazy().base->device;
  if (groups != 1 || w.shape()[0] % 8 != 0 || macs < kMinLaneMacs ||
      (dev && dev->target_info().gpu))
    return w;
  return w.permute({1, 2, 3, 0}).contiguous().permute({3, 0, 1, 2});
}

// Above this many taps the stride-1 gradient falls back to the autograd of the movement ops.
constexpr int64_t kMaxGradTaps = 64;

}  // namespace

Tensor Tensor::pool_windows(const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& dilation) const {
  int n = static_cast<int>(kernel.size());
  if (n > ndim() || stride.size() != kernel.size() || dilation.size() != kernel.size())
    fail("pool", "kernel of " + std::to_string(n) + " dims for shape " + shape_str(shape()),
         ErrorKind::kValue);
  Windows w{Shape(shape().begin(), shape().end() - n), {}, {}, kernel, stride, dilation};
  bool overlap = false, unit_stride = true;
  int64_t taps = 1;
  for (int j = 0; j < n; j++) {
    int64_t i = shape()[ndim() - n + j], k = kernel[j], s = stride[j], d = dilation[j];
    std::optional<int64_t> span = k < 1 ? std::nullopt : checked_mul(d, k - 1);
    if (k < 1 || s < 1 || d < 1 || !span || *span >= i)
      fail("pool",
           "window " + std::to_string(k) + " (stride " + std::to_string(s) + ", dilation " +
               std::to_string(d) + ") does not fit axis of size " + std::to_string(i) + " in " +
               shape_str(shape()),
           ErrorKind::kValue);
    w.i.push_back(i);
    w.o.push_back((i - d * (k - 1) - 1) / s + 1);
    // One window reads the same whatever the stride: min(s, k) keeps o * s <= i (a stride of
    // 2**62 would otherwise pad the axis to 2**62) and keeps whether windows overlap.
    if (w.o.back() == 1) w.s[j] = s = std::min(s, k);
    overlap |= k > s || d != 1;
    unit_stride &= s == 1;
    taps *= k;
  }
  if (!overlap) return disjoint_windows(*this, w);
  if (!unit_stride || taps > kMaxGradTaps) return repeat_windows(*this, w);
  return record(repeat_windows(detach(), w).lazy(), "pool", {*this},
                [w](const Tensor& g) { return Grads{unit_stride_window_grad(g, w)}; });
}

Tensor Tensor::conv2d(const Tensor& w,
                      const std::optional<Tensor>& bias,
                      int64_t stride,
                      int64_t padding,
                      int64_t dilation,
                      int64_t groups) const {
  if (ndim() != 4 || w.ndim() != 4)
    fail("conv2d",
         "input " + shape_str(shape()) + " and weight " + shape_str(w.shape()) +
             " must both be 4-D (N, C, H, W) and (O, C/groups, KH, KW)",
         ErrorKind::kValue);
  int64_t n = shape()[0], c = shape()[1], o = w.shape()[0], cg = w.shape()[1];
  if (groups < 1 || c % groups != 0 || o % groups != 0 || cg * groups != c)
    fail("conv2d",
         "input " + shape_str(shape()) + " has " + std::to_string(c) + " channels; weight " +
             shape_str(w.shape()) + " with groups=" + std::to_string(groups) + " expects " +
             std::to_string(cg * groups),
         ErrorKind::kValue);
  if (bias && bias->shape() != Shape{o})
    fail("conv2d",
         "bias of shape " + shape_str(bias->shape()) + " for " + std::to_string(o) +
             " output channels",
         ErrorKind::kValue);
  int64_t kh = w.shape()[2], kw = w.shape()[3];
  if (stride < 1 || dilation < 1 || padding < 0)
    fail("conv2d",
         "stride=" + std::to_string(stride) + ", dilation=" + std::to_string(dilation) +
             ", padding=" + std::to_string(padding) +
             ": stride and dilation must be >= 1, padding >= 0",
         ErrorKind::kValue);
  if (o == 0)  // as torch: an empty weight is an error, not an empty result
    fail("conv2d", "weight " + shape_str(w.shape()) + " has 0 output channels", ErrorKind::kValue);
  if (padding > 0) {
    int64_t h = add_or_fail("conv2d", "padding=" + std::to_string(padding), shape()[2], padding);
    int64_t wd = add_or_fail("conv2d", "padding=" + std::to_string(padding), shape()[3], padding);
    Shape padded{n, c, add_or_fail("conv2d", "padding=" + std::to_string(padding), h, padding),
                 add_or_fail("conv2d", "padding=" + std::to_string(padding), wd, padding)};
    numel_or_fail("conv2d", padded);
  }
  auto forward = [=](const Tensor& in, const Tensor& wt) {
    Tensor x = padding > 0 ? padded_in_memory(in, padding) : in;
    Tensor win = x.pool_windows({kh, kw}, {stride, stride}, {dilation, dilation});
    int64_t oh = win.shape()[2], ow = win.shape()[3];
    // (N, g, 1, C/g, OH, OW, KH, KW) * (1, g, O/g, C/g, 1, 1, KH, KW), summed over C/g, KH, KW.
    Tensor xs = win.reshape({n, groups, 1, cg, oh, ow, kh, kw});
    double macs = static_cast<double>(n) * o * oh * ow * cg * kh * kw;  // never overflows
    Tensor ws =
        channels_last_weight(wt, groups, macs).reshape({1, groups, o / groups, cg, 1, 1, kh, kw});
    return (xs * ws).sum({3, 6, 7}).reshape({n, o, oh, ow});
  };
  const bool direct_grads = stride == 1 && dilation == 1 && groups == 1 && padding <= kh - 1 &&
                            padding <= kw - 1 && dtypes::is_float(dtype()) && dtype() == w.dtype();
  auto convolve = [&]() -> Tensor {
    if (!direct_grads) return forward(*this, w);
    // Both gradients are convolutions of a gradient written to memory, so they run as the
    // forward's register-tiled window reduction rather than as the autograd of the windows
    // (a reduction over every tap of the loaded gradient's view stack, which no opt can tile):
    //   dx = conv(dy padded by k-1-p, w with in/out swapped and the taps flipped)
    //   dw = conv(x padded by p, seen as (C, N, H, W), with dy seen as (O, N, OH, OW) for weights)
    return record(forward(detach(), w.detach()).lazy(), "conv2d", {*this, w},
                  [x = *this, w, padding, kh, kw](const Tensor& g) {
                    Tensor xs = saved(x), ws = saved(w);
                    Tensor gp = g.pad({{0, 0},
                                       {0, 0},
                                       {kh - 1 - padding, kh - 1 - padding},
                                       {kw - 1 - padding, kw - 1 - padding}})
                                    .contiguous();
                    Tensor wt = ws.permute({1, 0, 2, 3}).flip({2, 3});
                    Tensor dx = gp.conv2d(wt, std::nullopt, 1, 0, 1, 1);
                    Tensor xp = padding > 0 ? padded_in_memory(xs, padding) : xs;
                    Tensor dw =
                        xp.permute({1, 0, 2, 3})
                            .conv2d(g.contiguous().permute({1, 0, 2, 3}), std::nullopt, 1, 0, 1, 1)
                            .permute({1, 0, 2, 3});
                    return Grads{dx, dw};
                  });
  };
  Tensor y = convolve();
  return bias ? y + bias->reshape({1, o, 1, 1}) : y;
}

Tensor Tensor::max_pool2d(int64_t kernel, int64_t stride) const {
  if (stride == 0) stride = kernel;  // NOTE: 0 is "the kernel size" here; Python checks stride=0
  return pool_windows({kernel, kernel}, {stride, stride}, {1, 1}).max({-2, -1});
}

Tensor Tensor::avg_pool2d(int64_t kernel, int64_t stride) const {
  if (stride == 0) stride = kernel;
  return pool_windows({kernel, kernel}, {stride, stride}, {1, 1}).mean({-2, -1});
}

}  // namespace baregrad::tensor
