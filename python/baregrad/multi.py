"""Tensors over several devices (tinygrad's `shard`): `MultiC` stands where a Tensor's `_c` (one `_baregrad.Tensor`)
would, holding one `_baregrad.Tensor` per device, `shards`, and the `axis` they split in equal parts (None: each
device holds the whole tensor). The Tensor layer above calls it as it calls `_c`; this module says what each call
means for the shards:

  - elementwise ops run shard by shard; an operand sharded otherwise, or on one device, is cut to each shard's part
    (after a copy to that device) first; the result is sharded as the first sharded operand (in the output's axes);
  - reshape, permute, expand, pad, shrink and flip move the axis, as tinygrad's; a movement that would move elements
    between shards raises RuntimeError naming it (tinygrad's errors), except that a shrink to one shard's part gives
    that part on every device;
  - sum, max, min, prod, any, all and mean reduce each shard; over the sharded axis each device then combines every
    shard's partial result (an allreduce: the result is whole on every device);
  - matmul is a broadcast multiply and a sum (so it is distributed as they are);
  - indexing with ints, slices of step 1, None and ... is shrinks and a reshape (views of the shards: setitem and
    assign write into them), as are split and chunk;
  - `to(device)`, reads to the host (`numpy`, `to_bytes`) and every other op gather the shards first: the op runs on
    the first device and its result is copied to every device (correct, but not distributed); writing into such a
    gathered result raises.

Copies between devices are `_baregrad.Tensor.to`'s lazy copies. Gradients flow through the shards: `backward()` of a
whole-on-every-device loss runs from the first device's copy, which reads every shard; a whole-on-every-device
tensor's gradient is the sum of its copies'. `call` and `static` route a C++ call with a MultiC argument here.
"""
from __future__ import annotations

import functools
import math

import _baregrad as _C
from baregrad.helpers import op_name

_ELEMENTWISE = frozenset("""abs add bitcast bitwise_and bitwise_not bitwise_or bitwise_xor cast ceil clamp contiguous cos
detach div elu eq exp exp2 floor ge gelu gt hardswish hardtanh idiv isfinite isinf isnan le leaky_relu lerp log log2
logical_and logical_not logical_or lshift lt masked_fill maximum minimum mish mod mul ne neg pow pow_scalar quick_gelu
reciprocal relu relu6 round rshift selu sigmoid sign silu sin softplus sqrt square sub tan tanh trunc where""".split())
_REDUCE = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "mul", "any": "logical_or", "all": "logical_and",
           "mean": "add"}


def _is_tensor(x) -> bool: return isinstance(x, (_C.Tensor, MultiC))


def _broadcast_shape(*shapes) -> tuple:
  n = max(len(s) for s in shapes)
  out = []
  for d in range(n):
    sizes = {s[d - n + len(s)] for s in shapes if d - n + len(s) >= 0} - {1}
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)


def _combine_everywhere(parts: list, op: str, devices: list | None = None) -> list:
  """On each device (default: each part's), every part copied there and combined by the elementwise method `op`
  (add, maximum, ...)."""
  return [functools.reduce(lambda a, b: getattr(a, op)(b), [p.to(d) for p in parts])
          for d in (devices if devices is not None else [p.device for p in parts])]


class MultiC:
  """One tensor over several devices (see the module's doc)."""
  __slots__ = ("shards", "axis", "copy_of", "__weakref__")

  def __init__(self, shards: list, axis: int | None, copy_of: str | None = None):
    # copy_of: the op that made it from gathered copies (not views of the shards): writes into it would be lost
    self.shards, self.axis, self.copy_of = list(shards), axis, copy_of

  # ---- what the Tensor layer reads -------------------------------------------------------------
  @property
  def device(self) -> tuple: return tuple(s.device for s in self.shards)
  @property
  def shape(self) -> tuple:
    s = list(self.shards[0].shape)
    if self.axis is not None: s[self.axis] *= len(self.shards)
    return tuple(s)
  @property
  def dtype(self): return self.shards[0].dtype
  @property
  def ndim(self) -> int: return self.shards[0].ndim
  def numel(self) -> int: return math.prod(self.shape)
  @property
  def sym_shape(self): return None
  @property
  def sym_vals(self): return {}
  @property
  def requires_grad(self): return self.shards[0].requires_grad
  def requires_grad_(self, on):
    for s in self.shards: s.requires_grad_(on)
  @property
  def grad(self):
    gs = [s.grad for s in self.shards]
    if all(g is None for g in gs): return None
    if self.axis is not None: return MultiC([g if g is not None else _C.Tensor.full(list(s.shape), 0.0, s.dtype, s.device)
                                            for g, s in zip(gs, self.shards)], self.axis)
    # whole on every device: each copy's gradient is a part of the tensor's, their sum
    live = [g for g in gs if g is not None]
    return MultiC(_combine_everywhere(live, "add", [s.device for s in self.shards]), None)
  def set_grad(self, g):
    for i, s in enumerate(self.shards): s.set_grad(None if g is None else _part(g, self, i))
  @property
  def is_leaf(self): return self.shards[0].is_leaf
  def retain_grad(self):
    for s in self.shards: s.retain_grad()
  def clear_grad(self):
    for s in self.shards: s.clear_grad()
  def lazy_node(self): return self.shards[0].lazy_node()

  # ---- data -------------------------------------------------------------------------------------
  def realize(self):
    for s in self.shards: s.realize()
  def gathered(self, device: str | None = None):
    """The whole tensor on `device` (the first shard's by default), one _baregrad.Tensor."""
    device = device or self.shards[0].device
    if self.axis is None: return self.shards[0].to(device)
    return _C.Tensor.cat([s.to(device) for s in self.shards], self.axis)
  def to(self, device: str): return self.gathered(device)
  def numpy(self): return self.gathered().numpy()
  def to_bytes(self): return self.gathered().to_bytes()
  def host_view(self): return self.gathered().host_view()
  def _check_writable(self, op: str):
    if self.copy_of is not None:
      raise RuntimeError(f"[{op}] cannot write into the result of {self.copy_of} on a multi-device tensor: it is a gathered "
                         "copy, not a view of the shards (index with slices and ints, or write into the whole tensor)")
  def assign(self, other):
    self._check_writable("assign")
    for i, s in enumerate(self.shards): s.assign(_part(other, self, i))
  def write_view(self, other):
    self._check_writable("setitem")
    for i, s in enumerate(self.shards): s.write_view(_part(other, self, i))
  @property
  def value_unshared(self): return all(s.value_unshared for s in self.shards)
  def same(self, other): return isinstance(other, MultiC) and all(a.same(b) for a, b in zip(self.shards, other.shards))

  def getitem(self, items: list):
    """Ints, slices of step 1, None and ... as shrinks and a reshape (views of the shards); other indices gather."""
    if not all(i is None or i is Ellipsis or isinstance(i, int) or (isinstance(i, slice) and i.step in (None, 1)) for i in items) \
       or sum(i is Ellipsis for i in items) > 1:
      return _fallback("getitem", self, items)
    n_real = sum(1 for i in items if i is not None and i is not Ellipsis)
    if Ellipsis in items:
      at = items.index(Ellipsis)
      items = items[:at] + [slice(None)] * max(self.ndim - n_real, 0) + items[at + 1:]
    else: items = items + [slice(None)] * max(self.ndim - n_real, 0)
    ranges, out_shape, d = [], [], 0
    for i in items:
      if i is None:
        out_shape.append(1)
        continue
      if d >= self.ndim: raise IndexError(f"[getitem] too many indices for a tensor of shape {self.shape}")
      size = self.shape[d]
      if isinstance(i, int):
        if not -size <= i < size: raise IndexError(f"[getitem] index {i} is out of bounds for dim {d} of size {size}")
        i %= size
        ranges.append((i, i + 1))
      else:
        lo, hi, _ = i.indices(size)
        hi = max(lo, hi)
        ranges.append((lo, hi))
        out_shape.append(hi - lo)
      d += 1
    ranges += [(0, s) for s in self.shape[d:]]
    out_shape += list(self.shape[d:])
    if self.axis is not None and ranges[self.axis] != (0, self.shape[self.axis]):
      k, (lo, hi) = self.shards[0].shape[self.axis], ranges[self.axis]
      if not (hi - lo == k and lo % k == 0): return _fallback("getitem", self, items)  # across shards: a gathered copy
    x = self if all(r == (0, s) for r, s in zip(ranges, self.shape)) else self.shrink(ranges)
    return x if tuple(out_shape) == x.shape else x.reshape(out_shape)
  def backward(self, grad_out=None):
    if self.axis is None:
      return self.shards[0].backward(None if grad_out is None else _whole(grad_out, self.shards[0].device))
    for i, s in enumerate(self.shards): s.backward(None if grad_out is None else _part(grad_out, self, i))
  def gradient(self, targets: list, materialize: bool = False):
    flat, where = [], []
    for t in targets:
      parts = t.shards if isinstance(t, MultiC) else [t]
      where.append((len(flat), len(parts), t.axis if isinstance(t, MultiC) else False))
      flat += parts
    root = self.shards[0] if self.axis is None else self.gathered()
    gs = root.gradient(flat, materialize)
    return [gs[a] if axis is False else MultiC(gs[a:a + n], axis) for a, n, axis in where]

  # ---- movement ---------------------------------------------------------------------------------
  def _each(self, name: str, *args):
    return [getattr(s, name)(*args) for s in self.shards]

  def reshape(self, new_shape):
    new_shape = [int(s) for s in new_shape]
    if -1 in new_shape:
      known = math.prod(s for s in new_shape if s != -1)
      new_shape[new_shape.index(-1)] = self.numel() // known if known else 0
    if math.prod(new_shape) != self.numel(): raise RuntimeError(f"[reshape] {self.shape} -> {tuple(new_shape)} changes the size")
    if self.axis is None: return MultiC(self._each("reshape", new_shape), None)
    n, acc = len(self.shards), [1]
    for s in new_shape: acc.append(acc[-1] * s)
    target = math.prod(self.shape[:self.axis])
    if target not in acc: raise RuntimeError(f"[reshape] {self.shape} -> {tuple(new_shape)} moved items between shards")
    # the elements of shard i are the i-th of n equal blocks of every prefix row: a new axis with the same
    # prefix and a size n divides keeps them together
    ax = len(acc) - acc[::-1].index(target) - 1
    if ax >= len(new_shape) or new_shape[ax] % n != 0:
      raise RuntimeError(f"[reshape] {self.shape} -> {tuple(new_shape)} moved items between shards")
    local = list(new_shape)
    local[ax] //= n
    return MultiC(self._each("reshape", local), ax)

  def permute(self, order):
    order = [int(o) for o in order]
    return MultiC(self._each("permute", order), None if self.axis is None else order.index(self.axis))

  def expand(self, new_shape):
    new_shape = list(new_shape)
    shift = len(new_shape) - self.ndim
    if self.axis is None: return MultiC(self._each("expand", new_shape), None)
    ax = self.axis + shift
    local = [self.shards[0].shape[self.axis] if d == ax else s for d, s in enumerate(new_shape)]
    if new_shape[ax] not in (-1, self.shape[self.axis]):
      raise RuntimeError(f"[expand] {self.shape} -> {tuple(new_shape)} changes the sharded axis {self.axis}")
    return MultiC(self._each("expand", local), ax)

  def pad(self, pads):
    pads = [tuple(p) for p in pads]
    if self.axis is not None and pads[self.axis] != (0, 0):
      raise RuntimeError(f"[pad] padding {pads} of the sharded axis {self.axis} is not supported")
    return MultiC(self._each("pad", pads), self.axis)

  def shrink(self, ranges):
    ranges = [tuple(r) for r in ranges]
    if self.axis is None: return MultiC(self._each("shrink", ranges), None)
    k = self.shards[0].shape[self.axis]
    lo, hi = ranges[self.axis]
    if (lo, hi) == (0, self.shape[self.axis]):
      local = [(0, k) if d == self.axis else r for d, r in enumerate(ranges)]
      return MultiC(self._each("shrink", local), self.axis)
    if (hi - lo) == k and lo % k == 0:  # one shard's part, copied to every device
      local = [(0, k) if d == self.axis else r for d, r in enumerate(ranges)]
      part = self.shards[lo // k].shrink(local)
      return MultiC([part.to(s.device) for s in self.shards], None)
    raise RuntimeError(f"[shrink] shrinking {ranges} across the shards of axis {self.axis} is not supported")

  def shrink_sym(self, ranges, vals):
    """A shrink at Variable offsets (`x[:, vi:vi+1]`), per device when the sharded axis is kept whole."""
    if self.axis is not None:
      lo, hi = ranges[self.axis]
      if not (lo.is_const() and hi.is_const() and (lo.const_value(), hi.const_value()) == (0, self.shape[self.axis])):
        return _fallback("shrink_sym", self, ranges, vals)
      k = self.shards[0].shape[self.axis]
      local = [r if d != self.axis else (_C.Sym(0), _C.Sym(k)) for d, r in enumerate(ranges)]
      return MultiC([s.shrink_sym(local, vals) for s in self.shards], self.axis)
    return MultiC([s.shrink_sym(ranges, vals) for s in self.shards], None)

  def split_sizes(self, sizes, dim: int):
    """Parts of `sizes` along `dim` as shrinks (views of the shards where the shrink keeps them apart)."""
    dim, out, at = int(dim) % self.ndim, [], 0
    for n in sizes:
      out.append(self.shrink([(at, at + n) if d == dim else (0, s) for d, s in enumerate(self.shape)]))
      at += n
    return out
  def split(self, size: int, dim: int):
    total = self.shape[int(dim) % self.ndim]
    return self.split_sizes([min(size, total - a) for a in range(0, total, size)] if size > 0 else [total], dim)
  def chunk(self, chunks: int, dim: int):
    total = self.shape[int(dim) % self.ndim]
    return self.split(-(-total // chunks) if chunks > 0 else total, dim)

  def flip(self, axes):
    if self.axis is not None and self.axis in [int(a) for a in axes]:
      raise RuntimeError(f"[flip] flipping the sharded axis {self.axis} is not supported")
    return MultiC(self._each("flip", list(axes)), self.axis)

  # ---- reductions -------------------------------------------------------------------------------
  def _reduce(self, name: str, axes, keepdim: bool):
    axes = sorted({int(a) % self.ndim for a in axes}) if axes else list(range(self.ndim))
    if self.axis is None or self.axis not in axes:
      new_axis = self.axis if self.axis is None or keepdim else self.axis - sum(a < self.axis for a in axes)
      return MultiC(self._each(name, axes, keepdim), new_axis)
    if name == "mean" and not _is_float(self.dtype):
      return _fallback(name, self, axes, keepdim)
    partial = [getattr(s, "sum" if name == "mean" else name)(axes, True) for s in self.shards]
    out = []
    for s, acc in zip(self.shards, _combine_everywhere(partial, _REDUCE[name])):
      if name == "mean":
        count = math.prod(self.shape[a] for a in axes)
        acc = acc.mul(_C.Tensor.full([], 1.0 / count, acc.dtype, s.device))
      if not keepdim: acc = acc.reshape([d for i, d in enumerate(acc.shape) if i not in axes])
      out.append(acc)
    return MultiC(out, None)

  def allreduce(self, op: str) -> MultiC:
    """Each device's shard combined (`op`: add, maximum, minimum, mul) with every other device's, kept sharded as
    before: shard i of the result is the combination of all the shards (tinygrad's UOp.allreduce). Every shard is
    copied to every device; tinygrad's RING/ALL2ALL schedules of the copies are not used."""
    if op not in ("add", "maximum", "minimum", "mul"):
      raise ValueError(f"[allreduce] op must be one of add, maximum, minimum, mul, got {op!r}")
    return MultiC(_combine_everywhere(self.shards, op), self.axis)

  def matmul(self, other):
    a, b = self, other
    if a.ndim == 1 or b.ndim == 1: return _fallback("matmul", a, b)
    # (..., n, k) @ (..., k, m): (..., n, 1, k) * (..., 1, m, k) summed over k
    bt = b.permute(list(range(b.ndim - 2)) + [b.ndim - 1, b.ndim - 2])
    a3 = a.reshape(list(a.shape[:-1]) + [1, a.shape[-1]])
    b3 = bt.reshape(list(bt.shape[:-2]) + [1] + list(bt.shape[-2:]))
    prod = _elementwise("mul", a3, b3)
    return prod._reduce("sum", [prod.ndim - 1], False)

  def __getattr__(self, name: str):
    if name in _ELEMENTWISE: return lambda *args: _elementwise(name, self, *args)
    if name in _REDUCE: return lambda axes, keepdim: self._reduce(name, axes, keepdim)
    if name.startswith("__"): raise AttributeError(name)
    return lambda *args, **kwargs: _fallback(name, self, *args, **kwargs)

  def __repr__(self): return f"<MultiC {self.shape} axis={self.axis} on {self.device}>"


def _is_float(dtype_name: str) -> bool: return dtype_name in ("float16", "bfloat16", "float32", "float64") or dtype_name.startswith("fp8")


def _whole(x, device: str):
  """`x` (a MultiC or a _baregrad.Tensor) whole on `device`."""
  return x.gathered(device) if isinstance(x, MultiC) else x.to(device)


def _cut(full, dim: int, size: int, i: int, n: int):
  """Shard i of n along `dim` of `full`; a size-1 (broadcast) dim stays whole."""
  if dim < 0 or full.shape[dim] == 1: return full
  k = full.shape[dim] // n
  return full.shrink([(i * k, (i + 1) * k) if d == dim else (0, s) for d, s in enumerate(full.shape)])


def _part(x, like: MultiC, i: int):
  """The part of `x` (of `like`'s shape) that shard i of `like` holds, on its device."""
  dev = like.shards[i].device
  if isinstance(x, MultiC) and x.device == like.device and x.axis == like.axis: return x.shards[i]
  full = _whole(x, dev)
  return full if like.axis is None else _cut(full, like.axis, like.shape[like.axis], i, len(like.shards))


def _elementwise(name: str, *args):
  tensors = [a for a in args if _is_tensor(a)]
  multis = [a for a in tensors if isinstance(a, MultiC)]
  devices = multis[0].device
  for m in multis:
    if m.device != devices: raise RuntimeError(f"[{op_name() or name}] operands on {devices} and {m.device}: shard them alike")
  out = _broadcast_shape(*[tuple(t.shape) for t in tensors])
  lead = next((m for m in multis if m.axis is not None), None)
  axis = None if lead is None else lead.axis + len(out) - lead.ndim
  n = len(devices)
  if axis is not None and out[axis] % n != 0:
    raise RuntimeError(f"[{name}] the sharded axis {axis} of {out} does not split over {n} devices")
  results = []
  for i, dev in enumerate(devices):
    local = []
    for a in args:
      if not _is_tensor(a):
        local.append(a)
        continue
      off = len(out) - len(a.shape)
      if isinstance(a, MultiC) and a.axis is not None and axis is not None and a.axis + off == axis:
        local.append(a.shards[i])
        continue
      whole = a.shards[i] if isinstance(a, MultiC) and a.axis is None else _whole(a, dev)
      local.append(whole if axis is None else _cut(whole, axis - off, out[axis], i, n))
    results.append(getattr(_C.Tensor, name)(*local))
  return MultiC(results, axis)


def _fallback(name: str, *args, **kwargs):
  """Runs `name` on the whole tensors on the first device; the result (a tensor) goes whole to every device."""
  multis = [a for a in list(args) + [x for a in args if isinstance(a, (list, tuple)) for x in a] if isinstance(a, MultiC)]
  devices, first = multis[0].device, multis[0].shards[0].device
  def whole(a):
    if isinstance(a, MultiC): return a.gathered(first)
    if isinstance(a, _C.Tensor) and a.device != first: return a.to(first)
    if isinstance(a, list): return [whole(x) for x in a]
    if isinstance(a, tuple): return tuple(whole(x) for x in a)
    return a
  args, kwargs = [whole(a) for a in args], {k: whole(v) for k, v in kwargs.items()}
  out = getattr(args[0], name)(*args[1:], **kwargs) if isinstance(args[0], _C.Tensor) else getattr(_C.Tensor, name)(*args, **kwargs)
  def spread(x):
    if isinstance(x, _C.Tensor): return MultiC([x if d == first else x.to(d) for d in devices], None, copy_of=name)
    if isinstance(x, list): return [spread(y) for y in x]
    if isinstance(x, tuple): return tuple(spread(y) for y in x)
    return x
  return spread(out)


def call(name: str, a, *args):
  """`a.<name>(*args)` for a _baregrad.Tensor or MultiC `a`, over shards when any of them is a MultiC."""
  if type(a) is not MultiC:  # every binary op passes here: no generator on the common path
    for x in args:
      if type(x) is MultiC: return _elementwise(name, a, *args) if name in _ELEMENTWISE else _fallback(name, a, *args)
  return getattr(a, name)(*args)


def static(name: str, *args):
  """`_baregrad.Tensor.<name>(*args)` (where, cat, stack, einsum), over shards when an argument is a MultiC."""
  flat = [x for a in args for x in (a if isinstance(a, (list, tuple)) else [a])]
  if not any(isinstance(x, MultiC) for x in flat): return getattr(_C.Tensor, name)(*args)
  if name == "where": return _elementwise("where", *args)
  return _fallback(name, *args)


def shard(c, devices: tuple, axis: int | None) -> MultiC:
  """`c` (one _baregrad.Tensor) split over `devices` along `axis` (None: whole on each). The shards of a leaf are
  leaves (a sharded parameter gets its gradient); those of a computed tensor pass gradients back to it."""
  def leaf(x):
    if not c.is_leaf: return x
    out = x.detach()
    out.requires_grad_(c.requires_grad)
    return out
  if axis is None: return MultiC([c if c.device == d and not c.is_leaf else leaf(c.to(d)) for d in devices], None)
  n, size = len(devices), c.shape[axis]
  if size % n != 0:
    raise RuntimeError(f"[shard] axis {axis} of size {size} does not split over {n} devices in equal parts")
  k = size // n
  parts = [c.shrink([(i * k, (i + 1) * k) if d == axis else (0, s) for d, s in enumerate(c.shape)]).contiguous() for i in range(n)]
  return MultiC([leaf(p.to(d)) for p, d in zip(parts, devices)], axis)
