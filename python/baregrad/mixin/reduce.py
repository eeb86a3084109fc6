"""Reductions, scans, softmax and matrix products (tinygrad's `axis` keywords)."""
from __future__ import annotations

import math

import numpy as np

import _baregrad as _C
from baregrad import multi
from baregrad.dtype import dtypes, least_upper_dtype, sum_acc_dtype, to_dtype
from baregrad.helpers import ShapeError, argfix, op_name


class ReduceMixin:
  __slots__ = ()

  def _axes(self, axis) -> list[int] | None:
    """C++ axes for tinygrad's axis: None -> [] (all), int -> [axis]; None for an empty tuple."""
    if axis is None: return []
    if not isinstance(axis, (int, np.integer, tuple, list)):
      raise TypeError(f"[{op_name()}] axis must be an int or a tuple of ints, got {type(axis).__name__} {axis!r}")
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
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

  def _tri(self, n: int):
    """The (n, n) bool mask of j <= i (row i, column j) on this device."""
    return self._T.ones(n, n, dtype=dtypes.bool, device=self.device).tril()

  def _cum_extreme(self, axis: int, is_max: bool):
    """(values, int32 indices) of the running max or min along `axis`, as torch's: the index is the
    last position holding the running value, NaN wins and stays (the last NaN's index). O(n^2)
    work along the axis (masks of (n, n)), as tinygrad's; the gradient goes to those indices."""
    axis = self._resolve_dim(axis)
    if self.ndim == 0: return self, self._T.zeros((), dtype=dtypes.int32, device=self.device)
    n = self.shape[axis]
    if n == 0: return self, self._T.zeros(self.shape, dtype=dtypes.int32, device=self.device).contiguous()
    x = self.transpose(axis, -1)
    xd = x.detach()
    fill = (dtypes.min if is_max else dtypes.max)(self.dtype)
    masked = self._tri(n).where(xd.unsqueeze(-2), fill)  # [..., i, j]: x_j for j <= i
    run = masked.max(-1) if is_max else masked.min(-1)
    hit = xd.unsqueeze(-2).eq(run.unsqueeze(-1))
    if dtypes.is_float(self.dtype): hit = hit | (xd.unsqueeze(-2).isnan() & run.unsqueeze(-1).isnan())
    pos = self._T.arange(n, dtype=dtypes.int32, device=self.device)
    idx = (self._tri(n) & hit).where(pos, -1).max(-1)
    return x.gather(-1, idx).transpose(axis, -1), idx.transpose(axis, -1)

  def cummax(self, axis: int = 0):
    """(values, indices) of the running maximum along `axis` (tinygrad's current API and torch's)."""
    return self._cum_extreme(axis, True)

  def cummin(self, axis: int = 0):
    """(values, indices) of the running minimum along `axis`, as torch.cummin."""
    return self._cum_extreme(axis, False)

  def logcumsumexp(self, axis: int = 0):
    """log(cumsum(exp(x))) along `axis`, shifted by the running max so that it neither overflows nor underflows."""
    x = self._float()
    if x.ndim == 0: return x
    axis = self._resolve_dim(axis)
    n = x.shape[axis]
    if n == 0: return x
    x = x.transpose(axis, -1)
    tri = self._tri(n)
    run = tri.where(x.detach().unsqueeze(-2), -math.inf).max(-1)
    run = run.isinf().where(0.0, run)  # an infinite running max shifts nothing: -inf stays -inf, inf stays inf
    total = tri.where(x.unsqueeze(-2) - run.unsqueeze(-1), -math.inf).exp().sum(-1)
    return (total.log() + run).transpose(axis, -1)

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

  def softmin(self, axis: int = -1, dtype=None):
    """softmax(-x) along `axis` (bool and int tensors in float32)."""
    x = self._float() if dtype is None else self.cast(to_dtype(dtype))
    return (-x).softmax(axis)

  def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12):
    """x / max(||x||_p, eps) along `dim`, as torch.nn.functional.normalize (p may be 0, inf or -inf)."""
    x = self._float()
    dim = x._resolve_dim(dim)
    a = x.abs()
    if p == math.inf: norm = a.max(dim, keepdim=True)
    elif p == -math.inf: norm = a.min(dim, keepdim=True)
    elif p == 0: norm = x.ne(0).sum(dim, keepdim=True).cast(x.dtype)
    else:
      s = (a ** p).sum(dim, keepdim=True)
      zero = s.eq(0)  # ||0|| = 0 with a zero gradient (torch's), not 0 ** (1/p - 1) = inf
      norm = zero.where(0.0, zero.where(1.0, s) ** (1 / p))
    return x / (norm >= eps).where(norm, eps)  # torch's clamp_min: at norm == eps the gradient goes to the norm

  # ---- sorting -------------------------------------------------------------------------------

  def _before(self, a, ia, b, ib, n: int, descending: bool):
    """Whether element (a, ia) comes before (b, ib) in the sorted order: positions past n (padding)
    last, then by value (NaN as the largest, torch's), then by original index (a stable sort)."""
    pa, pb = ia >= n, ib >= n
    if descending: first = a > b
    else: first = a < b
    same = a.eq(b)
    if dtypes.is_float(a.dtype):
      na, nb = a.isnan(), b.isnan()
      first = first | ((na & nb.logical_not()) if descending else (na.logical_not() & nb))
      same = same | (na & nb)
    return (pa.logical_not() & pb) | (pa.eq(pb) & (first | (same & (ia < ib))))

  def sort(self, dim: int = -1, descending: bool = False):
    """(values, int32 indices) sorted along `dim` by a bitonic network of elementwise ops: O(n log^2 n),
    stable (equal values keep their order), NaN after every number (first when descending), as torch."""
    if self.ndim == 0: return self, self._T.zeros((), dtype=dtypes.int32, device=self.device)
    dim = self._resolve_dim(dim)
    n = self.shape[dim]
    if n <= 1: return self, self._T.zeros(self.shape, dtype=dtypes.int32, device=self.device).contiguous()
    m = (n - 1).bit_length()
    size = 1 << m
    x = self.transpose(dim, -1)
    batch = x.shape[:-1]
    v = x.pad(((0, 0),) * len(batch) + ((0, size - n),)) if size != n else x
    idx = self._T.arange(size, dtype=dtypes.int32, device=self.device).expand(*batch, size)
    pos = np.arange(size)
    for k in range(1, m + 1):  # merge sorted runs of 2**(k-1) into runs of 2**k, alternating direction
      for j in range(k - 1, -1, -1):  # compare-exchange positions i and i ^ 2**j
        shape = (*batch, size >> (j + 1), 2, 1 << j)
        vr, ir = v.reshape(shape), idx.reshape(shape)
        vp, ip = vr.flip(-2), ir.flip(-2)  # each element's partner, in place
        # the pair swaps when the lower one belongs after the upper one (in blocks with bit k set: before it)
        flip = (((pos >> k) ^ (pos >> j)) & 1).astype(bool).reshape(shape[-3:])  # bit k is 0 throughout when k == m
        swap = self._before(vp, ip, vr, ir, n, descending) ^ self._T(flip, device=self.device)
        v = swap.where(vp, vr).reshape(*batch, size).contiguous()
        idx = swap.where(ip, ir).reshape(*batch, size).contiguous()
    if size != n: v, idx = v[..., :n], idx[..., :n]
    return v.transpose(dim, -1), idx.transpose(dim, -1)

  def argsort(self, dim: int = -1, descending: bool = False):
    """The int32 indices that sort the tensor along `dim` (stable)."""
    return self.sort(dim, descending)[1]

  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True):
    """(values, int32 indices) of the k largest (or smallest) along `dim`, in sorted order (also for sorted_=False)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
      raise TypeError(f"[topk] k must be an int, got {type(k).__name__}")
    k = int(k)
    size = self.shape[self._resolve_dim(dim)] if self.ndim else 1
    if not 0 <= k <= size: raise ValueError(f"[topk] k={k} is out of range for size {size} of dim {dim}")
    v, idx = self.sort(dim, descending=largest)
    if self.ndim == 0: return v, idx
    d = self._resolve_dim(dim)
    box = tuple((0, k) if i == d else None for i in range(self.ndim))
    return v.shrink(box), idx.shrink(box)

  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """|self - other| <= atol + rtol * |other| elementwise (infinities equal themselves; NaNs with equal_nan); other a
    Tensor or a Python number."""
    if not isinstance(other, self._T): other = self._to_tensor(other)
    is_finite_close = self.isfinite() & other.isfinite() & ((self - other).abs() <= atol + rtol * other.abs())
    is_infinite_close = (self.isinf() | other.isinf()) & (self == other)
    is_nan_close = (self.isnan() & other.isnan()) & equal_nan
    return is_finite_close | is_infinite_close | is_nan_close

  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """A 0-d bool tensor: whether every element is close (tinygrad's; torch's returns a Python bool: use .item())."""
    return self.isclose(other, rtol, atol, equal_nan).all()

  # ---- products ------------------------------------------------------------------------------

  def matmul(self, x, reverse: bool = False, dtype=None):
    a, b = (x, self) if reverse else (self, x)
    if not isinstance(a, self._T): a = self._T(a, device=self.device)
    if not isinstance(b, self._T): b = self._T(b, device=self.device)
    if dtype is not None:
      a, b = a.cast(to_dtype(dtype)), b.cast(to_dtype(dtype))
    elif a.dtype != b.dtype:
      out = least_upper_dtype(a.dtype, b.dtype)
      a, b = a.cast(out), b.cast(out)
    if a.ndim == 0 or b.ndim == 0: raise ShapeError(f"[matmul] both operands need a dim, got shapes {a.shape} @ {b.shape}")
    if a.shape[-1] != b.shape[-min(b.ndim, 2)]:
      raise ShapeError(f"[matmul] inner dims differ: {a.shape} @ {b.shape} ({a.shape[-1]} vs {b.shape[-min(b.ndim, 2)]})")
    return a._wrap(multi.call("matmul", a._c, b._c))

  def dot(self, w, dtype=None): return self.matmul(w, dtype=dtype)

  @staticmethod
  def einsum(formula: str, *operands, dtype=None):
    """Einstein summation ("ij,jk->ik", "...ij->...ji", implicit outputs); an index repeated within one operand
    ("ii->i", "ii->") takes that operand's diagonal. Bad formulas and shapes raise ValueError, also a RuntimeError."""
    ops = list(argfix(*operands))
    lhs, arrow, rhs = formula.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) == len(ops):
      for k, (term, op) in enumerate(zip(terms, ops)):
        terms[k], ops[k] = ReduceMixin._einsum_diagonals(term, op)
    try:
      ret = ops[0]._wrap(multi.static("einsum", ",".join(terms) + arrow + rhs, [o._c for o in ops]))
    except ValueError as e:
      raise ShapeError(str(e)) from None
    return ret if dtype is None else ret.cast(to_dtype(dtype))

  @staticmethod
  def _einsum_diagonals(term: str, op):
    """(term, op) with every letter repeated in term replaced by op's diagonal over those dims, as a last dim."""
    if term.count("...") > 1: return term, op  # the C++ parser names this error
    while (rep := next((c for c in term if c.isalpha() and term.count(c) > 1), None)) is not None:
      head, ell, tail = term.partition("...")
      width = op.ndim - len(head) - len(tail) if ell else 0
      dims = [i if i < len(head) else len(head) + width + (i - len(head)) for i in [j for j, c in enumerate(head + tail) if c == rep]]
      if width < 0 or op.ndim <= max(dims): raise ShapeError(f"[einsum] term {term!r} does not fit operand of shape {op.shape}")
      op = op.diagonal(dim1=dims[0], dim2=dims[1])
      term = (head + ell + tail).replace(rep, "", 2) + rep
    return term, op
