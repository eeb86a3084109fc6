// Optimizers: update parameters in place from the gradients backward() left in them.
#pragma once

#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace baregrad::tensor {

class Optimizer {
 public:
  // Every parameter must be a float tensor that requires grad.
  explicit Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  // Clears every parameter's gradient.
  void zero_grad();
  // Applies one update and realizes the new parameters (and optimizer state) in one schedule.
  // Throws baregrad::Error("[step] ...") naming a parameter that has no gradient.
  void step();
  // The learning rate: a float32 tensor of shape (1,) (float64 when a parameter is) on the
  // parameters' device that every
  // step reads, so a new rate changes no kernel and a TinyJit-captured step sees it. Assigning
  // into it (Tensor::assign; the handle shares the optimizer's tensor) sets the rate.
  Tensor lr() const { return lr_; }
  // Writes `lr` into lr()'s buffer (a copy and the same small kernel for every value).
  void set_lr(double lr);

 protected:
  // The new value of a state tensor, written into that tensor's buffer by step().
  using StateUpdates = std::vector<std::pair<Tensor*, Tensor>>;
  // The new value of parameter `i` given its gradient; new values of state tensors go in
  // `state` and are realized (in place) with the parameters.
  virtual Tensor update(size_t i, const Tensor& param, const Tensor& grad, StateUpdates& state) = 0;
  // lr() as a scalar of `dtype`, for update().
  Tensor lr_as(DType dtype) const { return lr_.reshape({}).cast(dtype); }
  std::vector<Tensor> params_;

 private:
  Tensor lr_;
};

// SGD with optional momentum (Nesterov or not) and L2 weight decay.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params,
      double lr = 0.001,
      double momentum = 0,
      double weight_decay = 0,
      bool nesterov = false);

 private:
  Tensor update(size_t i, const Tensor& p, const Tensor& g, StateUpdates& state) override;
  double momentum_, weight_decay_;
  bool nesterov_;
  std::vector<Tensor> velocity_;
};

// Adam; with decoupled weight decay it is AdamW.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params,
       double lr = 0.001,
       double b1 = 0.9,
       double b2 = 0.999,
       double eps = 1e-8,
       double weight_decay = 0);

  // The state, as tinygrad's LAMB names it: first and second moments per parameter, and
  // beta1^t, beta2^t after t steps (shape (1,), float64: tinygrad keeps float32, which moves
  // the first update by ~1e-6). step() updates each in place, so a state dict that holds them
  // saves and restores the optimizer.
  const std::vector<Tensor>& m() const { return m_; }
  const std::vector<Tensor>& v() const { return v_; }
  const Tensor& b1_t() const { return b1_t_; }
  const Tensor& b2_t() const { return b2_t_; }

 protected:
  bool trust_ratio_ = false;  // LAMB: scale each update by ||param|| / ||update||

 private:
  Tensor update(size_t i, const Tensor& p, const Tensor& g, StateUpdates& state) override;
  double b1_, b2_, eps_, weight_decay_;
  Tensor b1_t_, b2_t_;  // device tensors (so a captured step stays valid)
  std::vector<Tensor> m_, v_;
  std::optional<Tensor> inv_c1_, inv_c2_;  // 1 / (1 - beta^t) of the current step
};

// LAMB: Adam's update (with decoupled weight decay) scaled per parameter by the trust ratio
// ||param|| / ||update|| (1 when either norm is 0).
class LAMB : public Adam {
 public:
  LAMB(std::vector<Tensor> params,
       double lr = 0.001,
       double b1 = 0.9,
       double b2 = 0.999,
       double eps = 1e-6,
       double weight_decay = 0)
      : Adam(std::move(params), lr, b1, b2, eps, weight_decay) {
    trust_ratio_ = true;
  }
};

}  // namespace baregrad::tensor
