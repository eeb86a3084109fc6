"""Neural-network Tensor methods: linear layers, convolutions, pooling, normalisation, losses."""
from __future__ import annotations

import functools
import math

import _baregrad as _C
from baregrad.dtype import dtypes, to_dtype
from baregrad.helpers import argfix, make_tuple, op_name


def _resolve_pool_pads(padding, dims: int) -> list[int]:
  """tinygrad's padding forms (an int, one per dim, or flat (before, after) pairs last dim
  first) as flat torch-order pads."""
  if not isinstance(padding, int) and not (len(padding) == 2 * dims or len(padding) == dims):
    raise ValueError(f"[{op_name()}] padding={padding} for {dims} spatial dims: give an int, {dims} values or {2 * dims} values")
  if isinstance(padding, int): return [padding] * 2 * dims
  return list(padding) if len(padding) == 2 * dims else [p for p in padding for _ in range(2)][::-1]


def _check_window_args(op: str, shape, stride, dilation, pads) -> None:
  """stride and dilation >= 1 (as torch), and the padded input's element count within int64,
  named in a ValueError of `op` (the padding itself may be negative: tinygrad crops)."""
  for name, vals, lo in (("stride", stride, 1), ("dilation", dilation, 1)):
    if any(not isinstance(v, int) or v < lo for v in vals): raise ValueError(f"[{op}] {name}={tuple(vals)} must be ints >= {lo}")
  nd = len(stride)
  padded = list(shape[:-nd]) + [n + b + a for n, b, a in zip(shape[-nd:], pads[-2::-2], pads[::-2])]
  if math.prod(padded) > 2**63 - 1: raise ValueError(f"[{op}] padding={tuple(pads)} makes the input {tuple(shape)} {tuple(padded)}: more than 2**63-1 elements")


def _ceil_pads(shape, pads: list[int], k, s, d) -> list[int]:
  """Extra after-padding so the last window of ceil_mode fits, as torch (flat torch order)."""
  pads = list(pads)
  grouped = list(zip(pads[-2::-2], pads[::-2]))  # (before, after) per dim, first dim first
  for i, (size, (pb, pa), k_, s_, d_) in enumerate(zip(shape, grouped, k, s, d)):
    o = math.ceil((size + pb + pa - d_ * (k_ - 1) - 1) / s_) + 1
    if (o - 1) * s_ >= size + pb: o -= 1
    extra = (o - 1) * s_ + d_ * (k_ - 1) + 1 - (size + pb + pa)
    pads[-2 * i - 1] += max(extra, 0)
  return pads


class NNMixin:
  __slots__ = ()

  # ---- layers as functions -------------------------------------------------------------------

  def linear(self, weight, bias=None, dtype=None):
    self._tensor_arg(weight, "weight")
    if bias is not None: self._tensor_arg(bias, "bias")
    x = self if dtype is None else self.cast(to_dtype(dtype))
    x = x.mul(weight) if len(weight.shape) == 1 else x.dot(weight)
    return x.add(bias) if bias is not None else x

  def sequential(self, ll): return functools.reduce(lambda x, f: f(x), ll, self)

  def layernorm(self, axis=-1, eps: float = 1e-5):
    y = self - self.mean(axis, keepdim=True)
    return y.mul((y * y).mean(axis, keepdim=True).add(eps).rsqrt())

  def batchnorm(self, weight, bias, mean, invstd, axis=1):
    axes = argfix(axis)
    shape = tuple(s if ax in axes else 1 for ax, s in enumerate(self.shape))
    x = self - mean.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    ret = x.mul(invstd.reshape(shape) if len(invstd.shape) == len(axes) else invstd)
    return (ret + bias.reshape(shape)) if bias is not None else ret

  def dropout(self, p: float = 0.5):
    """Zeroes elements with probability p and scales the rest by 1/(1-p) while Tensor.training."""
    return self._wrap(self._c.dropout(float(p), bool(type(self).training)))

  def one_hot(self, num_classes: int = -1):
    if num_classes < -1: raise ValueError(f"[one_hot] num_classes={num_classes} must be >= 0, or -1 to infer it")
    return self._wrap(self._c.one_hot(int(num_classes)))

  # ---- convolution ---------------------------------------------------------------------------

  def conv2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, dtype=None):
    """Convolution over the trailing len(weight.shape) - 2 dims (1-D and 2-D, any padding)."""
    self._tensor_arg(weight, "weight")
    if bias is not None: self._tensor_arg(bias, "bias")
    (bs, cin_), (cout, cin), hw = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if groups * cin != cin_: raise ValueError(f"[conv2d] input {self.shape} has {cin_} channels, the weight {weight.shape} with groups={groups} takes {groups * cin}")
    if len(self.shape) != len(weight.shape): raise ValueError(f"[conv2d] input {self.shape} and weight {weight.shape} differ in rank")
    x, w = (self, weight) if dtype is None else (self.cast(to_dtype(dtype)), weight.cast(to_dtype(dtype)))
    nd = len(hw)
    if isinstance(padding, str): raise ValueError(f"[conv2d] padding={padding!r} is not supported")
    pads, stride, dilation = _resolve_pool_pads(padding, nd), make_tuple(stride, nd), make_tuple(dilation, nd)
    _check_window_args("conv2d", self.shape, stride, dilation, pads)
    if cout == 0: raise ValueError(f"[conv2d] weight {weight.shape} has 0 output channels (torch rejects it too)")
    if nd == 1:
      return x.unsqueeze(2).conv2d(w.unsqueeze(2), bias, groups, (1, stride[0]), (1, dilation[0]), pads + [0, 0]).squeeze(2)
    if any(pads): x = x.pad(pads)
    if nd == 2 and len(set(stride)) == 1 and len(set(dilation)) == 1:
      return x._wrap(x._c.conv2d(w._c, None if bias is None else bias._c, stride[0], 0, dilation[0], groups))
    win = x._wrap(x._c.pool_windows(list(hw), list(stride), list(dilation)))  # (bs, cin_, *out, *hw)
    out = win.shape[2:2 + nd]
    win = win.reshape(bs, groups, 1, cin, *out, *hw)
    ww = w.reshape(1, groups, cout // groups, cin, *([1] * nd), *hw)
    ret = (win * ww).sum([3] + [-(i + 1) for i in range(nd)]).reshape(bs, cout, *out)
    return ret if bias is None else ret + bias.reshape(1, -1, *([1] * nd))

  def conv_transpose2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, output_padding=0):
    """The transpose of conv2d (weight (Cin, Cout/groups, *k)); 1-D and 2-D with equal per-dim
    stride, dilation, padding and output_padding."""
    nd = len(weight.shape) - 2
    params = [make_tuple(v, nd) for v in (stride, dilation, padding, output_padding)]
    if any(len(set(p)) != 1 for p in params):
      raise NotImplementedError(f"[conv_transpose2d] conv_transpose2d with different values per dim is not supported")
    s, d, p, op = (v[0] for v in params)
    if nd == 1:
      full = self.unsqueeze(2).conv_transpose2d(weight.unsqueeze(2), bias, groups, s, d, 0, op)[:, :, 0]
      return full if p == 0 else full[:, :, p:full.shape[-1] - p]
    return self._wrap(_C.conv_transpose2d(self._c, weight._c, None if bias is None else bias._c, s, p, op, d, groups))

  # ---- pooling -------------------------------------------------------------------------------

  def _pool_setup(self, kernel_size, stride, dilation, padding, ceil_mode):
    k = make_tuple(kernel_size, 2)
    s, d = make_tuple(k if stride is None else stride, len(k)), make_tuple(dilation, len(k))
    pads = _resolve_pool_pads(padding, len(k))
    _check_window_args(op_name(), self.shape, s, d, pads)
    if ceil_mode: pads = _ceil_pads(self.shape[-len(k):], pads, k, s, d)
    return k, s, d, pads

  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False, return_indices: bool = False):
    if return_indices: raise NotImplementedError(f"[max_pool2d] max_pool2d with return_indices is not supported")
    k, s, d, pads = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    if len(k) == 2 and len(set(k)) == 1 and len(set(s)) == 1 and d == (1, 1) and not any(pads):
      return self._wrap(self._c.max_pool2d(k[0], s[0]))
    x = self.pad(pads, value=dtypes.min(self.dtype)) if any(pads) else self
    win = x._wrap(x._c.pool_windows(list(k), list(s), list(d)))
    return win.max([-(i + 1) for i in range(len(k))])

  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
    k, s, d, pads = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    if len(k) == 2 and len(set(k)) == 1 and len(set(s)) == 1 and d == (1, 1) and not any(pads):
      return self._wrap(self._c.avg_pool2d(k[0], s[0]))
    axes = [-(i + 1) for i in range(len(k))]
    def windows(x): return x._wrap(x._c.pool_windows(list(k), list(s), list(d)))
    total = windows(self.pad(pads) if any(pads) else self).sum(axes)
    ones = type(self).ones(self.shape[-len(k):], device=self.device)
    if count_include_pad:  # the explicit padding counts, the ceil_mode extra does not
      explicit = _resolve_pool_pads(padding, len(k))
      padded = [n + explicit[-2 - 2 * i] + explicit[-1 - 2 * i] for i, n in enumerate(ones.shape)]
      ones = type(self).ones(*padded, device=self.device)
      ones = ones.pad([0 if i % 2 == 0 else pads[i] - explicit[i] for i in range(len(pads))])
    else: ones = ones.pad(pads)
    return total / windows(ones).sum(axes)

  # ---- losses --------------------------------------------------------------------------------

  def _do_reduction(self, reduction: str = "mean"):
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"[{op_name()}] reduction={reduction!r} must be one of ('mean', 'sum', 'none')")
    return self.mean() if reduction == "mean" else self.sum() if reduction == "sum" else self

  def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean"):
    """Cross entropy of the logits' last axis against integer labels Y; labels equal to
    ignore_index add no loss and do not count in the mean."""
    self._tensor_arg(Y, "Y")
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"[sparse_categorical_crossentropy] label_smoothing={label_smoothing} is outside [0, 1]")
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"[sparse_categorical_crossentropy] reduction={reduction!r} must be one of ('mean', 'sum', 'none')")
    log_probs = self.log_softmax()
    loss_mask = Y != ignore_index
    classes = type(self).arange(self.shape[-1], dtype=Y.dtype, device=self.device)
    y = (Y.unsqueeze(-1) == classes) & loss_mask.unsqueeze(-1)
    smoothing = label_smoothing * (log_probs.mean(-1) * loss_mask)
    unreduced = (1 - label_smoothing) * (log_probs * y).sum(-1) + smoothing
    if reduction == "mean": return -(unreduced.sum() / loss_mask.sum())
    return -(unreduced.sum() if reduction == "sum" else unreduced)

  def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0):
    self._tensor_arg(Y, "Y")
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"[cross_entropy] label_smoothing={label_smoothing} is outside [0, 1]")
    Y = Y.one_hot(num_classes=self.shape[1]) if Y.ndim < 2 else Y
    Y = (1 - label_smoothing) * Y + label_smoothing / Y.shape[1]
    return (-self.log_softmax(axis=1).mul(Y).sum(axis=1))._do_reduction(reduction)

  def nll_loss(self, Y, weight=None, ignore_index: int | None = None, reduction: str = "mean"):
    self._tensor_arg(Y, "Y")
    weight = type(self).ones(Y.shape, device=self.device) if weight is None else weight[Y]
    masked = weight if ignore_index is None else weight * (Y != ignore_index)
    nll = -self.gather(1, Y.unsqueeze(1)).squeeze(1) * masked
    return nll.sum() / masked.sum() if reduction == "mean" else nll._do_reduction(reduction)

  def binary_crossentropy(self, Y, reduction: str = "mean"):
    """BCE of probabilities; logs are clamped at -100 as torch's."""
    self._tensor_arg(Y, "Y")
    if reduction == "mean": return self._wrap(self._c.binary_cross_entropy(Y._c))
    return (-Y * self.log().maximum(-100) - (1 - Y) * (1 - self).log().maximum(-100))._do_reduction(reduction)

  def binary_crossentropy_logits(self, Y, reduction: str = "mean", pos_weight=None):
    self._tensor_arg(Y, "Y")
    if reduction == "mean" and pos_weight is None: return self._wrap(self._c.binary_cross_entropy_with_logits(Y._c))
    log_p, log_1_minus_p = self.logsigmoid(), (-self).logsigmoid()
    return (-((1 if pos_weight is None else pos_weight) * Y * log_p + (1 - Y) * log_1_minus_p))._do_reduction(reduction)

  def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False, enable_gqa: bool = False):
    if enable_gqa:
      key = key.repeat_interleave(self.shape[-3] // key.shape[-3], dim=-3)
      value = value.repeat_interleave(self.shape[-3] // value.shape[-3], dim=-3)
    if dropout_p == 0 or not type(self).training:
      return self._wrap(self._c.scaled_dot_product_attention(key._c, value._c, None if attn_mask is None else attn_mask._c, is_causal))
    qk = self.matmul(key.transpose(-2, -1)) / math.sqrt(self.shape[-1])
    if is_causal: attn_mask = type(self).ones(qk.shape[-2], qk.shape[-1], dtype=dtypes.bool, device=self.device).tril()
    if attn_mask is not None:
      qk = qk + (attn_mask.where(0, -math.inf) if attn_mask.dtype is dtypes.bool else attn_mask)
    return qk.softmax(-1).dropout(dropout_p) @ value

  def mse(self, target): return self._wrap(self._c.mse(self._tensor_arg(target, "target")._c))
