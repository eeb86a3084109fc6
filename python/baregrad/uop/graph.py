"""`Tensor.uop`: a read-only view of a tensor's node in baregrad's lazy graph (tensor/lazy.h), shaped as tinygrad's
UOp for the reads programs and tests make:

  t.uop.op                  # Ops.BUFFER (realized), ADD/MUL/... (elementwise), REDUCE, CAST, BITCAST, CONST, IOTA,
                            # CONTIGUOUS (an unrealized .contiguous()), COPY (.to() another device), VIEW (a movement)
  t.uop.base                # the node the view reads (itself for a base)
  t.uop.src                 # the inputs: (base,) for a view
  t.uop.base.realized       # the DeviceBuffer holding it (the same object while one is alive), or None
  t.uop.is_realized, .buffer, .shape, .dtype, .device, .size, .arg, .toposort()

baregrad's graph is C++ and has no UOp objects to rewrite: graph rewrites are absent (an AttributeError). What a
program builds on a node: `.alu(op, *src)` (a new elementwise node); `t.uop.store(v.uop)` and `t.uop.after(*deps)`,
tinygrad's in-place writes (StoreUOp, AfterUOp below: each store runs, in order, when an after holding it becomes a
tensor, by `Tensor(after)` or `t.uop = after`); `t.uop.buf_uop`, the realized buffer whole. `UOp.const(value, dtype)`
is a deviceless constant (ConstUOp below). A view's movements are one ShapeTracker (`Ops.VIEW`), not tinygrad's
RESHAPE/PERMUTE/... chain.
"""
from __future__ import annotations

import weakref

import _baregrad as _C
from baregrad.dtype import dtypes, to_dtype
from baregrad.uop.ops import Ops, UOp


class TensorUOp:
  """One node of a tensor's lazy graph (see the module's doc); equal when it is the same node seen the same way."""
  __slots__ = ("_n", "_c")

  def __init__(self, node, c=None): self._n, self._c = node, c  # _c: the tensor it was read from (Tensor(t.uop))

  @property
  def op(self) -> Ops:
    n = self._n
    if not n.is_base: return Ops.VIEW
    if n.realized is not None: return Ops.BUFFER
    if n.force_kernel: return Ops.CONTIGUOUS
    if n.kind == "ALU": return Ops[n.op]
    if n.kind == "CAST": return Ops.BITCAST if n.op == "BITCAST" else Ops.CAST
    return Ops[n.kind]  # CONST, REDUCE, IOTA, COPY

  @property
  def base(self) -> TensorUOp: return self if self._n.is_base else TensorUOp(self._n.base)
  @property
  def src(self) -> tuple:
    if not self._n.is_base: return (self.base,)
    return () if self._n.realized is not None else tuple(TensorUOp(s) for s in self._n.srcs)
  @property
  def shape(self) -> tuple: return tuple(self._n.shape)
  @property
  def dtype(self): return to_dtype(self._n.dtype)
  @property
  def device(self) -> str: return self._n.device
  @property
  def size(self) -> int:
    out = 1
    for s in self._n.shape: out *= s
    return out
  @property
  def arg(self):
    """CONST: its value; REDUCE: (op, axes); an ALU op, CAST, BUFFER: None; VIEW: the ShapeTracker's text."""
    n = self._n
    if not n.is_base: return n.view
    if n.realized is None and n.kind == "CONST": return n.value
    if n.realized is None and n.kind == "REDUCE": return (Ops[n.op], tuple(n.axes))
    return None

  @property
  def realized(self):
    """The DeviceBuffer of a realized base (None for a view or an unrealized node)."""
    return _buffer(self._n) if self._n.is_base else None
  @property
  def is_realized(self) -> bool: return self._n.base.realized is not None
  @property
  def buffer(self):
    """The base's DeviceBuffer; a RuntimeError naming the node when it is not realized (baregrad allocates at
    realize)."""
    buf = _buffer(self._n.base)
    if buf is None: raise RuntimeError(f"[uop.buffer] {self!r} is not realized: realize() the tensor first")
    return buf

  def alu(self, op: Ops, *src) -> TensorUOp:
    """`op` of this node and `src` (nodes of tensors, deviceless constants, or numbers) as a new node, as tinygrad's
    UOp.alu: sources of other shapes broadcast (a 0-d source used by every element takes the sum of their
    gradients), `Tensor(result)` is the tensor, and gradients flow back to the tensors the sources came from. The
    operands must have one dtype (tinygrad's alu does not promote); a comparison gives bool."""
    from baregrad.tensor import Tensor
    fn = _ALU.get(op)
    if fn is None: raise NotImplementedError(f"[UOp.alu] {op} is not an elementwise op baregrad builds from Python (one of {', '.join(o.name for o in _ALU)})")
    if op is not Ops.WHERE and len(src) != _ARITY[op] - 1: raise TypeError(f"[UOp.alu] {op} takes {_ARITY[op]} sources, got {len(src) + 1}")
    ts = [Tensor(u) if isinstance(u, (TensorUOp, ConstUOp)) else u for u in (self, *src)]
    dts = {t.dtype for t in ts[(1 if op is Ops.WHERE else 0):] if isinstance(t, Tensor)}
    if len(dts) > 1: raise TypeError(f"[UOp.alu] {op} of {', '.join(map(str, sorted(dts, key=str)))}: cast the sources to one dtype first")
    return fn(*ts).uop

  @property
  def buf_uop(self) -> TensorUOp:
    """The realized buffer this node reads, whole (its base's node): `Tensor(t.uop.buf_uop)` is a tensor on that
    buffer. A RuntimeError naming the node when it is not realized."""
    c = _C.Tensor.of_buffer(self._n)  # a RuntimeError naming buf_uop when not realized
    return TensorUOp(c.lazy_node(), c)

  def store(self, value) -> StoreUOp:
    """tinygrad's STORE: `value` (a node, a constant, a number) written into the elements this node views. Nothing
    runs until an `.after()` holding it becomes a tensor."""
    return StoreUOp(self, value)

  def after(self, *deps) -> AfterUOp:
    """tinygrad's AFTER: this node once `deps` (stores, afters, or nodes to compute first) have run. `Tensor(it)`
    or `t.uop = it` runs them in order (each once) and gives this node's tensor."""
    return AfterUOp(self, deps)

  def has_buffer_identity(self, after_ok: bool = False) -> bool:
    """True for a base that has a buffer of its own (realized) or gets one when realized (`.contiguous()`,
    `.clone()`); False for views, constants and fused work."""
    n = self._n
    return n.is_base and (n.realized is not None or bool(n.force_kernel))

  def toposort(self) -> dict:
    """Every node this one reads, inputs before their readers, this one last (as tinygrad's, a dict of nodes)."""
    order: dict = {}
    stack: list = [(self, False)]
    while stack:
      u, done = stack.pop()
      if u in order: continue
      if done:
        order[u] = None
        continue
      stack.append((u, True))
      stack.extend((s, False) for s in reversed(u.src) if s not in order)
    return order

  def _key(self): return (self._n.base_id, self._n.view)
  def __eq__(self, other): return isinstance(other, TensorUOp) and self._key() == other._key()
  def __hash__(self): return hash(self._key())
  def __repr__(self): return f"UOp({self.op}, {self.dtype}, shape={self.shape}, device={self.device!r})"


UOp.register(TensorUOp)


def _tensor_of(u, op: str):
  """The tensor a node (or a constant, or a number) is read from, for a store's value or an after's target."""
  from baregrad.tensor import Tensor
  if isinstance(u, AfterUOp): return u.run()
  if isinstance(u, TensorUOp) and u._c is None:
    raise RuntimeError(f"[UOp.{op}] {u!r} was not read from a tensor (take it from t.uop, t.uop.buf_uop or an alu of them)")
  if isinstance(u, (TensorUOp, ConstUOp)): return Tensor(u)
  if isinstance(u, (bool, int, float)): return u
  raise TypeError(f"[UOp.{op}] a node of a tensor, a constant or a number, got {type(u).__name__}")


class StoreUOp:
  """`target.store(value)`: tinygrad's STORE of `value` into the elements `target` (a tensor's node, possibly a view
  such as t[:5].uop) views. It runs when an AfterUOp holding it becomes a tensor, as `target`'s assign()."""
  __slots__ = ("target", "value", "_done")
  op = Ops.STORE

  def __init__(self, target: TensorUOp, value):
    if not isinstance(target, TensorUOp): raise TypeError(f"[UOp.store] the target must be a tensor's node, got {type(target).__name__}")
    _tensor_of(target, "store")  # the error for a node of no tensor, now rather than when it runs
    self.target, self.value, self._done = target, value, False
  @property
  def src(self) -> tuple: return (self.target, self.value)
  @property
  def dtype(self): return dtypes.void

  def run(self) -> None:
    if self._done: return
    self._done = True
    from baregrad.tensor import Tensor
    dst, v = _tensor_of(self.target, "store"), _tensor_of(self.value, "store")
    dst.assign(v if isinstance(v, Tensor) else Tensor(v, device=dst.device, dtype=dst.dtype))

  def __repr__(self): return f"UOp(Ops.STORE, src=({self.target!r}, {self.value!r}))"


class AfterUOp:
  """`target.after(*deps)`: tinygrad's AFTER, `target` once `deps` have run (StoreUOps, AfterUOps, or nodes computed
  first). `Tensor(after)` and `t.uop = after` run each dep once, in order, and give `target`'s tensor."""
  __slots__ = ("target", "deps")
  op = Ops.AFTER

  def __init__(self, target: TensorUOp, deps: tuple):
    if not isinstance(target, TensorUOp): raise TypeError(f"[UOp.after] the target must be a tensor's node, got {type(target).__name__}")
    for d in deps:
      if not isinstance(d, (StoreUOp, AfterUOp, TensorUOp)): raise TypeError(f"[UOp.after] a dependency must be a store, an after or a node, got {type(d).__name__}")
    _tensor_of(target, "after")
    self.target, self.deps = target, tuple(deps)
  @property
  def src(self) -> tuple: return (self.target, *self.deps)
  @property
  def shape(self) -> tuple: return self.target.shape
  @property
  def dtype(self): return self.target.dtype
  @property
  def device(self) -> str: return self.target.device

  def run(self):
    """Runs the deps (each once) and returns the target's tensor."""
    for d in self.deps:
      if isinstance(d, TensorUOp): _tensor_of(d, "after").realize()
      else: d.run()
    return _tensor_of(self.target, "after")

  def __repr__(self): return f"UOp(Ops.AFTER, {self.dtype}, shape={self.shape}, src={self.src!r})"


UOp.register(StoreUOp)
UOp.register(AfterUOp)

_ALU = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b, Ops.FDIV: lambda a, b: a / b,
        Ops.IDIV: lambda a, b: a.idiv(b), Ops.MOD: lambda a, b: a.mod(b), Ops.MAX: lambda a, b: a.maximum(b), Ops.POW: lambda a, b: a.pow(b),
        Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a.ne(b), Ops.CMPEQ: lambda a, b: a.eq(b), Ops.AND: lambda a, b: a & b,
        Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b, Ops.SHL: lambda a, b: a << b, Ops.SHR: lambda a, b: a >> b,
        Ops.WHERE: lambda c, a, b: c.where(a, b), Ops.NEG: lambda a: -a, Ops.RECIP: lambda a: a.reciprocal(), Ops.EXP2: lambda a: a.exp2(),
        Ops.LOG2: lambda a: a.log2(), Ops.SIN: lambda a: a.sin(), Ops.SQRT: lambda a: a.sqrt(), Ops.TRUNC: lambda a: a.trunc()}
_ARITY = {op: fn.__code__.co_argcount for op, fn in _ALU.items()}


class ConstUOp:
  """A deviceless constant (tinygrad's `UOp.const(2.0)`, `.cast(dtype)`): a 0-d value on no device. `Tensor(u)` is a
  tensor with `device` None that takes the device of whatever it meets (`Tensor(u) + t` is on `t`'s device), reads
  as its value (`numpy()`, `item()`), realizes to nothing, and `clone(device=)` puts in a buffer. Without a
  dtype, a float is float32, an int int32 (tinygrad gives its weak dtypes there, which baregrad lacks)."""
  __slots__ = ("value", "dtype", "__weakref__")
  op = Ops.CONST
  _interned: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # one object per value, as tinygrad's UOps
  src, shape, device, is_realized, realized = (), (), None, False, None

  def __init__(self, value, dtype):
    dtype = to_dtype(dtype)
    if not isinstance(value, (bool, int, float)): raise TypeError(f"[UOp.const] a bool, int or float value, got {type(value).__name__} {value!r}")
    if dtypes.is_float(dtype): value = float(value)
    elif dtype == dtypes.bool: value = bool(value)
    elif not isinstance(value, float) or value == value and abs(value) != float("inf"): value = int(value)
    else: raise ValueError(f"[UOp.const] {value} has no {dtype} value")
    self.value, self.dtype = value, dtype

  @staticmethod
  def make(value, dtype=None) -> ConstUOp:
    if isinstance(value, ConstUOp): return value if dtype is None else value.cast(dtype)
    if isinstance(value, (tuple, list)): raise TypeError("[UOp.const] a tuple of constants is a graph baregrad does not build: use Tensor(list)")
    if not isinstance(value, (bool, int, float)): raise TypeError(f"[UOp.const] a bool, int or float value, got {type(value).__name__} {value!r}")
    return ConstUOp._intern(value, to_dtype(dtype) if dtype is not None else dtypes.from_py(value))

  @staticmethod
  def _intern(value, dtype) -> ConstUOp:
    u = ConstUOp(value, dtype)
    key = (u.dtype, repr(u.value))  # repr: 0.0 and -0.0 differ, nan is nan
    if (old := ConstUOp._interned.get(key)) is not None: return old
    ConstUOp._interned[key] = u
    return u

  @property
  def arg(self): return self.value
  @property
  def base(self) -> ConstUOp: return self
  @property
  def size(self) -> int: return 1
  def cast(self, dtype) -> ConstUOp: return ConstUOp._intern(self.value, to_dtype(dtype))
  def const_like(self, value) -> ConstUOp: return ConstUOp._intern(value, self.dtype)
  def has_buffer_identity(self, after_ok: bool = False) -> bool: return False
  def toposort(self) -> dict: return {self: None}
  def __eq__(self, other): return isinstance(other, ConstUOp) and (self.value, self.dtype) == (other.value, other.dtype)
  def __hash__(self): return hash((ConstUOp, self.value, self.dtype))
  def __repr__(self): return f"UOp(Ops.CONST, {self.dtype}, arg={self.value!r}, device=None)"


UOp.register(ConstUOp)


class MultiUOp:
  """`Tensor.uop` of a tensor over several devices (baregrad/multi.py): `axis` (None: whole on every device),
  `device` (the devices), `src` (each device's part, a TensorUOp), `shape` (the whole tensor's), `bounds` (each
  part's range along the axis)."""
  __slots__ = ("_c",)

  def __init__(self, c): self._c = c
  @property
  def axis(self): return self._c.axis
  @property
  def device(self) -> tuple: return self._c.device
  @property
  def shape(self) -> tuple: return self._c.shape
  @property
  def dtype(self): return to_dtype(self._c.dtype)
  @property
  def src(self) -> tuple: return tuple(TensorUOp(s.lazy_node(), s) for s in self._c.shards)
  @property
  def bounds(self) -> tuple:
    """Each device's (start, end) along the sharded axis; RuntimeError when the tensor is whole on each."""
    if self.axis is None: raise RuntimeError("[uop.bounds] bounds is not defined when axis is None")
    k = self._c.shards[0].shape[self.axis]
    return tuple((i * k, (i + 1) * k) for i in range(len(self._c.shards)))
  @property
  def base(self) -> MultiUOp: return self
  @property
  def is_realized(self) -> bool: return all(u.is_realized for u in self.src)
  def __repr__(self): return f"UOp(MULTI, axis={self.axis}, shape={self.shape}, device={self.device})"


UOp.register(MultiUOp)


def _buffer(node):
  buf = node.realized
  if buf is not None and not hasattr(buf, "_dtype"): buf._dtype = to_dtype(node.dtype)
  return buf


# tinygrad's Buffer reads on the DeviceBuffer: size (elements of the dtype it was realized as) and dtype.
_C.DeviceBuffer.dtype = property(lambda b: b._dtype)
_C.DeviceBuffer.size = property(lambda b: b.nbytes // b._dtype.itemsize)
_C.DeviceBuffer.is_allocated = lambda b: True
_C.DeviceBuffer.__repr__ = lambda b: f"<DeviceBuffer {b.device} {b.nbytes} bytes>"
