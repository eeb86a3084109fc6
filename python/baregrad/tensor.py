"""Tensor with tinygrad's API over the C++ tensor layer (_baregrad.Tensor).

A Tensor wraps one C++ tensor (`_c`); copies of the C++ tensor share its value and gradient, so
optimizers, TinyJit and assign() written in C++ update the tensors Python holds. Elementwise,
movement, reduction and nn methods live in the mixins of baregrad/mixin/.
"""
from __future__ import annotations

import contextlib
import math
import pickle
import pathlib
import weakref
from typing import Any, ClassVar, cast  # noqa: F401 (cast: programs import it from here, as from tinygrad.tensor)

import numpy as np

import _baregrad as _C
from baregrad.device import canonicalize_device
from baregrad.disk import DiskTensorMixin, _compute_error, disk_device, is_disk
from baregrad.dtype import DType, InvalidType, _fits, _from_np_dtype, _int_for, _key_dtype, _np_storage, _to_np_dtype, dtypes, least_upper_dtype, to_dtype
from baregrad.helpers import argfix, check_int64, fully_flatten, prod, op_name
from baregrad.mixin.elementwise import ElementwiseMixin
from baregrad.mixin.hashing import HashingMixin
from baregrad.mixin.inplace import InPlaceMixin
from baregrad.mixin.linalg import LinalgMixin
from baregrad.mixin.movement import MovementMixin, _whole_buffer
from baregrad.mixin.nn import NNMixin
from baregrad.mixin.reduce import ReduceMixin
from baregrad import multi, variable
from baregrad.uop.graph import AfterUOp, ConstUOp, MultiUOp, TensorUOp as TensorUOpBase
from baregrad.variable import make_sym

ConstType = (bool, int, float)
_EXACT_INT = 2**53  # doubles hold every integer below this; larger ones go through raw bytes
_new_object = object.__new__
_SCALAR_OPS = frozenset("add sub mul maximum minimum lt le gt ge eq ne".split())  # _C.Tensor.scalar_op's


def _max_sizes(shape) -> tuple:
  """`shape` with each Variable size (SymInt) at its upper bound."""
  return tuple(int(d.sym.vmax) if variable.is_symbolic(d) else d for d in shape)


def _first_device(device) -> str:
  """The device a C++ creation op makes a tensor on: the first of several (Tensor._finish spreads it)."""
  d = canonicalize_device(device)
  return d[0] if isinstance(d, tuple) else d


def _one_device(device, op: str) -> str:
  """The device of a random draw: several would hold the same numbers, so tinygrad's ValueError."""
  d = canonicalize_device(device)
  if isinstance(d, tuple):
    raise ValueError(f"[{op}] a random tensor on several devices {d} would repeat its numbers on each: make it on one "
                     "and shard it (or use rand_like of a sharded tensor)")
  return d


def is_numpy_ndarray(x) -> bool:
  """True for a numpy array (tinygrad's test, which works without importing numpy)."""
  return str(type(x)) == "<class 'numpy.ndarray'>"


def _is_const(x) -> bool: return isinstance(x, ConstType) or isinstance(x, (np.bool_, np.integer, np.floating))


class GradientShapeError(RuntimeError, AssertionError):
  """backward()/gradient() of a non-scalar without a gradient: tinygrad raises AssertionError."""


class Tensor(ElementwiseMixin, MovementMixin, ReduceMixin, NNMixin, LinalgMixin, HashingMixin, InPlaceMixin):
  """A lazy n-dimensional array; ops build a graph that realize() (or reading data) runs."""
  # _bound: see MovementMixin._bind; _grad_ref: see grad; _taken: see MovementMixin.__getitem__
  __slots__ = ("_c", "_bound", "_grad_ref", "_taken", "__weakref__")
  training: ClassVar[bool] = False
  _deviceless: ClassVar[bool] = False  # DevicelessTensor
  # numpy hands binary ops with a Tensor operand to the Tensor (np.ones(3) + t is a Tensor).
  __array_ufunc__ = None

  def __new__(cls, data: Any = None, device: str | None = None, dtype: Any = None, requires_grad: bool | None = None):
    """A pathlib.Path is a DISK tensor (the file's bytes, memory-mapped: baregrad/disk.py); so is
    data given a "disk:PATH" device (written into that file)."""
    if cls is Tensor and isinstance(data, pathlib.PurePath):
      t = DiskTensor.from_path(data)
      t = t if dtype is None else t.bitcast(dtype)
      return t if device is None or is_disk(device) else t.to(device)
    if cls is Tensor and is_disk(device) and data is not None:
      return Tensor(data, dtype=dtype, device="CPU").to(device)
    if cls is Tensor and isinstance(data, ConstUOp) and device is None: return super().__new__(DevicelessTensor)
    return super().__new__(cls)

  def __init__(self, data: Any, device: str | None = None, dtype: Any = None, requires_grad: bool | None = None):
    if isinstance(data, pathlib.PurePath) or (is_disk(device) and data is not None): return  # made by __new__
    if variable.in_use and isinstance(data, variable.SymInt):  # its value at launch
      # default_int, or int64 when the Variables' bounds let the value leave int32
      fits = -2**31 <= data.sym.vmin and data.sym.vmax < 2**31
      dt = to_dtype(dtype) if dtype is not None else dtypes.default_int if fits else dtypes.int64
      c = _C.Tensor.sym_scalar(data.sym, data.vals, dt.key, canonicalize_device(device))
      if requires_grad is not None: c.requires_grad_(requires_grad)
      self._c = c
      return
    if isinstance(data, variable.Variable):  # tinygrad: a RuntimeError naming it unbound
      raise RuntimeError(f"[Tensor] {variable.unbound_variable(data.expr)}")
    if variable.in_use and isinstance(data, (list, tuple)): variable.note_value_use("Tensor", data)
    _dtype = to_dtype(dtype) if dtype is not None else None
    _device = canonicalize_device(device)
    if isinstance(_device, tuple):  # whole on every device
      t = Tensor(data, device=_device[0], dtype=dtype, requires_grad=requires_grad)
      self._c = multi.shard(t._c, _device, None)
      return
    if isinstance(data, (_C.Tensor, multi.MultiC)): c = data
    elif isinstance(data, ConstUOp): c = Tensor._const_c(data.value, data.dtype, _device)
    elif isinstance(data, (TensorUOpBase, MultiUOp)) and data._c is not None: c = data._c
    elif isinstance(data, AfterUOp): c = data.run()._c
    elif isinstance(data, Tensor): c = data._c.detach()
    elif data is None: c = Tensor._const_c(0.0, _dtype or dtypes.default_float, _device)
    elif _is_const(data): c = Tensor._const_c(data, _dtype or dtypes.from_py(data), _device)
    elif isinstance(data, (bytes, bytearray, memoryview)):
      dt = _dtype or dtypes.uint8
      c = _C.Tensor.from_bytes(bytes(data), [len(bytes(data)) // dt.itemsize], dt.key, _device)
    elif isinstance(data, (list, tuple)): c = Tensor._from_list(data, _dtype, _device)
    elif isinstance(data, np.ndarray):
      if data.shape == (): c = Tensor._const_c(data.item(), _dtype or _from_np_dtype(data.dtype), _device)
      else: c = Tensor._from_numpy(data, _dtype, _device)
    else: raise TypeError(f"[{op_name()}] can't create Tensor from {data!r} with type {type(data).__name__}")
    made = c
    if _dtype is not None and c.dtype != _dtype.key: c = c.cast(_dtype.key)
    if isinstance(c, multi.MultiC): pass  # stays on its devices
    elif c.device != _device: c = c.to(_device)
    if c is not made or isinstance(data, Tensor): c = c.detach()  # a new tensor is a leaf
    if requires_grad is not None or c.requires_grad is not None: c.requires_grad_(requires_grad)
    self._c = c

  def _binary(self, name: str, y, reverse: bool = False, widen: bool = False):
    # The common case, a float tensor and a Python number, without the general promotion: the
    # number takes the tensor's dtype (ElementwiseMixin._binary gives the same result, slower).
    if (type(y) is float or type(y) is int) and name in _SCALAR_OPS and type(self._c) is _C.Tensor and \
       (c := self._c.float_scalar_op(name, float(y), reverse)) is not None:
      return Tensor._wrap(c)
    # Two tensors of one float dtype (a * b in a model): nothing to promote (C++ checks devices).
    if type(y) is Tensor and type(self) is Tensor and type(self._c) is _C.Tensor and type(y._c) is _C.Tensor and \
       self._c.same_float_dtype(y._c):
      a, b = (y._c, self._c) if reverse else (self._c, y._c)
      return Tensor._wrap(getattr(a, name)(b))
    return super()._binary(name, y, reverse, widen)

  # ---- construction helpers ----------------------------------------------------------------

  @staticmethod
  def _wrap(c) -> Tensor:
    t = _new_object(Tensor)  # not Tensor.__new__: its DISK checks cost a tiny op ~0.2 us
    t._c = c
    return t

  @staticmethod
  def _const_c(value, dtype: DType, device: str):
    """A 0-d C++ tensor holding `value` as `dtype` (ints beyond 2**53 stay exact)."""
    if isinstance(device, tuple): return multi.MultiC([Tensor._const_c(value, dtype, d) for d in device], None)
    if is_disk(device): raise _compute_error(device)
    if isinstance(value, np.generic): value = value.item()
    value = dtypes.as_const(value, dtype)  # 3.7 as int32 is 3, 2 as bool is True
    if not _fits(value, dtype):  # torch: "value cannot be converted to type int32 without overflow"
      raise ValueError(f"[{op_name()}] {value} cannot be converted to {dtype} without overflow")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _EXACT_INT and dtypes.is_int(dtype):
      raw = np.array([value], dtype=np.uint64 if value > 0 else np.int64).astype(_np_storage(dtype))
      return _C.Tensor.from_bytes(raw, [], dtype.key, device)
    return _C.Tensor.full([], float(value), dtype.key, device)

  @staticmethod
  def _const(value, dtype: DType, device: str) -> Tensor:
    """A Python scalar operand: requires_grad=False, as tinygrad makes it."""
    c = Tensor._const_c(value, dtype, device)
    c.requires_grad_(False)
    return Tensor._wrap(c)

  @staticmethod
  def _from_numpy(arr: np.ndarray, dtype: DType | None, device: str):
    """A copy of `arr` (numpy memory cannot be adopted by the device allocator)."""
    if dtype is None: dtype = _from_np_dtype(arr.dtype)
    if dtype is dtypes.bfloat16:
      return _C.Tensor.from_bytes(np.ascontiguousarray(arr, dtype=np.float32), list(arr.shape), "float32", device).cast("bfloat16")
    arr = np.ascontiguousarray(arr, dtype=_np_storage(dtype))
    return _C.Tensor.from_bytes(arr, list(arr.shape), dtype.key, device)

  @staticmethod
  def _int_cast(ints: list[int], shape, dtype: DType, device: str):
    """Python ints cast to the int `dtype` as numpy's astype and tinygrad do: wrapped to its width;
    values beyond 64 bits have no such value (ValueError)."""
    if min(ints) < -2**63 or max(ints) >= 2**64:
      raise ValueError(f"[{op_name()}] values {min(ints)} .. {max(ints)} cannot be converted to {dtype} without overflow: they exceed 64 bits")
    raw = np.array([x % (1 << 64) for x in ints], dtype=np.uint64).reshape(shape)
    return Tensor._from_numpy(raw.astype(_np_storage(dtype)), dtype, device)

  @staticmethod
  def _from_list(data, dtype: DType | None, device: str):
    if any(isinstance(x, Tensor) for x in fully_flatten(data)):
      return Tensor.stack(*[x if isinstance(x, Tensor) else Tensor(x, device, dtype) for x in data])._c
    if dtype is None:
      flat = fully_flatten(data)
      if flat and all(isinstance(x, (bool, np.bool_)) for x in flat): dtype = dtypes.bool
      elif flat and all(isinstance(x, (int, np.integer)) for x in flat): dtype = _int_for(int(min(flat)), int(max(flat)))
      else: dtype = dtypes.default_float
    # Integers go through int64 (wrapping into narrower dtypes as a cast), floats through float64.
    if dtypes.is_int(dtype):
      flat = fully_flatten(data)
      if flat and all(isinstance(x, (int, np.integer)) for x in flat) and not all(_fits(int(x), dtype) for x in flat):
        # An explicit int dtype is a cast, as numpy's astype and tinygrad's: ints wrap to its width.
        shape = np.array(data, dtype=object).shape
        if len(flat) != math.prod(shape): raise ValueError(f"[{op_name()}] cannot make a Tensor of the ragged list {data!r}")
        return Tensor._int_cast([int(x) for x in flat], shape, dtype, device)
    raw = np.array(data)
    if raw.dtype == object:
      flat = fully_flatten(data)
      if flat and all(isinstance(x, (int, np.integer)) for x in flat):
        raise ValueError(f"[{op_name()}] values {min(flat)} .. {max(flat)} cannot be converted to {dtype} without overflow: they exceed 64 bits")
      raise ValueError(f"[{op_name()}] cannot make a Tensor of the ragged or mixed list {data!r}")
    if raw.dtype == np.float64 and dtypes.is_unsigned(dtype) and raw.size and raw.min() >= 0:
      # numpy makes [0, 2**64-1] float64, which rounds the large one: read the ints exactly
      with contextlib.suppress(OverflowError, TypeError): raw = np.array(data, dtype=np.uint64)
    if dtypes.is_int(dtype) and raw.size and raw.dtype.kind in "iuf" and \
       not (np.isfinite(raw).all() and _fits(raw.min(), dtype) and _fits(raw.max(), dtype)):
      # Floats truncate toward zero, then wrap as ints do (above). NaN, inf and values beyond 64
      # bits have no such value.
      if raw.dtype.kind == "f" and not np.isfinite(raw).all():
        raise ValueError(f"[{op_name()}] non-finite values cannot be converted to {dtype}")
      raw = np.trunc(raw) if raw.dtype.kind == "f" else raw
      return Tensor._int_cast([int(x) for x in raw.reshape(-1).tolist()], raw.shape, dtype, device)
    if raw.dtype.kind in "iu" and dtypes.is_int(dtype) and not raw.dtype == np.uint64: raw = raw.astype(np.int64)
    if raw.dtype.kind in "US": raise TypeError(f"[{op_name()}] cannot make a Tensor of strings: {data!r}")
    return Tensor._from_numpy(raw, dtype, device)

  # ---- properties ----------------------------------------------------------------------------

  @property
  def shape(self) -> tuple[int, ...]:
    """The sizes; where a size holds a Variable, a SymInt (baregrad/variable.py)."""
    s = self._c.shape
    if not variable.in_use or (ss := self._c.sym_shape) is None: return s
    vals = self._c.sym_vals
    return tuple(make_sym(v, y, vals) for v, y in zip(s, ss))
  @property
  def max_shape(self) -> tuple[int, ...]:
    """The shape with each Variable size at its upper bound (the most a capture over it holds), as tinygrad's."""
    return _max_sizes(self.shape)
  def max_numel(self) -> int: return prod(self.max_shape)
  @property
  def dtype(self) -> DType: return _key_dtype(self._c.dtype)
  @property
  def device(self) -> str: return self._c.device
  @property
  def uop(self):
    """A read-only view of this tensor's node in the lazy graph (baregrad/uop/graph.py): `.op`, `.base`, `.src`,
    `.base.realized`, `.is_realized`, ... as tinygrad's UOp reads."""
    if isinstance(self._c, multi.MultiC): return MultiUOp(self._c)
    return TensorUOpBase(self._c.lazy_node(), self._c)
  @uop.setter
  def uop(self, u):
    """`t.uop = x.uop.after(...)` (tinygrad's in-place graph edit): runs the after's stores, then this tensor is its
    target's; `t.uop = other.uop` makes it that tensor's node."""
    if isinstance(u, AfterUOp): u = u.run().uop
    if not isinstance(u, (TensorUOpBase, MultiUOp)) or u._c is None:
      raise TypeError(f"[Tensor.uop] can only be set to a tensor's node or an after() of one, got {u!r}")
    if u.shape != self.shape: raise ValueError(f"[Tensor.uop] a node of shape {u.shape} for a tensor of shape {self.shape}")
    self._c = u._c
  @property
  def ndim(self) -> int: return self._c.ndim
  def numel(self) -> int: return self._c.numel()
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.element_size()
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def size(self, dim: int | None = None):
    return self.shape if dim is None else self.shape[self._resolve_dim(dim)]

  @property
  def requires_grad(self) -> bool | None:
    """tinygrad's tri-state: None (the default: gradient() and backward() reach this tensor, realize()
    ends its history), True (gradients always flow; optimizers set it), False (no gradient)."""
    return self._c.requires_grad

  @requires_grad.setter
  def requires_grad(self, value: bool | None):
    if value is not None and not isinstance(value, bool): value = bool(value)
    self._c.requires_grad_(value)

  def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    self.requires_grad = requires_grad
    return self

  @property
  def is_param(self) -> bool:
    """tinygrad's successor of requires_grad: False for a buffer (requires_grad False, as BatchNorm's
    running statistics), else True."""
    return self.requires_grad is not False

  @is_param.setter
  def is_param(self, value: bool):
    if not value: self.requires_grad = False
    elif self.requires_grad is False: self.requires_grad = None

  def is_param_(self, is_param: bool = True) -> Tensor:
    """Sets is_param (False makes the tensor a buffer: requires_grad False) and returns the tensor."""
    self.is_param = is_param
    return self

  @property
  def grad(self) -> Tensor | None:
    """The gradient backward() accumulated; while it is held, each read gives the same object, which a
    later backward() updates in place (tinygrad's t.grad.assign(t.grad + g))."""
    g = self._c.grad
    if g is None: return None
    ref = getattr(self, "_grad_ref", None)  # weak: a grad nobody holds is not kept alive here
    if ref is not None and (w := ref()) is not None and w._c.same(g): return w
    w = Tensor._wrap(g)
    self._grad_ref = weakref.ref(w)
    return w

  @grad.setter
  def grad(self, value: Tensor | None):
    if value is not None and not isinstance(value, Tensor):
      raise TypeError(f"[grad] grad must be a Tensor or None, got {type(value).__name__}")
    if value is not None and value.shape != self.shape:
      raise ValueError(f"[grad] grad of shape {value.shape} for a tensor of shape {self.shape}")
    self._c.set_grad(None if value is None else value._c)

  class train:  # noqa: N801 (tinygrad's name)
    """Sets Tensor.training for a `with` block or a decorated function."""
    def __init__(self, mode: bool = True): self.mode = mode
    def __enter__(self): self.prev, Tensor.training = Tensor.training, self.mode
    def __exit__(self, *args): Tensor.training = self.prev
    def __call__(self, fn):
      def wrapper(*args, **kwargs):
        with Tensor.train(self.mode): return fn(*args, **kwargs)
      return wrapper

  class test(train):  # noqa: N801
    def __init__(self, mode: bool = False): self.mode = mode

  def __repr__(self):  # tinygrad's
    grad = self._c.grad
    grad_repr = None if grad is None else f"<grad {tuple(grad.shape)}>"
    return f"<Tensor <UOp {self.device} {self.shape} {str(self.dtype)[7:]}> on {self.device} with grad {grad_repr}>"

  def __hash__(self): return id(self)

  def __bool__(self):
    # tinygrad's: `if t:` must not realize silently; compare t.item() instead.
    raise TypeError(f"[{op_name()}] __bool__ on Tensor is not defined")

  def __len__(self):
    if not self.shape: raise TypeError(f"[{op_name()}] len() of a 0-d tensor")
    return self.shape[0]

  def __iter__(self):
    if not self.shape: raise TypeError(f"[{op_name()}] iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))

  def __index__(self):
    if self.numel() != 1 or not dtypes.is_int(self.dtype): raise TypeError(f"[{op_name()}] only integer tensors of one element can be an index")
    return int(self.item())

  def __int__(self): return int(self.item())
  def __float__(self): return float(self.item())

  # ---- data ----------------------------------------------------------------------------------

  def realize(self, *lst: Tensor, do_update_stats: bool = True) -> Tensor:
    """Runs the kernels this tensor (and those of `lst`) need."""
    self._c.realize()
    for t in lst: t._c.realize()
    return self

  def linear_with_vars(self, *lst: Tensor) -> tuple:
    """The schedule realizing this tensor (and those of `lst`), not run, and the values of the Variables it binds
    (tinygrad's): see baregrad/engine/realize.py; run_linear runs it."""
    from baregrad.engine.realize import schedule
    linear = schedule(self, *lst)
    return linear, dict(linear.var_vals)

  def schedule_linear(self, *lst: Tensor):
    """linear_with_vars without Variables (tinygrad's: a schedule that binds one is an error here)."""
    linear, var_vals = self.linear_with_vars(*lst)
    if var_vals: raise ValueError(f"[schedule_linear] the schedule binds Variables {var_vals}: use linear_with_vars")
    return linear

  def numpy(self) -> np.ndarray:
    """A new numpy array holding a copy of the values (bfloat16 comes back as float32)."""
    return self._c.numpy()

  def __array__(self, dtype=None):
    """np.asarray(t): on the CPU device a read-only view of the realized device buffer (no copy:
    later in-place updates of the tensor show through it); a copy elsewhere."""
    arr = self._c.host_view()
    if arr is None: arr = self._c.numpy()
    return arr if dtype is None else arr.astype(dtype, copy=False)

  def tolist(self):
    return self.numpy().tolist()

  def item(self):
    if self.numel() != 1: raise ValueError(f"[item] item() needs one element, the tensor has shape {self.shape}")
    return self.numpy().reshape(()).item()

  def data(self) -> memoryview:
    if self.dtype is dtypes.bfloat16 or self.dtype in dtypes.fp8s:
      raise TypeError(f"[data] {self.dtype} has no memoryview format: numpy() gives float32, bitcast(dtypes.uint8) the codes")
    # an empty one is flat, as tinygrad's (Python cannot list a memoryview of shape (0, 2))
    if 0 in self.shape: return memoryview(self.numpy().reshape(0))
    return memoryview(self.numpy())

  def to(self, device: str | None) -> Tensor:
    """A copy on `device` (this tensor when it is there); the gradient flows back. "disk:PATH"
    writes the values into a new file and gives the DISK tensor mapping it."""
    if is_disk(device): return DiskTensor.write_new(self, disk_device(device))
    device = canonicalize_device(device)
    if device == self.device: return self
    if isinstance(device, tuple): return self.shard(device)  # whole on every device
    return Tensor._wrap(self._c.to(device))

  def shard(self, devices, axis: int | None = None) -> Tensor:
    """This tensor split over `devices` along `axis` in equal parts (None: whole on every device); ops on it run
    on every device (baregrad/multi.py says how each op treats the shards)."""
    if isinstance(self._c, multi.MultiC): raise RuntimeError(f"[shard] can't shard a multi-device tensor (on {self.device})")
    devices = canonicalize_device(tuple(devices))
    if isinstance(devices, str): return self.to(devices)
    out = Tensor._wrap(multi.shard(self._c, devices, None if axis is None else self._resolve_dim(axis)))
    if self.requires_grad is not None: out._c.requires_grad_(self.requires_grad)
    return out

  def shard_(self, devices, axis: int | None = None) -> Tensor: return self.replace(self.shard(devices, axis))

  def shard_like(self, y: Tensor) -> Tensor:
    """Sharded as `y` (its devices and axis); `y` on one device: this tensor moved there."""
    if isinstance(y.device, str): return self.to(y.device)
    if isinstance(self._c, multi.MultiC) and (self.device, self._c.axis) == (y.device, y._c.axis): return self
    return self.shard(y.device, y._c.axis)

  def to_(self, device: str | None) -> Tensor: return self.replace(self.to(device))

  def replace(self, x: Tensor) -> Tensor:
    """Makes this Python tensor refer to `x`'s data (other references keep the old one)."""
    self._tensor_arg(x, "the value")
    if self.shape != x.shape: raise ValueError(f"[replace] a value of shape {x.shape} for a tensor of shape {self.shape}")
    self._c = x._c
    return self

  def _tensor_arg(self, x, what: str):
    """`x` when it is a Tensor; else a TypeError naming the op and x's type ("[cat] every
    argument must be a Tensor, got list"), not an AttributeError from inside the op."""
    if not isinstance(x, Tensor): raise TypeError(f"[{op_name()}] {what} must be a Tensor, got {type(x).__name__}")
    return x

  def detach(self) -> Tensor:
    """The same values with no history: a new leaf, requires_grad undecided (None), as tinygrad's
    detach (a Ops.DETACH tensor that backward() fills like any other). No gradient flows through it
    to this tensor, and backward() through it gives this tensor zeros (tinygrad's toposort reaches it)."""
    c = self._c.detached_leaf() if type(self._c) is _C.Tensor else self._c.detach()
    c.requires_grad_(None)
    return Tensor._wrap(c)

  def clone(self, device: str | None = None) -> Tensor:
    """A copy in a buffer of its own (on `device` if given) that keeps is_param and .grad (cloned too),
    as tinygrad's. Gradients flow through it to this tensor, and backward() fills its .grad as a leaf's
    (tinygrad fills every tensor's); a clone of a requires_grad=False tensor is undecided (None): it gets them."""
    src = self._c if device is None else self._c.to(canonicalize_device(device))
    ret = Tensor._wrap(src.contiguous())
    if self.requires_grad is False: ret.requires_grad = None
    if (g := self.grad) is not None: ret.grad = g.clone(device)
    return ret

  def retain_grad(self) -> Tensor:
    """backward() fills .grad of this tensor too, though it was computed from others (torch's retain_grad)."""
    self._c.retain_grad()
    return self

  def __reduce__(self):
    """Pickling (and copy.deepcopy): the values, dtype, device and requires_grad."""
    return (_unpickle_tensor, (self.numpy(), self.dtype.key, self.device, self.requires_grad))

  def __reduce_ex__(self, protocol):
    """Protocol 5 pickles the values as a pickle.PickleBuffer, which a `buffer_callback` may keep out of band (no
    copy of the bytes inside the pickle); earlier protocols as __reduce__."""
    if protocol < 5 or type(self).__reduce__ is not Tensor.__reduce__: return self.__reduce__()
    arr = np.ascontiguousarray(self.numpy())
    return (_unpickle_tensor_buffer, (pickle.PickleBuffer(arr), arr.dtype.str, arr.shape, self.dtype.key, self.device,
                                      self.requires_grad))

  def contiguous(self, *args, **kwargs) -> Tensor:
    """This tensor in a buffer of its own layout: a realized buffer's whole, unmoved view is already that and is
    returned as is (torch's and tinygrad's: writes into the result are writes into this tensor); anything else is
    computed into a new buffer when realized. clone() always copies."""
    c = self._c
    if type(c) is _C.Tensor and _whole_buffer(c): return self
    return Tensor._wrap(c.contiguous())
  def contiguous_backward(self) -> Tensor: return self

  def assign(self, x) -> Tensor:
    """Replaces this tensor's value in place (the buffer keeps its address); realizes it."""
    if not isinstance(x, Tensor): x = Tensor(x, device=self.device, dtype=self.dtype)
    if isinstance(x, DiskTensor) or x._deviceless: x = x.to(self.device)
    if isinstance(self._c, multi.MultiC) and not isinstance(x._c, multi.MultiC): x = x.shard_like(self)  # a whole value
    elif isinstance(x._c, multi.MultiC) and not isinstance(self._c, multi.MultiC): x = x.to(self.device)  # gathered
    if type(x._c) is type(self._c) and x._c.same(self._c): return self
    if x.shape != self.shape: x = x._broadcast_to(self.shape)
    if x.dtype != self.dtype:  # as tinygrad: no implicit cast (int64 -> float32 would round)
      raise RuntimeError(f"[assign] assign dtype mismatch: a {x.dtype} value into a {self.dtype} tensor (cast it first)")
    if x.device != self.device: raise RuntimeError(f"[assign] a value on {x.device} into a tensor on {self.device}")
    self._c.assign(x._c)
    return self

  # ---- autograd ------------------------------------------------------------------------------

  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Accumulates d(self)/d(t) into t.grad for the leaves t of the graph that require grad (parameters); when
    none does, for every float leaf that is not requires_grad=False or a constant (the 2 of `x * 2`); and for
    clones and retain_grad() tensors. A .grad already there is updated in place (the same object)."""
    if gradient is not None and not isinstance(gradient, Tensor): gradient = Tensor(gradient, self.device, self.dtype)
    if gradient is None: self._check_scalar("backward")
    self._c.backward(None if gradient is None else gradient._c)
    return self

  def gradient(self, *targets: Tensor, gradient: Tensor | None = None, materialize_grads: bool = False) -> list[Tensor]:
    """d(self)/d(target) for each float target, without touching .grad: zeros for one the graph does not reach
    (as tinygrad). A requires_grad=False or integer target raises RuntimeError, or gives zeros with
    materialize_grads."""
    for t in targets: self._tensor_arg(t, "every target")
    if gradient is None: self._check_scalar("gradient")
    root = self if gradient is None else (self * gradient.detach()).sum()
    return [Tensor._wrap(g) for g in root._c.gradient([t._c for t in targets], materialize_grads)]

  def _check_scalar(self, op: str):
    if self.numel() != 1:  # tinygrad asserts this
      raise GradientShapeError(f"[{op}] called on a non-scalar tensor of shape {self.shape} without a gradient of that shape")

  # ---- creation ------------------------------------------------------------------------------

  @staticmethod
  def _finish(c, device: str | None, requires_grad: bool | None) -> Tensor:
    device = canonicalize_device(device)
    if isinstance(device, tuple): c = multi.shard(c, device, None)  # whole on every device
    elif c.device != device: c = c.to(device)
    if not c.is_leaf: c = c.detach()  # a created tensor is a leaf, requires_grad undecided
    if requires_grad is not None or c.requires_grad is not None: c.requires_grad_(requires_grad)
    return Tensor._wrap(c)

  @staticmethod
  def empty(*shape, device: str | None = None, dtype: Any = None, requires_grad: bool | None = None, **kwargs) -> Tensor:
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    shape = argfix(*shape)
    check_int64("empty", shape)
    if variable.in_use and not is_disk(device) and any(variable.is_symbolic(s) for s in shape):
      # a symbolic size: a buffer of its upper bound, seen through a symbolic shrink (tinygrad's)
      t = Tensor.empty(*_max_sizes(shape), device=device, dtype=dt, requires_grad=requires_grad)
      return t.shrink(tuple((0, s) for s in shape))
    variable.note_value_use("empty", shape)
    if is_disk(device): return DiskTensor.empty(shape, dt, disk_device(device))
    return Tensor._finish(_C.Tensor.empty(list(shape), dt.key, _first_device(device)), device, requires_grad)

  @staticmethod
  def full(shape, fill_value, device: str | None = None, dtype: Any = None, requires_grad: bool | None = None,
           buffer: bool = True) -> Tensor:
    """`shape` filled with `fill_value` (Invalid: uninitialized, as empty). The result is a broadcast constant
    whatever `buffer` says (tinygrad's buffer=False; its default True materializes one): realize() and setitem
    give it a buffer when it needs one, and reads fold the constant."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.from_py(fill_value)
    shape = argfix(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if isinstance(fill_value, InvalidType): return Tensor.empty(*shape, device=device, dtype=dt, requires_grad=requires_grad)
    check_int64("full", shape)
    if any(not isinstance(s, int) or s < 0 for s in shape): raise ValueError(f"[full] invalid shape {shape}")
    if math.prod(s for s in shape if s) > 2**63 - 1: raise ValueError(f"[full] shape {tuple(shape)} has more than 2**63-1 elements")
    base = Tensor._const_c(fill_value, dt, canonicalize_device(device))
    if variable.in_use and any(variable.is_symbolic(s) for s in shape):  # a symbolic shape
      c = base.reshape([1] * len(shape)).expand_sym([variable.sym_of(s) for s in shape], variable.vals_of(shape))
      return Tensor._finish(c, device, requires_grad)
    c = base.reshape([1] * len(shape)).expand(list(shape)) if shape else base
    return Tensor._finish(c, device, requires_grad)

  @staticmethod
  def zeros(*shape, **kwargs) -> Tensor: return Tensor.full(argfix(*shape), 0.0, **kwargs)
  @staticmethod
  def ones(*shape, **kwargs) -> Tensor: return Tensor.full(argfix(*shape), 1.0, **kwargs)

  @staticmethod
  def arange(start, stop=None, step=1, **kwargs) -> Tensor:
    if stop is None: stop, start = start, 0
    if step == 0: raise ValueError(f"[arange] step 0")
    if variable.in_use and variable.is_symbolic(stop) and isinstance(start, int) and not variable.is_symbolic(start) and step == 1:
      # a symbolic length: the arange of the longest one, shrunk (it has no buffer, so that is free)
      n = stop - start
      return Tensor.arange(start, start + max(n.sym.vmax, 0), **kwargs)[:n]
    variable.note_value_use("arange", (start, stop, step))
    ints = not any(isinstance(x, float) for x in (start, stop, step))
    explicit = kwargs.pop("dtype", None)
    dt = to_dtype(explicit or (dtypes.default_int if ints else dtypes.default_float))
    exact = all(isinstance(x, (int, np.integer)) for x in (start, stop, step))
    if exact: start, stop, step = int(start), int(stop), int(step)
    n = max(0, -((start - stop) // step)) if exact else 0
    if n and dtypes.is_int(dt):
      # integer ranges never wrap: without a dtype the first and last values pick it as Tensor([...])
      # does (int64 past int32); past an explicit one they raise (tinygrad's OverflowError; torch wraps)
      last = start + (n - 1) * step
      if explicit is None: dt = dtypes.from_py([start, last])
      if not (dt.min <= min(start, last) and max(start, last) <= dt.max):
        raise OverflowError(f"[arange] arange({start}, {stop}, {step}) runs from {start} to {last}, outside {dt} [{dt.min}, {dt.max}]")
    device = canonicalize_device(kwargs.pop("device", None))
    c = _C.Tensor.arange(float(start), float(stop), float(step), dt.key, _first_device(device))
    return Tensor._finish(c, device, kwargs.pop("requires_grad", None))

  @staticmethod
  def linspace(start, stop, steps: int, **kwargs) -> Tensor:
    dt = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float)
    c = _C.Tensor.linspace(float(start), float(stop), steps, dt.key)
    return Tensor._finish(c, kwargs.pop("device", None), kwargs.pop("requires_grad", None))

  @staticmethod
  def eye(n: int, m: int | None = None, dtype: Any = None, device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    if n < 0 or (m is not None and m < 0): raise ValueError(f"[eye] n={n}, m={m}: sizes cannot be negative")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return Tensor._finish(_C.Tensor.eye(n, -1 if m is None else m, dt.key), device, requires_grad)

  def _like(self, make, kwargs: dict) -> Tensor:
    """make(device, kwargs) for a tensor like self; on a sharded self (no other device asked), made on the first
    device and sharded as self (a random draw is one draw, split or copied as self is)."""
    device = kwargs.pop("device", None)
    if isinstance(self._c, multi.MultiC):
      if device is not None and canonicalize_device(device) != self.device:
        raise RuntimeError(f"[{op_name()}] device {device} differs from the sharded tensor's {self.device}")
      return make(self.device[0], kwargs).shard(self.device, self._c.axis)
    return make(device or self.device, kwargs)

  def full_like(self, fill_value, **kwargs) -> Tensor:
    dt = kwargs.pop("dtype", None) or self.dtype
    return self._like(lambda d, kw: Tensor.full(self.shape, fill_value, dtype=dt, device=d, **kw), kwargs)
  def const_like(self, b, dtype: Any = None) -> Tensor:
    """`b` in every element of self's shape, on self's device, in self's dtype unless `dtype` is given (tinygrad's)."""
    return Tensor.full(self.shape, b, dtype=dtype or self.dtype, device=self.device)
  @staticmethod
  def const(b, dtype: Any = None) -> Tensor:
    """A 0-d tensor holding `b` (tinygrad's has no device until used; baregrad's is on the default device)."""
    return Tensor(b, dtype=dtype)
  @staticmethod
  def invalids(*shape, device: str | None = None, dtype: Any = None) -> Tensor:
    """A tensor whose contents are undefined, as tinygrad's (baregrad: Tensor.empty)."""
    return Tensor.empty(*shape, device=device, dtype=dtype)
  @staticmethod
  def from_url(url: str, gunzip: bool = False, **kwargs) -> Tensor:
    """Tensor(fetch(url, gunzip=gunzip), **kwargs): the file's bytes (a DISK tensor unless device= moves it). baregrad
    downloads nothing: local paths and file:// URLs only; an http(s) URL not in the cache is a URLError naming it."""
    from baregrad.helpers import fetch
    return Tensor(fetch(url, gunzip=gunzip), **kwargs)
  def zeros_like(self, **kwargs) -> Tensor: return self.full_like(0, **kwargs)
  def ones_like(self, **kwargs) -> Tensor: return self.full_like(1, **kwargs)
  def empty_like(self, **kwargs) -> Tensor:
    dt = kwargs.pop("dtype", None) or self.dtype
    return self._like(lambda d, kw: Tensor.empty(self.shape, dtype=dt, device=d, **kw), kwargs)

  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    """Seeds tinygrad's generator: the same calls on the same devices then give tinygrad's numbers."""
    _C.Tensor.manual_seed(seed)

  @staticmethod
  def rand(*shape, device: str | None = None, dtype: Any = None, contiguous: bool = True, requires_grad: bool | None = None, **kwargs) -> Tensor:
    variable.note_value_use("rand", shape)
    if kwargs: raise TypeError(f"[rand] unexpected keyword arguments: {', '.join(sorted(kwargs))}")
    dt = to_dtype(dtype or dtypes.default_float)
    if not dtypes.is_float(dt): raise ValueError(f"[rand] dtype {dt} is not a float dtype")
    shape = argfix(*shape)
    check_int64("rand", shape)
    if not all(isinstance(s, int) and s >= 0 for s in shape): raise ValueError(f"[rand] invalid input shape={shape}")
    return Tensor._finish(_C.Tensor.rand(list(shape), dt.key, _one_device(device, "rand")), device, requires_grad)

  def rand_like(self, **kwargs) -> Tensor:
    dt = kwargs.pop("dtype", None) or self.dtype
    return self._like(lambda d, kw: Tensor.rand(*self.shape, device=d, dtype=dt, **kw), kwargs)

  @staticmethod
  def randn(*shape, dtype: Any = None, requires_grad: bool | None = None, device: str | None = None, **kwargs) -> Tensor:
    variable.note_value_use("randn", shape)
    dt = to_dtype(dtype or dtypes.default_float)
    if not dtypes.is_float(dt):  # tinygrad's: float32 normal samples cast to the dtype (ints truncate)
      return Tensor._finish(_C.Tensor.randn(list(argfix(*shape)), dtypes.float32.key, _one_device(device, "randn")).cast(dt.key), device, requires_grad)
    return Tensor._finish(_C.Tensor.randn(list(argfix(*shape)), dt.key, _one_device(device, "randn")), device, requires_grad)

  def randn_like(self, dtype: Any = None, requires_grad: bool | None = None, **kwargs) -> Tensor:
    return self._like(lambda d, kw: Tensor.randn(*self.shape, dtype=dtype or self.dtype, requires_grad=requires_grad, device=d), kwargs)

  @staticmethod
  def randint(*shape, low=0, high=10, dtype=dtypes.int32, device: str | None = None, requires_grad: bool | None = None, **kwargs) -> Tensor:
    variable.note_value_use("randint", shape)
    if not isinstance(low, int) or not isinstance(high, int): raise TypeError(f"[randint] low={low} and high={high} must be integers")
    dt = to_dtype(dtype)
    if not dtypes.is_int(dt): raise TypeError(f"[randint] dtype={dt} must be int")
    return Tensor._finish(_C.Tensor.randint(list(argfix(*shape)), low, high, dt.key, _one_device(device, "randint")), device, requires_grad)

  @staticmethod
  def normal(*shape, mean=0.0, std=1.0, requires_grad: bool | None = None, dtype: Any = None, device: str | None = None, **kwargs) -> Tensor:
    variable.note_value_use("normal", shape)
    dt = to_dtype(dtype or dtypes.default_float)
    if std < 0: raise ValueError(f"[normal] std={std} must be >= 0")
    return Tensor._finish(_C.Tensor.normal(list(argfix(*shape)), float(mean), float(std), dt.key, _one_device(device, "normal")), device, requires_grad)

  @staticmethod
  def uniform(*shape, low=0.0, high=1.0, dtype: Any = None, requires_grad: bool | None = None, device: str | None = None, **kwargs) -> Tensor:
    variable.note_value_use("uniform", shape)
    # tinygrad's ((high - low) * rand(*shape)).cast(dtype) + low, rand in the default float
    dt = to_dtype(dtype or dtypes.default_float)
    shape = argfix(*shape)
    check_int64("uniform", shape)
    if not all(isinstance(s, int) and s >= 0 for s in shape): raise ValueError(f"[uniform] invalid input shape={shape}")
    if not low < high: raise ValueError(f"[uniform] needs low < high, got low={low}, high={high}")
    return Tensor._finish((((high - low) * Tensor.rand(*shape, device=device)).cast(dt) + low)._c, device, requires_grad)

  @staticmethod
  def scaled_uniform(*shape, **kwargs) -> Tensor:
    rg = kwargs.pop("requires_grad", None)
    t = Tensor.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(argfix(*shape)) ** -0.5)
    return Tensor._finish(t._c, t.device, rg)

  @staticmethod
  def glorot_uniform(*shape, **kwargs) -> Tensor:
    shp = argfix(*shape)
    rg = kwargs.pop("requires_grad", None)
    bound = (6 / (shp[0] + prod(shp[1:]))) ** 0.5
    return Tensor.uniform(*shape, low=-bound, high=bound, requires_grad=rg, **kwargs)

  @staticmethod
  def kaiming_uniform(*shape, a: float = 0.01, **kwargs) -> Tensor:
    bound = (6 / (1 + a**2) / prod(argfix(*shape)[1:])) ** 0.5
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

  @staticmethod
  def kaiming_normal(*shape, a: float = 0.01, **kwargs) -> Tensor:
    std = (2 / (1 + a**2) / prod(argfix(*shape)[1:])) ** 0.5
    return Tensor.normal(*shape, mean=0.0, std=std, **kwargs)

  @staticmethod
  def randperm(n: int, device: str | None = None, dtype=dtypes.int32, **kwargs) -> Tensor:
    """A random permutation of 0..n-1: the stable argsort of rand(n) (sorted on the host), as tinygrad's."""
    order = np.argsort(Tensor.rand(n, device=device).numpy(), kind="stable")
    return Tensor(order, device=device, dtype=dtype, **kwargs)


def _unpickle_tensor(values, dtype_name: str, device: str, requires_grad):
  return Tensor(values, device=device, dtype=dtype_name, requires_grad=requires_grad)


def _unpickle_tensor_buffer(data, np_dtype: str, shape: tuple, dtype_name: str, device: str, requires_grad):
  with memoryview(data) as mv:
    values = np.frombuffer(mv, dtype=np.dtype(np_dtype)).reshape(shape)
    out = Tensor(values, device=device, dtype=dtype_name, requires_grad=requires_grad)  # a copy of the bytes
    del values
  # An out-of-band buffer is released now: the unpickler's memo would keep it (and its memory) alive until loads ends.
  if isinstance(data, pickle.PickleBuffer): data.release()
  return out


Tensor._T = Tensor  # what the mixins make and accept (`self._T(...)`, `isinstance(x, self._T)`): Tensor for every subclass


class DevicelessTensor(Tensor):
  """`Tensor(UOp.const(value))`: a constant on no device (`device` None, `uop` the ConstUOp). It computes as a 0-d
  constant on the device of what it meets (or the default device), realizes to nothing, and `clone(device=)`
  copies it into a buffer."""
  __slots__ = ("_u",)
  _deviceless = True

  def __init__(self, data: ConstUOp, device=None, dtype=None, requires_grad: bool | None = None):
    if dtype is not None: data = data.cast(dtype)
    super().__init__(data, None, None, requires_grad)
    self._u = data

  @property
  def device(self): return None
  @property
  def uop(self) -> ConstUOp: return self._u
  def _on(self, device) -> Tensor: return Tensor(self._u, device=canonicalize_device(device))  # None: the default
  def realize(self, *lst: Tensor, do_update_stats: bool = True) -> Tensor:
    for t in lst: t.realize()
    return self
  def to(self, device: str | None) -> Tensor: return self._on(device)
  def contiguous(self, *args, **kwargs) -> Tensor: return self  # a constant needs no buffer
  def clone(self, device: str | None = None) -> Tensor: return self._on(device).contiguous()


class DiskTensor(DiskTensorMixin, Tensor):
  """A view of a memory-mapped file (baregrad/disk.py): isinstance(t, Tensor) holds."""
  __slots__ = ("_arr", "_dtype", "_path")
