#include "tensor/nn.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace baregrad::tensor::nn {
namespace {

// Throws naming `op` unless `in` and `out` channels split evenly into `groups`.
void check_groups(const char* op, int64_t in, int64_t out, int64_t groups) {
  if (groups < 1 || in % groups != 0 || out % groups != 0)
    fail(op,
         std::to_string(in) + " -> " + std::to_string(out) + " channels cannot be split into " +
             std::to_string(groups) + " groups",
         ErrorKind::kValue);
}

// A float tensor of `shape` drawn from U(-bound, bound) that requires grad.
Tensor param(Shape shape, double bound) {
  Tensor t = Tensor::uniform(std::move(shape), -bound, bound);
  t.requires_grad_();
  return t;
}

void list(NamedTensors& out,
          const std::string& prefix,
          const Tensor& weight,
          const std::optional<Tensor>& bias) {
  out.emplace_back(prefix + "weight", weight);
  if (bias) out.emplace_back(prefix + "bias", *bias);
}

std::vector<Tensor> params(const Tensor& weight, const std::optional<Tensor>& bias) {
  std::vector<Tensor> p{weight};
  if (bias) p.push_back(*bias);
  return p;
}

// Pads (a positive amount) or crops (a negative one) each spatial axis 2.. of x by (before, after).
Tensor pad_or_crop(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& ba) {
  std::vector<std::pair<int64_t, int64_t>> pad(x.ndim(), {0, 0});
  for (size_t i = 0; i < ba.size(); i++)
    pad[i + 2] = {std::max<int64_t>(ba[i].first, 0), std::max<int64_t>(ba[i].second, 0)};
  Tensor t = x.pad(pad);
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t d : t.shape()) keep.push_back({0, d});
  for (size_t i = 0; i < ba.size(); i++)
    keep[i + 2] = {std::max<int64_t>(-ba[i].first, 0),
                   t.shape()[i + 2] - std::max<int64_t>(-ba[i].second, 0)};
  return t.shrink(keep);
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias)
    : weight(param({out, in}, 1 / std::sqrt(double(in)))) {
  if (with_bias) bias = param({out}, 1 / std::sqrt(double(in)));
}

Tensor Linear::operator()(const Tensor& x) const {
  if (x.ndim() < 1 || x.shape().back() != weight.shape()[1])
    fail("Linear",
         "input of shape " + shape_str(x.shape()) + " for a layer with " +
             std::to_string(weight.shape()[1]) + " input features",
         ErrorKind::kValue);
  Tensor y = x.matmul(weight.transpose());
  return bias ? y + *bias : y;
}

std::vector<Tensor> Linear::parameters() const { return params(weight, bias); }

void Linear::named(NamedTensors& out, const std::string& prefix) const {
  list(out, prefix, weight, bias);
}

Conv2d::Conv2d(int64_t in,
               int64_t out,
               int64_t k,
               int64_t stride_,
               int64_t padding_,
               int64_t dilation_,
               int64_t groups_,
               bool with_bias)
    : weight(Tensor::zeros({1})),
      stride(stride_),
      padding(padding_),
      dilation(dilation_),
      groups(groups_) {
  check_groups("Conv2d", in, out, groups);
  double bound = 1 / std::sqrt(double(in / groups * k * k));
  weight = param({out, in / groups, k, k}, bound);
  if (with_bias) bias = param({out}, bound);
}

Tensor Conv2d::operator()(const Tensor& x) const {
  return x.conv2d(weight, bias, stride, padding, dilation, groups);
}

std::vector<Tensor> Conv2d::parameters() const { return params(weight, bias); }

void Conv2d::named(NamedTensors& out, const std::string& prefix) const {
  list(out, prefix, weight, bias);
}

Conv1d::Conv1d(int64_t in,
               int64_t out,
               int64_t k,
               int64_t stride_,
               int64_t padding_,
               int64_t dilation_,
               int64_t groups_,
               bool with_bias)
    : weight(Tensor::zeros({1})),
      stride(stride_),
      padding(padding_),
      dilation(dilation_),
      groups(groups_) {
  check_groups("Conv1d", in, out, groups);
  double bound = 1 / std::sqrt(double(in / groups * k));
  weight = param({out, in / groups, k}, bound);
  if (with_bias) bias = param({out}, bound);
}

Tensor Conv1d::operator()(const Tensor& x) const {
  if (x.ndim() != 3)
    fail("Conv1d", "input of shape " + shape_str(x.shape()) + " is not (N, C, L)",
         ErrorKind::kValue);
  // NOTE: conv2d pads both spatial axes, so the length axis is padded here and H stays 1.
  Tensor xp = x.pad({{0, 0}, {0, 0}, {padding, padding}}).unsqueeze(2);
  return xp.conv2d(weight.unsqueeze(2), bias, stride, 0, dilation, groups).squeeze(2);
}

std::vector<Tensor> Conv1d::parameters() const { return params(weight, bias); }

void Conv1d::named(NamedTensors& out, const std::string& prefix) const {
  list(out, prefix, weight, bias);
}

Tensor conv_transpose2d(const Tensor& x,
                        const Tensor& w,
                        const std::optional<Tensor>& bias,
                        int64_t s,
                        int64_t p,
                        int64_t op,
                        int64_t d,
                        int64_t g) {
  if (x.ndim() != 4 || w.ndim() != 4)
    fail("conv_transpose2d",
         "input " + shape_str(x.shape()) + " and weight " + shape_str(w.shape()) +
             " must both be 4-D (N, C, H, W) and (C, O/groups, KH, KW)",
         ErrorKind::kValue);
  int64_t c = w.shape()[0], og = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  if (g < 1 || x.shape()[1] != c || c % g != 0)
    fail("conv_transpose2d",
         "input " + shape_str(x.shape()) + " and weight " + shape_str(w.shape()) +
             " with groups=" + std::to_string(g) + ": channels do not match",
         ErrorKind::kValue);
  if (s < 1 || d < 1 || p < 0 || op < 0 || op >= std::max(s, d))
    fail("conv_transpose2d",
         "stride " + std::to_string(s) + ", padding " + std::to_string(p) + ", output_padding " +
             std::to_string(op) + ", dilation " + std::to_string(d) +
             ": need stride, dilation >= 1 and output_padding < "
             "max(stride, dilation)",
         ErrorKind::kValue);
  int64_t n = x.shape()[0], h = x.shape()[2], wd = x.shape()[3];
  int64_t oh = (h - 1) * s - 2 * p + d * (kh - 1) + op + 1;
  int64_t ow = (wd - 1) * s - 2 * p + d * (kw - 1) + op + 1;
  if (oh < 1 || ow < 1)
    fail("conv_transpose2d",
         "input " + shape_str(x.shape()) + " with weight " + shape_str(w.shape()) +
             " gives an empty output (" + std::to_string(oh) + ", " + std::to_string(ow) + ")",
         ErrorKind::kValue);
  // Zeros between input pixels: (H, W) -> (H, 1, W, 1) -> pad to (H, s, W, s) -> crop the tail.
  Tensor xd = x;
  if (s > 1) {
    xd = x.reshape({n, c, h, 1, wd, 1})
             .pad({{0, 0}, {0, 0}, {0, 0}, {0, s - 1}, {0, 0}, {0, s - 1}})
             .reshape({n, c, h * s, wd * s})
             .shrink({{0, n}, {0, c}, {0, (h - 1) * s + 1}, {0, (wd - 1) * s + 1}});
  }
  int64_t ah = d * (kh - 1) - p, aw = d * (kw - 1) - p;
  xd = pad_or_crop(xd, {{ah, ah + op}, {aw, aw + op}});
  // (C, O/g, K, K) -> (g, C/g, O/g, K, K) -> (g, O/g, C/g, K, K), flipped -> (O, C/g, K, K).
  Tensor wt = w.reshape({g, c / g, og, kh, kw})
                  .transpose(1, 2)
                  .flip({3, 4})
                  .reshape({g * og, c / g, kh, kw});
  return xd.conv2d(wt, bias, 1, 0, d, g);
}

ConvTranspose2d::ConvTranspose2d(int64_t in,
                                 int64_t out,
                                 int64_t k,
                                 int64_t stride_,
                                 int64_t padding_,
                                 int64_t output_padding_,
                                 int64_t dilation_,
                                 int64_t groups_,
                                 bool with_bias)
    : weight(Tensor::zeros({1})),
      stride(stride_),
      padding(padding_),
      output_padding(output_padding_),
      dilation(dilation_),
      groups(groups_) {
  check_groups("ConvTranspose2d", in, out, groups);
  weight = param({in, out / groups, k, k}, 1 / std::sqrt(double(in * k * k)));
  if (with_bias) bias = param({out}, 1 / std::sqrt(double(in / groups * k * k)));
}

Tensor ConvTranspose2d::operator()(const Tensor& x) const {
  return conv_transpose2d(x, weight, bias, stride, padding, output_padding, dilation, groups);
}

std::vector<Tensor> ConvTranspose2d::parameters() const { return params(weight, bias); }

void ConvTranspose2d::named(NamedTensors& out, const std::string& prefix) const {
  list(out, prefix, weight, bias);
}

Embedding::Embedding(int64_t vocab, int64_t dim)
    : weight(param({vocab, dim}, std::sqrt(6.0 / double(vocab + dim)))),
      vocab_size(vocab),
      embed_size(dim) {}

Tensor Embedding::operator()(const Tensor& idx) const {
  if (!dtypes::is_int(idx.dtype()))
    fail("Embedding",
         "indices of shape " + shape_str(idx.shape()) + " must be integers, not " +
             idx.dtype().name(),
         ErrorKind::kType);
  return idx.one_hot(vocab_size).cast(weight.dtype()).matmul(weight);
}

std::vector<Tensor> Embedding::parameters() const { return {weight}; }

void Embedding::named(NamedTensors& out, const std::string& prefix) const {
  out.emplace_back(prefix + "weight", weight);
}

}  // namespace baregrad::tensor::nn
