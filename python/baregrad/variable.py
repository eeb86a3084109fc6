"""Variable: tinygrad's named integer with bounds, for sizes that change from call to call.

  vi = Variable("i", 1, 10).bind(4)
  a[:, :vi]                  # a view of 4 columns
  jf(a[:, :vi])              # TinyJit: one capture per value of i

baregrad has no symbolic shapes yet. A bound Variable is an int (its value) that also carries
its name and bounds: it is accepted wherever an int is (sizes, slices, pads, scalars in
arithmetic) and the shapes it makes are concrete. Kernels are therefore compiled per value,
and TinyJit keeps one capture per binding of the Variables it sees (python/README.md,
"Variable"). An unbound Variable used as an int is a TypeError naming it.
"""
from __future__ import annotations

from typing import Any

from baregrad.helpers import op_name, unbound_variable


# Set by the first Variable made: until then the movement ops skip looking for Variables.
in_use = False


class VariableRangeError(ValueError, AssertionError):
  """bind() of a value outside the bounds (tinygrad asserts: an AssertionError)."""


def _check_int(what: str, v) -> int:
  if isinstance(v, bool) or not isinstance(v, int):
    raise TypeError(f"[Variable] {what} must be an int, got {type(v).__name__} {v!r}")
  return int(v)


class Variable:
  """A named int in [vmin, vmax] (inclusive). Bind it to a value before using it as a size."""
  __slots__ = ("expr", "vmin", "vmax", "multiple_of")

  def __init__(self, name: str, min_val: int, max_val: int, dtype: Any = None, multiple_of: int = 1):
    global in_use
    in_use = True
    if not isinstance(name, str) or not name: raise TypeError(f"[Variable] the name must be a non-empty str, got {name!r}")
    self.expr, self.vmin, self.vmax = name, _check_int("min_val", min_val), _check_int("max_val", max_val)
    self.multiple_of = _check_int("multiple_of", multiple_of)
    if self.vmin > self.vmax: raise ValueError(f"[Variable] {name!r}: min_val {self.vmin} > max_val {self.vmax}")
    if self.multiple_of < 1: raise ValueError(f"[Variable] {name!r}: multiple_of={self.multiple_of} must be >= 1")
    del dtype  # tinygrad's index dtype: sizes are int64 here

  def bind(self, val: int) -> BoundVariable:
    """This Variable with the value `val` (checked against the bounds)."""
    val = _check_int(f"the value bound to {self.expr!r}", val)
    if not self.vmin <= val <= self.vmax:
      raise VariableRangeError(f"[bind] bind {val} not in range [{self.vmin}, {self.vmax}] of Variable {self.expr!r}")
    if val % self.multiple_of: raise VariableRangeError(f"[bind] bind {val} not divisible by {self.multiple_of} (Variable {self.expr!r})")
    return BoundVariable(self, val)

  def _unbound(self, *_):
    raise TypeError(f"[{op_name()}] {unbound_variable(self.expr)}")
  __index__ = __int__ = __float__ = _unbound  # type: ignore[assignment]

  def _key(self): return (self.expr, self.vmin, self.vmax, self.multiple_of)
  def __eq__(self, other): return isinstance(other, Variable) and self._key() == other._key()
  def __hash__(self): return hash(("Variable",) + self._key())
  def __repr__(self): return f"Variable({self.expr!r}, {self.vmin}, {self.vmax})"
  def __reduce__(self): return (Variable, (self.expr, self.vmin, self.vmax, None, self.multiple_of))


class BoundVariable(int):
  """A Variable bound to a value: the int itself, with `.unbind()`, `.expr`, `.vmin`, `.vmax`.
  Arithmetic on it gives plain ints."""
  # (int subclasses cannot have __slots__: `var` lives in the instance dict)

  def __new__(cls, var: Variable, val: int):
    obj = super().__new__(cls, val)
    obj.var = var
    return obj

  def unbind(self) -> tuple[Variable, int]: return self.var, int(self)
  @property
  def val(self) -> int: return int(self)
  @property
  def expr(self) -> str: return self.var.expr
  @property
  def vmin(self) -> int: return self.var.vmin
  @property
  def vmax(self) -> int: return self.var.vmax
  def __repr__(self): return f"{self.var!r}.bind({int(self)})"
  def __reduce__(self): return (BoundVariable, (self.var, int(self)))


def _bindings_in(x, found: dict | None = None) -> dict:
  """{name: value} of the bound Variables in `x` (nested lists, tuples, dicts and slices); an
  unbound Variable there is a TypeError naming it."""
  if found is None: found = {}
  if isinstance(x, Variable): x._unbound()
  if type(x) is BoundVariable: _merge_bindings(found, {x.expr: int(x)})
  elif isinstance(x, (list, tuple)):
    for i in x: _bindings_in(i, found)
  elif isinstance(x, dict):
    for i in x.values(): _bindings_in(i, found)
  elif isinstance(x, slice):
    for i in (x.start, x.stop, x.step): _bindings_in(i, found)
  return found


def _op_bindings(x) -> dict | None:
  """_bindings_in(x) for a movement op's arguments; None until the first Variable is made (then no
  argument or tensor can hold one, and the ops skip the search)."""
  return _bindings_in(x) if in_use else None


def _merge_bindings(into: dict, new: dict, error: type[Exception] = ValueError) -> dict:
  """`new` added to `into`, in place; a name bound to two values raises `error` naming the op."""
  for k, v in new.items():
    if into.setdefault(k, v) != v: raise error(f"[{op_name()}] Variable {k!r} is bound to both {into[k]} and {v}")
  return into
