"""Variable: tinygrad's named integer with bounds, for sizes that change from call to call.

  vi = Variable("i", 1, 10).bind(4)
  a[:, :vi]                  # a view of 4 columns whose shape is (3, i)
  (a[:, :vi] * 2).sum(1)     # kernels compiled once for every value of i
  jf(a[:, :vi])              # TinyJit: one capture serves every value of i

A bound Variable is an int (its value) that is also a symbolic size: a SymInt, whose `.sym` is
a polynomial over Variables (_baregrad.Sym). Arithmetic with +, - and * keeps it symbolic
(`vi + 1`, `2 * vi`); anything else gives a plain int. Shapes made from SymInts (shrink, pad,
expand, slicing, `full`) are symbolic: `Tensor.shape` holds SymInts there, and the kernels computing
them take the values at launch, so each is compiled once for every value (python/README.md,
"Variable"). An unbound Variable used as an int is a TypeError naming it.
"""
from __future__ import annotations

from typing import Any

import _baregrad as _C
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


class SymInt(int):
  """An int that is also a size over bound Variables: `int(x)` is its current value, `x.sym` the
  polynomial (a _baregrad.Sym) and `x.vals` the values of its Variables. +, - and * with ints or
  SymInts stay symbolic; every other operation sees a plain int."""
  # (int subclasses cannot have __slots__: the fields live in the instance dict)

  def __new__(cls, val: int, sym, vals: dict):
    obj = super().__new__(cls, val)
    obj.sym, obj.vals = sym, vals
    return obj

  def _combine(self, other, fn, reverse: bool = False):
    if isinstance(other, bool) or not isinstance(other, int): return NotImplemented
    o_sym = other.sym if isinstance(other, SymInt) else _C.Sym(int(other))
    vals = _merge_bindings(dict(self.vals), other.vals) if isinstance(other, SymInt) else self.vals
    a, b = (o_sym, self.sym) if reverse else (self.sym, o_sym)
    x, y = (int(other), int(self)) if reverse else (int(self), int(other))
    return make_sym(fn(x, y), fn(a, b), vals)

  def __add__(self, o): return self._combine(o, lambda a, b: a + b)
  def __radd__(self, o): return self._combine(o, lambda a, b: a + b, True)
  def __sub__(self, o): return self._combine(o, lambda a, b: a - b)
  def __rsub__(self, o): return self._combine(o, lambda a, b: a - b, True)
  def __mul__(self, o): return self._combine(o, lambda a, b: a * b)
  def __rmul__(self, o): return self._combine(o, lambda a, b: a * b, True)
  def __neg__(self): return make_sym(-int(self), -self.sym, self.vals)
  def sym_infer(self, var_vals: dict) -> int:
    """The value at `var_vals` ({name: int}; its own values for names not given)."""
    return self.sym.eval({**self.vals, **{str(k.expr if isinstance(k, Variable) else k): int(v) for k, v in var_vals.items()}})
  def __pos__(self): return self
  def __hash__(self): return int.__hash__(self)
  def __repr__(self): return f"{self.sym}(={int(self)})"
  def __reduce__(self): return (int, (int(self),))  # pickles as its value


def make_sym(val: int, sym, vals: dict):
  """A SymInt of `sym` valued `val`; a plain int when `sym` holds no Variable."""
  if sym.is_const(): return int(val)
  return SymInt(val, sym, vals)


class BoundVariable(SymInt):
  """A Variable bound to a value: the int itself, with `.unbind()`, `.expr`, `.vmin`, `.vmax`."""

  def __new__(cls, var: Variable, val: int):
    obj = SymInt.__new__(cls, val, _C.Sym.var(var.expr, var.vmin, var.vmax), {var.expr: val})
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


def sym_infer(x, var_vals: dict) -> int:
  """tinygrad's sym_infer: a size (int or SymInt) at the values `var_vals` ({name: int})."""
  return x.sym_infer(var_vals) if isinstance(x, SymInt) else int(x)


def is_symbolic(x) -> bool:
  """True for an int holding a Variable."""
  return isinstance(x, SymInt)


def sym_of(x):
  """The _baregrad.Sym of an int or SymInt."""
  return x.sym if isinstance(x, SymInt) else _C.Sym(int(x))


def vals_of(*xs) -> dict:
  """The merged Variable values of the SymInts in `xs` (nested lists and tuples)."""
  out: dict = {}
  def walk(x):
    if isinstance(x, SymInt): _merge_bindings(out, x.vals)
    elif isinstance(x, (list, tuple)):
      for i in x: walk(i)
  walk(xs)
  return out


def note_value_use(op: str, *xs) -> None:
  """Records that `op` used a SymInt in `xs` for its value (a scalar, or a size it cannot keep
  symbolic): a TinyJit capture doing so serves only the values it was made with."""
  if in_use and (vals := vals_of(*xs)):
    _C.jit_specialize(f"[{op}] used the value of Variable " + ", ".join(f"'{k}'" for k in vals))


def _bindings_in(x, found: dict | None = None) -> dict:
  """{name: value} of the bound Variables in `x` (nested lists, tuples, dicts and slices); an
  unbound Variable there is a TypeError naming it."""
  if found is None: found = {}
  if isinstance(x, Variable): x._unbound()
  if isinstance(x, SymInt): _merge_bindings(found, x.vals)
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
