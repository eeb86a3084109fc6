// Neural-network layers over Tensor (tinygrad's nn): parameters are plain tensors that require
// grad, initialised from the seeded generator. Every layer lists its state tensors with named()
// under tinygrad's names ("weight", "bias", "running_mean", ...) for nn_state.h.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace baregrad::tensor::nn {

// (name, tensor) pairs in a layer's declaration order; the tensors share storage with the layer.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// y = x @ weight.T + bias, weight (out, in) and bias (out,) drawn from U(-1/sqrt(in), 1/sqrt(in)).
struct Linear {
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const;
  // Appends prefix + "weight" and prefix + "bias" (when present) to `out`.
  void named(NamedTensors& out, const std::string& prefix) const;

  Tensor weight;
  std::optional<Tensor> bias;
};

// 2-D convolution over (N, C, H, W); weight (out, in/groups, k, k), bias (out,), both drawn from
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in/groups * k * k.
struct Conv2d {
  Conv2d(int64_t in_channels,
         int64_t out_channels,
         int64_t kernel,
         int64_t stride = 1,
         int64_t padding = 0,
         int64_t dilation = 1,
         int64_t groups = 1,
         bool bias = true);
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const;
  // Appends prefix + "weight" and prefix + "bias" (when present) to `out`.
  void named(NamedTensors& out, const std::string& prefix) const;

  Tensor weight;
  std::optional<Tensor> bias;
  int64_t stride, padding, dilation, groups;
};

// 1-D convolution over (N, C, L) as a conv2d of unit height; weight (out, in/groups, k) and
// bias (out,) drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in/groups * k.
struct Conv1d {
  Conv1d(int64_t in_channels,
         int64_t out_channels,
         int64_t kernel,
         int64_t stride = 1,
         int64_t padding = 0,
         int64_t dilation = 1,
         int64_t groups = 1,
         bool bias = true);
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const;
  // Appends prefix + "weight" and prefix + "bias" (when present) to `out`.
  void named(NamedTensors& out, const std::string& prefix) const;

  Tensor weight;
  std::optional<Tensor> bias;
  int64_t stride, padding, dilation, groups;
};

// The transpose (gradient w.r.t. the input) of conv2d: x (N, C, H, W) and weight
// (C, O/groups, K, K) give (N, O, OH, OW) with OH = (H-1)*stride - 2*padding +
// dilation*(K-1) + output_padding + 1; output_padding < max(stride, dilation).
Tensor conv_transpose2d(const Tensor& x,
                        const Tensor& weight,
                        const std::optional<Tensor>& bias = std::nullopt,
                        int64_t stride = 1,
                        int64_t padding = 0,
                        int64_t output_padding = 0,
                        int64_t dilation = 1,
                        int64_t groups = 1);

// conv_transpose2d as a layer (tinygrad): weight (in, out/groups, k, k) drawn from
// U(-1/sqrt(in*k*k), 1/sqrt(in*k*k)), bias (out,) from U(-1/sqrt(in/groups*k*k), ...).
struct ConvTranspose2d {
  ConvTranspose2d(int64_t in_channels,
                  int64_t out_channels,
                  int64_t kernel,
                  int64_t stride = 1,
                  int64_t padding = 0,
                  int64_t output_padding = 0,
                  int64_t dilation = 1,
                  int64_t groups = 1,
                  bool bias = true);
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const;
  // Appends prefix + "weight" and prefix + "bias" (when present) to `out`.
  void named(NamedTensors& out, const std::string& prefix) const;

  Tensor weight;
  std::optional<Tensor> bias;
  int64_t stride, padding, output_padding, dilation, groups;
};

// Rows of weight (vocab, dim) picked by integer indices: idx (...) -> (..., dim), computed as
// one_hot(idx) @ weight so that it is differentiable w.r.t. weight; an index outside
// [0, vocab) gives a zero row. weight is glorot-uniform as tinygrad: U(+-sqrt(6/(vocab+dim))).
struct Embedding {
  Embedding(int64_t vocab_size, int64_t embed_size);
  Tensor operator()(const Tensor& idx) const;
  std::vector<Tensor> parameters() const;
  // Appends prefix + "weight" to `out`.
  void named(NamedTensors& out, const std::string& prefix) const;

  Tensor weight;
  int64_t vocab_size, embed_size;
};

// ---- normalisation layers (nn_norm.cc) ----------------------------------------------------------

// Batch normalisation over axis 1 of x (N, C, ...): 2-D (N, C, H, W), 1-D (N, C) or (N, C, L).
// weight = 1 and bias = 0 (when affine); running_mean = 0, running_var = 1 (float32), and
// num_batches_tracked = 0 (int64 scalar) are state that does not require grad.
struct BatchNorm {
  explicit BatchNorm(int64_t num_features,
                     double eps = 1e-5,
                     bool affine = true,
                     double momentum = 0.1);
  // Training: normalises with the batch mean and biased variance, then assigns
  // running = (1 - momentum) * running + momentum * batch stat (the variance unbiased, n/(n-1))
  // and adds 1 to num_batches_tracked. Eval: normalises with the running statistics.
  Tensor operator()(const Tensor& x);
  std::vector<Tensor> parameters() const;  // weight and bias (when affine)
  // Appends weight, bias (when affine), running_mean, running_var, num_batches_tracked.
  void named(NamedTensors& out, const std::string& prefix) const;

  std::optional<Tensor> weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;
  double eps, momentum;
  bool training = true;
};
using BatchNorm1d = BatchNorm;
using BatchNorm2d = BatchNorm;

// (x - mean) / sqrt(var + eps) over the trailing axes given by normalized_shape (biased var),
// then * weight + bias (ones and zeros of normalized_shape) when elementwise_affine.
struct LayerNorm {
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{dim}, eps, elementwise_affine) {}
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const;
  // Appends prefix + "weight" and prefix + "bias" (when affine) to `out`.
  void named(NamedTensors& out, const std::string& prefix) const;

  Shape normalized_shape;
  std::optional<Tensor> weight, bias;
  double eps;
};

// x / sqrt(mean(x^2 over the last axis) + eps) * weight (ones (dim,), when elementwise_affine).
struct RMSNorm {
  explicit RMSNorm(int64_t dim, double eps = 1e-6, bool elementwise_affine = true);
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const;
  // Appends prefix + "weight" (when affine) to `out`.
  void named(NamedTensors& out, const std::string& prefix) const;

  int64_t dim;
  std::optional<Tensor> weight;
  double eps;
};

// x (N, C, ...) with C split into num_groups groups, each normalised over its channels and all
// later axes (biased var), then * weight + bias per channel (ones and zeros (C,)) when affine.
struct GroupNorm {
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const;
  // Appends prefix + "weight" and prefix + "bias" (when affine) to `out`.
  void named(NamedTensors& out, const std::string& prefix) const;

  int64_t num_groups, num_channels;
  std::optional<Tensor> weight, bias;
  double eps;
};

}  // namespace baregrad::tensor::nn
