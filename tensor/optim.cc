#include "tensor/optim.h"

#include <cmath>

#include "base/error.h"
#include "tensor/schedule.h"

namespace baregrad::tensor {

Optimizer::Optimizer(std::vector<Tensor> params, double lr_) : lr(lr_), params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); i++)
    if (!params_[i].requires_grad())
      fail("optimizer", "parameter " + std::to_string(i) + " of shape " +
                            shape_str(params_[i].shape()) + " does not require grad");
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.clear_grad();
}

void Optimizer::step() {
  std::vector<Tensor> news;
  std::vector<Tensor*> state;
  for (size_t i = 0; i < params_.size(); i++) {
    auto g = params_[i].grad();
    if (!g)
      fail("step", "parameter " + std::to_string(i) + " of shape " + shape_str(params_[i].shape()) +
                       " has no gradient (was it used in the loss? call backward() first)");
    Tensor n = update(i, params_[i], g->detach(), state).cast(params_[i].dtype());
    news.push_back(n.lazy().is_base_view() ? n : n.contiguous());
  }
  // One schedule for every update, so shared work is computed once.
  std::vector<Lazy> targets;
  for (auto& n : news) targets.push_back(n.lazy());
  for (Tensor* s : state) targets.push_back(s->lazy());
  run_schedule(create_schedule(targets));
  for (size_t i = 0; i < params_.size(); i++) params_[i].assign(news[i]);
  for (Tensor* s : state) s->assign(*s);
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(std::move(params), lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {
  for (auto& p : params_) velocity_.push_back(Tensor::zeros(p.shape(), p.dtype()));
}

Tensor SGD::update(size_t i, const Tensor& p, const Tensor& grad, std::vector<Tensor*>& state) {
  Tensor g = grad;
  if (weight_decay_ != 0) g = g + p.detach() * weight_decay_;
  if (momentum_ != 0) {
    velocity_[i] = velocity_[i] * momentum_ + g;
    state.push_back(&velocity_[i]);
    g = nesterov_ ? g + velocity_[i] * momentum_ : velocity_[i];
  }
  return p.detach() - g * lr;
}

Adam::Adam(
    std::vector<Tensor> params, double lr, double b1, double b2, double eps, double weight_decay)
    : Optimizer(std::move(params), lr), b1_(b1), b2_(b2), eps_(eps), weight_decay_(weight_decay) {
  for (auto& p : params_) {
    m_.push_back(Tensor::zeros(p.shape(), p.dtype()));
    v_.push_back(Tensor::zeros(p.shape(), p.dtype()));
  }
}

Tensor Adam::update(size_t i, const Tensor& p, const Tensor& g, std::vector<Tensor*>& state) {
  if (i == 0) {
    t_++;
    // The bias corrections change every step: as device scalars (not constants) they keep
    // every step's kernels identical, so they compile once.
    double c1 = 1 - std::pow(b1_, static_cast<double>(t_));
    double c2 = 1 - std::pow(b2_, static_cast<double>(t_));
    inv_c1_ = Tensor::from_data({1 / c1}, {}, p.dtype());
    inv_c2_ = Tensor::from_data({1 / c2}, {}, p.dtype());
  }
  m_[i] = m_[i] * b1_ + g * (1 - b1_);
  v_[i] = v_[i] * b2_ + g * g * (1 - b2_);
  state.push_back(&m_[i]);
  state.push_back(&v_[i]);
  Tensor step =
      (m_[i] * inv_c1_->cast(p.dtype())) / ((v_[i] * inv_c2_->cast(p.dtype())).sqrt() + eps_);
  Tensor pd = p.detach();
  if (weight_decay_ != 0) step = step + pd * weight_decay_;
  return pd - step * lr;
}

}  // namespace baregrad::tensor
