"""Layers with tinygrad's names and initialisation; their tensors are plain attributes, so
nn.state.get_state_dict / get_parameters find them and replacing one is seen by the layer.
Weights and biases require grad from the start (tinygrad leaves them None until an optimizer
takes them); running statistics never do."""
from __future__ import annotations

import math

from baregrad.dtype import dtypes
from baregrad.helpers import flatten, make_tuple, prod, op_name
from baregrad.nn import optim, state  # noqa: F401
from baregrad.nn import datasets  # noqa: F401
from baregrad.tensor import Tensor


def _input(x, what: str = "input") -> Tensor:
  """`x` when it is a Tensor; else a TypeError naming the layer and x's type (not an
  AttributeError from inside the layer)."""
  if not isinstance(x, Tensor): raise TypeError(f"[{op_name()}] {what} must be a Tensor, got {type(x).__name__}")
  return x


def _param(t: Tensor) -> Tensor:
  """A layer parameter: it requires grad, as torch's and the C++ layers' (tensor/nn.h) do."""
  return t.requires_grad_(True)


class BatchNorm:
  """Batch normalisation over axis 1. While Tensor.training it normalises with the batch
  statistics and updates running_mean / running_var (unbiased) and num_batches_tracked."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float = 0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight: Tensor | None = _param(Tensor.ones(sz)) if affine else None
    self.bias: Tensor | None = _param(Tensor.zeros(sz)) if affine else None
    self.num_batches_tracked = Tensor.zeros(dtype=dtypes.int64, requires_grad=False)
    if track_running_stats: self.running_mean, self.running_var = Tensor.zeros(sz, requires_grad=False), Tensor.ones(sz, requires_grad=False)

  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    shape_mask = [1, -1, *([1] * (x.ndim - 2))]
    if self.track_running_stats and not Tensor.training: return self.running_mean, self.running_var.reshape(shape_mask).expand(x.shape)
    reduce_axes = tuple(a for a in range(x.ndim) if a != 1)
    batch_mean = x.mean(axis=reduce_axes)
    y = x - batch_mean.detach().reshape(shape_mask)  # d(var)/d(mean) = 0
    return batch_mean, (y * y).mean(axis=reduce_axes)

  def __call__(self, x: Tensor) -> Tensor:
    x = _input(x)
    if x.ndim < 2 or (self.weight is not None and x.shape[1] != self.weight.shape[0]):
      raise ValueError(f"[{op_name()}] input of shape {x.shape} for a BatchNorm of {self.weight.shape[0] if self.weight is not None else '?'} features")
    batch_mean, batch_var = self.calc_stats(x)
    if self.track_running_stats and Tensor.training:
      n = x.numel() // x.shape[1]
      if n <= 1: raise ValueError(f"[{op_name()}] training needs more than one value per channel; the input {x.shape} has {n}")
      self.running_mean.assign((1 - self.momentum) * self.running_mean + self.momentum * batch_mean.detach())
      self.running_var.assign((1 - self.momentum) * self.running_var + self.momentum * n / (n - 1) * batch_var.detach())
      self.num_batches_tracked += 1
    return x.batchnorm(self.weight, self.bias, batch_mean, batch_var.add(self.eps).rsqrt())


BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm


def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride=1, padding=0, dilation=1, groups=1, bias=True) -> Conv2d:  # noqa: N802
  return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)


class Conv2d:
  """weight (out, in/groups, *kernel) and bias (out,) from U(+-1/sqrt(in * prod(kernel)))."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True):
    self.kernel_size = make_tuple(kernel_size, 2)
    if isinstance(padding, str):
      if padding.lower() != "same": raise ValueError(f"[{op_name()}] padding={padding!r}: the only padding string is 'same'")
      if stride != 1: raise ValueError(f"[{op_name()}] padding='same' is not supported for strided convolutions")
      pad = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for d, k in zip(make_tuple(dilation, len(self.kernel_size)), self.kernel_size[::-1])]
      padding = tuple(flatten(pad))
    self.stride, self.dilation, self.groups, self.padding = stride, dilation, groups, padding
    scale = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = _param(Tensor.uniform(out_channels, in_channels // groups, *self.kernel_size, low=-scale, high=scale))
    self.bias: Tensor | None = _param(Tensor.uniform(out_channels, low=-scale, high=scale)) if bias else None

  def __call__(self, x: Tensor) -> Tensor:
    x = _input(x)
    return x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding)


def ConvTranspose1d(in_channels: int, out_channels: int, kernel_size: int, stride=1, padding=0, output_padding=0, dilation=1,  # noqa: N802
                    groups=1, bias=True) -> ConvTranspose2d:
  return ConvTranspose2d(in_channels, out_channels, (kernel_size,), stride, padding, output_padding, dilation, groups, bias)


class ConvTranspose2d(Conv2d):
  """weight (in, out/groups, *kernel) from U(+-1/sqrt(in * prod(kernel)))."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, dilation=1, groups=1, bias=True):
    super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
    scale = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = _param(Tensor.uniform(in_channels, out_channels // groups, *self.kernel_size, low=-scale, high=scale))
    self.output_padding = output_padding

  def __call__(self, x: Tensor) -> Tensor:
    x = _input(x)
    return x.conv_transpose2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, self.output_padding)


class Linear:
  """y = x @ weight.T + bias; weight (out, in) and bias (out,) from U(+-1/sqrt(in))."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    bound = 1 / math.sqrt(in_features)
    self.weight = _param(Tensor.uniform(out_features, in_features, low=-bound, high=bound))
    self.bias = _param(Tensor.uniform(out_features, low=-bound, high=bound)) if bias else None

  def __call__(self, x: Tensor) -> Tensor: return _input(x).linear(self.weight.transpose(), self.bias)


class GroupNorm:
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    # As tinygrad's, the groups split each sample's channels *and* positions: more groups than channels is
    # allowed (torch refuses); a sample whose size the groups do not divide is a ValueError at the call.
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight: Tensor | None = _param(Tensor.ones(num_channels)) if affine else None
    self.bias: Tensor | None = _param(Tensor.zeros(num_channels)) if affine else None

  def __call__(self, x: Tensor) -> Tensor:
    x = _input(x)
    x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return x
    return x * self.weight.reshape(1, -1, *[1] * (x.ndim - 2)) + self.bias.reshape(1, -1, *[1] * (x.ndim - 2))


class InstanceNorm:
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight: Tensor | None = _param(Tensor.ones(num_features)) if affine else None
    self.bias: Tensor | None = _param(Tensor.zeros(num_features)) if affine else None

  def __call__(self, x: Tensor) -> Tensor:
    x = _input(x)
    x = x.reshape(x.shape[0], self.num_features, -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return x
    return x * self.weight.reshape(1, -1, *[1] * (x.ndim - 2)) + self.bias.reshape(1, -1, *[1] * (x.ndim - 2))


class LayerNorm:
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape: tuple[int, ...] = make_tuple(normalized_shape, 1)
    self.axis, self.eps = tuple(-1 - i for i in range(len(self.normalized_shape))), eps
    self.weight: Tensor | None = _param(Tensor.ones(*self.normalized_shape)) if elementwise_affine else None
    self.bias: Tensor | None = _param(Tensor.zeros(*self.normalized_shape)) if elementwise_affine else None

  def __call__(self, x: Tensor) -> Tensor:
    x = _input(x)
    if self.normalized_shape != x.shape[-len(self.normalized_shape):]:
      raise ValueError(f"[{op_name()}] last dimensions of {x.shape} must match {self.normalized_shape}")
    x = x.layernorm(eps=self.eps, axis=self.axis)
    if self.weight is None or self.bias is None: return x
    return x * self.weight + self.bias


class LayerNorm2d(LayerNorm):
  def __call__(self, x: Tensor) -> Tensor: return super().__call__(_input(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class RMSNorm:
  def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
    self.eps = eps
    self.weight = _param(Tensor.ones(dim)) if elementwise_affine else None

  def _norm(self, x: Tensor) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()

  def __call__(self, x: Tensor) -> Tensor:
    x = _input(x)
    x = self._norm(x.float()).cast(x.dtype)
    return x if self.weight is None else x * self.weight


class Embedding:
  """Rows of weight (vocab, embed), glorot-uniform, picked by integer indices (differentiable)."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz, self.weight = vocab_size, embed_size, _param(Tensor.glorot_uniform(vocab_size, embed_size))

  def __call__(self, idx: Tensor) -> Tensor:
    idx = _input(idx)
    if not dtypes.is_int(idx.dtype): raise TypeError(f"[{op_name()}] indices of dtype {idx.dtype}: they must be integers")
    big_shp = idx.shape + (self.vocab_sz, self.embed_sz)
    arange = Tensor.arange(self.vocab_sz, device=self.weight.device).unsqueeze(-1).expand(big_shp)
    hit = arange == idx.reshape(idx.shape + (1, 1)).expand(big_shp)
    return hit.where(self.weight.expand(big_shp), 0).sum(-2, dtype=self.weight.dtype)


class LSTMCell:
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    stdv = 1.0 / math.sqrt(hidden_size)
    self.weight_ih = _param(Tensor.uniform(hidden_size * 4, input_size, low=-stdv, high=stdv))
    self.weight_hh = _param(Tensor.uniform(hidden_size * 4, hidden_size, low=-stdv, high=stdv))
    self.bias_ih: Tensor | None = _param(Tensor.zeros(hidden_size * 4)) if bias else None
    self.bias_hh: Tensor | None = _param(Tensor.zeros(hidden_size * 4)) if bias else None

  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    x = _input(x)
    if hc is None: hc = (Tensor.zeros(x.size(0), self.weight_hh.size(1), dtype=x.dtype, device=x.device),) * 2
    gates = x.linear(self.weight_ih.T, self.bias_ih) + hc[0].linear(self.weight_hh.T, self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    new_c = f * hc[1] + i * g
    new_h = o * new_c.tanh()
    return new_h.contiguous(), new_c.contiguous()
