#include "tensor/autograd.h"

#include <unordered_map>
#include <unordered_set>

#include "base/check.h"
#include "base/error.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {

TensorImpl::~TensorImpl() {
  // A node held only here is taken out of its parents before they die, so each TensorImpl dies
  // with no graph behind it. The closure goes first: it may hold more references to parents.
  std::vector<std::shared_ptr<GradNode>> dying;
  if (node && node.use_count() == 1) dying.push_back(std::move(node));
  while (!dying.empty()) {
    std::shared_ptr<GradNode> n = std::move(dying.back());
    dying.pop_back();
    n->backward = nullptr;
    for (auto& p : n->parents)
      if (p && p.use_count() == 1 && p->node && p->node.use_count() == 1)
        dying.push_back(std::move(p->node));
  }
}

Tensor& Tensor::requires_grad_(bool on) {
  if (on && !dtypes::is_float(dtype()))
    fail("requires_grad", "only float tensors can require grad, got " + dtype().name());
  impl_->requires_grad = on;
  return *this;
}

std::optional<Tensor> Tensor::grad() const {
  if (!impl_->grad) return std::nullopt;
  return Tensor(impl_->grad);
}

namespace {
// The inputs of `node` still hold the values its op used (see GradNode::parent_bases).
void check_unchanged(const GradNode& node) {
  for (size_t i = 0; i < node.parents.size(); i++) {
    const Lazy& now = node.parents[i]->lazy;
    const auto& [base, version] = node.parent_bases[i];
    if (base.lock() == now.base && now.base->version == version) continue;
    fail("backward", std::string("input ") + std::to_string(i) + " of " + node.op +
                         " (a tensor of shape " + shape_str(now.shape()) + " " +
                         now.dtype().name() + ") was modified by assign() or setitem after " +
                         node.op +
                         " used it, so its gradient cannot be computed; run the forward again "
                         "after the update");
  }
}
}  // namespace

// Propagates `seed` (the gradient of `root`) back through the recorded graph. With `targets`,
// returns their gradients (zeros when unreached); otherwise accumulates into leaves' grad().
std::vector<Tensor> run_backward(const Tensor& root,
                                 const Tensor& seed,
                                 const std::vector<Tensor>* targets) {
  if (!root.requires_grad())
    fail("backward", "the tensor does not require grad (no input of it has requires_grad)");
  // Reverse topological order over the nodes that need gradients.
  std::vector<TensorImpl*> order;
  std::unordered_set<TensorImpl*> seen;
  std::vector<std::pair<TensorImpl*, size_t>> stack{{root.impl_.get(), 0}};
  seen.insert(root.impl_.get());
  while (!stack.empty()) {
    auto& [t, i] = stack.back();
    if (t->node && i < t->node->parents.size()) {
      TensorImpl* p = t->node->parents[i++].get();
      if (p->requires_grad && seen.insert(p).second) stack.push_back({p, 0});
    } else {
      order.push_back(t);
      stack.pop_back();
    }
  }
  std::unordered_map<TensorImpl*, Tensor> grads;
  grads.emplace(root.impl_.get(), seed);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* t = *it;
    auto g = grads.find(t);
    if (!t->node || g == grads.end()) continue;
    check_unchanged(*t->node);
    std::vector<std::optional<Tensor>> pg = t->node->backward(g->second);
    CHECK_EQ(pg.size(), t->node->parents.size()) << "backward of " << t->node->op;
    for (size_t i = 0; i < pg.size(); i++) {
      TensorImpl* p = t->node->parents[i].get();
      if (!pg[i] || !p->requires_grad) continue;
      Tensor gi = pg[i]->detach();
      CHECK(gi.shape() == p->lazy.shape())
          << "backward of " << t->node->op << " gave " << shape_str(gi.shape()) << " for "
          << shape_str(p->lazy.shape());
      if (gi.dtype() != p->lazy.dtype()) gi = gi.cast(p->lazy.dtype());
      auto [slot, fresh] = grads.emplace(p, gi);
      if (!fresh) slot->second = slot->second + gi;
    }
  }
  std::vector<Tensor> out;
  if (targets) {
    for (const Tensor& t : *targets) {
      auto it = grads.find(t.impl_.get());
      out.push_back(it != grads.end() ? it->second
                                      : Tensor::full(t.shape(), 0, t.dtype(), t.device()));
    }
    return out;
  }
  for (TensorImpl* t : order) {
    if (t->node) continue;  // only leaves keep .grad
    auto it = grads.find(t);
    if (it == grads.end()) continue;
    Tensor g = it->second;
    if (t->grad) g = Tensor(t->grad) + g;
    t->grad = g.impl_;
  }
  return out;
}

namespace {
Tensor seed_for(const Tensor& root, const std::optional<Tensor>& grad_out, const char* op) {
  if (grad_out) {
    if (grad_out->shape() != root.shape())
      fail(op, "gradient of shape " + shape_str(grad_out->shape()) + " for a tensor of shape " +
                   shape_str(root.shape()));
    return grad_out->detach();
  }
  if (root.numel() != 1)
    fail(op, "called on a non-scalar tensor of shape " + shape_str(root.shape()) +
                 " without a gradient of that shape");
  return Tensor::full(root.shape(), 1, root.dtype(), root.device());
}
}  // namespace

void Tensor::backward(std::optional<Tensor> grad_out) const {
  run_backward(*this, seed_for(*this, grad_out, "backward"), nullptr);
}

std::vector<Tensor> Tensor::gradient(const std::vector<Tensor>& targets) const {
  return run_backward(*this, seed_for(*this, std::nullopt, "gradient"), &targets);
}

}  // namespace baregrad::tensor
