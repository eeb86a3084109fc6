"""Reductions, scans, softmax and matrix products (tinygrad's `axis` keywords)."""
from __future__ import annotations

import _baregrad as _C
from baregrad.dtype import dtypes, least_upper_dtype, sum_acc_dtype, to_dtype
from baregrad.helpers import argfix


class ReduceMixin:
  __slots__ = ()

  def _axes(self, axis) -> list[int] | None:
    """C++ axes for tinygrad's axis: None -> [] (all), int -> [axis]; None for an empty tuple."""
    if axis is None: return []
    axes = [axis] if isinstance(axis, int) else list(axis)
    if not axes: return None
    axes = [self._resolve_dim(a) for a in axes]
    return axes if self.ndim else []  # a 0-d tensor takes axis 0 (or -1) and reduces nothing

  def _reduce(self, name: str, axis, keepdim: bool, *args):
    axes = self._axes(axis)
    if axes is None: return self
    return self._wrap(getattr(self._c, name)(axes, keepdim, *args))

  def sum(self, axis=None, keepdim: bool = False, dtype=None):
    """Sum over `axis`; small ints accumulate (and return) as 32-bit, half floats in float32."""
    x = self if dtype is None else self.cast(to_dtype(dtype))
    return x._reduce("sum", axis, keepdim)

  def prod(self, axis=None, keepdim: bool = False, dtype=None):
    x = self.cast(to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype))
    ret = x._reduce("prod", axis, keepdim)
    return ret.cast(self.dtype) if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16) else ret

  def max(self, axis=None, keepdim: bool = False): return self._reduce("max", axis, keepdim)
  def min(self, axis=None, keepdim: bool = False): return self._reduce("min", axis, keepdim)
  def any(self, axis=None, keepdim: bool = False): return self._reduce("any", axis, keepdim)
  def all(self, axis=None, keepdim: bool = False): return self._reduce("all", axis, keepdim)

  def mean(self, axis=None, keepdim: bool = False):
    axes = self._axes(axis)
    if axes is None: return self.cast(self.dtype if dtypes.is_float(self.dtype) else dtypes.float32)
    if any(self.shape[a] == 0 for a in (axes or range(self.ndim))):  # the mean of nothing is NaN
      return self.sum(axis, keepdim).cast(self.dtype if dtypes.is_float(self.dtype) else dtypes.float32) / 0.0
    return self._reduce("mean", axis, keepdim)

  def var(self, axis=None, keepdim: bool = False, correction=1): return self._reduce("var", axis, keepdim, float(correction))
  def std(self, axis=None, keepdim: bool = False, correction=1): return self._reduce("std", axis, keepdim, float(correction))
  def var_mean(self, axis=None, keepdim: bool = False, correction=1):
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis=None, keepdim: bool = False, correction=1):
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)
  def logsumexp(self, axis=None, keepdim: bool = False): return self._reduce("logsumexp", axis, keepdim)

  def cumsum(self, axis: int = 0):
    return self._wrap(self._c.cumsum(self._resolve_dim(axis)))

  def cumprod(self, axis: int):
    return self._wrap(self._c.cumprod(self._resolve_dim(axis)))

  def cummax(self, axis: int = 0):
    """Running maximum along `axis` (a triangular mask and a max, like cumsum)."""
    axis = self._resolve_dim(axis)
    n = self.shape[axis]
    x = self.transpose(axis, -1).unsqueeze(-2)
    mask = type(self).ones(n, n, dtype=dtypes.bool, device=self.device).tril()
    return mask.where(x, dtypes.min(self.dtype)).max(-1).transpose(axis, -1)

  def argmax(self, axis=None, keepdim: bool = False):
    return self._wrap(self._c.argmax(None if axis is None else self._resolve_dim(axis), keepdim))

  def argmin(self, axis=None, keepdim: bool = False):
    return self._wrap(self._c.argmin(None if axis is None else self._resolve_dim(axis), keepdim))

  def softmax(self, axis: int = -1, dtype=None):
    x = self if dtype is None else self.cast(to_dtype(dtype))
    return x._wrap(x._c.softmax(axis))

  def log_softmax(self, axis: int = -1, dtype=None):
    x = self if dtype is None else self.cast(to_dtype(dtype))
    return x._wrap(x._c.log_softmax(axis))

  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    is_finite_close = self.isfinite() & other.isfinite() & ((self - other).abs() <= atol + rtol * other.abs())
    is_infinite_close = (self.isinf() | other.isinf()) & (self == other)
    is_nan_close = (self.isnan() & other.isnan()) & equal_nan
    return is_finite_close | is_infinite_close | is_nan_close

  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

  # ---- products ------------------------------------------------------------------------------

  def matmul(self, x, reverse: bool = False, dtype=None):
    a, b = (x, self) if reverse else (self, x)
    if not isinstance(a, type(self)): a = type(self)(a, device=self.device)
    if not isinstance(b, type(self)): b = type(self)(b, device=self.device)
    if dtype is not None:
      a, b = a.cast(to_dtype(dtype)), b.cast(to_dtype(dtype))
    elif a.dtype != b.dtype:
      out = least_upper_dtype(a.dtype, b.dtype)
      a, b = a.cast(out), b.cast(out)
    return a._wrap(a._c.matmul(b._c))

  def dot(self, w, dtype=None): return self.matmul(w, dtype=dtype)

  @staticmethod
  def einsum(formula: str, *operands, dtype=None):
    ops = argfix(*operands)
    ret = ops[0]._wrap(_C.Tensor.einsum(formula, [o._c for o in ops]))
    return ret if dtype is None else ret.cast(to_dtype(dtype))
