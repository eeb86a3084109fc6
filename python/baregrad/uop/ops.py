"""`tinygrad.uop.ops` for programs written against tinygrad, where UOp is the IR node of every tensor. baregrad's IR
lives in C++ (compiler/uop.h) and is not exposed as Python objects. What is here:

  - `UOp.allreduce(t.uop, Ops.ADD, t.device)`: each shard of a sharded tensor summed (or MAX, MUL) over all of them;
  - `UOp.variable(name, min_val, max_val)`: a symbolic value (baregrad's Variable), bound with `.bind(v)`;
    `isinstance(x, UOp)` / `int | UOp` annotations are true for Variables, bound Variables and their expressions;
  - `sym_infer(size, var_vals)`, a symbolic size's value for given Variable values;
  - `Ops`, the op names of baregrad's IR (compiler/ops.def; DEBUG=4 prints kernels in them): many are tinygrad's
    (ADD, WHERE, LOAD, STORE, REDUCE_AXIS, SINK, ...), tinygrad's others are absent (an AttributeError naming them);
    and the schedule's LINEAR (a schedule or a TinyJit capture), CALL (one kernel of it) and CUSTOM_FUNCTION
    (tinygrad's graph batch; never produced);
    `GroupOp.Unary/Binary/Ternary/ALU` (and the IR's other groups: Meta, Memory, Control, Kernel, Vector), sets of them;
  - `AxisType`, the kinds of loop axis tinygrad's kernels have (DEVICE, GLOBAL, LOCAL, REDUCE, UPCAST, ...), by name;
  - `KernelInfo` and `ProgramInfo`, so that a module importing them loads: custom kernels written as UOp graphs
    (tinygrad's Tensor.custom_kernel) are not supported, and making either raises NotImplementedError saying so;
  - `PatternMatcher`, `UPat` and `graph_rewrite`, likewise: rewriting Python UOp graphs is not supported, and
    making a matcher or pattern, or calling graph_rewrite, raises NotImplementedError saying so.

Anything else (UOp.const, UOp.range, ...) is absent: an AttributeError or ImportError naming it.
"""
from __future__ import annotations

import abc
import enum

import _baregrad as _C
from baregrad.variable import SymInt, Variable, sym_infer  # noqa: F401 (sym_infer: tinygrad has it here)


class UOp(abc.ABC):
  """The symbolic values tinygrad programs make with UOp.variable; not constructible."""

  def __new__(cls, *args, **kwargs):
    raise TypeError("[UOp] baregrad has no Python UOp graph (its IR is C++): only UOp.variable(name, min, max) and UOp.const(value, dtype) exist")

  @staticmethod
  def variable(name: str, min_val: int, max_val: int, dtype=None) -> Variable:
    """A Variable named `name` in [min_val, max_val] (tinygrad's UOp.variable)."""
    return Variable(name, min_val, max_val, dtype)


  @staticmethod
  def const(value, dtype=None):
    """A deviceless constant (baregrad/uop/graph.py ConstUOp): `Tensor(UOp.const(2.0).cast(dtypes.float))`."""
    from baregrad.uop.graph import ConstUOp
    return ConstUOp.make(value, dtype)

  @staticmethod
  def allreduce(src, op: Ops, device) -> UOp:
    """tinygrad's allreduce of a sharded tensor's uop (`t.uop`): every shard becomes the combination (op: Ops.ADD,
    MAX, MUL) of all of them, still sharded along the same axis; `Tensor(result)` is the tensor. `device` must be
    src's devices."""
    from baregrad.uop.graph import MultiUOp
    if not isinstance(src, MultiUOp): raise TypeError(f"[allreduce] expected the uop of a sharded tensor, got {type(src).__name__}")
    if tuple(device) != tuple(src.device): raise ValueError(f"[allreduce] device {device} differs from the tensor's {src.device}")
    names = {Ops.ADD: "add", Ops.MAX: "maximum", Ops.MUL: "mul"}
    if op not in names: raise ValueError(f"[allreduce] op must be Ops.ADD, Ops.MAX or Ops.MUL, got {op}")
    return MultiUOp(src._c.allreduce(names[op]))


UOp.register(Variable)
UOp.register(SymInt)  # bound Variables and expressions of them

_IR_OPS = _C.ir_ops()
# The schedule-level ops of tinygrad that baregrad's Python schedule objects (engine/realize.py, TinyJit.captured) are
# shaped as: a LINEAR's src are CALLs, each with the kernel's SINK as src[0]. CUSTOM_FUNCTION (tinygrad's graph or
# HCQ batch wrapped as a call) is never produced: a baregrad linear lists every kernel itself. BUFFER, CONTIGUOUS and
# COPY are what Tensor.uop (uop/graph.py) calls a realized node, an unrealized .contiguous() and .to(another device).
_SCHEDULE_OPS = ("LINEAR", "CALL", "CUSTOM_FUNCTION", "BUFFER", "CONTIGUOUS", "COPY", "AFTER")
Ops = enum.Enum("Ops", [name for name, _ in _IR_OPS] + list(_SCHEDULE_OPS))
Ops.__doc__ = "The ops of baregrad's IR (compiler/ops.def), named as DEBUG=4 prints them, and the schedule's LINEAR/CALL."


class GroupOp:
  """The IR's op groups (compiler/uop.h OpGroup) as sets of Ops; ALU is Unary | Binary | Ternary, as tinygrad's."""
  Unary = Binary = Ternary = Meta = Memory = Control = Kernel = Vector = ALU = frozenset()


for _group in {g for _, g in _IR_OPS}: setattr(GroupOp, _group, frozenset(Ops[n] for n, g in _IR_OPS if g == _group))
GroupOp.ALU = GroupOp.Unary | GroupOp.Binary | GroupOp.Ternary


class AxisType(enum.Enum):
  """tinygrad's kinds of kernel loop axis. baregrad's kernels carry theirs in C++ (DEBUG=4 prints them); this enum
  gives programs that name one the same members."""
  def __repr__(self): return str(self)
  DEVICE = enum.auto(); GLOBAL = enum.auto(); WARP = enum.auto(); LOCAL = enum.auto(); WEAK = enum.auto()  # noqa: E702
  GROUP_REDUCE = enum.auto(); REDUCE = enum.auto(); UPCAST = enum.auto(); UNROLL = enum.auto(); THREAD = enum.auto()  # noqa: E702
  PLACEHOLDER = enum.auto(); LOOP = enum.auto()  # noqa: E702


class _Unsupported:
  """A tinygrad class baregrad names but cannot make: constructing one raises NotImplementedError with `_why`."""
  _why = ""

  def __init__(self, *args, **kwargs): raise NotImplementedError(f"[{type(self).__name__}] {self._why}")


_CUSTOM_KERNELS = ("custom kernels written as UOp graphs (tinygrad's Tensor.custom_kernel) are not supported: baregrad's "
                   "IR is C++ (compiler/), not Python UOps")
_REWRITES = "rewriting UOp graphs in Python is not supported: baregrad's IR and its rewrite rules are C++ (compiler/pattern.h)"


class KernelInfo(_Unsupported):
  """tinygrad's metadata of a custom kernel; constructing one raises NotImplementedError."""
  _why = _CUSTOM_KERNELS


class ProgramInfo(_Unsupported):
  """tinygrad's metadata of a compiled custom program; constructing one raises NotImplementedError."""
  _why = _CUSTOM_KERNELS


class PatternMatcher(_Unsupported):
  """tinygrad's rewrite-rule table; constructing one raises NotImplementedError."""
  _why = _REWRITES


class UPat(_Unsupported):
  """tinygrad's UOp pattern; constructing one raises NotImplementedError."""
  _why = _REWRITES

  @classmethod
  def cvar(cls, *args, **kwargs): return cls(*args, **kwargs)
  @classmethod
  def var(cls, *args, **kwargs): return cls(*args, **kwargs)


def deconstruct_function(fxn) -> tuple:
  """What rebuilds a plain function with `types.FunctionType(*parts)`: (its code, the globals its code names, at any
  depth of nested code, its name, its defaults); tinygrad pickles pattern-matcher functions this way. A function
  with a closure raises AssertionError (its cells can't be rebuilt from these)."""
  import types

  def names(co) -> set: return set(co.co_names).union(*(names(c) for c in co.co_consts if isinstance(c, types.CodeType)))
  assert fxn.__closure__ is None, f"[deconstruct_function] {fxn.__name__} has a closure: closures are not supported"
  used = names(fxn.__code__)
  return fxn.__code__, {k: v for k, v in fxn.__globals__.items() if k in used}, fxn.__name__, fxn.__defaults__


def graph_rewrite(sink, pm, ctx=None, **kwargs):
  """tinygrad's rewrite of a UOp graph by a PatternMatcher: raises NotImplementedError (see PatternMatcher)."""
  raise NotImplementedError(f"[graph_rewrite] {_REWRITES}")
