"""tinygrad's `function` decorator: `@function` or `@function(precompile=True)` on a function or method
returning a Tensor or a tuple of Tensors.

tinygrad traces the call into one graph node (a CALL of the function body, with its tensor inputs as
parameters) so the body is scheduled and, with precompile=, compiled as a unit. baregrad has no such node:
its `function` is a pass-through that runs the body eagerly and returns its tensors, so values and
gradients are those of the undecorated function and nothing extra is realized. What it checks as tinygrad
does: the return type (RuntimeError otherwise). What it does not: implicit inputs (tinygrad's
allow_implicit=False refuses realized tensors the body reads that are not reachable from its arguments)
and device use inside the body. A custom gradient (grad_fxn=) is a NotImplementedError, since running the
body eagerly would silently give the ordinary gradient instead.
"""
from __future__ import annotations

import functools
import time
from typing import Callable, Generic, TypeVar

from baregrad.helpers import DEBUG
from baregrad.tensor import Tensor

ReturnType = TypeVar("ReturnType")


class _function(Generic[ReturnType]):  # noqa: N801 (tinygrad's name)
  """A function wrapped by @function; calling it runs the function (see the module docstring)."""
  depth = 0

  def __init__(self, fxn: Callable[..., ReturnType], *, precompile: bool, precompile_backward: bool,
               allow_implicit: bool, grad_fxn: Callable | None):
    if not callable(fxn): raise TypeError(f"[function] needs a callable, got {type(fxn).__name__}")
    if grad_fxn is not None:
      raise NotImplementedError("[function] grad_fxn= (a custom gradient) is not supported: baregrad runs the "
                                "function eagerly and would differentiate its body instead")
    self.fxn, self.precompile, self.precompile_backward = fxn, precompile, precompile_backward
    self.allow_implicit, self.grad_fxn = allow_implicit, grad_fxn
    functools.update_wrapper(self, fxn)

  def __get__(self, obj, objtype=None):
    """As a method decorator: bind the instance as the first argument."""
    return self if obj is None else functools.partial(self.__call__, obj)

  def __call__(self, *args, **kwargs) -> ReturnType:
    st = time.perf_counter()
    _function.depth += 1
    try:
      ret = self.fxn(*args, **kwargs)
    finally:
      _function.depth -= 1
    if not (isinstance(ret, Tensor) or (isinstance(ret, tuple) and all(isinstance(x, Tensor) for x in ret))):
      name = getattr(self.fxn, "__qualname__", type(self.fxn).__qualname__)
      raise RuntimeError(f"[function] {name} returned {type(ret).__name__}: a function returns a Tensor or a tuple "
                         "of Tensors")
    if DEBUG >= 2:
      name = getattr(self.fxn, "__qualname__", type(self.fxn).__qualname__)
      print("  " * _function.depth + f"function in {(time.perf_counter() - st) * 1000:8.2f} ms: {name}")
    return ret


def function(fxn=None, *, precompile: bool = False, precompile_backward: bool = False, allow_implicit: bool = False,
             grad_fxn: Callable | None = None):
  """@function or @function(precompile=..., ...): run as one unit in tinygrad; a pass-through in baregrad."""
  def wrap(f):
    return _function(f, precompile=precompile, precompile_backward=precompile_backward,
                     allow_implicit=allow_implicit, grad_fxn=grad_fxn)
  return wrap if fxn is None else wrap(fxn)
