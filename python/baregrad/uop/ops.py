"""`tinygrad.uop.ops` for programs written against tinygrad, where UOp is the IR node of every tensor. baregrad's IR
lives in C++ (compiler/uop.h) and is not exposed as Python objects. What is here:

  - `UOp.variable(name, min_val, max_val)`: a symbolic value (baregrad's Variable), bound with `.bind(v)`;
    `isinstance(x, UOp)` / `int | UOp` annotations are true for Variables, bound Variables and their expressions;
  - `sym_infer(size, var_vals)`, a symbolic size's value for given Variable values;
  - `Ops`, the op names of baregrad's IR (compiler/ops.def; DEBUG=4 prints kernels in them): many are tinygrad's
    (ADD, WHERE, LOAD, STORE, REDUCE_AXIS, SINK, ...), tinygrad's others are absent (an AttributeError naming them);
    and the schedule's LINEAR (a schedule or a TinyJit capture), CALL (one kernel of it) and CUSTOM_FUNCTION
    (tinygrad's graph batch; never produced);
    `GroupOp.Unary/Binary/Ternary/ALU` (and the IR's other groups: Meta, Memory, Control, Kernel, Vector), sets of them;
  - `KernelInfo` and `ProgramInfo`, so that a module importing them loads: custom kernels written as UOp graphs
    (tinygrad's Tensor.custom_kernel) are not supported, and making either raises NotImplementedError saying so.

Anything else (UOp.const, graph rewrites, ...) is absent: an AttributeError or ImportError naming it.
"""
from __future__ import annotations

import abc
import enum

import _baregrad as _C
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

_IR_OPS = _C.ir_ops()
# The schedule-level ops of tinygrad that baregrad's Python schedule objects (engine/realize.py, TinyJit.captured) are
# shaped as: a LINEAR's src are CALLs, each with the kernel's SINK as src[0]. CUSTOM_FUNCTION (tinygrad's graph or
# HCQ batch wrapped as a call) is never produced: a baregrad linear lists every kernel itself. BUFFER, CONTIGUOUS and
# COPY are what Tensor.uop (uop/graph.py) calls a realized node, an unrealized .contiguous() and .to(another device).
_SCHEDULE_OPS = ("LINEAR", "CALL", "CUSTOM_FUNCTION", "BUFFER", "CONTIGUOUS", "COPY")
Ops = enum.Enum("Ops", [name for name, _ in _IR_OPS] + list(_SCHEDULE_OPS))
Ops.__doc__ = "The ops of baregrad's IR (compiler/ops.def), named as DEBUG=4 prints them, and the schedule's LINEAR/CALL."


class GroupOp:
  """The IR's op groups (compiler/uop.h OpGroup) as sets of Ops; ALU is Unary | Binary | Ternary, as tinygrad's."""
  Unary = Binary = Ternary = Meta = Memory = Control = Kernel = Vector = ALU = frozenset()


for _group in {g for _, g in _IR_OPS}: setattr(GroupOp, _group, frozenset(Ops[n] for n, g in _IR_OPS if g == _group))
GroupOp.ALU = GroupOp.Unary | GroupOp.Binary | GroupOp.Ternary


class _CustomKernelInfo:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError(f"[{type(self).__name__}] custom kernels written as UOp graphs (tinygrad's Tensor.custom_kernel) "
                              "are not supported: baregrad's IR is C++ (compiler/), not Python UOps")


class KernelInfo(_CustomKernelInfo):
  """tinygrad's metadata of a custom kernel; constructing one raises NotImplementedError."""


class ProgramInfo(_CustomKernelInfo):
  """tinygrad's metadata of a compiled custom program; constructing one raises NotImplementedError."""
