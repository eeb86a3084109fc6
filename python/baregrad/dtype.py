"""Element types with tinygrad's names, promotion lattice and numpy conversion."""
from __future__ import annotations

import functools
import math
from typing import Union

import numpy as np

from baregrad.helpers import ContextVar, getenv, op_name


class DType:
  """One scalar element type; every dtype exists once, so `is` and `==` agree."""
  __slots__ = ("priority", "bitsize", "name", "fmt", "key")

  def __init__(self, priority: int, bitsize: int, name: str, fmt: str | None, key: str):
    self.priority, self.bitsize, self.name, self.fmt, self.key = priority, bitsize, name, fmt, key

  @property
  def itemsize(self) -> int: return (self.bitsize + 7) // 8
  @property
  def count(self) -> int: return 1
  @property
  def base(self) -> DType: return self
  def scalar(self) -> DType: return self
  @property
  def min(self): return dtypes.min(self)
  @property
  def max(self): return dtypes.max(self)
  def __repr__(self): return f"dtypes.{_INVERSE[self.key]}"
  def __lt__(self, o: DType): return (self.priority, self.bitsize, self.name) < (o.priority, o.bitsize, o.name)
  def __reduce__(self): return (to_dtype, (self.key,))


class dtypes:  # noqa: N801 (tinygrad's name)
  @staticmethod
  def is_float(x: DType) -> bool: return x in dtypes.floats
  @staticmethod
  def is_int(x: DType) -> bool: return x in dtypes.ints
  @staticmethod
  def is_unsigned(x: DType) -> bool: return x in dtypes.uints
  @staticmethod
  def is_bool(x: DType) -> bool: return x is dtypes.bool

  @staticmethod
  def from_py(x) -> DType:
    """The dtype tinygrad gives a Python value (lists: the widest of their elements)."""
    if isinstance(x, np.generic): return _from_np_dtype(x.dtype)
    if x.__class__ is float: return dtypes.default_float
    if x.__class__ is bool or isinstance(x, InvalidType): return dtypes.bool  # tinygrad's choice for Invalid
    if isinstance(x, int): return _int_for(int(x))  # int and its subclasses but bool (a bound Variable)
    if isinstance(x, (list, tuple)): return max(dtypes.from_py(xi) for xi in x) if x else dtypes.default_float
    raise RuntimeError(f"[from_py] no dtype for {x!r} of type {type(x).__name__}")

  @staticmethod
  def as_const(val, dtype: DType):
    if isinstance(val, float) and math.isnan(val): val = math.nan
    return int(val) if dtypes.is_int(dtype) else float(val) if dtypes.is_float(dtype) else bool(val)

  @staticmethod
  def min(dtype: DType):
    if dtypes.is_int(dtype): return 0 if dtypes.is_unsigned(dtype) else -2**(dtype.bitsize - 1)
    return -math.inf if dtypes.is_float(dtype) else False

  @staticmethod
  def max(dtype: DType):
    if dtypes.is_int(dtype): return 2**dtype.bitsize - 1 + dtypes.min(dtype)
    return math.inf if dtypes.is_float(dtype) else True

  @staticmethod
  def finfo(dtype: DType) -> tuple[int, int]:
    """(exponent bits, mantissa bits) of a float dtype."""
    if not dtypes.is_float(dtype): raise ValueError(f"[finfo] {dtype} is not a floating point type")
    return {dtypes.fp8e4m3: (4, 3), dtypes.fp8e5m2: (5, 2), dtypes.fp8e4m3fnuz: (4, 3), dtypes.fp8e5m2fnuz: (5, 2),
            dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7),
            dtypes.float32: (8, 23), dtypes.float64: (11, 52)}[dtype]

  @staticmethod
  def fields() -> dict[str, DType]: return dict(_FIELDS)

  void = DType(-1, 0, "void", None, "void")  # no value: tinygrad's type of UOps that give none; no tensor holds it
  bool = DType(0, 1, "bool", "?", "bool")
  int8 = DType(1, 8, "signed char", "b", "int8")
  uint8 = DType(2, 8, "unsigned char", "B", "uint8")
  int16 = DType(3, 16, "short", "h", "int16")
  uint16 = DType(4, 16, "unsigned short", "H", "uint16")
  int32 = DType(5, 32, "int", "i", "int32")
  uint32 = DType(6, 32, "unsigned int", "I", "uint32")
  int64 = DType(7, 64, "long", "q", "int64")
  uint64 = DType(8, 64, "unsigned long", "Q", "uint64")
  # 8-bit floats, storage only (computed in float32); numpy has no fp8, numpy() gives float32.
  fp8e4m3 = DType(9, 8, "float8_e4m3", None, "fp8e4m3")
  fp8e5m2 = DType(10, 8, "float8_e5m2", None, "fp8e5m2")
  fp8e4m3fnuz = DType(10, 8, "float8_e4m3fnuz", None, "fp8e4m3fnuz")  # finite only, one zero, NaN 0x80
  fp8e5m2fnuz = DType(10, 8, "float8_e5m2fnuz", None, "fp8e5m2fnuz")
  float16 = DType(11, 16, "half", "e", "float16")
  bfloat16 = DType(12, 16, "__bf16", None, "bfloat16")
  float32 = DType(13, 32, "float", "f", "float32")
  float64 = DType(14, 64, "double", "d", "float64")

  half = float16; float = float32; double = float64  # noqa: E702
  uchar = uint8; ushort = uint16; uint = uint32; ulong = uint64  # noqa: E702
  char = int8; short = int16; int = int32; long = int64  # noqa: E702

  default_float: DType = float32
  default_int: DType = int32

  fp8_ocp = (fp8e4m3, fp8e5m2)
  fp8_fnuz = (fp8e4m3fnuz, fp8e5m2fnuz)
  fp8s = fp8_ocp + fp8_fnuz
  floats = fp8s + (float16, bfloat16, float32, float64)
  uints = (uint8, uint16, uint32, uint64)
  sints = (int8, int16, int32, int64)
  ints = uints + sints
  int8s, int16s, int32s, int64s = (uint8, int8), (uint16, int16), (uint32, int32), (uint64, int64)  # by width, as tinygrad's
  all = floats + ints + (bool,)  # noqa: A003


_FIELDS = {k: v for k, v in vars(dtypes).items() if isinstance(v, DType) and not k.startswith("default")}
# tinygrad.dtype's tables: every dtype by each of its names, and a dtype's name to its first one
DTYPES_DICT = {k: v for k, v in _FIELDS.items() if k != "void"}  # as tinygrad's: void is no value type
INVERSE_DTYPES_DICT = {"void": "void"}
for _k, _v in DTYPES_DICT.items(): INVERSE_DTYPES_DICT.setdefault(_v.name, _k)
_INVERSE = {v.key: k for k, v in _FIELDS.items()}  # the last alias names it, as tinygrad: dtypes.float
_BY_KEY = {d.key: d for d in dtypes.all}

if (_env_float := getenv("DEFAULT_FLOAT", "")):
  dtypes.default_float = getattr(dtypes, _env_float.lower())
  assert dtypes.is_float(dtypes.default_float), f"{_env_float} is not a float dtype"

DTypeLike = Union[str, DType]


class _DefaultDType(ContextVar):
  """DEFAULT_FLOAT and DEFAULT_INT as tinygrad's ContextVars: `Context(DEFAULT_FLOAT=dtypes.float16)` sets
  dtypes.default_float (what Python floats, rand, randn and the nn layers make) for the block."""
  def __init__(self, key: str, attr: str, check):
    self.key, self._attr, self._check, self._default = key, attr, check, getattr(dtypes, attr)
    ContextVar._cache[key] = self

  @property
  def value(self) -> DType: return getattr(dtypes, self._attr)

  @value.setter
  def value(self, v):
    dt = to_dtype(v.lower() if isinstance(v, str) else v)
    if not self._check(dt): raise ValueError(f"[{self.key}] {dt} is not a{'' if self._attr == 'default_int' else ' float'} dtype")
    setattr(dtypes, self._attr, dt)


DEFAULT_FLOAT = _DefaultDType("DEFAULT_FLOAT", "default_float", dtypes.is_float)
DEFAULT_INT = _DefaultDType("DEFAULT_INT", "default_int", dtypes.is_int)


class InvalidType:
  """tinygrad's Invalid, a value that may be anything: Tensor.full(shape, Invalid) is Tensor.empty(shape), and
  cond.where(x, Invalid) is x where cond holds, unspecified elsewhere (baregrad leaves x there)."""
  _instance: InvalidType | None = None

  def __new__(cls):
    if cls._instance is None: cls._instance = super().__new__(cls)
    return cls._instance

  def __repr__(self): return "Invalid"
  def __reduce__(self): return (InvalidType, ())  # unpickles as the one instance


Invalid = InvalidType()


class UnknownDTypeError(TypeError, AttributeError):
  """An unknown dtype (a name or object): a TypeError, and an AttributeError as tinygrad's
  getattr(dtypes, name) raises."""


def to_dtype(dtype: DTypeLike) -> DType:
  """A DType from a DType, a name ("float32", "half", "long") or a numpy/torch-like dtype."""
  if isinstance(dtype, DType): return dtype
  if dtype is None: raise TypeError(f"[to_dtype] dtype None is not a dtype")
  if isinstance(dtype, str):
    if (d := _FIELDS.get(dtype.lower())) is None: raise UnknownDTypeError(f"[to_dtype] unknown dtype {dtype!r}")
    return d
  if dtype is bool: return dtypes.bool
  if dtype is int: return dtypes.default_int
  if dtype is float: return dtypes.default_float
  try:
    return _from_np_dtype(np.dtype(dtype))
  except TypeError: pass
  raise UnknownDTypeError(f"[to_dtype] cannot interpret {dtype!r} as a dtype")


def _key_dtype(key: str) -> DType: return _BY_KEY[key]


# tinygrad's promotion lattice (JAX's, without weak types): edges to the next wider types.
_LATTICE = {
  dtypes.bool: [dtypes.int8, dtypes.uint8], dtypes.int8: [dtypes.int16], dtypes.int16: [dtypes.int32],
  dtypes.int32: [dtypes.int64], dtypes.int64: [dtypes.float16, dtypes.bfloat16],
  dtypes.uint8: [dtypes.int16, dtypes.uint16], dtypes.uint16: [dtypes.int32, dtypes.uint32],
  dtypes.uint32: [dtypes.int64, dtypes.uint64], dtypes.uint64: [dtypes.float16, dtypes.bfloat16],
  dtypes.fp8e4m3: [dtypes.float16, dtypes.bfloat16], dtypes.fp8e5m2: [dtypes.float16, dtypes.bfloat16],
  dtypes.fp8e4m3fnuz: [dtypes.float16, dtypes.bfloat16], dtypes.fp8e5m2fnuz: [dtypes.float16, dtypes.bfloat16],
  dtypes.float16: [dtypes.float32], dtypes.bfloat16: [dtypes.float32], dtypes.float32: [dtypes.float64],
  dtypes.float64: [],
}


@functools.cache
def _parents(dtype: DType) -> frozenset:
  return frozenset({dtype}).union(*[_parents(d) for d in _LATTICE[dtype]])


def _int_for(*xs: int) -> DType:
  """The dtype of Python ints: default_int where all fit it, else int64, else uint64 (numpy's
  choice for 2**63 .. 2**64-1); ValueError where even those cannot hold them all."""
  for dt in (dtypes.default_int, dtypes.int64, dtypes.uint64):
    if all(_fits(x, dt) for x in xs): return dt
  raise ValueError(f"[{op_name()}] integers {min(xs)} .. {max(xs)} do not fit one of int64 or uint64")


def _fits(x, dtype: DType) -> bool:
  """Whether the number `x` is in the range of the int dtype `dtype` (always for other dtypes)."""
  return not dtypes.is_int(dtype) or dtypes.min(dtype) <= x <= dtypes.max(dtype)


@functools.cache
def least_upper_dtype(*ds: DType) -> DType:
  """The narrowest dtype every one of `ds` promotes to."""
  # tinygrad reaches the fp8s from the ints through its weak float: ints and bools with one fp8 give it
  f8 = {d for d in ds if d in dtypes.fp8s}
  if len(f8) == 1 and all(d in f8 or dtypes.is_int(d) or d is dtypes.bool for d in ds): return next(iter(f8))
  return min(frozenset.intersection(*[_parents(d) for d in ds]))


def least_upper_float(dt: DType) -> DType: return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)


def sum_acc_dtype(dt: DType) -> DType:
  """The dtype sum() accumulates `dt` in (tinygrad): ints widen to 32 bits, floats to float32."""
  if dtypes.is_unsigned(dt): return least_upper_dtype(dt, dtypes.uint32)
  if dtypes.is_int(dt) or dt is dtypes.bool: return least_upper_dtype(dt, dtypes.int32)
  return least_upper_dtype(dt, dtypes.float32)


_NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16,
       dtypes.uint16: np.uint16, dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64,
       dtypes.uint64: np.uint64, dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64}
_FROM_NP = {np.dtype(v): k for k, v in _NP.items()}


def _to_np_dtype(dtype: DType):
  """The numpy dtype `Tensor.numpy()` returns for `dtype` (tinygrad's): float32 for bfloat16 and the fp8s, which
  numpy lacks."""
  return np.float32 if dtype in (dtypes.bfloat16, *dtypes.fp8s) else _NP.get(dtype)


def _np_storage(dtype: DType):
  """The numpy dtype holding `dtype`'s values bit for bit; None for bfloat16 and the fp8s, which numpy lacks."""
  return _NP.get(dtype)


def _from_np_dtype(npdtype) -> DType:
  npdtype = np.dtype(npdtype)
  if (d := _FROM_NP.get(npdtype.newbyteorder("=") if npdtype.byteorder not in "=|" else npdtype)) is None:
    raise TypeError(f"[{op_name()}] numpy dtype {npdtype} is not supported")
  return d


# ---- scalar conversions, as tinygrad.dtype's ----------------------------------------------------

def strong_dtype(dtype: DType) -> DType:
  """tinygrad maps its weak dtypes to the defaults here; baregrad has none, so every dtype is
  its own strong dtype."""
  return dtype


def float_to_fp8(x: float, dtype: DType) -> int:
  """The fp8 code (0..255) of `x` rounded once to nearest even in `dtype`, as Tensor.cast
  rounds (and torch's float8 types: past the largest finite value, e4m3 gives NaN)."""
  if dtype not in dtypes.fp8s: raise TypeError(f"[float_to_fp8] {dtype} is not an fp8 dtype")
  import _baregrad as _C
  return _C.fp8_encode(dtype.key, float(x))


def fp8_to_float(x: int, dtype: DType) -> float:
  """The value of fp8 code `x` (0..255) in `dtype`."""
  if dtype not in dtypes.fp8s: raise TypeError(f"[fp8_to_float] {dtype} is not an fp8 dtype")
  import _baregrad as _C
  return _C.fp8_decode(dtype.key, int(x))


def _round_bf16(x: float) -> float:
  f = np.array([x], np.float32)
  if not np.isfinite(f[0]): return float(f[0])
  b = int(f.view(np.uint32)[0])
  b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000  # round to nearest even
  return float(np.array([b], np.uint32).view(np.float32)[0])


def _wrap(dtype: DType):
  """int(x) wrapped to `dtype`'s width (two's complement for the signed ones)."""
  bits, signed = dtype.itemsize * 8, not dtypes.is_unsigned(dtype)
  def f(x):
    v = int(x) % (1 << bits)
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v
  return f


# A Python value as `dtype` stores it: floats rounded (float32 and below), ints wrapped.
truncate: dict = {dtypes.bool: bool, dtypes.float16: lambda x: float(np.float16(x)), dtypes.bfloat16: _round_bf16,
                  dtypes.float32: lambda x: float(np.float32(x)), dtypes.float64: float,
                  **{d: (lambda x, d=d: fp8_to_float(float_to_fp8(x, d), d)) for d in dtypes.fp8s},
                  **{d: _wrap(d) for d in (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
                                                dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)}}


def _to_torch_dtype(dtype: DType):
  """The torch dtype of `dtype` (uint8 for the fp8s' codes); None when torch has none."""
  import torch
  if dtype == dtypes.uint64: return getattr(torch, "uint64", None)
  if dtype == dtypes.bfloat16: return torch.bfloat16
  if dtype in dtypes.fp8s: return torch.uint8
  np_type = _NP.get(dtype)
  if np_type is None: return None
  try: return torch.from_numpy(np.array([], dtype=np_type)).dtype
  except TypeError: return None  # uint16/uint32 before torch 2.3


def _from_torch_dtype(torchdtype) -> DType:
  for d in DTYPES_DICT.values():
    if d not in dtypes.fp8s and _to_torch_dtype(d) == torchdtype: return d
  raise TypeError(f"[{op_name()}] torch dtype {torchdtype} has no baregrad dtype")
