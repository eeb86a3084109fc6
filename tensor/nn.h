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

}  // namespace baregrad::tensor::nn
