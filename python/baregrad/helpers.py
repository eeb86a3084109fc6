"""tinygrad's helpers: getenv, Context, GlobalCounters, Timing, tqdm, fetch and small utilities."""
from __future__ import annotations

import contextlib
import copyreg
import dataclasses
import ctypes
import functools
import gc
import getpass
import gzip
import hashlib
import importlib
import itertools
import marshal
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
import types
from typing import Any, Callable, Generic, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")

# Code objects and modules pickle, as tinygrad's helpers make them: a code object as its marshal bytes (unpickled by
# the same Python version only), a module as its name (imported again). Functions' parts pickle this way
# (uop.ops.deconstruct_function).
copyreg.pickle(types.CodeType, lambda code: (marshal.loads, (marshal.dumps(code),)))
copyreg.pickle(types.ModuleType, lambda module: (importlib.import_module, (module.__name__,)))
OSX, WIN = sys.platform == "darwin", sys.platform == "win32"
CI = os.getenv("CI", "") != ""


@functools.cache
def getenv(key: str, default: Any = 0):
  """The environment variable `key` converted to the type of `default` (read once, as tinygrad).
  A value that does not convert is a ValueError naming the variable: "DEBUG=abc: must be an int"."""
  raw = os.getenv(key, default)
  try:
    return type(default)(raw)
  except (TypeError, ValueError):
    raise ValueError(f"[getenv] {key}={raw}: must be {'an' if type(default) is int else 'a'} {type(default).__name__}") from None


# Errors of two kinds at once (as numpy's AxisError is a ValueError and an IndexError), so code catching either
# catches them. Their class names are their baregrad kind: they print, and are caught, as that kind.
DTypeError = type("TypeError", (TypeError, RuntimeError), {"__module__": __name__, "__doc__":
  "A dtype an op does not take: baregrad's TypeError, also the RuntimeError torch and tinygrad raise."})
ShapeError = type("ValueError", (ValueError, RuntimeError), {"__module__": __name__, "__doc__":
  "Shapes an op cannot combine: baregrad's ValueError, also the RuntimeError torch and tinygrad raise."})
SymbolicDimError = type("ValueError", (ValueError, RuntimeError, AssertionError), {"__module__": __name__, "__doc__":
  "An op that needs a dim's size fixed, given a symbolic one: a ValueError, also the AssertionError tinygrad raises."})


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


def unbound_variable(name: str) -> str:
  return f"Variable {name!r} is unbound: use Variable(...).bind(value) where a size or int is needed"


def check_int64(op: str, args) -> None:
  """ValueError naming `op` for a Python int in `args` (nested lists and tuples too) that does
  not fit int64: the C++ core takes int64 sizes, and the binding's own error names no op; a
  TypeError for an unbound Variable."""
  for a in args:
    if isinstance(a, (list, tuple)): check_int64(op, a)
    elif isinstance(a, int):
      if not isinstance(a, bool) and not -2**63 <= a < 2**63: raise ValueError(f"[{op}] {a} does not fit int64")
    elif hasattr(a, "_unbound"): raise TypeError(f"[{op}] {unbound_variable(a.expr)}")  # baregrad/variable.py


def prod(x: Iterable) -> Any:
  """The product of the items (1 for none); works for any type with `*`, as tinygrad's."""
  return functools.reduce(lambda a, b: a * b, x, 1)
def polyN(x: T, p: list[float]) -> T:
  """p[0] * x**(n-1) + ... + p[-1] by Horner's rule (x a number or a Tensor)."""
  return functools.reduce(lambda acc, c: acc * x + c, p, 0.0)  # type: ignore


class disable_gc(contextlib.ContextDecorator):  # noqa: N801 (tinygrad's name)
  """Turns Python's garbage collector off inside (a decorator or a `with`); nesting and
  recursion restore it only when the outermost use ends."""
  def __init__(self): self._was: list[bool] = []
  def __enter__(self):
    self._was.append(gc.isenabled())
    gc.disable()
  def __exit__(self, *exc):
    if self._was.pop(): gc.enable()
    return False


def dedup(x: Iterable[T]) -> list[T]:
  """The items without repeats, in first-seen order."""
  return list(dict.fromkeys(x))
def flatten(x: Iterable) -> list:
  """One level of nesting removed: [[1, 2], [3]] -> [1, 2, 3]."""
  return [item for sub in x for item in sub]
def get_single_element(x: Sequence[T]) -> T:
  """The one item of `x`; an AssertionError naming the count otherwise (tinygrad's)."""
  assert len(x) == 1, f"[get_single_element] expected one element, got {len(x)}"
  return x[0]
def get_child(obj, key: str):
  """The object a dotted path names under `obj`: "layers.0.attn" is obj.layers[0].attn (dict keys and list indices
  too), as state_dict keys name parameters; the path's first missing part raises KeyError/AttributeError/IndexError."""
  for k in key.split("."):
    if k.isnumeric(): obj = obj[int(k)]
    elif isinstance(obj, dict): obj = obj[k]
    else: obj = getattr(obj, k)
  return obj
def all_same(items: Sequence) -> bool:
  """True when every item equals the first (and for an empty sequence)."""
  return all(x == items[0] for x in items)
def all_int(t) -> bool:
  """True when every item is a Python int."""
  return all(isinstance(s, int) for s in t)
def argsort(x):
  """The indices that sort `x`, in the container type of `x` (list or tuple)."""
  return type(x)(sorted(range(len(x)), key=x.__getitem__))
def ceildiv(num, amt):
  """num / amt rounded up; an int for int or float operands (tinygrad's)."""
  ret = -(num // -amt)
  return int(ret) if isinstance(ret, float) else ret
def round_up(num: int, amt: int) -> int:
  """The smallest multiple of amt that is >= num."""
  return (num + amt - 1) // amt * amt
def partition(itr: Iterable[T], fxn: Callable[[T], bool]) -> tuple[list[T], list[T]]:
  """(the items for which fxn is true, the others), each in order."""
  yes: list[T] = []
  no: list[T] = []
  for x in itr: (yes if fxn(x) else no).append(x)
  return yes, no
def unwrap(x: T | None) -> T:
  """x, asserting it is not None (an AssertionError as tinygrad's)."""
  assert x is not None, "[unwrap] the value is None"
  return x
def temp(x: str, append_user: bool = False) -> str:
  """A path named x in the system temp dir (x.<user> with append_user), as a posix string."""
  return (pathlib.Path(tempfile.gettempdir()) / (f"{x}.{getpass.getuser()}" if append_user else x)).as_posix()
def to_mv(ptr: int, sz: int) -> memoryview:
  """A writable byte memoryview of `sz` bytes at address `ptr` (no copy: it aliases that memory)."""
  return memoryview((ctypes.c_uint8 * sz).from_address(ptr)).cast("B")


def mv_address(mv) -> int:
  """The address of a writable buffer's first byte (a memoryview, bytearray or numpy array)."""
  return ctypes.addressof(ctypes.c_char.from_buffer(mv))


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
    if self.key in _native_options():
      raw = _c().option_value(self.key)
      return int(raw or self._default) if isinstance(self._default, int) else raw
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

  def tolist(self, obj=None) -> list:
    """The comma-separated value as a list; with `obj`, each name looked up on it
    (`EMULATED_DTYPES.tolist(dtypes)`)."""
    names = [x.strip() for x in str(self.value).split(",") if x.strip()]
    return [getattr(obj, x) for x in names] if obj is not None else names


@functools.cache
def _native_options() -> frozenset: return frozenset(_c().option_names())


@dataclasses.dataclass(frozen=True)
class Target:
  """A device string's parts, as tinygrad's Target: `[interface[:indices]+]device[:renderer[:arch]]`
  ("MOCK+NV", "NV:PTX:sm_90", "PCI:0,1+AMD"); device and renderer are upper-cased, arch kept."""
  device: str = ""
  renderer: str = ""
  arch: str = ""
  interface: str = ""
  indices: str = ""

  @staticmethod
  def parse(s: str) -> Target:
    head, plus, rest = s.partition("+")
    if not plus: head, rest = "", s
    if "+" in rest: raise RuntimeError(f"[Target] too many '+' in target string: {s!r}")
    iface, _, indices = head.rpartition(":") if ":" in head else (head, "", "")
    parts = rest.split(":")
    if len(parts) > 3: raise RuntimeError(f"[Target] too many ':' in target string: {s!r}")
    dev, ren, arch = (parts + ["", ""])[:3]
    return Target(dev.upper(), ren.upper(), arch, iface, indices)

  def __repr__(self) -> str:
    head = ":".join(x for x in (self.interface, self.indices) if x)
    body = ":".join([self.device, self.renderer, self.arch]).rstrip(":")
    return (head + "+" if head else "") + body

  def replacedefault(self, **kwargs) -> Target:
    """This target with the fields given that it leaves empty set."""
    return dataclasses.replace(self, **{k: v for k, v in kwargs.items() if not getattr(self, k)})


class _DevVar(ContextVar):
  """DEV: the default device's name, a string ("", "CPU", "MOCK+NV:1"); its parts as tinygrad's
  Target names them: [interface+]device[:renderer], e.g. "MOCK+NV" has interface MOCK, device NV."""
  def _parts(self) -> tuple[str, str, str]:
    iface, _, rest = str(self.value).rpartition("+")
    dev, _, ren = rest.partition(":")
    return iface.upper(), dev.upper(), ("" if ren.isdigit() else ren.upper())
  @property
  def interface(self) -> str: return self._parts()[0]
  @property
  def device(self) -> str: return self._parts()[1]
  @property
  def renderer(self) -> str: return self._parts()[2]
  def __repr__(self): return str(self.value)


class _TrainingVar(ContextVar):
  """TRAINING: tinygrad's Context(TRAINING=1); it reads and sets Tensor.training, which dropout,
  BatchNorm and attention dropout read (tinygrad 0.12's switch)."""
  @property
  def value(self) -> int:
    from baregrad.tensor import Tensor
    return int(Tensor.training)
  @value.setter
  def value(self, v):
    from baregrad.tensor import Tensor
    Tensor.training = bool(v)


class _CapturingVar(ContextVar):
  """CAPTURING: 0 stops a running TinyJit capture from recording the kernels that run (tinygrad's
  Context(CAPTURING=0)): they run on the capturing call only, and replays read what they wrote."""
  def __init__(self, key: str, default_value):
    super().__init__(key, default_value)
    if not self._local: self.value = 0  # CAPTURING=0 in the environment
  @property
  def value(self) -> int: return int(self._local)
  @value.setter
  def value(self, v):
    self._local = int(v)
    _c().set_jit_capturing(bool(self._local))


DEBUG, BEAM, NOOPT = ContextVar("DEBUG", 0), ContextVar("BEAM", 0), ContextVar("NOOPT", 0)
DEV, TRAINING, NO_COLOR = _DevVar("DEV", ""), _TrainingVar("TRAINING", 0), ContextVar("NO_COLOR", 0)
# tinygrad's image-dtype switches: read by tinygrad programs; baregrad has no image dtypes, so setting them changes nothing
IMAGE, FLOAT16 = ContextVar("IMAGE", 0), ContextVar("FLOAT16", 0)
# JIT=0: TinyJit calls its function every time, capturing nothing (as tinygrad).
JIT = ContextVar("JIT", 1)
CAPTURING = _CapturingVar("CAPTURING", 1)
# tinygrad switches for code paths baregrad does not have, read by tinygrad programs and tests;
# setting them changes no result: EMULATED_DTYPES (dtypes tinygrad's renderers emulate; every
# baregrad CPU target computes each dtype natively), CHECK_OOB (tinygrad's optional check that
# no index leaves its buffer; baregrad always builds a kernel whose views could read past a
# buffer for the current sizes instead), WINO (winograd convolutions).
EMULATED_DTYPES, CHECK_OOB, WINO = ContextVar("EMULATED_DTYPES", ""), ContextVar("CHECK_OOB", 0), ContextVar("WINO", 0)


def _option_default(key: str):
  """The default of a ContextVar made on first use: "" for a native option holding a string
  (CPU_CC, PTXAS), else 0."""
  if key in _native_options() and not _c().option_value(key).isdigit(): return ""
  return 0


class Context(contextlib.ContextDecorator):
  """Sets options for a `with` block (or a decorated function): Context(DEBUG=2)."""
  def __init__(self, **kwargs): self.kwargs = kwargs

  def __enter__(self):
    self.old_context: dict[str, Any] = {}
    for k, v in self.kwargs.items():
      var = ContextVar._cache[k] if k in ContextVar._cache else ContextVar(k, _option_default(k))  # a var is falsy at 0
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
  """Prints "<prefix>  1.23 ms" (plus on_exit(elapsed_ns)) on stdout when the block ends; .et is the time in ns."""
  def __init__(self, prefix="", on_exit=None, enabled=True): self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self): self.st = time.perf_counter_ns()
  def __exit__(self, *exc):
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et*1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))


class Profiling(contextlib.ContextDecorator):
  """cProfile over a block: prints the top `frac` of functions by `sort` (times in ms / ts) and, with fn=,
  saves the stats there (pstats format)."""
  def __init__(self, enabled=True, sort="cumtime", frac=0.2, fn=None, ts=1):
    self.enabled, self.sort, self.frac, self.fn, self.time_scale = enabled, sort, frac, fn, 1e3 / ts

  def __enter__(self):
    import cProfile
    self.pr = cProfile.Profile()
    if self.enabled: self.pr.enable()

  def __exit__(self, *exc):
    if not self.enabled: return
    self.pr.disable()
    if self.fn: self.pr.dump_stats(self.fn)
    import pstats
    stats = pstats.Stats(self.pr).strip_dirs().sort_stats(self.sort)
    rows = stats.fcn_list  # type: ignore[attr-defined]  # sorted by sort_stats
    for fcn in rows[:int(len(rows) * self.frac)]:
      _, ncalls, tottime, cumtime, callers = stats.stats[fcn]  # type: ignore[attr-defined]
      where = f"{fcn[0]}:{fcn[1]}:{fcn[2]}"
      top = max(callers.items(), key=lambda c: c[1][2], default=None)  # the caller that spent the most time in it
      share = 100 * top[1][2] / tottime if top and tottime else 0
      caller = colored(f"<- {share:3.0f}% {top[0][0]}:{top[0][1]}:{top[0][2]}", "BLACK") if top else ""
      print(f"n:{ncalls:8d}  tm:{tottime * self.time_scale:7.2f}ms  tot:{cumtime * self.time_scale:7.2f}ms",
            colored(where.ljust(50), "yellow"), caller)


_COLORS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")


def colored(st, color: str | None, background=False):
  """st in an ANSI color ("red"; upper case "RED" is the bright variant); as is when color is None or NO_COLOR."""
  if color is None or NO_COLOR: return st
  if color.lower() not in _COLORS: raise ValueError(f"[colored] unknown color {color!r}: one of {', '.join(_COLORS)}")
  code = 30 + _COLORS.index(color.lower()) + (60 if color.isupper() else 0) + (10 if background else 0)
  return f"\x1b[{code}m{st}\x1b[0m"


def ansistrip(s: str) -> str:
  """s without ANSI escape sequences."""
  return re.sub(r"\x1b\[(K|.*?m)", "", s)


def ansilen(s: str) -> int:
  """The printed length of s: its length without ANSI escape sequences."""
  return len(ansistrip(s))


# *** tqdm: a dependency-free progress bar on stderr, with tinygrad's (and tqdm's) common interface

def _hms(t: float) -> str:
  """Seconds as "MM:SS" or "H:MM:SS"."""
  h, m, sec = int(t) // 3600, int(t) % 3600 // 60, int(t) % 60
  return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def _si(x: float) -> str:
  """x with 3 significant digits and an SI prefix: 1234 -> "1.23k", 15 -> "15.0", 0 -> "0.00"."""
  for p in " kMGTPEZ":
    if abs(x) < 999.5: return f"{x:#.3g}".rstrip(".") + p.strip()
    x /= 1000
  return f"{x:#.3g}".rstrip(".") + "Y"


class tqdm(Generic[T]):  # noqa: N801 (tinygrad's name)
  """A progress bar on stderr: `for x in tqdm(it, desc=...)`, or `with tqdm(total=n) as t: t.update(k)`.
  disable=True prints nothing; disable=None prints only when stderr is a terminal."""
  def __init__(self, iterable: Iterable[T] | None = None, desc: str = "", disable: bool | None = False, unit: str = "it",
               unit_scale=False, total: int | None = None, rate: int = 100):
    self.disable = (not sys.stderr.isatty()) if disable is None else bool(disable)
    self.iterable, self.unit, self.unit_scale, self.rate = iterable, unit, unit_scale, rate
    if total is None: total = len(iterable) if hasattr(iterable, "__len__") else 0  # type: ignore[arg-type]
    self.t, self.n, self.i, self.skip, self.st = total, 0, -1, 1, time.perf_counter()
    self.set_description(desc)
    self.update(0)

  def __iter__(self) -> Iterator[T]:
    if self.iterable is None: raise TypeError("[tqdm] needs an iterable to iterate; use update() with total=")
    for x in self.iterable:
      yield x
      self.update(1)
    self.update(close=True)

  def __enter__(self): return self
  def __exit__(self, *exc): self.update(close=True)

  def set_description(self, desc: str):
    """The text shown before the bar ("desc: ")."""
    self.desc = f"{desc}: " if desc else ""

  def close(self):
    """Prints the final bar and a newline."""
    self.update(close=True)

  def update(self, n: int = 0, close: bool = False):
    """Adds n to the count and redraws (at most about `rate` times a second); close ends the line."""
    self.n, self.i = self.n + n, self.i + 1
    if self.disable or (not close and self.i % self.skip != 0): return
    elapsed = time.perf_counter() - self.st
    if elapsed and self.i and self.i / elapsed > self.rate: self.skip = max(int(self.i / elapsed) // self.rate, 1)
    num = _si if self.unit_scale else str
    count = f"{num(self.n)}/{num(self.t)}" if self.t else f"{num(self.n)}{self.unit}"
    eta = (f"<{_hms(elapsed * (self.t - self.n) / self.n)}" if self.n else "<?") if self.t else ""
    speed = "?" if not self.n or not elapsed else num(self.n / elapsed) if self.unit_scale else f"{self.n / elapsed:5.2f}"
    suffix = f"{count} [{_hms(elapsed)}{eta}, {speed}{self.unit}/s]"
    bar = ""
    if self.t:
      frac = min(self.n / self.t, 1.0)
      width = max(shutil.get_terminal_size().columns - ansilen(self.desc) - len(suffix) - 9, 1)
      filled = int(width * frac)
      bar = f"{100 * frac:3.0f}%|{('█' * filled).ljust(width)}| "
    print(f"\r{self.desc}{bar}{suffix}", end="\n" if close else "", file=sys.stderr, flush=True)

  @classmethod
  def write(cls, s: str):
    """Prints s on its own line of stderr, clearing the bar's line."""
    print(f"\r\x1b[K{s}", file=sys.stderr, flush=True)


def trange(n: int, **kwargs) -> tqdm[int]:
  """tqdm(range(n), total=n, ...)."""
  return tqdm(range(n), total=n, **kwargs)


# *** fetch: files by URL, from tinygrad's download cache; baregrad has no network access

def _ensure_downloads_dir() -> pathlib.Path:
  """tinygrad's download cache, so files placed for tinygrad are found: $XDG_CACHE_HOME (or ~/.cache,
  ~/Library/Caches on macOS)/tinygrad/downloads; /raid/downloads on a tinybox."""
  if pathlib.Path("/etc/tinybox-release").is_file(): return pathlib.Path("/raid/downloads")
  base = os.getenv("XDG_CACHE_HOME") or os.path.expanduser("~/Library/Caches" if OSX else "~/.cache")
  return pathlib.Path(base) / "tinygrad" / "downloads"


def fetch(url: str, name: pathlib.Path | str | None = None, subdir: str | None = None, gunzip: bool = False,
          allow_caching=not getenv("DISABLE_HTTP_CACHE"), headers: dict[str, str] = {}, sha256: str | None = None,
          extract: bool = False) -> pathlib.Path:
  """The local path of `url`. A path starting with "/" or "." is returned as is; a file:// URL is copied into
  the download cache (gunzipped with gunzip=, checked with sha256=, tar-extracted with extract=), as tinygrad
  copies a download; http(s):// URLs are found in the cache (under the name tinygrad gives them: `name`, or the
  md5 of the URL) and are a URLError otherwise: baregrad downloads nothing."""
  import urllib.error
  import urllib.request
  if url.startswith(("/", ".")): return pathlib.Path(url)
  if "://" not in url: raise ValueError(f"[fetch] {url!r} is neither a URL nor a path starting with '/' or '.'")
  if name is not None and (isinstance(name, pathlib.Path) or "/" in name): fp = pathlib.Path(name)
  else:
    hdrs = "\n".join(f"{k.strip()}:{v.strip()}" for k, v in sorted(headers.items()))
    hh = "_" + hashlib.md5(hdrs.encode()).hexdigest() if headers else ""
    fname = (name or hashlib.md5(url.encode("utf-8")).hexdigest()) + hh + (".gunzip" if gunzip else "")
    fp = _ensure_downloads_dir() / (subdir or "") / fname
  def stale() -> bool: return not fp.is_file() or not allow_caching or bool(sha256 and _sha256(fp) != sha256)
  if stale():
    if not url.startswith("file://"):
      if not fp.is_file(): why = f"it is not in the download cache: place it at {fp}"
      elif not allow_caching: why = "caching is off (DISABLE_HTTP_CACHE)"
      else: why = f"the cached copy at {fp} does not match sha256={sha256}"
      raise urllib.error.URLError(f"[fetch] baregrad has no network access and does not download {url}: {why}")
    if extract: shutil.rmtree(fp.parent / f"{fp.name}.extract", ignore_errors=True)
    fp.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url) as r, tempfile.NamedTemporaryFile(dir=fp.parent, delete=False) as f:
      src = gzip.GzipFile(fileobj=r) if gunzip else r
      h = hashlib.sha256()
      while chunk := src.read(1 << 16):
        h.update(chunk)
        f.write(chunk)
    if sha256 and h.hexdigest() != sha256:
      os.unlink(f.name)
      raise RuntimeError(f"[fetch] sha256 mismatch for {url}: expected {sha256}, got {h.hexdigest()}")
    os.replace(f.name, fp)
  if not extract: return fp
  out = fp.parent / f"{fp.name}.extract"
  if not out.is_dir():
    import tarfile
    tmp = tempfile.mkdtemp(dir=fp.parent)
    try:
      with tarfile.open(fp) as t:
        # NOTE: the "data" filter (no absolute paths, no links out of the folder) is in Python >= 3.11.4 only.
        if hasattr(tarfile, "data_filter"): t.extractall(tmp, filter="data")
        else:
          for m in t.getmembers():
            dest = os.path.realpath(os.path.join(tmp, m.name))
            if not dest.startswith(os.path.realpath(tmp) + os.sep) or m.issym() or m.islnk():
              raise RuntimeError(f"[fetch] {fp}: member {m.name!r} would be written outside {out}")
          t.extractall(tmp)
      os.rename(tmp, out)
    finally: shutil.rmtree(tmp, ignore_errors=True)
  return out


def _sha256(p: pathlib.Path) -> str: return hashlib.sha256(p.read_bytes()).hexdigest()


# ---- more of tinygrad.helpers' small utilities (names programs import) ----------------------

def get_shape(x) -> tuple:
  """The shape of nested lists/tuples (a str or a 0-d value: ()); ValueError when rows differ in shape."""
  if isinstance(x, str) or not hasattr(x, "__len__") or getattr(x, "shape", None) == (): return ()
  shapes = [get_shape(item) for item in x]
  if any(s != shapes[0] for s in shapes): raise ValueError(f"[get_shape] inhomogeneous shape from {x}")
  return (len(shapes),) + (shapes[0] if shapes else ())


def time_to_str(t: float, w: int = 8) -> str:
  """Seconds as a fixed-width string in s, ms or us, whichever keeps the number at least 10."""
  if t > 10: return f"{t:{w}.2f}s "
  if t > 1e-2: return f"{t * 1e3:{w}.2f}ms"
  return f"{t * 1e6:{w}.2f}us"


def strip_parens(fst: str) -> str:
  """fst without one pair of outer parentheses, when they enclose all of it."""
  if not (fst.startswith("(") and fst.endswith(")")): return fst
  depth = 0
  for c in fst[1:-1]:
    depth += (c == "(") - (c == ")")
    if depth < 0: return fst
  return fst[1:-1] if depth == 0 else fst


def cdiv(x: int, y: int) -> int:
  """Integer division rounding toward zero, as C's (0 when y is 0)."""
  if y == 0: return 0
  q = abs(x) // abs(y)
  return -q if (x < 0) != (y < 0) else q


def cmod(x: int, y: int) -> int:
  """The remainder that goes with cdiv: x - cdiv(x, y) * y (the sign of x)."""
  return x - cdiv(x, y) * y


def getbits(value: int, start: int, end: int) -> int:
  """Bits start..end (inclusive) of value, shifted down."""
  return (value >> start) & ((1 << (end - start + 1)) - 1)


def merge_dicts(ds: Iterable[dict]) -> dict:
  """One dict of all of ds; RuntimeError when two of them give one key different values."""
  out: dict = {}
  for d in ds:
    for k, v in d.items():
      if k in out and out[k] != v: raise RuntimeError(f"[merge_dicts] key {k!r} has the values {out[k]!r} and {v!r}")
      out[k] = v
  return out


def word_wrap(x: str, wrap: int = 80) -> str:
  """x with a newline after every `wrap` visible characters of each line (ANSI escapes take no width)."""
  out = []
  for line in x.splitlines() or [x]:
    toks = [m.group(0) for m in re.finditer(r"\x1b\[(K|.*?m)|.", line, re.S)]
    left = sum(len(t) == 1 for t in toks)  # visible characters not placed yet
    pieces, width, cur = [], 0, ""
    for tok in toks:
      if width == wrap and left:  # more to show after the wrap-th visible character: a new line
        pieces.append(cur)
        cur, width = "", 0
      cur += tok
      width += len(tok) == 1
      left -= len(tok) == 1
    pieces.append(cur)
    out.append("\n".join(pieces))
  return "\n".join(out)


def from_mv(mv: memoryview, to_type=ctypes.c_char):
  """The bytes of a writable memoryview as a ctypes array of to_type (no copy)."""
  return (to_type * (len(mv) // ctypes.sizeof(to_type))).from_buffer(mv)


count = itertools.count  # tinygrad's helpers export it


def profile_marker(name: str, color: str = "gray") -> None:
  """A named point in tinygrad's profile; baregrad's timeline (bare trace) has no markers from Python, so this
  records nothing."""
  del name, color


def __getattr__(name: str):
  # DEFAULT_FLOAT and DEFAULT_INT live with the dtypes they set (baregrad/dtype.py)
  if name in ("DEFAULT_FLOAT", "DEFAULT_INT"):
    from baregrad import dtype
    return getattr(dtype, name)
  raise AttributeError(f"module 'baregrad.helpers' has no attribute {name!r}")
