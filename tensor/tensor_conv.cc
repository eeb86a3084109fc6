// Convolution and pooling from sliding-window views (movement ops only, so autograd and the
// scheduler see ordinary reshapes, pads and shrinks).
#include <numeric>

#include "base/error.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {

// Replaces axis `a` (size i) of x by two axes (k, o): out[.., j, t, ..] = x[.., j*d + t*s, ..].
// The axis is tiled into rows of length L + d over a copy padded to L = i + max(s, d), so row j
// starts j*d into the data; striding is a reshape to (o, s) keeping column 0.
Tensor windows_1d(const Tensor& x, int a, int64_t k, int64_t s, int64_t d) {
  const Shape& sh = x.shape();
  int64_t i = sh[a];
  int64_t o = (i - d * (k - 1) - 1) / s + 1;
  int64_t L = i + std::max(s, d), R = L + d;
  int64_t copies = (k * R + L - 1) / L;
  std::vector<std::pair<int64_t, int64_t>> pad(sh.size(), {0, 0});
  pad[a] = {0, L - i};
  Tensor t = x.pad(pad);  // (.., L, ..)
  // repeat along the axis: (.., 1, L, ..) -> (.., copies, L, ..) -> (.., copies*L, ..)
  Shape s1(sh.begin(), sh.begin() + a), rest(sh.begin() + a + 1, sh.end());
  Shape one = s1, rep = s1, flat = s1;
  one.push_back(1);
  one.push_back(L);
  rep.push_back(copies);
  rep.push_back(L);
  flat.push_back(copies * L);
  for (auto* v : {&one, &rep, &flat}) v->insert(v->end(), rest.begin(), rest.end());
  t = t.reshape(one).expand(rep).reshape(flat);
  std::vector<std::pair<int64_t, int64_t>> cut;
  for (int64_t dim : flat) cut.push_back({0, dim});
  cut[a] = {0, k * R};
  t = t.shrink(cut);
  // rows of R: (.., k, R, ..) -> columns [0, o*s) -> (.., k, o, s, ..) -> s index 0
  Shape rows = s1;
  rows.push_back(k);
  rows.push_back(R);
  rows.insert(rows.end(), rest.begin(), rest.end());
  t = t.reshape(rows);
  std::vector<std::pair<int64_t, int64_t>> cols;
  for (int64_t dim : rows) cols.push_back({0, dim});
  cols[a + 1] = {0, o * s};
  t = t.shrink(cols);
  Shape split = s1;
  split.push_back(k);
  split.push_back(o);
  split.push_back(s);
  split.insert(split.end(), rest.begin(), rest.end());
  t = t.reshape(split);
  std::vector<std::pair<int64_t, int64_t>> first;
  for (int64_t dim : split) first.push_back({0, dim});
  first[a + 2] = {0, 1};
  Shape out = s1;
  out.push_back(k);
  out.push_back(o);
  out.insert(out.end(), rest.begin(), rest.end());
  return t.shrink(first).reshape(out);
}

}  // namespace

Tensor Tensor::pool_windows(const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& dilation) const {
  int n = static_cast<int>(kernel.size());
  if (n > ndim() || stride.size() != kernel.size() || dilation.size() != kernel.size())
    fail("pool", "kernel of " + std::to_string(n) + " dims for shape " + shape_str(shape()));
  int lead = ndim() - n;
  for (int j = 0; j < n; j++) {
    int64_t i = shape()[lead + j], k = kernel[j], s = stride[j], d = dilation[j];
    if (k < 1 || s < 1 || d < 1 || d * (k - 1) + 1 > i)
      fail("pool", "window " + std::to_string(k) + " (stride " + std::to_string(s) + ", dilation " +
                       std::to_string(d) + ") does not fit axis of size " + std::to_string(i) +
                       " in " + shape_str(shape()));
  }
  Tensor t = *this;  // each spatial axis becomes (k, o), in place
  for (int j = 0; j < n; j++) t = windows_1d(t, lead + 2 * j, kernel[j], stride[j], dilation[j]);
  // (.., k0, o0, k1, o1, ..) -> (.., o0, o1, .., k0, k1, ..)
  std::vector<int> order(lead);
  std::iota(order.begin(), order.end(), 0);
  for (int j = 0; j < n; j++) order.push_back(lead + 2 * j + 1);
  for (int j = 0; j < n; j++) order.push_back(lead + 2 * j);
  return t.permute(order);
}

Tensor Tensor::conv2d(const Tensor& w,
                      const std::optional<Tensor>& bias,
                      int64_t stride,
                      int64_t padding,
                      int64_t dilation,
                      int64_t groups) const {
  if (ndim() != 4 || w.ndim() != 4)
    fail("conv2d", "input " + shape_str(shape()) + " and weight " + shape_str(w.shape()) +
                       " must both be 4-D (N, C, H, W) and (O, C/groups, KH, KW)");
  int64_t n = shape()[0], c = shape()[1], o = w.shape()[0], cg = w.shape()[1];
  if (groups < 1 || c % groups != 0 || o % groups != 0 || cg * groups != c)
    fail("conv2d", "input " + shape_str(shape()) + " has " + std::to_string(c) +
                       " channels; weight " + shape_str(w.shape()) + " with groups=" +
                       std::to_string(groups) + " expects " + std::to_string(cg * groups));
  if (bias && bias->shape() != Shape{o})
    fail("conv2d", "bias of shape " + shape_str(bias->shape()) + " for " + std::to_string(o) +
                       " output channels");
  int64_t kh = w.shape()[2], kw = w.shape()[3];
  Tensor x = pad({{0, 0}, {0, 0}, {padding, padding}, {padding, padding}});
  Tensor win = x.pool_windows({kh, kw}, {stride, stride}, {dilation, dilation});
  int64_t oh = win.shape()[2], ow = win.shape()[3];
  // (N, g, 1, C/g, OH, OW, KH, KW) * (1, g, O/g, C/g, 1, 1, KH, KW), summed over C/g, KH, KW.
  Tensor xs = win.reshape({n, groups, 1, cg, oh, ow, kh, kw});
  Tensor ws = w.reshape({1, groups, o / groups, cg, 1, 1, kh, kw});
  Tensor y = (xs * ws).sum({3, 6, 7}).reshape({n, o, oh, ow});
  return bias ? y + bias->reshape({1, o, 1, 1}) : y;
}

Tensor Tensor::max_pool2d(int64_t kernel, int64_t stride) const {
  if (stride == 0) stride = kernel;
  return pool_windows({kernel, kernel}, {stride, stride}, {1, 1}).max({-2, -1});
}

Tensor Tensor::avg_pool2d(int64_t kernel, int64_t stride) const {
  if (stride == 0) stride = kernel;
  return pool_windows({kernel, kernel}, {stride, stride}, {1, 1}).mean({-2, -1});
}

}  // namespace baregrad::tensor
