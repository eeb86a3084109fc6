"""DISK tensors: a file's bytes, memory-mapped, as tinygrad's DISK device gives them.

`Tensor(pathlib.Path(p))` is the whole file as uint8; `Tensor.empty(*shape, dtype=, device="disk:p")`
maps the file as that shape (creating or extending it); `t.to("disk:p")` writes a tensor into a new
file of its size. A DISK tensor has views (indexing with ints and slices, reshape, shrink, flatten,
permute, bitcast), reads (`to(device)`, `numpy()`, `tolist()`, `item()`, `data()`) and writes
(`assign`, `t[...] = v`); the mapping is the file, so a write is in the file at once. Reads and
writes need a contiguous view (RuntimeError "non-contiguous view is not supported", as tinygrad);
compute is done on a compute device: `t.to("CPU") + 1`, not `t + 1` (a RuntimeError naming the op).
"""
from __future__ import annotations

import math
import mmap
import os
import pathlib
from typing import Any

import numpy as np

import _baregrad as _C
from baregrad.dtype import DType, _np_storage, dtypes, to_dtype
from baregrad.helpers import argfix, op_name

def _storage(dt: DType) -> np.dtype:
  """The numpy dtype that holds `dt`'s bytes (bfloat16 and the fp8s, which numpy lacks, as uints)."""
  if (np_dt := _np_storage(dt)) is not None: return np.dtype(np_dt)
  return np.dtype(np.uint16 if dt.itemsize == 2 else np.uint8)


def is_disk(device: Any) -> bool:
  return isinstance(device, str) and device[:5].upper() == "DISK:"


class DiskComputeError(NotImplementedError, AssertionError):
  """An op that computes, asked of a DISK tensor: a RuntimeError (NotImplementedError is one), and
  what tinygrad raises for the same calls (NotImplementedError for cast, AssertionError for cat and
  elementwise ops)."""


def _compute_error(device: str) -> RuntimeError:
  """What an op that computes says of a DISK tensor."""
  return DiskComputeError(f"[{op_name()}] {device} tensors hold a file's bytes and do not compute: move one to a compute "
                      f"device first (t.to('CPU')); they support views, bitcast, to(), numpy() and assign")


def disk_device(device: str) -> str:
  """"disk:/a/b" -> "DISK:/a/b" (the path keeps its case)."""
  return "DISK:" + device[5:]


def _open(path: str, nbytes: int | None) -> np.ndarray:
  """The file at `path` as a writable uint8 memory map; with `nbytes`, created or extended to
  at least that size."""
  p = pathlib.Path(path)
  if nbytes is None:
    if not p.exists(): raise FileNotFoundError(f"[disk] no file {path!r}")
  else:
    if nbytes < 0: raise ValueError(f"[disk] a size of {nbytes} bytes for {path!r}")
    with open(p, "ab") as f:
      if f.tell() < nbytes: f.truncate(nbytes)
  size = p.stat().st_size
  if size == 0: return np.zeros(0, np.uint8)
  writable = os.access(p, os.W_OK)
  with open(p, "r+b" if writable else "rb") as f:
    mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
  return np.frombuffer(mm, dtype=np.uint8)


class DiskTensorMixin:
  """Methods a DISK tensor replaces; mixed into baregrad.tensor.DiskTensor (a Tensor subclass)."""
  __slots__ = ()

  # ---- construction --------------------------------------------------------------------------

  @classmethod
  def _make(cls, arr: np.ndarray, dtype: DType, path: str):
    t = object.__new__(cls)
    t._arr, t._dtype, t._path = arr, dtype, path
    return t

  @classmethod
  def from_path(cls, path: str | os.PathLike):
    """The whole file as a 1-D uint8 tensor."""
    path = os.fspath(path)
    return cls._make(_open(path, None), dtypes.uint8, path)

  @classmethod
  def empty(cls, shape, dtype: DType, device: str):
    """The file `device` names mapped as `shape` of `dtype` (created or extended as needed)."""
    shape = tuple(argfix(*shape)) if isinstance(shape, (tuple, list)) else (shape,)
    if not all(isinstance(s, int) and s >= 0 for s in shape): raise ValueError(f"[empty] invalid shape {shape} for {device}")
    nbytes = math.prod(shape) * dtype.itemsize
    mm = _open(device[5:], nbytes)
    return cls._make(mm[:nbytes].view(_storage(dtype)).reshape(shape), dtype, device[5:])

  @classmethod
  def write_new(cls, src, device: str):
    """A new file (replacing any) holding `src`'s bytes, mapped as its shape and dtype."""
    raw = src._c.to_bytes()
    path = device[5:]
    with open(path, "wb") as f: f.write(raw)
    return cls.empty(src.shape, src.dtype, device)

  def __init__(self, *args, **kwargs): pass  # made by __new__ / the class methods

  # ---- properties ----------------------------------------------------------------------------

  @property
  def _c(self): raise _compute_error(self.device)

  @property
  def shape(self) -> tuple[int, ...]: return tuple(int(s) for s in self._arr.shape)
  @property
  def dtype(self) -> DType: return self._dtype
  @property
  def device(self) -> str: return "DISK:" + self._path
  @property
  def ndim(self) -> int: return self._arr.ndim
  def numel(self) -> int: return int(self._arr.size)
  def element_size(self) -> int: return self._dtype.itemsize
  @property
  def requires_grad(self): return False
  @requires_grad.setter
  def requires_grad(self, value):
    if value: raise RuntimeError(f"[requires_grad] {self.device} tensors have no gradient")
  @property
  def grad(self): return None
  @property
  def is_param(self) -> bool: return False

  def __repr__(self): return f"<Tensor <{self.device} {self.shape} {self.dtype!r}> on {self.device} with grad None>"
  def __reduce__(self): raise TypeError(f"[pickle] {self.device} tensors are a file mapping: pickle t.to('CPU')")

  # ---- views ---------------------------------------------------------------------------------

  def _view(self, arr: np.ndarray, dtype: DType | None = None):
    return type(self)._make(arr, dtype or self._dtype, self._path)

  def _contiguous_arr(self) -> np.ndarray:
    if not self._arr.flags.c_contiguous:
      raise RuntimeError(f"[{op_name()}] non-contiguous view is not supported on {self.device} (shape {self.shape}, strides {self._arr.strides})")
    return self._arr

  @staticmethod
  def _basic(indices):
    items = indices if isinstance(indices, tuple) else (indices,)
    for i in items:
      if i is None or i is Ellipsis or isinstance(i, slice): continue
      if isinstance(i, (int, np.integer)) and not isinstance(i, bool): continue
      raise RuntimeError(f"[{op_name()}] advanced indexing (by {type(i).__name__}) is not supported for DISK tensors: use ints and slices")
    return items

  def __getitem__(self, indices):
    items = self._basic(indices)
    try: return self._view(self._arr[items])
    except IndexError as e: raise IndexError(f"[getitem] {e} (a {self.device} tensor of shape {self.shape})") from None

  def reshape(self, shape, *args):
    shape = tuple(argfix(shape, *args))
    try: return self._view(self._arr.reshape(shape, order="C") if self._arr.flags.c_contiguous else self._no_copy_reshape(shape))
    except ValueError as e: raise ValueError(f"[reshape] cannot reshape {self.shape} to {shape}: {e}") from None

  def _no_copy_reshape(self, shape):
    v = self._arr.view()
    v.shape = shape  # raises rather than copying
    return v

  def view(self, shape, *args): return self.reshape(shape, *args)
  def flatten(self, start_dim: int = 0, end_dim: int = -1):
    nd = max(self.ndim, 1)
    s, e = start_dim % nd, end_dim % nd
    return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def shrink(self, arg):
    if len(arg) != self.ndim: raise ValueError(f"[shrink] {len(arg)} ranges for {self.ndim} dims")
    return self._view(self._arr[tuple(slice(None) if a is None else slice(a[0], a[1]) for a in arg)])

  def permute(self, order, *args): return self._view(self._arr.transpose(tuple(argfix(order, *args))))
  @property
  def T(self): return self._view(self._arr.T)
  def transpose(self, dim0: int = 1, dim1: int = 0):
    order = list(range(self.ndim))
    order[dim0], order[dim1] = order[dim1], order[dim0]
    return self.permute(order)

  def bitcast(self, dtype):
    """The same bytes as `dtype` (the last axis rescaled for another itemsize), still on disk."""
    dt = to_dtype(dtype)
    arr = self._arr
    if dt.itemsize != self._dtype.itemsize:
      if arr.ndim == 0 or (arr.shape[-1] * self._dtype.itemsize) % dt.itemsize or (arr.ndim and arr.strides[-1] != arr.itemsize):
        raise RuntimeError(f"[bitcast] cannot bitcast {self.shape} {self._dtype} on {self.device} to {dt}")
    return self._view(arr.view(_storage(dt)), dt)

  def contiguous(self, *args, **kwargs):
    self._contiguous_arr()
    return self

  def realize(self, *lst, **kwargs):
    for t in (self,) + lst:
      if isinstance(t, DiskTensorMixin): continue
      t.realize()
    return self

  def detach(self): return self
  def clone(self, device: str | None = None):
    """A copy on `device` (a compute device; CPU by default): DISK tensors are files, not buffers."""
    return self.to(device or "CPU")

  # ---- reads and writes ----------------------------------------------------------------------

  def to(self, device: str | None):
    from baregrad.device import canonicalize_device
    from baregrad.tensor import Tensor
    if is_disk(device):
      if disk_device(device) == self.device: return self
      return type(self).write_new(self.to("CPU"), disk_device(device))
    device = canonicalize_device(device)
    raw = self._contiguous_arr().tobytes()
    return Tensor._wrap(_C.Tensor.from_bytes(raw, list(self.shape), self._dtype.key, device))

  def numpy(self) -> np.ndarray:
    if _np_storage(self._dtype) is None: return self.to("CPU").numpy()  # bfloat16, fp8: as float32
    return np.array(self._contiguous_arr())

  def __array__(self, dtype=None):
    arr = self.numpy()
    return arr if dtype is None else arr.astype(dtype, copy=False)

  def tolist(self): return self.numpy().tolist()
  def item(self):
    if self.numel() != 1: raise ValueError(f"[item] item() needs one element, the tensor has shape {self.shape}")
    return self.numpy().reshape(()).item()
  def data(self) -> memoryview: return memoryview(np.array(self._contiguous_arr()))

  def assign(self, x):
    """Writes `x` (a tensor on any device, or values; broadcast, cast to this dtype) into the file."""
    from baregrad.dtype import least_upper_dtype
    from baregrad.tensor import Tensor
    if isinstance(x, DiskTensorMixin): x = x.to("CPU")
    if not isinstance(x, Tensor): x = Tensor(x, device="CPU", dtype=self._dtype) if not isinstance(x, np.ndarray) else Tensor(x, device="CPU")
    if x.dtype != self._dtype:
      if least_upper_dtype(self._dtype, x.dtype) != self._dtype and not (dtypes.is_int(self._dtype) and dtypes.is_int(x.dtype)):
        raise RuntimeError(f"[assign] a {x.dtype} value into a {self._dtype} tensor on {self.device}")
      x = x.cast(self._dtype)
    if x.shape != self.shape: x = x._broadcast_to(self.shape)
    dst = self._contiguous_arr()
    raw = np.frombuffer(x._c.to_bytes(), dtype=dst.dtype).reshape(dst.shape)
    dst[...] = raw
    return self

  def __setitem__(self, indices, v):
    self[indices].assign(v)
