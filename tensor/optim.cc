#include "tensor/optim.h"

#include <cmath>

#include "base/error.h"
#include "tensor/schedule.h"

namespace baregrad::tensor {
namespace {

// float32 as tinygrad's, float64 when a parameter is (so its updates stay exact).
DType lr_dtype(const std::vector<Tensor>& params) {
  for (const Tensor& p : params)
    if (p.dtype() == dtypes::kFloat64) return dtypes::kFloat64;
  return dtypes::kFloat32;
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr)
    : params_(std::move(params)),
      lr_(Tensor::from_data(
              {lr}, {1}, lr_dtype(params_), params_.empty() ? "" : params_[0].device())
              .realize()) {
  for (size_t i = 0; i < params_.size(); i++)
    if (!params_[i].requires_grad())
      fail("optimizer",
           "parameter " + std::to_string(i) + " of shape " + shape_str(params_[i].shape()) +
               " does not require grad",
           ErrorKind::kValue);
}

void Optimizer::set_lr(double lr) {
  lr_.assign(Tensor::from_data({lr}, {1}, lr_.dtype(), lr_.device()));
  lr_.realize();
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.clear_grad();
}

void Optimizer::step() {
  std::vector<Tensor> news;
  StateUpdates state;
  for (size_t i = 0; i < params_.size(); i++) {
    auto g = params_[i].grad();
    if (!g)
      fail("step", "parameter " + std::to_string(i) + " of shape " + shape_str(params_[i].shape()) +
                       " has no gradient (was it used in the loss? call backward() first)");
    news.push_back(update(i, params_[i], g->detach(), state).cast(params_[i].dtype()));
  }
  // In place, in one schedule: shared work runs once, parameters keep their buffers (which a
  // TinyJit replay relies on), and a lazy loss read after step() still sees the old values.
  std::vector<std::pair<Tensor, Tensor>> updates;
  for (size_t i = 0; i < params_.size(); i++) updates.push_back({params_[i], news[i]});
  for (auto& [target, value] : state) updates.push_back({*target, value});
  Tensor::assign_all(updates);
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(std::move(params), lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {
  for (auto& p : params_) velocity_.push_back(Tensor::full(p.shape(), 0, p.dtype(), p.device()));
}

Tensor SGD::update(size_t i, const Tensor& p, const Tensor& grad, StateUpdates& state) {
  Tensor g = grad;
  if (weight_decay_ != 0) g = g + p.detach() * weight_decay_;
  if (momentum_ != 0) {
    Tensor v = velocity_[i] * momentum_ + g;
    state.push_back({&velocity_[i], v});
    g = nesterov_ ? g + v * momentum_ : v;
  }
  return p.detach() - g * lr_as(g.dtype());
}

Adam::Adam(
    std::vector<Tensor> params, double lr, double b1, double b2, double eps, double weight_decay)
    : Optimizer(std::move(params), lr),
      b1_(b1),
      b2_(b2),
      eps_(eps),
      weight_decay_(weight_decay),
      b1_t_(
          Tensor::full({1}, 1, dtypes::kFloat64, Optimizer::lr().device()).contiguous().realize()),
      b2_t_(
          Tensor::full({1}, 1, dtypes::kFloat64, Optimizer::lr().device()).contiguous().realize()) {
  for (auto& p : params_) {
    m_.push_back(Tensor::full(p.shape(), 0, p.dtype(), p.device()));
    v_.push_back(Tensor::full(p.shape(), 0, p.dtype(), p.device()));
  }
}

Tensor Adam::update(size_t i, const Tensor& p, const Tensor& g, StateUpdates& state) {
  if (i == 0) {
    // Bias corrections from beta^t on the device: 1 / (1 - beta^t).
    Tensor b1t = b1_t_ * b1_, b2t = b2_t_ * b2_;
    state.push_back({&b1_t_, b1t});
    state.push_back({&b2_t_, b2t});
    inv_c1_ = (-b1t.reshape({}) + 1.0).reciprocal();
    inv_c2_ = (-b2t.reshape({}) + 1.0).reciprocal();
  }
  Tensor m = m_[i] * b1_ + g * (1 - b1_);
  Tensor v = v_[i] * b2_ + g * g * (1 - b2_);
  state.push_back({&m_[i], m});
  state.push_back({&v_[i], v});
  Tensor step = (m * inv_c1_->cast(p.dtype())) / ((v * inv_c2_->cast(p.dtype())).sqrt() + eps_);
  Tensor pd = p.detach();
  if (weight_decay_ != 0) step = step + pd * weight_decay_;
  if (trust_ratio_) {
    Tensor pn = (pd * pd).sum().sqrt(), sn = (step * step).sum().sqrt();
    Tensor zero = Tensor::full({}, 0, pn.dtype(), pn.device());
    Tensor ratio = Tensor::where(zero.lt(pn).logical_and(zero.lt(sn)), pn / sn, zero + 1.0);
    step = step * ratio;
  }
  return pd - step * lr_as(step.dtype());
}

}  // namespace baregrad::tensor
