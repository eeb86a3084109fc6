"""TinyJit: capture a step function's kernels on its second call and replay them afterwards.

The capture and replay are the C++ TinyJit (tensor/jit.h): the Tensor arguments are the inputs
(realized and bound by position; keyword tensors in sorted order), everything else the function
reads (parameters, optimizer state) is bound by address and must change through assign().
Non-Tensor arguments and return values are those of the last eager call.
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

import _baregrad as _C
from baregrad.helpers import op_name
from baregrad.tensor import Tensor


class JitError(Exception):
  pass


class TinyJit:
  def __init__(self, fxn: Callable | None = None, captured=None, prune: bool = False, optimize: bool = False):
    if fxn is None and captured is None: raise ValueError(f"[{op_name()}] need either a function or a CapturedJit")
    self.fxn = fxn
    self._structure: Any = None  # the return value of the last eager call, tensors as slots
    self._call_args: tuple = ((), {}, [])
    ref = weakref.ref(self)
    self._jit = _C.TinyJit(lambda cs: ref()._run(cs))
    if fxn is not None: functools.update_wrapper(self, fxn)

  def __get__(self, obj, objtype=None):
    """As a method decorator: bind the instance as the first argument."""
    return self if obj is None else functools.partial(self.__call__, obj)

  @property
  def cnt(self) -> int: return self._jit.calls
  @property
  def captured(self) -> bool: return self._jit.captured
  @property
  def kernel_count(self) -> int: return self._jit.kernel_count

  def reset(self):
    self._jit.reset()
    self._structure = None

  def _run(self, cs: list) -> list:
    """The eager call: the tensor arguments replaced by the realized inputs C++ passes."""
    args, kwargs, slots = self._call_args
    args, kwargs = list(args), dict(kwargs)
    for (where, key), c in zip(slots, cs):
      t = Tensor._wrap(c)
      if where == "arg": args[key] = t
      else: kwargs[key] = t
    ret = self.fxn(*args, **kwargs)
    outs: list = []
    def flat(x):
      if isinstance(x, Tensor):
        outs.append(x._c)
        return _Slot(len(outs) - 1)
      if isinstance(x, (list, tuple)): return type(x)(flat(i) for i in x)
      if isinstance(x, dict): return {k: flat(v) for k, v in x.items()}
      return x
    self._structure = flat(ret)
    return outs

  def __call__(self, *args, **kwargs):
    slots = [("arg", i) for i, a in enumerate(args) if isinstance(a, Tensor)]
    slots += [("kw", k) for k in sorted(kwargs) if isinstance(kwargs[k], Tensor)]
    inputs = [(args[k] if w == "arg" else kwargs[k])._c for w, k in slots]
    self._call_args = (args, kwargs, slots)
    try:
      outs = self._jit(inputs)
    finally:
      self._call_args = ((), {}, [])
    def fill(x):
      if isinstance(x, _Slot): return Tensor._wrap(outs[x.i])
      if isinstance(x, (list, tuple)): return type(x)(fill(i) for i in x)
      if isinstance(x, dict): return {k: fill(v) for k, v in x.items()}
      return x
    return fill(self._structure)


class _Slot:
  __slots__ = ("i",)
  def __init__(self, i: int): self.i = i
