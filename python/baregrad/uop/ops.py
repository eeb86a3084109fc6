"""`UOp` for programs written against tinygrad, where it is the IR node of every tensor. baregrad's IR lives in C++
(compiler/) and is not exposed as Python objects; what tinygrad programs (not its internals) use of UOp is:

  - `UOp.variable(name, min_val, max_val)`: a symbolic value (baregrad's Variable), bound with `.bind(v)`;
  - `isinstance(x, UOp)` / `int | UOp` annotations: true for Variables, bound Variables and their expressions;
  - `sym_infer(size, var_vals)`, a symbolic size's value for given Variable values.

Anything else (UOp.const, Ops, graph rewrites, ...) is absent: an AttributeError or ImportError naming it.
"""
from __future__ import annotations

import abc

from baregrad.variable import SymInt, Variable, sym_infer  # noqa: F401 (sym_infer: tinygrad has it here)


class UOp(abc.ABC):
  """The symbolic values tinygrad programs make with UOp.variable; not constructible."""

  def __new__(cls, *args, **kwargs):
    raise TypeError("[UOp] baregrad has no Python UOp graph (its IR is C++): only UOp.variable(name, min, max) exists")

  @staticmethod
  def variable(name: str, min_val: int, max_val: int, dtype=None) -> Variable:
    """A Variable named `name` in [min_val, max_val] (tinygrad's UOp.variable)."""
    return Variable(name, min_val, max_val, dtype)


UOp.register(Variable)
UOp.register(SymInt)  # bound Variables and expressions of them
