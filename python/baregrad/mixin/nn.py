"""Neural-network Tensor methods: linear layers, convolutions, pooling, normalisation, losses."""
from __future__ import annotations

import functools
import math

import numpy as np

import _baregrad as _C
from baregrad import multi
from baregrad.dtype import dtypes, to_dtype
from baregrad.helpers import ShapeError, argfix, make_tuple, op_name


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


class MultinomialError(ValueError, AssertionError):
  """multinomial's bad arguments: a ValueError, and the AssertionError tinygrad's asserts raise."""


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
    return self._wrap(self._c.dropout(float(p), bool(self._T.training)))

  def multinomial(self, num_samples: int = 1, replacement: bool = False):
    """int32 indices of num_samples draws from the categories of the last axis (1-D or 2-D), weighted by self.
    Draws without replacement take the num_samples largest random keys (a sort on the device: TinyJit captures it).
    Bad arguments raise MultinomialError, a ValueError and an AssertionError (tinygrad asserts)."""
    if not 1 <= self.ndim <= 2: raise MultinomialError(f"[multinomial] needs a 1-D or 2-D tensor of weights, got shape {self.shape}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
      raise MultinomialError(f"[multinomial] num_samples={num_samples!r} must be a positive int")
    w = (self.unsqueeze(0) if self.ndim == 1 else self).float()
    if not replacement and num_samples > w.shape[1]:
      raise MultinomialError(f"[multinomial] cannot draw {num_samples} samples without replacement from {w.shape[1]} categories")
    if replacement or num_samples == 1:
      cw = w.cumsum(1)
      cdf = cw / cw[:, -1:]
      u = self._T.rand(num_samples, w.shape[0], 1, device=self.device)
      idx = (u >= cdf).sum(2).transpose(0, 1)  # the first category whose cdf is above u
    else:  # Efraimidis-Spirakis: the num_samples largest log(u)/w (weight 0 is never drawn while others remain)
      keys = self._T.rand(*w.shape, device=self.device).log() / w
      idx = keys.topk(num_samples, dim=1)[1]
    return (idx.squeeze(0) if self.ndim == 1 else idx).cast(dtypes.int32)

  @staticmethod
  def _threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds (Random123; JAX's and tinygrad's) on uint32 tensors: the two output words."""
    ks = [k0, k1, k0 ^ k1 ^ 0x1BD11BDA]
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
      for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
        x0 = x0 + x1
        x1 = x0 ^ ((x1 << r) | (x1 >> (32 - r)))
      x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + (i + 1)
    return x0, x1

  @classmethod
  def _threefry_random_bits(cls, key, counts0, counts1):
    """tinygrad's helper: Threefry-2x32 of the counters (counts0[i], counts1[i]) under the (2,) uint32 `key`,
    every first output word, then every second."""
    w0, w1 = cls._threefry2x32(key[0:1], key[1:2], counts0, counts1)
    return w0.cat(w1)

  def threefry(self, seed):
    """Threefry-2x32 of each uint64 element (high word, low word) under the uint64 `seed`, as one uint64
    (tinygrad's THREEFRY op)."""
    for name, t in (("self", self), ("seed", seed)):
      if not isinstance(t, self._T) or t.dtype != dtypes.uint64:
        raise TypeError(f"[threefry] {name} must be a uint64 Tensor, got {t!r}")
    u32, u64 = dtypes.uint32, dtypes.uint64
    w0, w1 = self._threefry2x32(seed.cast(u32), (seed >> 32).cast(u32), self.cast(u32), (self >> 32).cast(u32))
    return (w1.cast(u64) << 32) | w0.cast(u64)

  @classmethod
  def random_bits(cls, key, counter, num: int):
    """num uint32 random words from threefry with `key` and the 64-bit `counter` (each a (2,) uint32 tensor,
    low word first), as tinygrad's."""
    for name, t in (("key", key), ("counter", counter)):
      if not isinstance(t, cls) or t.shape != (2,) or t.dtype != dtypes.uint32:
        raise ValueError(f"[random_bits] {name} must be a (2,) uint32 Tensor, got {t!r}")
    if isinstance(num, bool) or not isinstance(num, int) or num < 0: raise ValueError(f"[random_bits] num={num!r} must be an int >= 0")
    bits, low, high = [], counter[0:1], counter[1:2]
    for start in range(0, num, 2**32 - 1):
      n = min(num - start, 2**32 - 1)
      c_low = low + (start & 0xFFFFFFFF)
      c_high = high + (start >> 32) + (c_low < low).cast(dtypes.uint32)  # the carry
      nk0, nk1 = cls._threefry2x32(key[0:1], key[1:2], c_low, c_high)
      half = (n + 1) // 2
      lo = cls.arange(half, dtype=dtypes.uint32, device=key.device)
      w0, w1 = cls._threefry2x32(nk0, nk1, lo, lo + half)
      bits.append(w0.cat(w1)[:n])
    return bits[0].cat(*bits[1:]) if bits else counter[0:0]

  def one_hot(self, num_classes: int):
    """int32 one-hot vectors of `num_classes` on a new last axis (tinygrad's: num_classes must be >= 0;
    torch's -1, which infers max + 1, is a ValueError here as in tinygrad and jax)."""
    if num_classes < 0: raise ValueError(f"[one_hot] num_classes={num_classes} must be non-negative")
    return self._wrap(self._c.one_hot(int(num_classes)))

  # ---- convolution ---------------------------------------------------------------------------

  def conv2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, dtype=None):
    """Convolution over the trailing len(weight.shape) - 2 dims (1-D and 2-D, any padding)."""
    self._tensor_arg(weight, "weight")
    if bias is not None: self._tensor_arg(bias, "bias")
    (bs, cin_), (cout, cin), hw = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if groups * cin != cin_: raise ShapeError(f"[conv2d] input {self.shape} has {cin_} channels, the weight {weight.shape} with groups={groups} takes {groups * cin}")
    if len(self.shape) != len(weight.shape): raise ShapeError(f"[conv2d] input {self.shape} and weight {weight.shape} differ in rank")
    x, w = (self, weight) if dtype is None else (self.cast(to_dtype(dtype)), weight.cast(to_dtype(dtype)))
    nd = len(hw)
    if isinstance(padding, str): raise ValueError(f"[conv2d] padding={padding!r} is not supported")
    pads, stride, dilation = _resolve_pool_pads(padding, nd), make_tuple(stride, nd), make_tuple(dilation, nd)
    _check_window_args("conv2d", self.shape, stride, dilation, pads)
    padded = [n + b + a for n, b, a in zip(self.shape[-nd:], pads[-2::-2], pads[::-2])]
    if any((k - 1) * d + 1 > n for k, d, n in zip(hw, dilation, padded)):
      raise ShapeError(f"[conv2d] kernel {hw} (dilation {dilation}) is larger than the padded input {tuple(padded)}")
    if cout == 0: raise ValueError(f"[conv2d] weight {weight.shape} has 0 output channels (torch rejects it too)")
    if nd == 1:
      return x.unsqueeze(2).conv2d(w.unsqueeze(2), bias, groups, (1, stride[0]), (1, dilation[0]), pads + [0, 0]).squeeze(2)
    # padding in memory: windows of a padded view carry its mask, which keeps every load of the
    # convolution kernel scalar (and decoded per element); one copy of the input costs far less
    if any(pads): x = x.pad(pads).contiguous()
    if nd == 2 and len(set(stride)) == 1 and len(set(dilation)) == 1:
      return x._wrap(x._c.conv2d(w._c, None if bias is None else bias._c, stride[0], 0, dilation[0], groups))
    win = x._wrap(x._c.pool_windows(list(hw), list(stride), list(dilation)))  # (bs, cin_, *out, *hw)
    out = win.shape[2:2 + nd]
    win = win.reshape(bs, groups, 1, cin, *out, *hw)
    ww = w.reshape(1, groups, cout // groups, cin, *([1] * nd), *hw)
    ret = (win * ww).sum([3] + [-(i + 1) for i in range(nd)]).reshape(bs, cout, *out)
    return ret if bias is None else ret + bias.reshape(1, -1, *([1] * nd))

  def conv_transpose2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, output_padding=0):
    """The transpose of conv2d (weight (Cin, Cout/groups, *k)) over the trailing len(weight.shape) - 2 dims; stride,
    dilation, output_padding an int or one per dim, padding as conv2d's (int, one per dim, or flat pairs)."""
    self._tensor_arg(weight, "weight")
    if bias is not None: self._tensor_arg(bias, "bias")
    nd = len(weight.shape) - 2
    if nd < 1 or self.ndim != nd + 2: raise ValueError(f"[conv_transpose2d] input {self.shape} and weight {weight.shape} do not fit")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1: raise ValueError(f"[conv_transpose2d] groups={groups!r} must be an int >= 1")
    if weight.shape[0] != self.shape[1] or weight.shape[0] % groups:
      raise ValueError(f"[conv_transpose2d] input {self.shape} has {self.shape[1]} channels, the weight {weight.shape} "
                       f"with groups={groups} takes {weight.shape[0]}")
    s, d, op = (make_tuple(v, nd) for v in (stride, dilation, output_padding))
    if len(s) != nd or len(d) != nd or len(op) != nd:
      raise ValueError(f"[conv_transpose2d] stride={stride}, dilation={dilation}, output_padding={output_padding} for {nd} spatial dims")
    pads = _resolve_pool_pads(padding, nd)
    _check_window_args("conv_transpose2d", self.shape, s, d, [0] * 2 * nd)
    if any(o < 0 or (o >= s_ and o >= d_) for o, s_, d_ in zip(op, s, d)):
      raise ValueError(f"[conv_transpose2d] output_padding={op} must be >= 0 and smaller than either stride={s} or dilation={d}")
    grouped = list(zip(pads[-2::-2], pads[::-2]))  # (before, after) per dim, first dim first
    if nd == 2 and all(len(set(v)) == 1 for v in (s, d, op)) and len(set(pads)) == 1 and pads[0] >= 0:
      return self._wrap(_C.conv_transpose2d(self._c, weight._c, None if bias is None else bias._c, s[0], pads[0], op[0], d[0], groups))
    # stride - 1 zeros between neighbouring inputs, then a stride-1 conv with the flipped, group-transposed weight
    x = self
    for ax, st in enumerate(s, start=2):
      n, rank = x.shape[ax], x.ndim
      if st == 1 or n == 0: continue
      x = x.unsqueeze(ax + 1).pad(tuple((0, st - 1) if j == ax + 1 else None for j in range(rank + 1))).flatten(ax, ax + 1)
      x = x.shrink(tuple((0, (n - 1) * st + 1) if j == ax else None for j in range(rank)))
    cin, cout_g, k = weight.shape[0], weight.shape[1], weight.shape[2:]
    w = weight.reshape(groups, cin // groups, cout_g, *k).transpose(1, 2).flip(*range(3, 3 + nd))
    w = w.reshape(groups * cout_g, cin // groups, *k)
    conv_pads = []  # flat, last dim first: the full correlation, cropped by padding, output_padding added after
    for i in reversed(range(nd)): conv_pads += [d[i] * (k[i] - 1) - grouped[i][0], d[i] * (k[i] - 1) - grouped[i][1] + op[i]]
    return x.conv2d(w, bias, groups=groups, dilation=d, padding=conv_pads)

  # ---- pooling -------------------------------------------------------------------------------

  def _pool_setup(self, kernel_size, stride, dilation, padding, ceil_mode):
    k = make_tuple(kernel_size, 2)
    s, d = make_tuple(k if stride is None else stride, len(k)), make_tuple(dilation, len(k))
    pads = _resolve_pool_pads(padding, len(k))
    _check_window_args(op_name(), self.shape, s, d, pads)
    if ceil_mode: pads = _ceil_pads(self.shape[-len(k):], pads, k, s, d)
    return k, s, d, pads

  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False, return_indices: bool = False):
    """Max over sliding windows of the trailing len(kernel_size) dims; with return_indices also the int32 flat index
    (within each unpadded plane, as torch's) of each window's first maximum."""
    k, s, d, pads = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    axes = [-(i + 1) for i in range(len(k))]
    if len(k) == 2 and len(set(k)) == 1 and len(set(s)) == 1 and d == (1, 1) and not any(pads) and not return_indices:
      return self._wrap(self._c.max_pool2d(k[0], s[0]))
    x = self.pad(pads, value=dtypes.min(self.dtype)) if any(pads) else self
    win = x._wrap(x._c.pool_windows(list(k), list(s), list(d)))
    if not return_indices: return win.max(axes)
    plane = self.shape[-len(k):]
    n = math.prod(plane)
    pos = self._T.arange(n, dtype=dtypes.int64 if n >= 2**31 else dtypes.int32, device=self.device).reshape(plane)
    pos = pos.pad(pads, value=n) if any(pads) else pos  # padding is never the first maximum
    pos = pos._wrap(pos._c.pool_windows(list(k), list(s), list(d)))
    values = win.max(axes)
    return values, (win == values.reshape(*values.shape, *[1] * len(k))).where(pos, n).min(axes)

  def max_unpool2d(self, indices, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None):
    """The partial inverse of max_pool2d: self's values at the flat per-plane `indices`, zeros elsewhere."""
    self._tensor_arg(indices, "indices")
    if indices.shape != self.shape: raise ValueError(f"[max_unpool2d] indices {indices.shape} and input {self.shape} differ in shape")
    if self.ndim < 3: raise ValueError(f"[max_unpool2d] needs (batch, channel, *spatial), got {self.shape}")
    bs, c, *spatial = self.shape
    nd = len(spatial)
    if output_size is None:
      k, d = make_tuple(kernel_size, nd), make_tuple(dilation, nd)
      s = make_tuple(k if stride is None else stride, nd)
      pads = _resolve_pool_pads(padding, nd)
      before_after = list(zip(pads[-2::-2], pads[::-2]))  # per dim, first dim first
      out = tuple((i - 1) * s_ - b - a + d_ * (k_ - 1) + 1 for i, k_, s_, d_, (b, a) in zip(spatial, k, s, d, before_after))
    else: out = tuple(output_size)[-nd:]
    if any(o <= 0 for o in out): raise ValueError(f"[max_unpool2d] output size {out} must be positive")
    flat = self._T.zeros(bs, c, math.prod(out), dtype=self.dtype, device=self.device)
    return flat.scatter(2, indices.reshape(bs, c, -1), self.reshape(bs, c, -1)).reshape(bs, c, *out)

  def interpolate(self, size, mode: str = "linear", align_corners: bool = False):
    """Resizes the trailing len(size) dims as torch's F.interpolate: mode linear (bilinear, trilinear: the same,
    by the length of size), nearest or nearest-exact; int tensors come back as their dtype."""
    if not isinstance(size, (tuple, list)) or not size or len(size) > self.ndim or not all(isinstance(o, int) for o in size):
      raise ValueError(f"[interpolate] size={size!r} must be a tuple of 1 to {self.ndim} ints")
    if any(o <= 0 for o in size): raise ValueError(f"[interpolate] size={tuple(size)} must be positive")
    if mode not in ("linear", "bilinear", "trilinear", "nearest", "nearest-exact"):
      raise ValueError(f"[interpolate] mode={mode!r} must be one of linear, bilinear, trilinear, nearest, nearest-exact")
    linear = mode in ("linear", "bilinear", "trilinear")
    if align_corners and not linear: raise ValueError(f"[interpolate] align_corners=True needs a linear mode, not {mode!r}")
    if any(n == 0 for n in self.shape[-len(size):]): raise ValueError(f"[interpolate] input {self.shape} has an empty dim to resize")
    x = self if not linear or dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)
    acc = np.float64 if x.dtype == dtypes.float64 else np.float32  # torch computes source positions in this
    for ax, o in zip(range(self.ndim - len(size), self.ndim), size):
      n, dst = x.shape[ax], np.arange(o, dtype=acc)
      at = (slice(None),) * ax
      if not linear:
        scale = acc(n) / acc(o)
        src = np.floor((dst + acc(0.5)) * scale if mode == "nearest-exact" else dst * scale).astype(np.int64)
        x = x[at + (np.minimum(src, n - 1),)]
        continue
      if align_corners: src = dst * (acc(n - 1) / acc(o - 1) if o > 1 else acc(0))
      elif n == o: src = dst
      else: src = np.maximum((dst + acc(0.5)) * (acc(n) / acc(o)) - acc(0.5), acc(0))
      lo = src.astype(np.int64)
      hi = lo + (lo < n - 1)
      frac = self._T(np.clip(src - lo, 0, 1).astype(acc).reshape(o, *[1] * (x.ndim - ax - 1)), dtype=x.dtype, device=self.device)
      x = x[at + (lo,)] * (1 - frac) + x[at + (hi,)] * frac
    return x.cast(self.dtype)

  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
    k, s, d, pads = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    if len(k) == 2 and len(set(k)) == 1 and len(set(s)) == 1 and d == (1, 1) and not any(pads):
      return self._wrap(self._c.avg_pool2d(k[0], s[0]))
    axes = [-(i + 1) for i in range(len(k))]
    def windows(x): return x._wrap(x._c.pool_windows(list(k), list(s), list(d)))
    total = windows(self.pad(pads) if any(pads) else self).sum(axes)
    ones = self._T.ones(self.shape[-len(k):], device=self.device)
    if count_include_pad:  # the explicit padding counts, the ceil_mode extra does not
      explicit = _resolve_pool_pads(padding, len(k))
      padded = [n + explicit[-2 - 2 * i] + explicit[-1 - 2 * i] for i, n in enumerate(ones.shape)]
      ones = self._T.ones(*padded, device=self.device)
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
    classes = self._T.arange(self.shape[-1], dtype=Y.dtype, device=self.device)
    y = (Y.unsqueeze(-1) == classes) & loss_mask.unsqueeze(-1)
    smoothing = label_smoothing * (log_probs.mean(-1) * loss_mask)
    unreduced = (1 - label_smoothing) * (log_probs * y).sum(-1) + smoothing
    if reduction == "mean": return -(unreduced.sum() / loss_mask.sum())
    return -(unreduced.sum() if reduction == "sum" else unreduced)

  def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross entropy of logits (classes on dim 1, or dim 0 of a 1-D input) with class indices (self's shape without
    the class dim) or class probabilities (self's shape), as torch's."""
    self._tensor_arg(Y, "Y")
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"[cross_entropy] label_smoothing={label_smoothing} is outside [0, 1]")
    cdim = 1 if self.ndim >= 2 else 0
    n = self.shape[cdim]
    if Y.shape == self.shape[:cdim] + self.shape[cdim + 1:]:  # class indices: one-hot on a new last axis, moved to cdim
      Y = Y.one_hot(num_classes=n)
      if Y.ndim > 2: Y = Y.permute(0, Y.ndim - 1, *range(1, Y.ndim - 1))
    elif Y.shape != self.shape:
      raise ShapeError(f"[cross_entropy] target {Y.shape} for logits {self.shape}: give class indices of shape "
                       f"{self.shape[:cdim] + self.shape[cdim + 1:]} or probabilities of shape {self.shape}")
    Y = (1 - label_smoothing) * Y + label_smoothing / n
    return (-self.log_softmax(axis=cdim).mul(Y).sum(axis=cdim))._do_reduction(reduction)

  def nll_loss(self, Y, weight=None, ignore_index: int | None = None, reduction: str = "mean"):
    self._tensor_arg(Y, "Y")
    weight = self._T.ones(Y.shape, device=self.device) if weight is None else weight[Y]
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
    if dropout_p == 0 or not self._T.training:
      return self._wrap(multi.call("scaled_dot_product_attention", self._c, key._c, value._c, None if attn_mask is None else attn_mask._c,
                                   is_causal))
    qk = self.matmul(key.transpose(-2, -1)) / math.sqrt(self.shape[-1])
    if is_causal: attn_mask = self._T.ones(qk.shape[-2], qk.shape[-1], dtype=dtypes.bool, device=self.device).tril()
    if attn_mask is not None:
      qk = qk + (attn_mask.where(0, -math.inf) if attn_mask.dtype is dtypes.bool else attn_mask)
    return qk.softmax(-1).dropout(dropout_p) @ value

  def mse(self, target): return self._wrap(self._c.mse(self._tensor_arg(target, "target")._c))
