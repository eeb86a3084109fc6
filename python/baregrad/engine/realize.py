"""Schedules: the kernels that realize some tensors, made without running them (tinygrad's `schedule_linear`,
`linear_with_vars`, `run_linear`, `compile_linear`, `lower_and_compile`).

  linear, var_vals = Tensor.linear_with_vars(a, b)   # or a.schedule_linear(b) when no Variables are bound
  len(linear.src)                                    # how many kernels realizing a and b takes
  compile_linear(linear)                             # compiles them (the device caches the programs)
  estimate_uop(linear.src[0]).ops                    # a kernel's estimated operations (and .mem, bytes)
  run_linear(linear, var_vals)                       # runs them: a and b are realized

`linear.src` has one call per kernel in tinygrad's LINEAR shape: `call.src[0].op is Ops.SINK` (the kernel's AST
root), `call.device`, and baregrad's `call.shape`/`call.dtype` (the output) and `call.inputs` (buffers read). A
schedule runs once; realizing its tensors another way first makes its kernels compute them again.
"""
from __future__ import annotations

import _baregrad as _C
from baregrad.uop.ops import Ops


class _KernelAST:
  __slots__ = ("op",)
  def __init__(self): self.op = Ops.SINK
  def __repr__(self): return "SINK"


class ScheduledCall:
  """One kernel of a schedule."""
  __slots__ = ("src", "device", "shape", "dtype", "inputs", "var_vals", "_at")
  op = Ops.CALL

  def __init__(self, at: tuple, device: str, shape: tuple, dtype: str, inputs: int, var_vals: dict):
    self.src, self.device, self.shape, self.dtype, self.inputs, self.var_vals = (_KernelAST(),), device, shape, dtype, inputs, var_vals
    self._at = at  # (the schedule, this kernel's index)

  def __repr__(self): return f"<kernel on {self.device}: {self.inputs} inputs -> {self.shape} {self.dtype}>"


class Linear:
  """The kernels of a schedule, in order (`src`); see the module's doc."""
  op = Ops.LINEAR

  def __init__(self, sched):
    self._sched = sched
    self.src = tuple(ScheduledCall((sched, i), *k) for i, k in enumerate(sched.kernels()))
    self.var_vals: dict[str, int] = {}
    for call in self.src: self.var_vals.update(call.var_vals)

  def __len__(self): return len(self.src)
  def __repr__(self): return f"<schedule of {len(self.src)} kernels>"


def run_linear(linear: Linear, var_vals: dict | None = None, update_stats: bool = True) -> None:
  """Runs the schedule's kernels (once): its tensors are realized. `var_vals` must be the schedule's own (the
  values its Variables were bound to when it was made)."""
  if not isinstance(linear, Linear): raise TypeError(f"[run_linear] expected a schedule (Linear), got {type(linear).__name__}")
  if var_vals and {k: int(v) for k, v in var_vals.items()} != linear.var_vals:
    raise ValueError(f"[run_linear] var_vals {dict(var_vals)} differ from the schedule's {linear.var_vals}: bind the Variables "
                     "to those values and schedule again")
  linear._sched.run()


class Estimates:
  """A kernel's estimated work: `ops` (arithmetic operations over all its threads) and `mem` (bytes it loads and
  stores), what GlobalCounters.global_ops / global_mem add when it runs (tinygrad's Estimates; lds is 0)."""
  __slots__ = ("ops", "mem", "lds")

  def __init__(self, ops: int, mem: int): self.ops, self.mem, self.lds = ops, mem, 0
  def __repr__(self): return f"Estimates(ops={self.ops}, mem={self.mem})"


def estimate_uop(call: ScheduledCall) -> Estimates:
  """The estimates of one kernel of a schedule (it is compiled for them); before the schedule runs."""
  if not isinstance(call, ScheduledCall): raise TypeError(f"[estimate_uop] expected a kernel of a schedule (linear.src[i]), got {type(call).__name__}")
  sched, i = call._at
  ops, mem = sched.estimate(i)
  return Estimates(int(ops), int(mem))


def compile_linear(linear: Linear) -> Linear:
  """Compiles the schedule's kernels without running them (the device's program cache keeps them)."""
  if not isinstance(linear, Linear): raise TypeError(f"[compile_linear] expected a schedule (Linear), got {type(linear).__name__}")
  linear._sched.compile()
  return linear


def lower_and_compile(linear: Linear) -> Linear:
  """tinygrad's lowering of a schedule's kernels to programs: here the same as compile_linear."""
  if not isinstance(linear, Linear): raise TypeError(f"[lower_and_compile] expected a schedule (Linear), got {type(linear).__name__}")
  return compile_linear(linear)


class _BeamRule:
  """tinygrad's pm_beam, the rule that sets BEAM on a schedule's kernels. baregrad searches when BEAM is set in the
  environment or a Context as the kernels compile; this object only stands for the rule (graph_rewrite with it raises)."""
  def __repr__(self): return "pm_beam"


pm_beam = _BeamRule()


def schedule(*tensors) -> Linear:
  """The schedule realizing `tensors` (baregrad Tensors), not run."""
  from baregrad.multi import MultiC
  cs = [s for t in tensors for s in (t._c.shards if isinstance(t._c, MultiC) else [t._c])]  # every device's part
  return Linear(_C.schedule(cs))
