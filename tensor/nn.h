// Neural-network layers over Tensor (tinygrad's nn): parameters are plain tensors that require
// grad, initialised from the seeded generator.
#pragma once

#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace baregrad::tensor::nn {

// y = x @ weight.T + bias, weight (out, in) and bias (out,) drawn from U(-1/sqrt(in), 1/sqrt(in)).
struct Linear {
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> parameters() const;

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

  Tensor weight;
  std::optional<Tensor> bias;
  int64_t stride, padding, dilation, groups;
};

}  // namespace baregrad::tensor::nn
