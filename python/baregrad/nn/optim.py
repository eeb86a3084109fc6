"""Optimizers with tinygrad's signatures: SGD, Adam, AdamW and LAMB over the C++ ones
(tensor/optim.h), which update every parameter (and the optimizer state) in place in one schedule,
so TinyJit can capture it; LARS, Muon and SGD(classic=True) in Python over Tensor ops and assign,
as every optimizer over parameters sharded over devices (its state sharded as each parameter)."""
from __future__ import annotations

import _baregrad as _C
from baregrad.device import canonicalize_device
from baregrad.dtype import dtypes
from baregrad.helpers import getenv, op_name
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
    # Parameters sharded over devices (baregrad/multi.py) step in Python over Tensor ops, their state sharded alike.
    self._multi = any(isinstance(x.device, tuple) for x in self.params)
    if self._multi and len({x.device for x in self.params}) != 1:
      raise NotImplementedError(f"[{op_name()}] parameters on {sorted({str(x.device) for x in self.params})}: sharded "
                                "parameters must all be on the same devices (shard every parameter over them)")
    if not self.params: raise ValueError(f"[{op_name()}] optimizer must have at least one param")
    self.buffers: list[Tensor] = _dedup([x for x in params if not x.requires_grad])
    self._lr0 = float(lr.numpy().reshape(-1)[0]) if isinstance(lr, Tensor) else float(lr)
    if self._lr0 < 0: raise ValueError(f"[{op_name()}] invalid learning rate {self._lr0}: it must be >= 0")
    self._c, self._device = None, self.params[0].device

  def _attach(self, c_optimizer):
    self._c = c_optimizer
    self._lr = Tensor._wrap(c_optimizer.lr)

  def _own_lr(self, device=None):
    """The state of a Python optimizer: lr on `device` (the first parameter's when None), float32
    or float64 when a parameter is (as the C++ optimizers')."""
    self._device = self.params[0].device if device is None else canonicalize_device(device)
    lr_dtype = dtypes.float64 if any(p.dtype == dtypes.float64 for p in self.params) else dtypes.float32
    self._lr = Tensor([self._lr0], dtype=lr_dtype, device=self._device).contiguous().realize()

  @property
  def device(self) -> str: return getattr(self, "_device", None) or self.params[0].device

  def _state_like(self, p: Tensor, dtype) -> Tensor:
    """A zero state tensor for parameter p: on the state device, or sharded as p."""
    if isinstance(p.device, tuple) and self.device == p.device:
      return Tensor.zeros(*p.shape, dtype=dtype).shard_like(p).contiguous().realize()
    return Tensor.zeros(*p.shape, dtype=dtype, device=self.device).contiguous().realize()

  # The lr tensor lives in __dict__ as "lr", tinygrad's attribute, so that a state dict of the
  # optimizer names it "lr"; reads and writes of opt.lr go through the `lr` property below.
  @property
  def _lr(self) -> Tensor: return self.__dict__["lr"]
  @_lr.setter
  def _lr(self, t: Tensor): self.__dict__["lr"] = t

  @property
  def lr(self) -> Tensor:
    """The learning rate: a float32 tensor of shape (1,) on the device, as tinygrad's. Every step
    reads it, so changing it (opt.lr = 0.01, opt.lr *= 0.999, opt.lr.assign(t)) changes no kernel."""
    return self._lr

  @lr.setter
  def lr(self, value):
    if isinstance(value, Tensor): self._lr.assign(value).realize()
    elif self._c is None: self._lr.assign(Tensor([float(value)], dtype=self._lr.dtype, device=self._lr.device)).realize()
    else: self._c.set_lr(float(value))

  def zero_grad(self):
    """Forgets every parameter's gradient."""
    if self._c is None:
      for p in self.params: p.grad = None
    else: self._c.zero_grad()

  def step(self):
    """One update from the gradients backward() left; throws RuntimeError naming a parameter
    without one, or outside training mode (tinygrad's rule: Context(TRAINING=1), Tensor.train())."""
    if not Tensor.training:
      raise RuntimeError("[step] TRAINING=0: the optimizer runs only in training mode; use Context(TRAINING=1) or "
                         "Tensor.train() around the step (Tensor.training is False)")
    if self._c is None:
      grads = []
      for i, p in enumerate(self.params):
        if (g := p.grad) is None:
          raise RuntimeError(f"[step] parameter {i} of shape {p.shape} has no gradient (was it used in the loss? call backward() first)")
        grads.append(g)
      self._step(grads)
    else: self._c.step()
    for b in self.buffers: b.realize()

  def _step(self, grads: list[Tensor]): raise NotImplementedError

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




class LARS(Optimizer):
  """LARS: SGD with momentum (classic: lr inside the momentum buffer), L2 weight decay added to the
  gradient before it (pre_wd) or decoupled after it, a trust ratio tcoef*|w|/(|g| + wd*|w|), and
  Newton-Schulz orthogonalisation of the update when ns_coefficients are given (Muon)."""
  def __init__(self, params: list[Tensor], lr=0.001, momentum=0.9, weight_decay=1e-4, ns_steps=0, ns_coefficients=None,
               nesterov=False, classic=True, pre_wd=True, tcoef=0.001, device=None, fused=False):
    super().__init__(params, lr)
    if momentum < 0: raise ValueError(f"[{op_name()}] invalid momentum {momentum}: it must be >= 0")
    if weight_decay < 0: raise ValueError(f"[{op_name()}] invalid weight_decay {weight_decay}: it must be >= 0")
    if ns_coefficients and any(p.ndim == 0 for p in self.params):
      raise ValueError(f"[{op_name()}] Newton-Schulz needs parameters of at least one dimension, got shape ()")
    self.momentum, self.wd, self.ns_steps, self.ns_coefficients = momentum, weight_decay, ns_steps, ns_coefficients
    self.nesterov, self.classic, self.pre_wd, self.tcoef = nesterov, classic, pre_wd, tcoef
    self._own_lr(device)
    state_dtype = getenv("OPTIM_DTYPE", "float32")
    self.b = [self._state_like(p, state_dtype) for p in self.params] if momentum else []

  def _step(self, grads: list[Tensor]):
    lr = self.lr.reshape(())
    for i, (p, g) in enumerate(zip(self.params, grads)):
      t, g = p.detach().to(self.device), g.detach().to(self.device)
      r: Tensor | float = 1.0
      if self.tcoef != 0:
        r1, r2 = t.square().sum().sqrt(), g.square().sum().sqrt()
        r = (r1 > 0).where((r2 > 0).where(self.tcoef * r1 / (r2 + self.wd * r1), 1.0), 1.0)
      if self.pre_wd and self.wd > 0: g = g + self.wd * t
      if self.classic: g = g * r * lr
      if self.momentum:
        self.b[i].assign((self.momentum * self.b[i] + g).cast(self.b[i].dtype))
        g = (g + self.momentum * self.b[i]) if self.nesterov else self.b[i]
      if self.ns_coefficients: g = g.reshape(g.shape[0], -1).newton_schulz(self.ns_steps, self.ns_coefficients).reshape(g.shape)
      # NOTE: tinygrad (a9069c17) computes the decoupled decay and drops it; this applies it, as torch.optim.Muon
      if not self.pre_wd and self.wd > 0: t = t * (1.0 - self.wd * lr)
      if not self.classic: g = g * r * lr
      p.assign((t - g).cast(p.dtype).to(p.device))


class SGD(LARS):
  """SGD with momentum (Nesterov or not) and L2 weight decay added to the gradient; the C++
  optimizer unless classic (lr inside the momentum buffer, tinygrad's LARS without trust ratio)
  or another device for the state is asked for."""
  def __init__(self, params: list[Tensor], lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False, device=None,
               fused=False):
    if not isinstance(params, Tensor) and hasattr(params, "__iter__"): params = list(params)  # read twice below
    multi = isinstance(params, list) and any(isinstance(p, Tensor) and isinstance(p.device, tuple) for p in params)
    if classic or device is not None or multi:
      super().__init__(params, lr, momentum, weight_decay, 0, None, nesterov, classic=classic, pre_wd=True, tcoef=0.0, device=device)
      return
    Optimizer.__init__(self, params, lr)
    if momentum < 0: raise ValueError(f"[{op_name()}] invalid momentum {momentum}: it must be >= 0")
    if weight_decay < 0: raise ValueError(f"[{op_name()}] invalid weight_decay {weight_decay}: it must be >= 0")
    self.momentum, self.wd, self.nesterov, self.classic, self.pre_wd, self.tcoef = momentum, weight_decay, nesterov, False, True, 0.0
    self.ns_steps, self.ns_coefficients, self.b = 0, None, []
    self._attach(_C.SGD([p._c for p in self.params], self._lr0, float(momentum), float(weight_decay), bool(nesterov)))


class Muon(LARS):
  """Muon: Nesterov momentum, then ns_steps Newton-Schulz iterations orthogonalising each update
  (parameters viewed as (shape[0], -1)), and weight decay decoupled after them."""
  def __init__(self, params: list[Tensor], lr=0.001, momentum=0.95, weight_decay=0.1, ns_steps=5, ns_coefficients=(3.4445, -4.775, 2.0315),
               nesterov=True, device=None, fused=False):
    if fused: raise ValueError(f"[{op_name()}] fused=True is not allowed for Muon (as tinygrad's)")
    super().__init__(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False, tcoef=0.0,
                     device=device)


class LAMB(Optimizer):
  """LAMB: Adam with decoupled weight decay and a per-parameter trust ratio; adam=True drops
  the trust ratio (Adam / AdamW). The C++ optimizer, unless `device=` puts the state (m, v,
  b1_t, b2_t, lr) on another device: then tinygrad's update in Python over Tensor ops there."""
  def __init__(self, params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False, fused=False,
               device=None):
    super().__init__(params, lr)
    if weight_decay < 0: raise ValueError(f"[{op_name()}] invalid weight_decay {weight_decay}: it must be >= 0")
    for i, b in enumerate((b1, b2)):  # torch's checks
      if not 0.0 <= b < 1.0: raise ValueError(f"[{op_name()}] invalid beta parameter at index {i}: {b} (it must be in [0, 1))")
    if eps < 0: raise ValueError(f"[{op_name()}] invalid epsilon {eps}: it must be >= 0")
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    if device is not None or self._multi:
      self._own_lr(device)
      self.m = [self._state_like(p, dtypes.float32) for p in self.params]
      self.v = [self._state_like(p, dtypes.float32) for p in self.params]
      self.b1_t, self.b2_t = (Tensor.ones(1, dtype=dtypes.float32, device=self.device).contiguous().realize() for _ in range(2))
      return
    cls = _C.Adam if adam else _C.LAMB
    self._attach(cls([p._c for p in self.params], self._lr0, float(b1), float(b2), float(eps), float(weight_decay)))
    # The C++ optimizer's state, shared: step() updates these tensors in place, and a state dict
    # of the optimizer (m.0, v.0, b1_t, b2_t as tinygrad's) saves and restores it.
    self.m = [Tensor._wrap(c) for c in self._c.m]
    self.v = [Tensor._wrap(c) for c in self._c.v]
    self.b1_t, self.b2_t = Tensor._wrap(self._c.b1_t), Tensor._wrap(self._c.b2_t)


  def _step(self, grads: list[Tensor]):  # the Python path (device=), tinygrad's update
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    lr = self.lr.reshape(())
    for i, (p, g) in enumerate(zip(self.params, grads)):
      t, g = p.detach().to(self.device), g.detach().to(self.device).cast(dtypes.float32)
      self.m[i].assign(self.b1 * self.m[i] + (1.0 - self.b1) * g)
      self.v[i].assign(self.b2 * self.v[i] + (1.0 - self.b2) * (g * g))
      m_hat, v_hat = self.m[i] / (1.0 - self.b1_t), self.v[i] / (1.0 - self.b2_t)
      up = (m_hat / (v_hat.sqrt() + self.eps)).cast(t.dtype) + self.wd * t
      r: Tensor | float = 1.0
      if not self.adam:
        r1, r2 = t.square().sum().sqrt(), up.square().sum().sqrt()
        r = (r1 > 0).where((r2 > 0).where(r1 / r2, 1.0), 1.0)
      p.assign((t - lr * r * up).cast(p.dtype).to(p.device))


def AdamW(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, fused=False, device=None) -> LAMB:  # noqa: N802
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, device=device)


def Adam(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, fused=False, device=None) -> LAMB:  # noqa: N802
  return LAMB(params, lr, b1, b2, eps, 0.0, adam=True, device=device)
