#include "tensor/nn.h"

#include <cmath>

#include "base/error.h"

namespace baregrad::tensor::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias)
    : weight(Tensor::uniform({out, in}, -1 / std::sqrt(double(in)), 1 / std::sqrt(double(in)))) {
  weight.requires_grad_();
  if (with_bias) {
    bias = Tensor::uniform({out}, -1 / std::sqrt(double(in)), 1 / std::sqrt(double(in)));
    bias->requires_grad_();
  }
}

Tensor Linear::operator()(const Tensor& x) const {
  if (x.ndim() < 1 || x.shape().back() != weight.shape()[1])
    fail("Linear", "input of shape " + shape_str(x.shape()) + " for a layer with " +
                       std::to_string(weight.shape()[1]) + " input features");
  Tensor y = x.matmul(weight.transpose());
  return bias ? y + *bias : y;
}

std::vector<Tensor> Linear::parameters() const {
  std::vector<Tensor> p{weight};
  if (bias) p.push_back(*bias);
  return p;
}

}  // namespace baregrad::tensor::nn
