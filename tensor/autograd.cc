#include "tensor/autograd.h"

#include <algorithm>
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

namespace {
thread_local int backward_depth = 0;       // > 0 while run_backward runs on this thread
thread_local bool building_graph = false;  // the innermost run_backward records its own graph

struct InBackward {
  explicit InBackward(bool graph) : saved_(building_graph) {
    backward_depth++;
    building_graph = graph;
  }
  ~InBackward() {
    backward_depth--;
    building_graph = saved_;
  }
  InBackward(const InBackward&) = delete;
  InBackward& operator=(const InBackward&) = delete;

 private:
  bool saved_;
};

std::string describe(const TensorImpl& t) {
  return "a tensor of shape " + shape_str(t.lazy.shape()) + " " + t.lazy.dtype().name();
}
}  // namespace

bool record_undecided() { return backward_depth == 0 || building_graph; }
bool create_graph() { return building_graph; }

Tensor& Tensor::requires_grad_(bool on) { return set_requires_grad(on); }

Tensor& Tensor::set_requires_grad(std::optional<bool> on) {
  if (on.value_or(false) && !dtypes::is_float(dtype()))
    fail("requires_grad", "only float tensors can require grad, got " + dtype().name());
  // A history recorded only because the inputs were undecided is not kept: the tensor becomes
  // a leaf of its own (a parameter built as randn(...) * 0.1 is one).
  if (on && impl_->mode == GradMode::kUnset) impl_->node.reset();
  impl_->mode = !on ? GradMode::kUnset : *on ? GradMode::kOn : GradMode::kOff;
  return *this;
}

std::optional<bool> Tensor::requires_grad_state() const {
  if (impl_->mode == GradMode::kUnset) return std::nullopt;
  return impl_->mode == GradMode::kOn;
}

Tensor Tensor::detach() const {
  Tensor t(impl_->lazy);
  t.impl_->mode = GradMode::kOff;
  return t;
}

Tensor Tensor::detached_leaf() const {
  Tensor t(impl_->lazy);
  t.impl_->detached_from = impl_;
  return t;
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

// Propagates `seed` (the gradient of `root`) back through the recorded graph, along the paths
// that lead to a wanted tensor: `targets` when given (their gradients are returned), else every
// grad-capable leaf (the gradient is accumulated into its grad()).
std::vector<Tensor> run_backward(const Tensor& root,
                                 const Tensor& seed,
                                 const std::vector<Tensor>* targets,
                                 bool materialize,
                                 const char* op,
                                 bool graph) {
  InBackward guard(graph);
  TensorImpl* r = root.impl_.get();
  if (!grad_capable(*r))
    fail(op, r->mode == GradMode::kOff
                 ? "the tensor has requires_grad=False (detach() gives that), so no gradient flows"
                 : "only float tensors have gradients, got " + describe(*r));
  if (!r->node && r->history_dropped)
    fail(op,
         "the graph behind this tensor was dropped when it was realized: its inputs' "
         "requires_grad was None, and realize() keeps no history for those (as tinygrad's "
         "realize); set requires_grad=True on the inputs, or ask for the gradient before "
         "realizing");
  std::unordered_set<const TensorImpl*> wanted;
  if (targets)
    for (const Tensor& t : *targets) wanted.insert(t.impl_.get());
  // Reverse topological order of the grad-capable tensors behind the root.
  std::vector<TensorImpl*> order;
  std::unordered_set<TensorImpl*> seen;
  std::vector<std::pair<TensorImpl*, size_t>> stack{{r, 0}};
  seen.insert(r);
  while (!stack.empty()) {
    auto& [t, i] = stack.back();
    if (t->node && i < t->node->parents.size()) {
      TensorImpl* p = t->node->parents[i++].get();
      if (grad_capable(*p) && seen.insert(p).second) stack.push_back({p, 0});
    } else {
      order.push_back(t);
      stack.pop_back();
    }
  }
  // A tensor is on a useful path when it is wanted or a parent is (parents come first).
  // backward() wants the leaves that require grad. When none does (tinygrad code that never
  // decides), it wants every undecided leaf but scalar constants (the 2 of `x * 2`; tinygrad
  // skips its CONSTs too). A broadcast constant (Tensor.ones(3, 3), Tensor.full) is a tensor
  // like any other: tinygrad's full() makes a buffer. With parameters in the graph an input's
  // gradient, unread, would be computed when the optimizer overwrites a weight it reads (assign
  // realizes the small lazy readers of a buffer first), a matmul per step for nothing: see below.
  bool any_on = std::any_of(order.begin(), order.end(),
                            [](const TensorImpl* t) { return t->mode == GradMode::kOn; });
  // A computed tensor a Python program holds counts as a leaf (tinygrad fills the .grad of every
  // tensor it can see), but for the root itself (its .grad would only be the seed). With
  // parameters in the graph, an undecided tensor is wanted only when a Python program holds it
  // (an input batch, say): its gradient is droppable (LazyBase), so an optimizer step that
  // overwrites a weight it reads drops it instead of computing it.
  // An arange, eye or linspace (LazyBase::iota_expr) has no device in tinygrad, and its
  // backward() skips the tensors without one.
  auto constant = [](const TensorImpl* t) {
    const LazyBase* b = t->lazy.base.get();
    if (b->kind == LazyKind::kConst) return t->lazy.is_base_view();
    return b->iota_expr && !b->force_kernel && !b->write_into;
  };
  auto wanted_leaf = [any_on, r, constant](const TensorImpl* t) {
    if (t->node && (t->py_handles == 0 || t == r)) return false;
    if (t->mode == GradMode::kOn) return true;
    if (any_on && t->py_handles == 0) return false;
    return !constant(t);
  };
  std::unordered_set<const TensorImpl*> useful;
  for (TensorImpl* t : order) {
    bool use = targets ? wanted.count(t) > 0 : wanted_leaf(t) || t->retain_grad;
    if (!use && t->node)
      for (auto& p : t->node->parents) use = use || useful.count(p.get()) > 0;
    if (use) useful.insert(t);
  }
  if (!targets && !useful.count(r))
    fail(op,
         "no tensor in this graph can have a gradient: every input is requires_grad=False "
         "(requires_grad_(False) gives that), an integer tensor, a constant or an arange "
         "(clone() one to differentiate it)");
  std::unordered_map<TensorImpl*, Tensor> grads;
  grads.emplace(r, seed);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* t = *it;
    auto g = grads.find(t);
    if (!t->node || g == grads.end() || !useful.count(t)) continue;
    check_unchanged(*t->node);
    std::vector<std::optional<Tensor>> pg = t->node->backward(g->second);
    CHECK_EQ(pg.size(), t->node->parents.size()) << "backward of " << t->node->op;
    for (size_t i = 0; i < pg.size(); i++) {
      TensorImpl* p = t->node->parents[i].get();
      if (!pg[i] || !useful.count(p) || !grad_capable(*p)) continue;
      Tensor gi = graph ? *pg[i] : pg[i]->detach();
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
    bool cut = std::any_of(order.begin(), order.end(),
                           [](const TensorImpl* t) { return !t->node && t->history_dropped; });
    for (size_t i = 0; i < targets->size(); i++) {
      const Tensor& t = (*targets)[i];
      auto it = grads.find(t.impl_.get());
      if (it != grads.end()) {
        out.push_back(it->second);
        continue;
      }
      // A float target the graph does not reach: zeros, as tinygrad's gradient gives, unless
      // realize() cut the graph on the way (the target may well have been behind it).
      bool off = t.impl_->mode == GradMode::kOff, is_float = dtypes::is_float(t.dtype());
      if (!materialize && (off || !is_float || cut))
        fail(op, "target " + std::to_string(i) + " (" + describe(*t.impl_) + ") " +
                     (off         ? "has requires_grad=False, so no gradient reaches it"
                      : !is_float ? "is not a float tensor, so it has no gradient"
                                  : "is not in the graph of this tensor, which realize() cut "
                                    "where a requires_grad=None tensor was computed (set "
                                    "requires_grad=True on the inputs to keep it)") +
                     " (materialize_grads=True gives zeros instead)");
      out.push_back(Tensor::full(t.shape(), 0, t.dtype(), t.device()));
    }
    return out;
  }
  for (TensorImpl* t : order) {
    if (t->node && !t->retain_grad && !wanted_leaf(t)) continue;  // leaves, and see TensorImpl
    auto it = grads.find(t);
    if (it == grads.end()) continue;
    Tensor g = it->second;
    // An undecided tensor's gradient beside parameters: a base of its own, droppable (see
    // LazyBase), so that no parameter's gradient shares it.
    bool droppable = any_on && t->mode != GradMode::kOn && !g.lazy().base->realized;
    if (droppable && !t->grad) g = Tensor(lazy_contiguous(g.lazy(), g.dtype()));
    if (t->grad) {
      // Into the grad tensor already there: whoever holds it sees the sum, lazy readers of the
      // old value keep it (they read its old base).
      g = Tensor(t->grad) + g;
      t->grad->lazy = g.impl_->lazy;
    } else {
      t->grad = g.impl_;
    }
    if (droppable) g.lazy().base->droppable = true;
  }
  // tinygrad's backward() fills every tensor its toposort reaches, and that goes on through a
  // detach into the detached tensor's graph: the wanted tensors there that have no .grad yet
  // get zeros (no gradient flows through a detach).
  std::vector<TensorImpl*> behind;
  auto reach = [&](TensorImpl* t) {
    if (t && seen.insert(t).second) behind.push_back(t);
  };
  for (TensorImpl* t : order) reach(t->detached_from.lock().get());
  for (size_t i = 0; i < behind.size(); i++) {
    TensorImpl* t = behind[i];
    if (t->node)
      for (auto& p : t->node->parents)
        if (grad_capable(*p)) reach(p.get());
    reach(t->detached_from.lock().get());
    if (!t->grad && grad_capable(*t) && wanted_leaf(t) && t != r)
      t->grad =
          Tensor::full(t->lazy.shape(), 0, t->lazy.dtype(), t->lazy.base->device->name()).impl_;
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
  run_backward(*this, seed_for(*this, grad_out, "backward"), nullptr, false, "backward",
               /*graph=*/false);
}

std::vector<Tensor> Tensor::gradient(const std::vector<Tensor>& targets, bool materialize) const {
  return run_backward(*this, seed_for(*this, std::nullopt, "gradient"), &targets, materialize,
                      "gradient", /*graph=*/true);
}

}  // namespace baregrad::tensor
