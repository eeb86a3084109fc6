"""tinygrad's helpers: getenv, Context, GlobalCounters and small sequence utilities."""
from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import time
from typing import Any, Iterable, TypeVar

T = TypeVar("T")


@functools.cache
def getenv(key: str, default: Any = 0):
  """The environment variable `key` converted to the type of `default` (read once, as tinygrad).
  A value that does not convert is a ValueError naming the variable: "DEBUG=abc: must be an int"."""
  raw = os.getenv(key, default)
  try:
    return type(default)(raw)
  except (TypeError, ValueError):
    raise ValueError(f"[getenv] {key}={raw}: must be {'an' if type(default) is int else 'a'} {type(default).__name__}") from None


def op_name() -> str:
  """The op an error raised in a private helper names: the nearest caller on the stack that is
  not a private helper. __init__ and __call__ give their class ("Linear"), other dunders their
  name ("getitem"), methods their name ("sum")."""
  f = sys._getframe(1)
  while f is not None:
    name = f.f_code.co_name
    if name in ("__init__", "__call__", "__new__"):
      obj = f.f_locals.get("self", f.f_locals.get("cls"))
      if obj is not None: return obj.__name__ if isinstance(obj, type) else type(obj).__name__
    if name.startswith("__") and name.endswith("__") and len(name) > 4: return name.strip("_")
    if not name.startswith(("_", "<")): return name
    f = f.f_back
  return "baregrad"


def check_int64(op: str, args) -> None:
  """ValueError naming `op` for a Python int in `args` (nested lists and tuples too) that does
  not fit int64: the C++ core takes int64 sizes, and the binding's own error names no op."""
  for a in args:
    if isinstance(a, (list, tuple)): check_int64(op, a)
    elif isinstance(a, int) and not isinstance(a, bool) and not -2**63 <= a < 2**63:
      raise ValueError(f"[{op}] {a} does not fit int64")


def prod(x: Iterable) -> Any: return math.prod(x)
def dedup(x: Iterable[T]) -> list[T]: return list(dict.fromkeys(x))
def flatten(x: Iterable) -> list: return [item for sub in x for item in sub]
def all_int(t) -> bool: return all(isinstance(s, int) for s in t)
def ceildiv(num: int, amt: int) -> int: return -(num // -amt)
def round_up(num: int, amt: int) -> int: return (num + amt - 1) // amt * amt


def argfix(*x):
  """(2, 3), ((2, 3),) and ([2, 3],) all mean the shape (2, 3)."""
  if x and x[0].__class__ in (tuple, list):
    if len(x) != 1: raise ValueError(f"[argfix] bad arg {x}")
    return tuple(x[0])
  return x


def make_tuple(x, cnt: int) -> tuple:
  return (x,) * cnt if isinstance(x, int) else tuple(x)


def fully_flatten(lst):
  if hasattr(lst, "__len__") and hasattr(lst, "__getitem__") and not isinstance(lst, str):
    return [x for item in lst for x in fully_flatten(item)]
  return [lst]


def _c():
  import _baregrad
  return _baregrad


class ContextVar:
  """A setting Context can change; baregrad's own options (DEBUG, THREADS, ...) live in C++."""
  _cache: dict[str, ContextVar] = {}

  def __init__(self, key: str, default_value):
    self.key, self._default = key, default_value
    self._local = getenv(key, default_value)
    ContextVar._cache[key] = self

  @property
  def value(self):
    if self.key in _native_options(): return type(self._default)(_c().option_value(self.key) or self._default)
    return self._local

  @value.setter
  def value(self, v):
    if self.key in _native_options(): _c().set_option(self.key, str(int(v)) if isinstance(v, bool) else str(v))
    else: self._local = v

  def __bool__(self): return bool(self.value)
  def __int__(self): return int(self.value)
  def __eq__(self, x): return self.value == x
  def __ge__(self, x): return self.value >= x
  def __gt__(self, x): return self.value > x
  def __le__(self, x): return self.value <= x
  def __lt__(self, x): return self.value < x
  def __hash__(self): return hash(self.key)


@functools.cache
def _native_options() -> frozenset: return frozenset(_c().option_names())


DEBUG, BEAM, NOOPT = ContextVar("DEBUG", 0), ContextVar("BEAM", 0), ContextVar("NOOPT", 0)


class Context(contextlib.ContextDecorator):
  """Sets options for a `with` block (or a decorated function): Context(DEBUG=2)."""
  def __init__(self, **kwargs): self.kwargs = kwargs

  def __enter__(self):
    self.old_context: dict[str, Any] = {}
    for k, v in self.kwargs.items():
      var = ContextVar._cache.get(k) or ContextVar(k, 0)
      self.old_context[k] = var.value
      var.value = v

  def __exit__(self, *args):
    for k, v in self.old_context.items(): ContextVar._cache[k].value = v


class _GlobalCountersMeta(type):
  """Class attributes that read the C++ counters, so GlobalCounters.kernel_count is live."""
  @property
  def kernel_count(cls) -> int: return _c().counters()["kernel_count"]
  @property
  def global_ops(cls) -> int: return _c().counters()["global_ops"]
  @property
  def global_mem(cls) -> int: return _c().counters()["global_mem"]
  @property
  def mem_used(cls) -> int: return _c().counters()["mem_used"]
  @property
  def time_sum_s(cls) -> float: return 0.0


class GlobalCounters(metaclass=_GlobalCountersMeta):
  """Kernels launched, their estimated FLOPs and bytes, and the device memory tensors hold.
  time_sum_s is always 0: launches are asynchronous and not timed one by one."""
  @staticmethod
  def reset(): _c().reset_counters()


class Timing(contextlib.ContextDecorator):
  def __init__(self, prefix="", on_exit=None, enabled=True): self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self): self.st = time.perf_counter_ns()
  def __exit__(self, *exc):
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et*1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))
