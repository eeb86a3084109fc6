"""Optimizers with tinygrad's signatures over the C++ ones (tensor/optim.h): step() updates
every parameter (and the optimizer state) in place, in one schedule, so TinyJit can capture it."""
from __future__ import annotations

import _baregrad as _C
from baregrad.helpers import op_name
from baregrad.tensor import Tensor


def _dedup(ts: list[Tensor]) -> list[Tensor]:
  out: list[Tensor] = []
  for t in ts:
    if not any(t._c.same(o._c) for o in out): out.append(t)
  return out


class Optimizer:
  """The parameters are the tensors that require grad (None becomes True, as tinygrad); the
  others are buffers, realized by step()."""
  def __init__(self, params: list[Tensor], lr: float):
    if isinstance(params, Tensor) or not hasattr(params, "__iter__"):
      raise TypeError(f"[{op_name()}] params must be a list of Tensors, got {type(params).__name__}")
    params = list(params)
    for i, x in enumerate(params):
      if not isinstance(x, Tensor): raise TypeError(f"[{op_name()}] params must be Tensors, got {type(x).__name__} at index {i}")
    for x in params:
      if x.requires_grad is None: x.requires_grad_(True)
    self.params: list[Tensor] = _dedup([x for x in params if x.requires_grad])
    if not self.params: raise ValueError(f"[{op_name()}] optimizer must have at least one param")
    self.buffers: list[Tensor] = _dedup([x for x in params if not x.requires_grad])
    self._lr0 = float(lr.numpy().reshape(-1)[0]) if isinstance(lr, Tensor) else float(lr)

  def _attach(self, c_optimizer):
    self._c = c_optimizer
    self._lr = Tensor._wrap(c_optimizer.lr)

  @property
  def device(self) -> str: return self.params[0].device

  @property
  def lr(self) -> Tensor:
    """The learning rate: a float32 tensor of shape (1,) on the device, as tinygrad's. Every step
    reads it, so changing it (opt.lr = 0.01, opt.lr *= 0.999, opt.lr.assign(t)) changes no kernel."""
    return self._lr

  @lr.setter
  def lr(self, value):
    if isinstance(value, Tensor): self._lr.assign(value).realize()
    else: self._c.set_lr(float(value))

  def zero_grad(self):
    """Forgets every parameter's gradient."""
    self._c.zero_grad()

  def step(self):
    """One update from the gradients backward() left; throws RuntimeError naming a parameter
    without one."""
    self._c.step()
    for b in self.buffers: b.realize()

  def schedule_step(self) -> list[Tensor]:
    self.step()
    return self.params + self.buffers


class OptimizerGroup(Optimizer):
  """Several optimizers stepped together."""
  def __init__(self, *optimizers: Optimizer):  # pylint: disable=super-init-not-called
    for i, o in enumerate(optimizers):
      if not isinstance(o, Optimizer): raise TypeError(f"[{op_name()}] optimizers must be Optimizers, got {type(o).__name__} at index {i}")
    self.optimizers = optimizers
    self.params = [p for o in optimizers for p in o.params]
    self.buffers = [b for o in optimizers for b in o.buffers]

  def __getitem__(self, i): return self.optimizers[i]
  def zero_grad(self): [o.zero_grad() for o in self.optimizers]
  def step(self): [o.step() for o in self.optimizers]


class SGD(Optimizer):
  """SGD with momentum (Nesterov or not) and L2 weight decay added to the gradient."""
  def __init__(self, params: list[Tensor], lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False, fused=False):
    if classic: raise NotImplementedError(f"[{op_name()}] classic momentum (lr inside the momentum buffer) is not supported")
    super().__init__(params, lr)
    self.momentum, self.wd, self.nesterov = momentum, weight_decay, nesterov
    self._attach(_C.SGD([p._c for p in self.params], self._lr0, float(momentum), float(weight_decay), bool(nesterov)))


class LAMB(Optimizer):
  """LAMB: Adam with decoupled weight decay and a per-parameter trust ratio; adam=True drops
  the trust ratio (Adam / AdamW)."""
  def __init__(self, params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False, fused=False):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    cls = _C.Adam if adam else _C.LAMB
    self._attach(cls([p._c for p in self.params], self._lr0, float(b1), float(b2), float(eps), float(weight_decay)))


def AdamW(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, fused=False) -> LAMB:  # noqa: N802
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)


def Adam(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, fused=False) -> LAMB:  # noqa: N802
  return LAMB(params, lr, b1, b2, eps, 0.0, adam=True)
