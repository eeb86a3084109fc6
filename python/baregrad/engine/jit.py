"""TinyJit: capture a step function's kernels on its second call and replay them afterwards.

The capture and replay are the C++ TinyJit (tensor/jit.h): the Tensor arguments are the inputs
(realized and bound by position; keyword tensors in sorted order), everything else the function
reads (parameters, optimizer state) is bound by address and must change through assign().
Non-Tensor arguments and return values are those of the last eager call.

Bound Variables (baregrad/variable.py) in the arguments, and those that made a Tensor argument
(`a[:, :vi]`), are the call's binding. The first call is eager and the second is captured. When
nothing in the call used the Variables' values on the host (`arange(vi)`, `float(vi)`, a shape with
no symbolic form) -- its kernels take them at launch (symbolic shapes) or not at all (an input
sliced at `vi` is realized before the capture) -- the capture may be shared: the first call where a Variable has another value is captured again, and
if both captures launch the same programs (a constant computed from a value, `x * float(vi)`,
makes other programs), every later value replays it, with outputs of the new sizes. Otherwise
(`jit.shared` is False; `jit.why_not_shared` says why) the capture serves its own values and
other values get captures of their own, made as the first one was, so a replay never uses
another value's kernels. The last MAX_BINDINGS captures are kept.
"""
from __future__ import annotations

import functools
import gc
import weakref
from typing import Any, Callable

import _baregrad as _C
from baregrad.engine.realize import _KernelAST
from baregrad.helpers import JIT, op_name
from baregrad.multi import MultiC
from baregrad.tensor import Tensor
from baregrad.uop.ops import Ops
from baregrad.variable import _bindings_in, _merge_bindings


def graph_class(dev):
  """The graph a TinyJit replay on `dev` (a Device[d] object) submits as: HCQGraph or CUDAGraph (tinygrad's
  graph_class; every baregrad device makes graphs)."""
  return dev.graph


class JitError(RuntimeError):
  """tinygrad's JitError (inputs unlike the captured ones); a RuntimeError, as baregrad's errors
  from the C++ TinyJit are."""


class TinyJit:
  MAX_BINDINGS = 16  # captures kept, one per binding of the Variables in the arguments

  def __init__(self, fxn: Callable | None = None, captured=None, prune: bool = False, optimize: bool = False):
    if fxn is None and captured is None: raise ValueError(f"[{op_name()}] need either a function or a CapturedJit")
    self.fxn, self.prune = fxn, bool(prune)
    self._call_args: tuple = ((), {}, [], [])
    self._captures: dict[tuple, _Capture] = {}  # binding -> its capture, oldest first
    self._cur = self._capture_for(())
    if fxn is not None: functools.update_wrapper(self, fxn)

  def __get__(self, obj, objtype=None):
    """As a method decorator: bind the instance as the first argument."""
    return self if obj is None else functools.partial(self.__call__, obj)

  def _capture_for(self, binding: tuple) -> _Capture:
    cap = self._captures.pop(binding, None)
    if cap is None:
      ref = weakref.ref(self)
      cap = _Capture(_C.TinyJit(lambda cs: ref()._run(cs), prune=self.prune))
    self._captures[binding] = cap  # most recently used last
    while len(self._captures) > self.MAX_BINDINGS: del self._captures[next(iter(self._captures))]
    return cap

  # Of the capture the last call used.
  @property
  def cnt(self) -> int: return self._cur.jit.calls
  @property
  def captured(self) -> CapturedJit | None:
    """The capture the last call used (None before the second call): `captured.linear.src` has one entry per kernel
    launch of a replay, in order (tinygrad's CapturedJit)."""
    return CapturedJit(self._cur.jit) if self._cur.jit.captured else None
  @property
  def kernel_count(self) -> int: return self._cur.jit.kernel_count

  def reset(self):
    self._captures.clear()
    self._cur = self._capture_for(())

  def _run(self, cs: list) -> list:
    """The eager call: the tensor arguments replaced by the realized inputs C++ passes."""
    args, kwargs, slots, layout = self._call_args
    cs, at = list(cs), 0  # a multi-device input came as its shards: regroup them
    for k, lay in enumerate(layout):
      if lay is None: cs[k], at = cs[at], at + 1
      else: cs[k], at = MultiC(cs[at:at + lay[0]], lay[1]), at + lay[0]
    cs = cs[:len(layout)]
    args, kwargs = list(args), dict(kwargs)
    copies: dict = {}  # containers holding inputs, copied: the caller's stay as they were
    for (where, key, sub), c in zip(slots, cs):
      box, t = (args if where == "arg" else kwargs), Tensor._wrap(c)
      if sub is None: box[key] = t
      else: copies.setdefault((where, key), dict(box[key]) if isinstance(box[key], dict) else list(box[key]))[sub] = t
    for (where, key), x in copies.items():
      box = args if where == "arg" else kwargs
      orig = box[key]
      box[key] = x if isinstance(orig, (list, dict)) else type(orig)(*x) if hasattr(orig, "_fields") else type(orig)(x)
    ret = self.fxn(*args, **kwargs)
    outs: list = []
    capturing = _C.jit_capturing()
    def flat(x):
      if isinstance(x, Tensor):
        if isinstance(x._c, MultiC):  # a multi-device output: its shards
          outs.extend(x._c.shards)
          return _Slot(len(outs) - len(x._c.shards), len(x._c.shards), x._c.axis)
        outs.append(x._c)
        return _Slot(len(outs) - 1)
      if isinstance(x, (list, tuple)): return type(x)(flat(i) for i in x)
      if isinstance(x, dict): return {k: flat(v) for k, v in x.items()}
      if capturing and x is not None:  # a replay would return this value, whatever the inputs
        raise JitError(f"JIT return contains non-Tensor value of type {type(x).__name__}")
      return x
    self._cur.structure = flat(ret)
    # flat is recursive, so its closure cell refers back to it: that cycle (which holds `outs`, and so the returned
    # tensors' lazy graphs) would live until the next gc, and the capture, which plans memory right after this
    # returns, would see every intermediate as still in use and give each its own memory instead of sharing.
    flat = None  # noqa: F841
    return outs

  # Whether the capture the last call used serves every value of its Variables.
  @property
  def shared(self) -> bool: return self._cur.jit.shared
  @property
  def why_not_shared(self) -> str: return self._cur.jit.why_not_shared

  def __call__(self, *args, **kwargs):
    if not JIT: return self.fxn(*args, **kwargs)  # JIT=0: every call runs eagerly, as tinygrad's
    # The inputs: tensor arguments, then (as tinygrad) tensors directly inside a list, tuple or
    # dict argument, each slot (where, key, key in the container or None).
    slots = [("arg", i, None) for i, a in enumerate(args) if isinstance(a, Tensor)]
    slots += [("kw", k, None) for k in sorted(kwargs) if isinstance(kwargs[k], Tensor)]
    for where, key, x in [("arg", i, a) for i, a in enumerate(args)] + [("kw", k, kwargs[k]) for k in sorted(kwargs)]:
      items = enumerate(x) if isinstance(x, (list, tuple)) else x.items() if isinstance(x, dict) else ()
      slots += [(where, key, j) for j, t in items if isinstance(t, Tensor)]
    def at(where, key, sub):
      x = args[key] if where == "arg" else kwargs[key]
      return x if sub is None else x[sub]
    tensors = [at(*s) for s in slots]
    layout = [(len(t._c.shards), t._c.axis) if isinstance(t._c, MultiC) else None for t in tensors]
    inputs = [s for t in tensors for s in (t._c.shards if isinstance(t._c, MultiC) else [t._c])]
    found = _bindings_in((args, kwargs))
    for t in tensors: _merge_bindings(found, getattr(t, "_bound", None) or {}, JitError)
    binding = tuple(sorted(found.items()))
    # The first capture of these Variables is keyed by their names: shared, it serves every value;
    # if not, only the values it was captured with, and other values get captures of their own.
    names = ("vars",) + tuple(sorted(found)) if found else ()
    first = self._captures.get(names)
    if first is None or not first.jit.captured or first.jit.may_share or first.jit.captured_vals == found: key = names
    else: key = binding
    self._cur = self._capture_for(key)
    jit = self._cur.jit
    if jit.calls == 1 or (jit.captured and jit.may_share and not jit.shared and jit.captured_vals != found):
      # This call captures: graphs of earlier calls that only a reference cycle keeps alive must
      # not be realized inside it (assign() realizes the lazy readers of what it overwrites).
      gc.collect()
    self._call_args = (args, kwargs, slots, layout)
    try:
      outs = self._cur.jit(inputs, found)
    except RuntimeError as e:  # the JIT's own errors (inputs unlike the captured ones, ...)
      if str(e).startswith("[jit] ") and not isinstance(e, JitError): raise JitError(str(e)) from None
      raise
    finally:
      self._call_args = ((), {}, [], [])
    def fill(x):
      if isinstance(x, _Slot): return Tensor._wrap(outs[x.i] if x.n is None else MultiC(outs[x.i:x.i + x.n], x.axis))
      if isinstance(x, (list, tuple)): return type(x)(fill(i) for i in x)
      if isinstance(x, dict): return {k: fill(v) for k, v in x.items()}
      return x
    return fill(self._cur.structure)


class _JitKernel:
  """One kernel launch of a capture, in tinygrad's LINEAR shape: `src[0].op is Ops.SINK`; `name` and `device` are
  the kernel's."""
  __slots__ = ("src", "name", "device")
  op = Ops.CALL
  def __init__(self, name: str, device: str): self.src, self.name, self.device = (_KernelAST(),), name, device
  def __repr__(self): return f"<kernel {self.name} on {self.device}>"


class CapturedJit:
  """What a TinyJit captured: `linear.src` lists the kernel launches one replay runs, `kernel_count` counts them,
  `uses_graph` says whether a replay is one device graph submission."""

  def __init__(self, jit):
    self._jit = jit
    self.linear = _JitLinear(tuple(_JitKernel(n, d) for n, d in jit.kernels()))

  @property
  def kernel_count(self) -> int: return self._jit.kernel_count
  @property
  def uses_graph(self) -> bool: return self._jit.uses_graph
  @property
  def intermediate_bytes(self) -> int:
    """Bytes of the step's private intermediate buffers (baregrad's; tensor/jit.h)."""
    return self._jit.intermediate_bytes
  @property
  def planned_bytes(self) -> int:
    """What those take once buffers that are never alive together share memory."""
    return self._jit.planned_bytes
  def free_intermediates(self):
    """Releases the memory of the capture's private intermediate buffers (waiting for a replay in flight); the next
    call allocates it again. Inputs, outputs, parameters and state the step assigns are kept."""
    self._jit.free_intermediates()
  def __repr__(self): return f"<CapturedJit of {len(self.linear.src)} kernels>"


class _JitLinear:
  __slots__ = ("src",)
  op = Ops.LINEAR
  def __init__(self, src: tuple): self.src = src
  def __len__(self): return len(self.src)


class _Capture:
  """One C++ TinyJit and the return value of its last eager call, tensors as slots."""
  __slots__ = ("jit", "structure")
  def __init__(self, jit): self.jit, self.structure = jit, None


class _Slot:
  __slots__ = ("i", "n", "axis")
  def __init__(self, i: int, n: int | None = None, axis: int | None = None): self.i, self.n, self.axis = i, n, axis
