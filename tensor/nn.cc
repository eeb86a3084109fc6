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
  if (groups < 1 || in % groups != 0 || out % groups != 0)
    fail("Conv2d", std::to_string(in) + " -> " + std::to_string(out) +
                       " channels cannot be split into " + std::to_string(groups) + " groups");
  double bound = 1 / std::sqrt(double(in / groups * k * k));
  weight = Tensor::uniform({out, in / groups, k, k}, -bound, bound);
  weight.requires_grad_();
  if (with_bias) {
    bias = Tensor::uniform({out}, -bound, bound);
    bias->requires_grad_();
  }
}

Tensor Conv2d::operator()(const Tensor& x) const {
  return x.conv2d(weight, bias, stride, padding, dilation, groups);
}

std::vector<Tensor> Conv2d::parameters() const {
  std::vector<Tensor> p{weight};
  if (bias) p.push_back(*bias);
  return p;
}

}  // namespace baregrad::tensor::nn
