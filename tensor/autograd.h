// Reverse-mode autograd over Tensor ops: each op whose inputs need gradients records a
// GradNode; backward() walks them from a scalar in reverse topological order.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tensor/lazy.h"

namespace baregrad::tensor {

class Tensor;
struct TensorImpl;

// Maps the gradient of an op's output to the gradients of its inputs (nullopt: none).
using BackwardFn = std::function<std::vector<std::optional<Tensor>>(const Tensor& grad)>;

struct GradNode {
  const char* op;
  std::vector<std::shared_ptr<TensorImpl>> parents;
  BackwardFn backward;
  // Each parent's base and its version when the op ran: backward() refuses to run on values
  // that assign() or setitem replaced or wrote since (torch's "modified by an inplace operation").
  std::vector<std::pair<std::weak_ptr<LazyBase>, uint64_t>> parent_bases;
};

// What a Tensor value refers to; copies of a Tensor share it (and so share .grad).
struct TensorImpl {
  Lazy lazy;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // set by backward() on tensors that require grad
  std::shared_ptr<GradNode> node;    // how this tensor was computed, when it needs grad

  // Releases the graph it alone holds one node at a time (no recursion over a deep graph).
  ~TensorImpl();
};

}  // namespace baregrad::tensor
