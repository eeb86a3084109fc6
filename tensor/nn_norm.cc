// Normalisation layers of nn.h: BatchNorm, LayerNorm, RMSNorm, GroupNorm (tinygrad semantics).
#include <numeric>

#include "base/error.h"
#include "tensor/nn.h"

namespace baregrad::tensor::nn {
namespace {

// A float32 tensor filled with `value` that requires grad (affine weight / bias).
Tensor affine_param(Shape shape, double value) {
  Tensor t = Tensor::full(std::move(shape), value);
  t.requires_grad_();
  return t;
}

void list(NamedTensors& out,
          const std::string& prefix,
          const std::optional<Tensor>& weight,
          const std::optional<Tensor>& bias) {
  if (weight) out.emplace_back(prefix + "weight", *weight);
  if (bias) out.emplace_back(prefix + "bias", *bias);
}

std::vector<Tensor> params(const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  std::vector<Tensor> p;
  if (weight) p.push_back(*weight);
  if (bias) p.push_back(*bias);
  return p;
}

// (x - mean) / sqrt(var + eps) over `axes`, the variance biased.
Tensor normalize(const Tensor& x, const std::vector<int>& axes, double eps) {
  Tensor centered = x - x.mean(axes, true);
  return centered * (centered.square().mean(axes, true) + eps).pow(-0.5);
}

// `t` (C,) reshaped to broadcast along axis 1 of an ndim-D tensor: (1, C, 1, ...).
Tensor per_channel(const Tensor& t, int ndim) {
  Shape s(ndim, 1);
  s[1] = t.shape()[0];
  return t.reshape(s);
}

void check_channels(const char* op, const Tensor& x, int64_t c) {
  if (x.ndim() < 2 || x.shape()[1] != c)
    fail(op,
         "input of shape " + shape_str(x.shape()) + " for a layer of " + std::to_string(c) +
             " channels (need (N, " + std::to_string(c) + ", ...))",
         ErrorKind::kValue);
}

}  // namespace

BatchNorm::BatchNorm(int64_t n, double eps_, bool affine, double momentum_)
    : running_mean(Tensor::zeros({n})),
      running_var(Tensor::ones({n})),
      num_batches_tracked(Tensor::zeros({}, dtypes::kInt64)),
      eps(eps_),
      momentum(momentum_) {
  if (affine) {
    weight = affine_param({n}, 1);
    bias = affine_param({n}, 0);
  }
}

Tensor BatchNorm::operator()(const Tensor& x) {
  int64_t c = running_mean.shape()[0];
  check_channels("BatchNorm", x, c);
  int nd = x.ndim();
  Tensor y = x;
  if (training) {
    std::vector<int> axes{0};
    for (int a = 2; a < nd; a++) axes.push_back(a);
    int64_t count = x.numel() / c;
    if (count < 2)
      fail("BatchNorm",
           "training needs more than one value per channel, got input of shape " +
               shape_str(x.shape()),
           ErrorKind::kValue);
    Tensor mean = x.mean(axes);
    // NOTE: d(var)/d(mean) is 0, so the mean is detached inside the variance as tinygrad does.
    Tensor var = (x - per_channel(mean.detach(), nd)).square().mean(axes);
    y = (x - per_channel(mean, nd)) * per_channel((var + eps).pow(-0.5), nd);
    DType rt = running_mean.dtype();
    double unbias = double(count) / double(count - 1);
    running_mean.assign(running_mean * (1 - momentum) + mean.detach().cast(rt) * momentum);
    running_var.assign(running_var * (1 - momentum) + var.detach().cast(rt) * (momentum * unbias));
    num_batches_tracked.assign(num_batches_tracked + 1);
  } else {
    y = (x - per_channel(running_mean, nd)) * per_channel((running_var + eps).pow(-0.5), nd);
  }
  if (weight) y = y * per_channel(*weight, nd);
  return bias ? y + per_channel(*bias, nd) : y;
}

std::vector<Tensor> BatchNorm::parameters() const { return params(weight, bias); }

void BatchNorm::named(NamedTensors& out, const std::string& prefix) const {
  list(out, prefix, weight, bias);
  out.emplace_back(prefix + "running_mean", running_mean);
  out.emplace_back(prefix + "running_var", running_var);
  out.emplace_back(prefix + "num_batches_tracked", num_batches_tracked);
}

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine)
    : normalized_shape(std::move(shape)), eps(eps_) {
  if (normalized_shape.empty()) fail("LayerNorm", "normalized_shape is empty", ErrorKind::kValue);
  if (affine) {
    weight = affine_param(normalized_shape, 1);
    bias = affine_param(normalized_shape, 0);
  }
}

Tensor LayerNorm::operator()(const Tensor& x) const {
  int k = static_cast<int>(normalized_shape.size());
  if (x.ndim() < k ||
      !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - k))
    fail("LayerNorm",
         "input of shape " + shape_str(x.shape()) + " does not end in " +
             shape_str(normalized_shape),
         ErrorKind::kValue);
  std::vector<int> axes(k);
  std::iota(axes.begin(), axes.end(), x.ndim() - k);
  Tensor y = normalize(x, axes, eps);
  if (weight) y = y * *weight;
  return bias ? y + *bias : y;
}

std::vector<Tensor> LayerNorm::parameters() const { return params(weight, bias); }

void LayerNorm::named(NamedTensors& out, const std::string& prefix) const {
  list(out, prefix, weight, bias);
}

RMSNorm::RMSNorm(int64_t dim_, double eps_, bool affine) : dim(dim_), eps(eps_) {
  if (affine) weight = affine_param({dim}, 1);
}

Tensor RMSNorm::operator()(const Tensor& x) const {
  if (x.ndim() < 1 || x.shape().back() != dim)
    fail("RMSNorm",
         "input of shape " + shape_str(x.shape()) + " for a layer of dim " + std::to_string(dim),
         ErrorKind::kValue);
  Tensor y = x * (x.square().mean({-1}, true) + eps).pow(-0.5);
  return weight ? y * *weight : y;
}

std::vector<Tensor> RMSNorm::parameters() const { return params(weight, std::nullopt); }

void RMSNorm::named(NamedTensors& out, const std::string& prefix) const {
  list(out, prefix, weight, std::nullopt);
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps_, bool affine)
    : num_groups(groups), num_channels(channels), eps(eps_) {
  if (groups < 1 || channels % groups != 0)
    fail("GroupNorm",
         std::to_string(channels) + " channels cannot be split into " + std::to_string(groups) +
             " groups",
         ErrorKind::kValue);
  if (affine) {
    weight = affine_param({channels}, 1);
    bias = affine_param({channels}, 0);
  }
}

Tensor GroupNorm::operator()(const Tensor& x) const {
  check_channels("GroupNorm", x, num_channels);
  Tensor y = normalize(x.reshape({x.shape()[0], num_groups, -1}), {2}, eps).reshape(x.shape());
  if (weight) y = y * per_channel(*weight, x.ndim());
  return bias ? y + per_channel(*bias, x.ndim()) : y;
}

std::vector<Tensor> GroupNorm::parameters() const { return params(weight, bias); }

void GroupNorm::named(NamedTensors& out, const std::string& prefix) const {
  list(out, prefix, weight, bias);
}

}  // namespace baregrad::tensor::nn
