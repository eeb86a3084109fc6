"""Movement Tensor methods: views (reshape, permute, pad, ...), joins and splits, indexing."""
from __future__ import annotations

import functools
import numpy as np

import _baregrad as _C
from baregrad import multi
from baregrad.dtype import dtypes, least_upper_dtype, to_dtype
from baregrad.helpers import DTypeError, ShapeError, SymbolicDimError, argfix, check_int64, fully_flatten, make_tuple, prod, op_name
from baregrad import variable
from baregrad.variable import _merge_bindings, _op_bindings, is_symbolic, sym_of, vals_of


def _flat_to_grouped(padding) -> tuple:
  """torch's flat (left, right, top, bottom, ...) pads, last dim first, as (before, after) pairs."""
  return tuple(zip(padding[-2::-2], padding[::-2]))


def _whole_buffer(c) -> bool:
  """`c` (a C++ tensor) is its realized buffer's whole, unmoved view. The node it reads is freed on
  return, so it does not count as another reader of the base."""
  n = c.lazy_node()
  return n.is_base and n.realized is not None


class MovementMixin:
  __slots__ = ()

  def _resolve_dim(self, dim: int, *, extra: bool = False) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
      raise TypeError(f"[{op_name()}] an axis must be an int, got {type(dim).__name__} {dim!r}")
    dim = int(dim)
    total = self.ndim + int(extra)
    if not -max(1, total) <= dim <= max(1, total) - 1:
      raise IndexError(f"[{op_name()}] axis {dim} is out of range for {self.shape} (valid: {-max(1, total)} to {max(1, total) - 1})")
    return dim + total if dim < 0 else dim

  def _m(self, name: str, *args):
    check_int64(name, args)
    return self._wrap(getattr(self._c, name)(*args))

  def _bind(self, out, found: dict):
    """`out` tagged with the bound Variables `found` in an op's arguments (_op_bindings) and those
    of self: TinyJit keys its captures on them (baregrad/variable.py)."""
    if found is None: return out
    prev = getattr(self, "_bound", None)
    if not found and not prev or not hasattr(type(out), "_bound"): return out
    merged = _merge_bindings(dict(prev or {}), found)
    if found and out._c.sym_shape is None:  # sized by the values: a capture serves only them
      _C.jit_specialize(f"[{op_name()}] made a shape from the value of Variable " + ", ".join(f"'{k}'" for k in found))
    if out is self: out = self._wrap(self._c)
    out._bound = merged
    return out

  # ---- views ---------------------------------------------------------------------------------

  def reshape(self, shape, *args):
    new_shape = argfix(shape, *args)
    found = _op_bindings(new_shape)
    new_shape = [self.shape[i] if s is None else s for i, s in enumerate(new_shape)]
    if new_shape.count(-1) > 1: raise RuntimeError(f"[reshape] {new_shape} has more than one -1")
    return self._bind(self if tuple(new_shape) == self.shape else self._m("reshape", new_shape), found)

  def view(self, shape, *args): return self.reshape(shape, *args)

  def expand(self, shape, *args):
    new_shape = argfix(shape, *args)
    found = _op_bindings(new_shape)
    if variable.in_use and any(is_symbolic(s) for s in new_shape):
      cur = (1,) * (len(new_shape) - self.ndim) + self.shape
      full = [c if s is None or (not is_symbolic(s) and s == -1) else s for s, c in zip(new_shape, cur)]
      check_int64("expand", [int(s) for s in full])
      return self._bind(self._wrap(self._c.expand_sym([sym_of(s) for s in full], vals_of(full))), found)
    return self._bind(self._m("expand", [-1 if s is None else s for s in new_shape]), found)

  def _broadcast_to(self, shape):
    shape = tuple(shape)
    if self.shape == shape: return self
    if len(shape) < self.ndim: raise ValueError(f"[{op_name()}] cannot broadcast {self.shape} to {shape}")
    return self.expand(shape)

  def permute(self, order, *args):
    order = argfix(order, *args)
    if sorted(self._resolve_dim(o) for o in order) != list(range(self.ndim)):
      raise RuntimeError(f"[permute] {order} is not a permutation of the {self.ndim} axes of {self.shape}")
    return self._m("permute", [int(o) for o in order])

  def flip(self, axis, *args):
    axes = [self._resolve_dim(a) for a in argfix(axis, *args)]
    if len(set(axes)) != len(axes): raise RuntimeError(f"[flip] the axes {axes} name an axis twice")
    return self._m("flip", axes) if axes else self

  def shrink(self, arg):
    found = _op_bindings(arg)
    if len(arg) != self.ndim: raise ValueError(f"[shrink] a tensor of shape {self.shape} needs {self.ndim} ranges, got {arg}")
    if variable.in_use and (self._c.sym_shape is not None or any(r is not None and (is_symbolic(r[0]) or is_symbolic(r[1])) for r in arg)):
      # symbolic ranges, or a symbolic tensor (whose None ranges keep their Variables)
      ranges = [(0, s) if r is None else (r[0], r[1]) for r, s in zip(arg, self.shape)]
      check_int64("shrink", [(int(a), int(b)) for a, b in ranges])
      out = self._c.shrink_sym([(sym_of(a), sym_of(b)) for a, b in ranges], vals_of(ranges))
      return self._bind(self._wrap(out), found)
    ranges = [(0, s) if r is None else (int(r[0]), int(r[1])) for r, s in zip(arg, self.shape)]
    return self._bind(self if all(r == (0, s) for r, s in zip(ranges, self.shape)) else self._m("shrink", ranges), found)

  def pad(self, padding, mode: str = "constant", value: float = 0.0):
    """Flat torch-style pads (last dim first) or one (before, after) pair or None per dim;
    negative pads crop; modes constant, reflect, replicate and circular."""
    found = _op_bindings(padding)
    return self._bind(self._pad(padding, mode, value), found)

  def _pad(self, padding, mode: str, value: float):
    if mode not in {"constant", "reflect", "replicate", "circular"}: raise NotImplementedError(f"[pad] mode={mode!r} is not supported")
    if all(isinstance(p, (int, np.integer)) for p in padding):
      if len(padding) % 2 != 0: raise ValueError(f"[pad] flat padding {padding} has an odd number of values")
      pads = _flat_to_grouped(tuple(padding) + (0, 0) * (self.ndim - len(padding) // 2))
    else: pads = tuple((0, 0) if p is None else tuple(p) for p in padding)
    if len(pads) != self.ndim: raise ValueError(f"[pad] padding {padding} does not fit the {self.ndim} dims of {self.shape}")
    if variable.in_use and mode == "constant" and value == 0 and any(is_symbolic(x) for p in pads for x in p):
      if any(int(x) < 0 for p in pads for x in p): raise ValueError(f"[pad] a symbolic padding {pads} must not crop")
      check_int64("pad", [(int(b), int(a)) for b, a in pads])
      return self._wrap(self._c.pad_sym([(sym_of(b), sym_of(a)) for b, a in pads], vals_of(pads)))
    pads = [(int(b), int(a)) for b, a in pads]
    if mode in ("reflect", "replicate") and any(b < 0 or a < 0 for b, a in pads):  # torch: pad the input, then crop
      x = self.pad(tuple((max(b, 0), max(a, 0)) for b, a in pads), mode=mode)
      return x.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pads, x.shape)))
    if mode == "constant" and value == 0 and all(b >= 0 and a >= 0 for b, a in pads): return self._m("pad", pads)
    check_int64("pad", pads)
    return self._wrap(self._c.pad_mode(pads, mode, float(value)))

  def pad_to(self, shape, *args, value: float = 0.0):
    """Pads at the end of each dim up to `shape` (None keeps a dim) with `value`."""
    new_shape = argfix(shape, *args)
    if len(new_shape) != self.ndim: raise ValueError(f"[pad_to] cannot pad {self.shape} to {new_shape}: the ranks differ")
    pads = tuple(None if ns is None else (0, ns - s) for s, ns in zip(self.shape, new_shape))
    if all(p is None or p == (0, 0) for p in pads): return self
    return self.pad(pads, value=value)

  def shrink_to(self, shape, *args):
    """The leading `shape` elements of each dim (None keeps a dim)."""
    new_shape = argfix(shape, *args)
    if len(new_shape) != self.ndim: raise ValueError(f"[shrink_to] cannot shrink {self.shape} to {new_shape}: the ranks differ")
    return self.shrink(tuple(None if ns is None else (0, ns) for ns in new_shape))

  def transpose(self, dim0: int = 1, dim1: int = 0): return self._m("transpose", self._resolve_dim(dim0), self._resolve_dim(dim1))

  @property
  def T(self): return self.transpose()  # noqa: N802

  def flatten(self, start_dim: int = 0, end_dim: int = -1):
    if self.ndim == 0: return self.reshape(1)
    return self._m("flatten", self._resolve_dim(start_dim), self._resolve_dim(end_dim))

  def unflatten(self, dim: int, sizes):
    return self._m("unflatten", self._resolve_dim(dim), list(sizes))

  def squeeze(self, dim: int | None = None):
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dim = self._resolve_dim(dim)
    return self if not self.ndim or self.shape[dim] != 1 else self.reshape(self.shape[:dim] + self.shape[dim + 1:])

  def unsqueeze(self, dim: int): return self._m("unsqueeze", self._resolve_dim(dim, extra=True))

  def repeat(self, repeats, *args): return self._m("repeat", list(argfix(repeats, *args)))

  def repeat_interleave(self, repeats: int, dim: int | None = None):
    if not isinstance(repeats, int) or repeats < 0: raise ValueError(f"[repeat_interleave] repeats={repeats!r} must be an int >= 0")
    x, dim = (self.flatten(), 0) if dim is None else (self, self._resolve_dim(dim))
    shp = x.shape
    return x.reshape(*shp[:dim + 1], 1, *shp[dim + 1:]).expand(*shp[:dim + 1], repeats, *shp[dim + 1:]).flatten(dim, dim + 1)

  def roll(self, shifts, dims=None):
    """Elements shifted along dims, wrapping around; without dims, over the flattened tensor (one shift only)."""
    if dims is None:
      shifts = make_tuple(shifts, 1)
      if len(shifts) != 1: raise ShapeError(f"[roll] {len(shifts)} shifts {shifts} need as many dims, got none")
      return self._wrap(self._c.roll(int(shifts[0]), None))
    ret, shifts, dims = self, make_tuple(shifts, 1), make_tuple(dims, 1)
    if len(shifts) != len(dims): raise ShapeError(f"[roll] {len(shifts)} shifts {shifts} for {len(dims)} dims {dims}")
    for shift, dim in zip(shifts, dims):
      ret = ret._wrap(ret._c.roll(int(shift), ret._resolve_dim(dim)))
    return ret

  def rearrange(self, formula: str, **sizes):
    """einops-style rearrange: "b (h w) c -> b h w c" splits (sizes given as keywords, one left to infer),
    "(b c) -> ..." and "b c -> (b c)" merge, names reorder, `...` stands for the other dims, `1` or `()` is a
    dim of size 1."""
    if not isinstance(formula, str) or formula.count("->") != 1: raise ValueError(f"[rearrange] formula {formula!r} needs exactly one '->'")
    def parse(side: str) -> list:
      """Items of one side: a name, '...', or a list of names (a parenthesised group; '1' is an empty one)."""
      items, group = [], None
      for tok in side.replace("…", "...").replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
          if group is not None: raise ValueError(f"[rearrange] nested parentheses in {formula!r}")
          group = []
        elif tok == ")":
          if group is None: raise ValueError(f"[rearrange] unbalanced ')' in {formula!r}")
          items.append(group)
          group = None
        elif tok == "1":
          if group is None: items.append([])  # inside a group a 1 changes nothing
        elif tok == "..." or (tok.isidentifier() and not tok.startswith("_") and not tok.endswith("_")):
          (group if group is not None else items).append(tok)
        else: raise ValueError(f"[rearrange] invalid axis name {tok!r} in {formula!r}")
      if group is not None: raise ValueError(f"[rearrange] unbalanced '(' in {formula!r}")
      return items
    lhs, rhs = (parse(side) for side in formula.split("->"))
    def names(items): return [n for it in items for n in (it if isinstance(it, list) else [it])]
    ln, rn = names(lhs), names(rhs)
    if len(ln) != len(set(ln)) or len(rn) != len(set(rn)) or set(ln) != set(rn):
      raise ValueError(f"[rearrange] {formula!r}: each side must name the same axes once")
    if any("..." in it for it in lhs if isinstance(it, list)): raise ValueError(f"[rearrange] '...' inside a group on the left of {formula!r}")
    for name in sizes:
      if name not in ln: raise ValueError(f"[rearrange] size given for {name!r}, which {formula!r} does not use")
    ell = self.ndim - (len(lhs) - 1) if "..." in lhs else 0
    if ell < 0 or ("..." not in lhs and len(lhs) != self.ndim):
      raise ValueError(f"[rearrange] {formula!r} names {len(lhs) - ('...' in lhs)} dims, the tensor has shape {self.shape}")
    ell_names = [f"...{i}" for i in range(ell)]
    known, split, dims = {}, [], list(self.shape)
    for it in lhs:
      if it == "...":
        known.update(zip(ell_names, dims[:ell]))
        split += ell_names
        dims = dims[ell:]
        continue
      group, n = (it if isinstance(it, list) else [it]), dims.pop(0)
      unknown = [g for g in group if g not in sizes]
      if len(unknown) > 1: raise ValueError(f"[rearrange] {formula!r}: cannot infer the sizes of {unknown} from dim size {n}")
      given = prod(sizes[g] for g in group if g in sizes)
      if (unknown and (given == 0 or n % given)) or (not unknown and given != n):
        raise ValueError(f"[rearrange] {formula!r}: sizes {[sizes.get(g, '?') for g in group]} do not make dim size {n}")
      known.update({g: sizes[g] if g in sizes else n // given for g in group})
      split += group
    def members(it): return [m for n in (it if isinstance(it, list) else [it]) for m in (ell_names if n == "..." else [n])]
    out = self.reshape([known[n] for n in split]).permute([split.index(n) for it in rhs for n in members(it)])
    final = []
    for it in rhs: final += [known[n] for n in ell_names] if it == "..." else [prod(known[n] for n in members(it))]
    return out.reshape(final)

  @staticmethod
  def from_blob(ptr: int, shape, **kwargs):
    """A Tensor of `shape` over the memory at address `ptr`, used in place as tinygrad's (no copy: the
    tensor reads what the memory holds when a kernel runs, and writes land in it); dtype=, device=,
    requires_grad= as Tensor's. The device must address host memory (the CPU devices; others raise
    RuntimeError). The caller keeps the memory alive while the tensor or any view of it lives, and
    synchronizes (`numpy()`, `Device[d].synchronize()`) before reading what a kernel wrote there."""
    from baregrad.device import canonicalize_device
    from baregrad.tensor import Tensor
    shape = argfix(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if any(not isinstance(s, int) or s < 0 for s in shape): raise ValueError(f"[from_blob] invalid shape {shape}")
    dtype = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float)
    nbytes = prod(shape) * dtype.itemsize
    if nbytes and not ptr: raise ValueError(f"[from_blob] a null pointer for {nbytes} bytes")
    device, requires_grad = canonicalize_device(kwargs.pop("device", None)), kwargs.pop("requires_grad", None)
    if kwargs: raise TypeError(f"[from_blob] unexpected keyword arguments: {', '.join(sorted(kwargs))}")
    return Tensor._finish(_C.Tensor.from_blob(int(ptr), list(shape), dtype.key, device), device, requires_grad)

  # ---- joins and splits ----------------------------------------------------------------------

  def cat(self, *args, dim: int = 0):
    ts = [self._tensor_arg(t, "every argument") for t in argfix(self, *args)]
    if variable.in_use and any(t._c.sym_shape is not None for t in ts): return ts[0]._cat_sym(ts, dim)
    return ts[0]._wrap(multi.static("cat", [t._c for t in ts], dim))

  def _cat_sym(self, ts: list, dim: int):
    """cat of tensors with symbolic sizes (`a[:vi].cat(b[:vj])`): each padded (symbolically) to the total along `dim`
    and summed, so the result keeps a symbolic size and a TinyJit capture of it serves every value."""
    dim = self._resolve_dim(dim)
    for t in ts[1:]:
      if t.ndim != self.ndim or any(d != dim and sym_of(a) != sym_of(b) for d, (a, b) in enumerate(zip(self.shape, t.shape))):
        raise ValueError(f"[cat] shapes {self.shape} and {t.shape} differ outside axis {dim}")
    out_t = least_upper_dtype(*[t.dtype for t in ts])
    sum_t = dtypes.uint8 if out_t == dtypes.bool else out_t  # bools add as 0/1 bytes
    total = functools.reduce(lambda a, b: a + b, [t.shape[dim] for t in ts])
    out, offset = None, 0
    for t in ts:
      size = t.shape[dim]
      part = t.cast(sum_t).pad(tuple((offset, total - offset - size) if d == dim else None for d in range(t.ndim)))
      out, offset = part if out is None else out + part, offset + size
    return out.cast(out_t)

  def stack(self, *args, dim: int = 0):
    """Joins tensors of one shape along a new axis `dim`; `Tensor.stack(a, b)` or `Tensor.stack((a, b))`."""
    ts = argfix(self, *args)  # ValueError for a tuple followed by more tensors
    ts = [ts[0]._tensor_arg(t, "every argument") for t in ts]
    return ts[0]._wrap(multi.static("stack", [t._c for t in ts], dim))

  def _static_dim(self, dim: int) -> int:
    """`dim` resolved; a SymbolicDimError when its size is a Variable (pieces sized by its current value would
    be wrong for every other value)."""
    dim = self._resolve_dim(dim)
    if variable.in_use and is_symbolic(self.shape[dim]):
      raise SymbolicDimError(f"[{op_name()}] cannot split dim {dim} of symbolic size {self.shape[dim]} (shape {self.shape}): "
                             f"shrink it with the Variable instead")
    return dim

  def split(self, sizes, dim: int = 0) -> tuple:
    dim = self._static_dim(dim)
    parts = self._c.split(int(sizes), dim) if isinstance(sizes, (int, np.integer)) else self._c.split_sizes(list(sizes), dim)
    return tuple(self._pieces(parts, dim))

  def chunk(self, chunks: int, dim: int = 0) -> list:
    dim = self._static_dim(dim)
    return self._pieces(self._c.chunk(int(chunks), dim), dim)

  def _pieces(self, parts, dim: int) -> list:
    """split's and chunk's pieces along static `dim`: with symbolic dims elsewhere, cut again by shrink, which keeps
    their Variables (the C++ pieces have them at their current values)."""
    if not variable.in_use or self._c.sym_shape is None: return [self._wrap(p) for p in parts]
    out, at = [], 0
    for p in parts:
      out.append(self.shrink(tuple((at, at + p.shape[dim]) if d == dim else None for d in range(self.ndim))))
      at += p.shape[dim]
    return out

  def _check_index_shape(self, dim: int, index, src=None) -> None:
    """torch's rule for gather and scatter: index has self's ndim and fits self beside dim (and src everywhere)."""
    op = op_name()
    if index.ndim != self.ndim: raise ShapeError(f"[{op}] index of shape {index.shape} for a tensor of shape {self.shape}: ndims differ")
    if any(i > n for d, (i, n) in enumerate(zip(index.shape, self.shape)) if d != dim) or \
       (src is not None and (src.ndim != index.ndim or any(i > s for i, s in zip(index.shape, src.shape)))):
      raise ShapeError(f"[{op}] index {index.shape} exceeds {'src ' + str(src.shape) + ' or ' if src is not None else ''}"
                       f"(beside dim {dim}) self {self.shape}")

  def gather(self, dim: int, index):
    """out[i][j] = self[index[i][j]][j] along `dim` (torch.gather); index fits self beside dim."""
    self._tensor_arg(index, "index")
    if not dtypes.is_int(index.dtype): raise DTypeError(f"[gather] index must be an integer tensor, got {index.dtype}")
    self._check_index_shape(self._resolve_dim(dim), index)
    return self._wrap(self._c.gather(self._resolve_dim(dim), index.to(self.device)._c))

  def scatter(self, dim: int, index, src, reduce: str | None = None):
    """A copy with self[index[i]][...] = src[i] along `dim` (the last duplicate wins); reduce='add' or 'multiply'
    combines a scalar src with self instead (as scatter_reduce 'sum' and 'prod'; a tensor src takes scatter_reduce)."""
    if reduce not in (None, "add", "multiply"): raise TypeError(f"[scatter] reduce={reduce!r} must be one of None, 'add', 'multiply'")
    self._tensor_arg(index, "index")
    if not dtypes.is_int(index.dtype): raise DTypeError(f"[scatter] index must be an integer tensor, got {index.dtype}")
    if not isinstance(src, self._T): src = self._T.full(index.shape, src, dtype=self.dtype, device=self.device)
    elif reduce is not None: raise TypeError("[scatter] a tensor src with reduce= is not supported (tinygrad's rule): use scatter_reduce")
    if reduce is not None: return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")
    self._check_index_shape(self._resolve_dim(dim), index, src)
    if src.dtype != self.dtype: raise DTypeError(f"[scatter] src dtype {src.dtype} differs from {self.dtype}")
    return self._wrap(self._c.scatter(self._resolve_dim(dim), index._c, src._c))

  def scatter_reduce(self, dim: int, index, src, reduce: str, include_self: bool = True):
    """self with src[i] reduced into self[index[i]] along `dim` by sum, prod, mean, amax or amin (with self's
    values unless include_self=False); positions no index names keep self's value."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise RuntimeError(f"[scatter_reduce] reduce={reduce!r} must be one of 'sum', 'prod', 'mean', 'amax', 'amin'")
    self._tensor_arg(index, "index")
    self._tensor_arg(src, "src")
    dim = self._resolve_dim(dim)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"[scatter_reduce] index must be an integer tensor, got {index.dtype}")
    if src.dtype != self.dtype: raise DTypeError(f"[scatter_reduce] src dtype {src.dtype} differs from {self.dtype}")
    if index.device != self.device or src.device != self.device:
      raise RuntimeError(f"[scatter_reduce] index on {index.device} and src on {src.device} for a tensor on {self.device}")
    if not index.ndim == src.ndim == self.ndim:
      raise ValueError(f"[scatter_reduce] index {index.shape}, src {src.shape} into {self.shape}: ndims differ")
    if any(i > s_ or (d != dim and i > n) for d, (i, s_, n) in enumerate(zip(index.shape, src.shape, self.shape))):
      raise ValueError(f"[scatter_reduce] index {index.shape} exceeds src {src.shape} or (beside dim {dim}) self {self.shape}")
    if index.numel() == 0: return self
    # a new last axis runs over the index positions along dim; dim itself becomes the target position
    src = src.shrink(tuple((0, i) for i in index.shape)).unsqueeze(-1).transpose(dim, -1)
    target = [1] * (self.ndim + 1)
    target[dim] = self.shape[dim]
    positions = self._T.arange(self.shape[dim], dtype=index.dtype, device=self.device).reshape(target)
    hit = index.unsqueeze(-1).transpose(dim, -1) == positions
    def fit(x, value=0):  # index may cover less than self beside dim: pad with the reduction's identity
      return x.pad(tuple((0, n - i) for i, n in zip(x.shape, self.shape)), value=value)
    hit_any = fit(hit.any(-1))
    if reduce in ("sum", "mean"): r = fit(hit.where(src, 0).sum(-1))
    elif reduce == "prod": r = fit(hit.where(src, 1).prod(-1), 1)
    else:
      fill = dtypes.min(self.dtype) if reduce == "amax" else dtypes.max(self.dtype)
      r = hit.where(src, fill)
      r = fit(r.max(-1) if reduce == "amax" else r.min(-1), fill)
    r = r.cast(self.dtype)
    if reduce == "mean":
      count = fit(hit.sum(-1)) + int(include_self)
      total = r + self if include_self else r
      mean = total.div(count.maximum(1), rounding_mode="floor") if dtypes.is_int(self.dtype) else total / count.maximum(1)
      return hit_any.where(mean.cast(self.dtype), self)
    if not include_self: return hit_any.where(r, self)
    return {"sum": lambda: self + r, "prod": lambda: self * r, "amax": lambda: self.maximum(r), "amin": lambda: self.minimum(r)}[reduce]()

  def masked_select(self, mask, size: int | None = None, fill_value=0):
    """The 1-D tensor of self's elements where the bool `mask` (broadcast with self) is True; with size=None its
    length is the count (this reads the mask back), with size=N it is N: truncated or padded with fill_value."""
    self._tensor_arg(mask, "mask")
    if mask.dtype != dtypes.bool: raise RuntimeError(f"[masked_select] mask must be a bool tensor, got {mask.dtype}")
    try:
      shape = np.broadcast_shapes(self.shape, mask.shape)
    except ValueError:
      raise ValueError(f"[masked_select] mask {mask.shape} does not broadcast with {self.shape}") from None
    x, m = self._broadcast_to(shape).flatten(), mask._broadcast_to(shape).flatten()
    if size is None: return x[np.flatnonzero(m.numpy()).astype(np.int64 if m.numel() >= 2**31 else np.int32)]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
      raise ValueError(f"[masked_select] size={size!r} must be an int >= 0")
    idt = dtypes.int64 if max(m.numel(), size) >= 2**31 else dtypes.int32
    pos = m.cast(idt).cumsum() - 1  # output slot of each selected element
    slot = (m & (pos < size)).where(pos, size)  # the rest go to a spare slot past the end
    every = self._T.arange(m.numel(), dtype=idt, device=self.device)
    src = self._T.zeros(size + 1, dtype=idt, device=self.device).scatter(0, slot, every)
    return (self._T.arange(size, dtype=idt, device=self.device) < m.sum()).where(x[src[:size]], fill_value).cast(self.dtype)

  def nonzero(self, size: int | None = None, fill_value=0):
    """int32 (count, ndim) indices of the nonzero elements in row-major order (torch's layout); size=N as in
    masked_select: N rows, the missing ones filled with fill_value."""
    idt = dtypes.int64 if self.numel() >= 2**31 else dtypes.int32
    if self.ndim == 0:
      return self._T.zeros(size if size is not None else int(self.ne(0).item()), 0, dtype=idt, device=self.device)
    flat = self._T.arange(self.numel(), dtype=idt, device=self.device).masked_select(self.ne(0).flatten(), size=size)
    strides = [prod(self.shape[d + 1:]) for d in range(self.ndim)]
    coords = self._T.stack(*[(flat // st) % n for st, n in zip(strides, self.shape)], dim=-1)
    if size is None: return coords
    valid = self._T.arange(size, dtype=idt, device=self.device) < self.ne(0).sum()
    return valid.unsqueeze(-1).where(coords, fill_value).cast(idt)

  def unfold(self, dim: int, size: int, step: int):
    """Windows of `size` elements every `step` along `dim` (torch.Tensor.unfold): dim becomes the window count
    and a last dim of `size` is added."""
    if self.ndim == 0: return self.reshape(1).unfold(0, size, step).reshape(size)
    dim = self._resolve_dim(dim)
    for name, v in (("size", size), ("step", step)):
      if isinstance(v, bool) or not isinstance(v, int): raise TypeError(f"[unfold] {name}={v!r} must be an int")
    if size < 0: raise RuntimeError(f"[unfold] size={size} must be >= 0")
    if step <= 0: raise RuntimeError(f"[unfold] step={step} must be > 0")
    if size > self.shape[dim]: raise RuntimeError(f"[unfold] size={size} is larger than dim {dim} of {self.shape}")
    count = (self.shape[dim] - size) // step + 1
    if size == 0:  # empty windows
      out_shape = (*self.shape[:dim], count, *self.shape[dim + 1:], 0)
      if self.shape[dim] == 0: return self._T.zeros(*out_shape, dtype=self.dtype, device=self.device)
      # a shrink to nothing, expanded: the graph stays connected for backward
      empty = self.shrink(tuple((0, 1) if d == dim else None for d in range(self.ndim))).unsqueeze(-1)
      return empty.shrink((None,) * self.ndim + ((0, 0),)).expand(*out_shape)
    order = [d for d in range(self.ndim) if d != dim] + [dim]
    win = self.permute(order)
    win = win._wrap(win._c.pool_windows([size], [step], [1]))  # (..., count, size)
    back = list(range(self.ndim - 1))
    back.insert(dim, self.ndim - 1)
    return win.permute(*back, self.ndim)

  def meshgrid(self, *args, indexing: str = "ij"):
    if indexing not in ("ij", "xy"): raise RuntimeError(f"[meshgrid] indexing is 'ij' or 'xy', not {indexing!r}")
    tensors = (self,) + args
    if len(tensors) == 1: return tensors
    if indexing == "xy": tensors = (tensors[1], tensors[0]) + tensors[2:]
    shape = tuple(t.numel() for t in tensors)
    out = [t.reshape([-1 if i == j else 1 for j in range(len(shape))]).expand(shape) for i, t in enumerate(tensors)]
    return out[1:2] + out[0:1] + out[2:] if indexing == "xy" else out

  # ---- triangles and diagonals ---------------------------------------------------------------

  def _tri_mask(self, diagonal: int, upper: bool):
    op = 'triu' if upper else 'tril'
    if self.ndim < 2: raise ValueError(f"[{op}] needs a tensor of at least 2 dims, got shape {self.shape}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
      raise TypeError(f"[{op}] diagonal must be an int, got {type(diagonal).__name__} {diagonal!r}")
    r, c = self.shape[-2], self.shape[-1]
    diagonal = max(-r, min(c, diagonal))  # past either corner every element is kept or masked
    i = self._T.arange(r, device=self.device).reshape(r, 1)
    j = self._T.arange(c, device=self.device).reshape(1, c)
    return (j - i >= diagonal) if upper else (j - i <= diagonal)

  def _zero(self): return False if self.dtype is dtypes.bool else 0

  def triu(self, diagonal: int = 0):
    """The elements on and above diagonal `diagonal` of the last two dims, zeros (False) below; dtype kept."""
    return self._tri_mask(diagonal, True).where(self, self._zero())

  def tril(self, diagonal: int = 0):
    """The elements on and below diagonal `diagonal` of the last two dims, zeros (False) above; dtype kept."""
    return self._tri_mask(diagonal, False).where(self, self._zero())

  def diag(self):
    if self.ndim != 1: raise ValueError(f"[diag] diag needs a 1-D tensor, got shape {self.shape}")
    n = self.shape[0]
    return self._T.eye(n, dtype=dtypes.bool, device=self.device).where(self.reshape(1, n).expand(n, n), 0)

  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """The diagonal `offset` (> 0 above the main one) of the planes spanned by dim1 and dim2, as a new last axis
    (torch.diagonal); rectangular planes and batches too."""
    if self.ndim < 2: raise ValueError(f"[diagonal] needs a tensor of at least 2 dims, got shape {self.shape}")
    d1, d2 = self._resolve_dim(dim1), self._resolve_dim(dim2)
    if d1 == d2: raise ShapeError(f"[diagonal] dim1 and dim2 are both dim {d1}")
    x = self.permute([i for i in range(self.ndim) if i not in (d1, d2)] + [d1, d2])
    r, c = x.shape[-2:]
    lo, hi = (0, min(offset, c)) if offset >= 0 else (min(-offset, r), 0)
    n = max(0, min(r - lo, c - hi))
    x = x.shrink(tuple((0, s) for s in x.shape[:-2]) + ((lo, lo + n), (hi, hi + n)))
    return self._T.eye(n, dtype=dtypes.bool, device=self.device).where(x, self._zero()).sum(-1, dtype=self.dtype)

  # ---- indexing ------------------------------------------------------------------------------

  def _index_items(self, indices, check_tensors: bool = False) -> list:
    """Python indices as the items _baregrad's getitem takes (int, slice, None, ..., C++ tensor).
    Index lists and arrays are bounds-checked here (IndexError, as numpy and torch), Tensor
    indices only with `check_tensors` (it reads them back): out of range, a gather gives 0."""
    # A list of ints is one index array; any other list is a tuple of indices, as tinygrad's and
    # torch's (x[[slice(None), [1, 3]]] is x[:, [1, 3]], x[[[0, 1], [1, 0]]] is x[[0, 1], [1, 0]]);
    # numpy >= 1.23 makes the second one array instead, and refuses the first.
    if isinstance(indices, list) and not all(isinstance(i, (int, np.integer)) for i in indices):
      indices = tuple(indices)
    if isinstance(indices, list): indices = [np.zeros(0, np.int32) if not indices else indices]
    if not isinstance(indices, (tuple, list)): indices = [indices]
    items, hosts = [], []
    for i in indices:
      hosts.append(i.numpy() if check_tensors and isinstance(i, self._T) else None)
      if isinstance(i, (bool, np.bool_)): raise IndexError(f"[{op_name()}] bool (mask) indexing is not supported")
      if isinstance(i, (int, np.integer)): items.append(int(i))
      elif i is None or i is Ellipsis: items.append(i)
      elif isinstance(i, slice):
        for part in (i.start, i.stop, i.step):
          if part is not None and not isinstance(part, (int, np.integer)): raise TypeError(f"[{op_name()}] slice {i} is not supported")
        items.append(slice(*(None if p is None else int(p) for p in (i.start, i.stop, i.step))))
      elif isinstance(i, self._T): items.append(i.to(self.device)._c)
      elif isinstance(i, (list, tuple, np.ndarray)):
        try:
          t = self._T(i, device=self.device)
        except ValueError as e:
          raise IndexError(f"[{op_name()}] index {i!r} is not a rectangular array of ints: {e}") from None
        if not dtypes.is_int(t.dtype): raise IndexError(f"[{op_name()}] an index tensor of dtype {t.dtype}: indices must be integers")
        items.append(t._c)
        if isinstance(i, np.ndarray) or all(isinstance(x, (int, np.integer)) for x in fully_flatten(i)): hosts[-1] = np.asarray(i)
      else: raise IndexError(f"[{op_name()}] {type(i).__name__} indexing is not supported")
    self._check_index_bounds(items, hosts)
    return items

  def _check_index_bounds(self, items, hosts):
    real = sum(1 for i in items if i is not None and i is not Ellipsis)
    axis = 0
    for i, host in zip(items, hosts):
      if i is Ellipsis: axis += max(self.ndim - real, 0)
      if i is None or i is Ellipsis: continue
      if host is not None and host.size and axis < self.ndim:
        n = self.shape[axis]
        bad = host[(host < -n) | (host >= n)]
        if bad.size: raise IndexError(f"[{op_name()}] index {bad.flat[0]} is out of bounds for axis {axis} with size {n}")
      axis += 1

  def __getitem__(self, indices):
    if indices is Ellipsis: return self  # tinygrad's t[...] is t (torch's is a view of t)
    found = _op_bindings(indices)
    if (found or variable.in_use and self._c.sym_shape is not None) and (sym := self._symbolic_slices(indices)) is not None:
      return self._bind(sym, found)
    out = self._bind(self._wrap(self._c.getitem(self._index_items(indices))), found)
    if type(out) is type(self): out._taken = (id(self._c), indices)  # see __setitem__
    return out

  def _symbolic_slices(self, indices):
    """x[a:b, ...] with SymInt bounds (steps 1, bounds >= 0) as a symbolic shrink; None for any
    other index (it is then taken at the Variables' current values)."""
    items = indices if isinstance(indices, tuple) else (indices,)
    if len(items) > self.ndim or not all(isinstance(i, slice) and i.step in (None, 1) for i in items): return None
    if not any(is_symbolic(i.start) or is_symbolic(i.stop) for i in items) and self._c.sym_shape is None: return None
    ranges = []
    for i, n in zip(items, self.shape):
      lo, hi = 0 if i.start is None else i.start, n if i.stop is None else i.stop
      if not all(isinstance(x, int) and int(x) >= 0 for x in (lo, hi)) or int(hi) > int(n) or int(lo) > int(hi): return None
      ranges.append((lo, hi))
    return self.shrink(tuple(ranges) + (None,) * (self.ndim - len(items)))

  def __setitem__(self, indices, v):
    """Writes `v` (broadcast) into the selected elements of this tensor's buffer: views of the
    same buffer (t.T, t[1:], ...) see the write, as in torch and tinygrad. A tensor that is still
    lazy work nothing else refers to (`z = x * 2`, `Tensor.zeros(4)`) instead takes the new
    value as a graph, as tinygrad's: gradients flow to `v` and to the elements it kept."""
    c = self._c
    # t[k] += x stores back v = t[k], which the += wrote in place: the same index object, taken from this tensor,
    # still a view of its base (a gather's copy is not), so there is nothing left to write
    if type(v) is type(self) and (taken := getattr(v, "_taken", None)) is not None and taken[1] is indices and \
       taken[0] == id(c) and type(c) is _C.Tensor and v._c.lazy_node().base_id == c.lazy_node().base_id:
      return
    if (type(v) is float or type(v) is int) and type(c) is _C.Tensor and c.requires_grad is None and \
       (type(indices) is int or (type(indices) is tuple and all(type(i) is int or type(i) is slice for i in indices))) and \
       _whole_buffer(c):
      # the common case, a number into a buffer (t[i] = 0.5, t[:, 1:3] = 0): the steps below, direct
      sel = c.getitem(self._index_items(indices))
      if sel.numel(): sel.write_view(self._const_c(v, self.dtype, self.device).expand(sel.shape))
      return
    Tensor = self._T
    if not isinstance(v, Tensor):
      if not isinstance(v, (bool, int, float, list, tuple, np.ndarray, np.generic)): raise TypeError(f"[{op_name()}] can't set a {type(v).__name__} to a Tensor")
      v = Tensor(v, device=self.device, dtype=self.dtype)
    if v._deviceless: v = v.to(self.device)
    if v.device != self.device: raise RuntimeError(f"[setitem] value on {v.device} for a tensor on {self.device}")
    if v.dtype != self.dtype:  # as tinygrad: a Tensor value is not cast implicitly
      raise RuntimeError(f"[setitem] setitem dtype mismatch: a {v.dtype} value into a {self.dtype} tensor (cast it first)")
    functional = self._c.value_unshared
    if not functional and (self._c.requires_grad or v._c.requires_grad):
      raise NotImplementedError(f"[{op_name()}] setitem with requires_grad into a realized tensor is not supported (its buffer is written in place)")
    items = self._index_items(indices, check_tensors=True)
    sel = self._wrap(self._c.getitem(items))  # validates the indices (IndexError, ...)
    v = v._broadcast_to(sel.shape)
    advanced = any(isinstance(i, (_C.Tensor, multi.MultiC)) for i in items)
    if not functional and not advanced and type(self._c) is _C.Tensor and _whole_buffer(self._c):
      # ints and slices into a whole buffer: write the selected elements only (a KV cache's
      # t[:, pos] = k writes one position, not the whole cache)
      if sel.numel(): sel._c.write_view(v._c)
      return
    if advanced: new = self._scatter_setitem(items, v)
    else: new = self._basic_setitem(items, v)
    if new is None: return
    if functional: self._c = new._c
    else: self._c.write_view(new._c)  # into the buffer every view of it shares

  def _scatter_setitem(self, items, v):
    """Advanced indices: scatter `v` into the flat positions the index selects (last one wins)."""
    if (new := self._scatter_setitem_dims(items, v)) is not NotImplemented: return new
    n = self.numel()
    pos = self._T.arange(n, dtype=dtypes.int64 if n >= 2**31 else dtypes.int32, device=self.device).reshape(self.shape)
    idx = self._wrap(pos._c.getitem(items)).flatten()
    if idx.numel() == 0: return None
    return self.flatten().scatter(0, idx, v.flatten()).reshape(self.shape)

  def _scatter_setitem_dims(self, items, v):
    """Advanced indices with only whole dims beside them (t[:, i, :, j] = v; ints count as 0-d index tensors): the
    indexed dims D become one axis of P = prod(D) positions, the broadcast index combinations one
    axis of NB, and each position takes the value of the last combination naming it (a P x NB table) by a
    gather along NB: work ~ numel + P * NB, where the flat scatter costs numel * v.numel(). An int index is a
    0-d index here, but it removes its dim first (tinygrad's and torch's order, not numpy's) when placing the
    broadcast dims in v. NotImplemented for other mixes (partial slices, None)."""
    Tensor = self._T
    real = sum(1 for i in items if i is not Ellipsis)
    full = []
    for i in items:
      if i is Ellipsis: full += [slice(None)] * (self.ndim - real)
      elif i is None: return NotImplemented
      else: full.append(i)
    full += [slice(None)] * (self.ndim - len(full))
    dims, idx, placed = [], [], []  # placed: the tensor indices' dims with the int dims removed
    for d, i in enumerate(full):
      if isinstance(i, slice):
        if i.indices(self.shape[d]) != (0, self.shape[d], 1): return NotImplemented
        continue
      if isinstance(i, int): t = Tensor(i, dtype=dtypes.int64, device=self.device)
      else: t, _ = self._wrap(i), placed.append(d - sum(isinstance(j, int) for j in full[:d]))
      dims.append(d)
      idx.append((t < 0).where(t + self.shape[d], t))  # in range: _index_items checked
    B = np.broadcast_shapes(*(t.shape for t in idx))
    nb, sizes = prod(B), [self.shape[d] for d in dims]
    P = prod(sizes)
    if nb == 0 or self.numel() == 0: return None
    rest = [d for d in range(self.ndim) if d not in dims]
    # the broadcast dims stand where the indexed dims were when those are adjacent, else first
    at = placed[0] if placed == list(range(placed[0], placed[-1] + 1)) else 0
    v_rest = list(range(at)) + list(range(at + len(B), v.ndim))
    vp = v.permute(*v_rest, *range(at, at + len(B))).reshape(*(self.shape[d] for d in rest), nb)
    lin = idx[0]._broadcast_to(B).cast(dtypes.int64)
    for t, n in zip(idx[1:], sizes[1:]): lin = lin * n + t._broadcast_to(B).cast(dtypes.int64)
    hit = lin.reshape(nb, 1) == Tensor.arange(P, dtype=dtypes.int64, device=self.device).reshape(1, P)
    last = hit.where(Tensor.arange(1, nb + 1, dtype=dtypes.int64, device=self.device).reshape(nb, 1), 0).max(0)
    shp = [self.shape[d] for d in rest]
    src = (last - 1).maximum(0).reshape(*([1] * len(rest)), P).expand(*shp, P)
    mine = self.permute(*rest, *dims).reshape(*shp, P)
    out = (last > 0).reshape(*([1] * len(rest)), P).where(vp.gather(-1, src), mine)
    return out.reshape(*shp, *sizes).permute(*np.argsort(rest + dims).tolist())

  def _basic_setitem(self, items, v):
    """Ints, slices, None and Ellipsis select a strided box; v is padded out to the full shape
    with views and chosen by a mask of the same box."""
    real = sum(1 for i in items if i is not None and i is not Ellipsis)
    at = next((j for j, i in enumerate(items) if i is Ellipsis), len(items))
    items = items[:at] + [slice(None)] * (self.ndim - real) + items[at + 1:]
    boxes = []  # (start, step, count) per dim
    for i in (i for i in items if i is not None):
      n = self.shape[len(boxes)]
      if isinstance(i, int):
        boxes.append((i + n if i < 0 else i, 1, 1))
      else:
        start, stop, step = i.indices(n)
        boxes.append((start, step, len(range(start, stop, step))))
    if any(k == 0 for _, _, k in boxes): return None
    v = v.reshape(tuple(k for _, _, k in boxes))
    mask = self._T.ones(v.shape, dtype=dtypes.bool, device=self.device)
    for d, ((start, step, k), n) in enumerate(zip(boxes, self.shape)):
      if step < 0: v, mask, start, step = v.flip(d), mask.flip(d), start + (k - 1) * step, -step
      if step > 1 and k > 1:
        def spread(x):
          shp = x.shape
          x = x.reshape(*shp[:d + 1], 1, *shp[d + 1:])
          x = x.pad(tuple((0, step - 1) if j == d + 1 else None for j in range(x.ndim)))
          x = x.reshape(*shp[:d], shp[d] * step, *shp[d + 1:])
          return x.shrink(tuple((0, (k - 1) * step + 1) if j == d else None for j in range(x.ndim)))
        v, mask = spread(v), spread(mask)
      span = (k - 1) * step + 1
      pads = tuple((start, n - start - span) if j == d else None for j in range(v.ndim))
      v, mask = v.pad(pads), mask.pad(pads)
    return mask.where(v, self)

  def __delitem__(self, indices): raise TypeError(f"[{op_name()}] a Tensor's items cannot be deleted")

  def masked_fill(self, mask, value): return mask.where(value, self)
