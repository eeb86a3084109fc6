// Reverse-mode autograd over Tensor ops: each op whose inputs may need gradients records a
// GradNode; backward() walks them from a scalar in reverse topological order.
//
// requires_grad is tinygrad's tri-state (GradMode). An op with an input that requires grad
// (kOn) records a node and its output requires grad, as in PyTorch. An op whose float inputs
// are only undecided (kUnset, the default) records a node too, so that a gradient can still be
// asked for, but that history follows tinygrad's lifetime: realize() drops it (tinygrad
// replaces a realized tensor's graph with its buffer), so a forward-only program does not keep
// its activations alive. kOff tensors (detach(), requires_grad=False) stop gradients.
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
  // The output's base was not computed yet when the op ran (not a view of a realized buffer):
  // once it is, an undecided history is dropped (see Tensor::record).
  bool out_pending = false;
};

// tinygrad's requires_grad: None (kUnset), True (kOn), False (kOff).
enum class GradMode : uint8_t { kUnset, kOn, kOff };

// What a Tensor value refers to; copies of a Tensor share it (and so share .grad).
struct TensorImpl {
  Lazy lazy;
  GradMode mode = GradMode::kUnset;
  // Set when realize() dropped the history of this kUnset tensor: backward() says so.
  bool history_dropped = false;
  std::shared_ptr<TensorImpl> grad;  // set by backward() on tensors that require grad
  // backward() also fills grad of this tensor though it has a history (torch's retain_grad).
  bool retain_grad = false;
  // How many Python objects hold this tensor (the bindings count them): backward() treats a
  // held computed tensor as a leaf too, as tinygrad fills .grad of every tensor a program holds.
  int py_handles = 0;
  std::shared_ptr<GradNode> node;  // how this tensor was computed, when it may need grad
  // The tensor detached_leaf() was taken from: backward() through this one gives it zeros.
  std::weak_ptr<TensorImpl> detached_from;

  // Releases the graph it alone holds one node at a time (no recursion over a deep graph).
  ~TensorImpl();
};

// True when `t`'s undecided history may be dropped now: its value has been computed since.
inline bool history_realized(const TensorImpl& t) {
  return t.mode == GradMode::kUnset && t.node && t.node->out_pending && t.lazy.base->realized;
}

// A float tensor that is not requires_grad=false: gradients may flow into it.
inline bool grad_capable(const TensorImpl& t) {
  return t.mode == GradMode::kOn ||
         (t.mode == GradMode::kUnset && compiler::dtypes::is_float(t.lazy.dtype()));
}

// False while backward() runs: the ops of its backward pass record history only for inputs that
// require grad (kOn), never for undecided ones (see Tensor::record). gradient() records the
// graph of the gradients it computes (create_graph() is true, and backward functions read
// their inputs with history), so its results are differentiable as tinygrad's are: a second
// gradient() of a gradient gives second derivatives.
bool record_undecided();
bool create_graph();

}  // namespace baregrad::tensor
