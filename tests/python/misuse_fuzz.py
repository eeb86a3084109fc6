#!/usr/bin/python3
"""A misuse fuzzer for the Python API: random op chains checked against numpy, and random bad
calls that must end in a result or a Python exception, never a crash, an abort or a hang.

Each case is a small Python program (printed whole when it fails, so it is its own reproducer).
Cases run in a worker process that is restarted after a crash or a hang; the parent reads which
case was running, so every finding names one case.

  ./bare python tests/python/misuse_fuzz.py                     # 400 cases from seed 1
  ./bare python tests/python/misuse_fuzz.py --seed 7 --cases 5000
  ./bare python tests/python/misuse_fuzz.py --forever           # new seeds until interrupted
  ./bare python tests/python/misuse_fuzz.py --show 1:17         # print case 17 of seed 1

Outcomes: ok (agrees with numpy, or raised a documented exception kind), and the findings:
crash (the worker died of a signal), hang (no answer within --timeout), wrong (a value or shape
that disagrees with numpy), kind (an exception kind outside the documented ones) and accepted
(a call numpy rejects as invalid that returned a tensor). Exit status 1 when there are findings.
"""
import argparse
import json
import os
import random
import select
import signal
import subprocess
import sys
import time

# Exceptions a misuse may raise: the kinds tinygrad, torch and numpy use for bad values, types,
# indices, sizes and allocation failures.
ALLOWED = ("ValueError", "TypeError", "IndexError", "RuntimeError", "MemoryError", "OverflowError", "NotImplementedError",
           "ZeroDivisionError", "AssertionError")

PRELUDE = """\
import numpy as np
from baregrad import Tensor, dtypes
def _data(seed, shape, kind='f'):
  g = np.random.default_rng(seed)
  if kind == 'f': return g.standard_normal(shape).astype(np.float32)
  if kind == 'i': return g.integers(-20, 20, shape).astype(np.int32)
  return g.integers(0, 2, shape).astype(bool)
"""

# ---- random op chains (valid calls; the result must agree with numpy) -----------------------------


def _factor_shape(rng, n):
  """A random shape of 1 to 4 dims with n elements."""
  dims = []
  for _ in range(rng.randint(0, 3)):
    divs = [d for d in range(1, n + 1) if n % d == 0]
    d = rng.choice(divs)
    dims.append(d)
    n //= d
  dims.append(n)
  rng.shuffle(dims)
  return tuple(dims)


def _axis(rng, shape): return rng.randrange(len(shape)) - (len(shape) if rng.random() < 0.3 else 0)


def chain_case(rng):
  """Returns (code, kind): a program that builds `x` (baregrad) and `r` (numpy) with the same ops."""
  kind = rng.choice("fffib")
  shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(1, 3)))
  lines = [f"r = _data({rng.randrange(1 << 30)}, {shape}, '{kind}')", "x = Tensor(r)"]
  if kind == "f": lines.append("r = r.astype(np.float64)")

  def emit(bg, npy, new_shape=None):
    nonlocal shape
    lines.append(f"x = {bg}")
    lines.append(f"r = {npy}")
    if new_shape is not None: shape = tuple(new_shape)

  # Whether x holds exactly numpy's values so far (only moved, compared or selected): float->int
  # casts and argmax are taken only then, as a rounding difference would flip their answer.
  exact = True
  for _ in range(rng.randint(1, 8)):
    nd = len(shape)
    op = rng.choice(["unary", "binary", "scalar", "reduce", "reshape", "permute", "flip", "pad", "slice", "expand", "cumsum",
                     "softmax", "matmul", "where", "argmax", "cast"])
    if kind == "f" and op in ("unary", "binary", "scalar", "reduce", "cumsum", "softmax", "matmul"): exact = False
    if op in ("argmax", "cast") and not exact: continue
    if nd == 0 and op not in ("unary", "scalar", "reshape", "cast"): continue
    if kind == "b" and op not in ("reshape", "permute", "flip", "slice", "expand", "binary", "where"): continue
    if kind == "i" and op in ("softmax", "matmul", "unary"): continue
    if op == "unary":
      name, npy = rng.choice([("neg()", "-r"), ("relu()", "np.maximum(r, 0)"), ("tanh()", "np.tanh(r)"),
                              ("sigmoid()", "1 / (1 + np.exp(-r))"), ("abs()", "np.abs(r)"), ("sin()", "np.sin(r)"),
                              ("cos()", "np.cos(r)"), ("clip(-8, 8).exp()", "np.exp(np.clip(r, -8, 8))"),
                              ("abs().sqrt()", "np.sqrt(np.abs(r))"), ("abs().add(1).log()", "np.log(np.abs(r) + 1)"),
                              ("square()", "r * r")])
      emit(f"x.{name}", npy)
    elif op == "binary":
      other = tuple(d if rng.random() < 0.7 else 1 for d in shape)
      lines.append(f"q = _data({rng.randrange(1 << 30)}, {other}, '{kind}')")
      lines.append("y = Tensor(q)")
      if kind == "b":
        bg, npy = rng.choice([("x & y", "r & q"), ("x | y", "r | q"), ("x ^ y", "r ^ q"), ("x.logical_not() | y", "~r | q")])
      elif kind == "i":
        bg, npy = rng.choice([("x + y", "r + q"), ("x - y", "r - q"), ("x * y", "r * q"), ("x.maximum(y)", "np.maximum(r, q)"),
                              ("x.minimum(y)", "np.minimum(r, q)"), ("x & y", "r & q"), ("(x < y).where(x, y)", "np.where(r < q, r, q)")])
      else:
        bg, npy = rng.choice([("x + y", "r + q"), ("x - y", "r - q"), ("x * y", "r * q"), ("x / (y.abs() + 1)", "r / (np.abs(q) + 1)"),
                              ("x.maximum(y)", "np.maximum(r, q)"), ("x.minimum(y)", "np.minimum(r, q)"),
                              ("(x > y).where(x, y)", "np.where(r > q, r, q)")])
      emit(bg, npy)
    elif op == "scalar":
      c = rng.choice([2, 3, -1, 0]) if kind == "i" else rng.choice([0.5, -1.5, 2.0, 3, 0.0])
      bg, npy = rng.choice([(f"x + {c}", f"r + {c}"), (f"x * {c}", f"r * {c}"), (f"{c} - x", f"{c} - r"),
                            (f"x.maximum({c})", f"np.maximum(r, {c})")])
      emit(bg, npy)
    elif op == "reduce":
      red = rng.choice(["sum", "max", "min"] + (["mean"] if kind == "f" else []))
      npred = {"sum": "np.sum", "max": "np.max", "min": "np.min", "mean": "np.mean"}[red]
      if rng.random() < 0.25:
        emit(f"x.{red}()", f"{npred}(r)" + (".astype(np.int32)" if kind == "i" and red == "sum" else ""), ())
      else:
        ax, keep = _axis(rng, shape), rng.random() < 0.5
        new = list(shape)
        if keep: new[ax] = 1
        else: del new[ax]
        cast = ".astype(np.int32)" if kind == "i" and red == "sum" else ""
        emit(f"x.{red}({ax}, keepdim={keep})", f"{npred}(r, axis={ax}, keepdims={keep}){cast}", new)
    elif op == "reshape":
      n = 1
      for d in shape: n *= d
      new = _factor_shape(rng, n)
      if rng.random() < 0.3 and len(new) > 1:
        spec = list(new)
        spec[rng.randrange(len(spec))] = -1
        emit(f"x.reshape({tuple(spec)})", f"r.reshape({tuple(spec)})", new)
      else:
        emit(f"x.reshape({new})", f"r.reshape({new})", new)
    elif op == "permute" and nd > 1:
      order = list(range(nd))
      rng.shuffle(order)
      emit(f"x.permute({tuple(order)})", f"np.transpose(r, {tuple(order)})", [shape[i] for i in order])
    elif op == "flip":
      ax = _axis(rng, shape)
      emit(f"x.flip({ax})", f"np.flip(r, {ax})")
    elif op == "pad" and kind == "f":
      pads = tuple((rng.randint(0, 2), rng.randint(0, 2)) for _ in shape)
      emit(f"x.pad({pads})", f"np.pad(r, {pads})", [d + a + b for d, (a, b) in zip(shape, pads)])
    elif op == "slice":
      ax = rng.randrange(nd)
      start, stop, step = rng.choice([None, 0, 1, -1, -3, 5]), rng.choice([None, 0, 2, -1, 9]), rng.choice([None, 1, 2, -1, -2, 3])
      idx = ", ".join([":"] * ax + [f"{'' if start is None else start}:{'' if stop is None else stop}:{'' if step is None else step}"])
      new = list(shape)
      new[ax] = len(range(*slice(start, stop, step).indices(shape[ax])))
      if new[ax] == 0: continue
      emit(f"x[{idx}]", f"r[{idx}]", new)
    elif op == "expand":
      ones = [i for i, d in enumerate(shape) if d == 1]
      if not ones: continue
      new = list(shape)
      new[rng.choice(ones)] = rng.randint(2, 4)
      emit(f"x.expand({tuple(new)})", f"np.broadcast_to(r, {tuple(new)})", new)
    elif op == "cumsum":
      ax = rng.randrange(nd)
      emit(f"x.cumsum({ax})", f"np.cumsum(r, axis={ax})" + (".astype(np.int32)" if kind == "i" else ""))
    elif op == "softmax":
      ax = _axis(rng, shape)
      emit(f"x.softmax({ax})", f"np.exp(r - r.max(axis={ax}, keepdims=True)) / np.exp(r - r.max(axis={ax}, keepdims=True)).sum(axis={ax}, keepdims=True)")
    elif op == "matmul" and nd == 2:
      m = rng.randint(1, 5)
      lines.append(f"q = _data({rng.randrange(1 << 30)}, {(shape[1], m)}, 'f')")
      emit("x @ Tensor(q)", "r @ q.astype(np.float64)", (shape[0], m))
    elif op == "where":
      lines.append(f"c = _data({rng.randrange(1 << 30)}, {shape}, 'b')")
      emit("Tensor(c).where(x, x.flip(0))", "np.where(c, r, np.flip(r, 0))")
    elif op == "argmax" and kind != "b":
      ax = rng.randrange(nd)
      new = list(shape)
      del new[ax]
      emit(f"x.argmax({ax})", f"np.argmax(r, axis={ax}).astype(np.int32)", new)
      kind = "i"
    elif op == "cast" and kind == "f":
      emit("x.cast(dtypes.int32)", "np.trunc(r).astype(np.int32)")
      kind = "i"
  lines.append(f"check(x, r, {kind!r})")
  return "\n".join(lines)


# ---- random bad calls (must be a result or a documented exception) --------------------------------

NUMS = [0, 1, 2, 3, -1, -2, -5, 7, 2**31, 2**32, 2**40, 2**62, 2**63, -(2**63), 2**64, 1.5, -0.5, "float('nan')", "float('inf')",
        "float('-inf')", "None", "'x'", "True", "()", "(2, 3)", "[1, 2]", "(-1,)", "(0,)", "(2**40, 2**40)"]


def _n(rng): return rng.choice(NUMS)


BAD = [
  "Tensor.ones({a}).numpy()",
  "Tensor.ones({a}, {b}).sum().numpy()",
  "Tensor.zeros({a}).contiguous().realize().shape",
  "Tensor.full(({a}, 2), {b}).numpy()",
  "Tensor.arange({a}, {b}, {c}).numpy()",
  "Tensor.arange({a}).numpy()",
  "Tensor.linspace({a}, {b}, {c}).numpy()",
  "Tensor.eye({a}).numpy()",
  "Tensor.rand({a}).numpy()",
  "X.reshape({a}).numpy()",
  "X.reshape({a}, {b}).numpy()",
  "X.permute({a}, {b}).numpy()",
  "X.expand({a}, {b}).numpy()",
  "X.pad((({a}, {b}), (0, 0))).numpy()",
  "X.pad((({a}, 0), ({b}, 0))).sum().numpy()",
  "X.shrink((({a}, {b}), None)).numpy()",
  "X.flip({a}).numpy()",
  "X.sum({a}).numpy()",
  "X.max({a}).numpy()",
  "X.cumsum({a}).numpy()",
  "X.softmax({a}).numpy()",
  "X.transpose({a}, {b}).numpy()",
  "X.squeeze({a}).numpy()",
  "X.unsqueeze({a}).numpy()",
  "X.repeat({a}, {b}).numpy()",
  "X.repeat_interleave({a}).numpy()",
  "X.split({a}).__len__()",
  "X.chunk({a}).__len__()",
  "X.triu({a}).numpy()",
  "X[{a}].numpy()",
  "X[{a}, {b}].numpy()",
  "X[::{a}].numpy()",
  "X[{a}:{b}:{c}].numpy()",
  "X[[0, {a}]].numpy()",
  "Y = X.contiguous(); Y[{a}] = {b}; Y.numpy()",
  "Y = X.contiguous(); Y[[0, 1], [{a}, 0]] = Tensor([1.0, 2.0]); Y.numpy()",
  "X.gather(0, Tensor([[0, {a}]])).numpy()",
  "X.one_hot({a}).numpy()",
  "I.one_hot({a}).numpy()",
  "(X ** {a}).numpy()",
  "(X + {a}).numpy()",
  "(I + {a}).numpy()",
  "(I * {a}).numpy()",
  "(I // {a}).numpy()",
  "(I % {a}).numpy()",
  "(B - {a}).numpy()",
  "X.cast({dt}).numpy()",
  "I.cast({dt}).softmax().numpy()",
  "B.softmax().numpy()",
  "Tensor([{a}, {b}]).numpy()",
  "Tensor({a}).numpy()",
  "Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 3, 3, 3), stride={a}, padding={b}).numpy()",
  "Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones({a}, 3, 3, 3), dilation={b}).numpy()",
  "Tensor.ones(1, 1, 4, 4).max_pool2d(kernel_size={a}, stride={b}).numpy()",
  "Tensor.ones(1, 1, 4, 4).avg_pool2d(kernel_size={a}, padding={b}).numpy()",
  "X.argmax({a}).numpy()",
  "Tensor([1.0, float('nan'), {a}]).argmax().numpy()",
  "X.cat(X, dim={a}).numpy()",
  "Tensor.stack(X, X, dim={a}).numpy()",
  "X.matmul(Tensor.ones({a}, {b})).numpy()",
  "X.clip({a}, {b}).numpy()",
  "(X.requires_grad_() * {a}).sum().backward(); X.grad.numpy()",
]
# Bad calls numpy can make too, with numpy's spelling: where numpy raises, baregrad must raise;
# where both return, the values must agree.
TWINS = [
  ("X.reshape({a})", "XN.reshape({a})"),
  ("X.reshape({a}, {b})", "XN.reshape({a}, {b})"),
  ("X.permute({a}, {b})", "np.transpose(XN, ({a}, {b}))"),
  ("X.flip({a})", "np.flip(XN, {a})"),
  ("X.sum({a})", "XN.sum({a})"),
  ("X.max({a})", "XN.max({a})"),
  ("X.cumsum({a})", "np.cumsum(XN, {a})"),
  ("X.transpose({a}, {b})", "np.swapaxes(XN, {a}, {b})"),
  ("X.unsqueeze({a})", "np.expand_dims(XN, {a})"),
  ("X.triu({a})", "np.triu(XN, {a})"),
  ("X[{a}]", "XN[{a}]"),
  ("X[{a}, {b}]", "XN[{a}, {b}]"),
  ("X[::{a}]", "XN[::{a}]"),
  ("X[{a}:{b}:{c}]", "XN[{a}:{b}:{c}]"),
  # a list that is not all ints is a tuple of indices (tinygrad's and torch's; numpy >= 1.23 differs)
  ("X[[0, {a}]]", "XN[[0, {a}] if isinstance({a}, int) else (0, {a})]"),
  ("X.argmax({a})", "np.argmax(XN, {a})"),
  ("Tensor.arange({a}, {b}, {c})", "np.arange({a}, {b}, {c})"),
  ("Tensor.eye({a})", "np.eye({a})"),
  ("(I + {a})", "(IN + {a})"),
  ("Tensor([1.0, float('nan'), {a}]).argmax()", "np.argmax(np.array([1.0, float('nan'), {a}]))"),
  ("X.split({a}).__len__()", None),
]

DTYPES = ["dtypes.float16", "dtypes.bfloat16", "dtypes.float64", "dtypes.int8", "dtypes.uint8", "dtypes.bool", "dtypes.int64",
          "dtypes.uint32", "'float32'", "None", "3"]


def bad_case(rng):
  head = ("XN = _data(1, (3, 4))\nIN = _data(2, (3, 4), 'i')\nX = Tensor(XN)\nI = Tensor(IN)\nB = Tensor(_data(3, (3, 4), 'b'))\n")
  args = dict(a=_n(rng), b=_n(rng), c=_n(rng), dt=rng.choice(DTYPES))
  if rng.random() < 0.4:
    tmpl, twin = rng.choice(TWINS)
    # numpy takes no bool where it wants an int; Python's bool is an int, so those are not compared
    if twin and "True" not in args.values(): return head + f"twin({tmpl.format(**args)!r}, {twin.format(**args)!r})"
  return head + f"bad({rng.choice(BAD).format(**args)!r})"


def standalone(seed, i):
  """Case i of seed as a program that runs by itself."""
  return f"ALLOWED = {ALLOWED!r}\n" + PRELUDE + WORKER_HELPERS + make_case(seed, i) + "\nprint('ok')\n"


def make_case(seed, i):
  rng = random.Random(seed * 1_000_003 + i)
  return chain_case(rng) if rng.random() < 0.5 else bad_case(rng)


# ---- the worker: runs cases it reads from stdin, one line of outcome each -----------------------

WORKER_HELPERS = """
import sys
class Finding(Exception): pass
def check(x, r, kind):
  got = x.numpy()
  if tuple(x.shape) != tuple(np.shape(r)): raise Finding(f'wrong: shape {tuple(x.shape)} != numpy {np.shape(r)}')
  if got.shape != np.shape(r): raise Finding(f'wrong: numpy() shape {got.shape} != {np.shape(r)}')
  if kind == 'f':
    r = np.asarray(r, np.float64)
    tol = 2e-3 * max(1.0, float(np.nanmax(np.abs(r), initial=0)))
    same = np.isclose(got.astype(np.float64), r, rtol=2e-3, atol=tol, equal_nan=True)
  else:
    same = got.astype(np.int64) == np.asarray(r).astype(np.int64)
  if not np.all(same):
    bad = np.argwhere(~np.asarray(same))[:3]
    raise Finding('wrong: ' + ', '.join(f'at {tuple(int(v) for v in b)} got {got[tuple(b)]} numpy {np.asarray(r)[tuple(b)]}' for b in bad))
def bad(call):
  g = sys._getframe(1).f_globals
  try:
    out = eval(compile(call, '<case>', 'exec') if ';' in call or '=' in call.split('(')[0] else call, g)
  except Finding: raise
  except BaseException as e:
    if type(e).__name__ not in ALLOWED: raise Finding(f'kind: {type(e).__name__}: {e}')
    msg = str(e)
    if not msg.strip(): raise Finding(f'kind: {type(e).__name__} with an empty message')
    return
  if isinstance(out, np.ndarray) and any(d < 0 for d in out.shape): raise Finding(f'wrong: negative shape {out.shape}')
def twin(call, np_call):
  g = sys._getframe(1).f_globals
  try:
    want = eval(np_call, g)
  except OverflowError:
    want = OverflowError
  except Exception:
    want = None  # numpy rejects it
  try:
    out = eval(call, g)
  except Finding: raise
  except BaseException as e:
    if type(e).__name__ not in ALLOWED: raise Finding(f'kind: {type(e).__name__}: {e}')
    if not str(e).strip(): raise Finding(f'kind: {type(e).__name__} with an empty message')
    return
  if want is None: raise Finding(f'accepted: numpy rejects {np_call}')
  if want is OverflowError: return  # numpy cannot hold the argument; a right answer is fine
  got = out.numpy()
  if got.shape != np.shape(want): raise Finding(f'wrong: shape {got.shape} != numpy {np.shape(want)}')
  if not np.allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=1e-5, atol=1e-6, equal_nan=True):
    raise Finding(f'wrong: {got.ravel()[:6]} != numpy {np.asarray(want).ravel()[:6]}')
"""


def worker():
  import resource
  # A bad size must fail as an allocation error, not take the machine's memory. RLIMIT_DATA
  # (writable private memory) rather than RLIMIT_AS: GPU devices reserve terabytes of address
  # space with no access, which the data limit does not count.
  limit = int(os.environ.get("MISUSE_FUZZ_DATA_GIB", "16")) << 30
  resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
  import numpy as np  # noqa: F401 (imported once for every case)
  import warnings
  warnings.simplefilter("ignore")
  base = {"ALLOWED": ALLOWED}
  exec(PRELUDE + WORKER_HELPERS, base)
  out = sys.stdout
  # MISUSE_FUZZ_CASE_FILE: a JSON list of programs run instead of the generated cases (the
  # fuzzer's own test gives it cases that must be findings).
  given = os.environ.get("MISUSE_FUZZ_CASE_FILE")
  given = json.load(open(given)) if given else None
  for line in sys.stdin:
    seed, i = map(int, line.split())
    case = given[i] if given else make_case(seed, i)  # a generator bug ends the worker, loudly
    out.write(f"start {i}\n")
    out.flush()
    try:
      exec(case, dict(base))
      res = "ok"
    except base["Finding"] as e:
      res = str(e)
    except BaseException as e:  # bad() handles the calls that may raise: a chain may not
      res = f"raised: {type(e).__name__}: {e}"
    out.write(f"done {i} {res!r}\n")
    out.flush()


class Runner:
  """Feeds cases to a worker process; restarts it after a crash or a hang."""

  def __init__(self, timeout):
    self.timeout, self.proc = timeout, None

  def _start(self):
    self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    self.buf = b""

  def _kill(self):
    try:
      os.killpg(self.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
    self.proc.wait()
    self.proc = None

  def _line(self, deadline):
    """The worker's next line; '' when it exited, None when `deadline` passed first. Reads the
    pipe's fd directly: a buffered reader would hide lines it already read from select()."""
    fd = self.proc.stdout.fileno()
    while b"\n" not in self.buf:
      left = deadline - time.monotonic()
      if left <= 0: return None
      if not select.select([fd], [], [], left)[0]: continue
      chunk = os.read(fd, 65536)
      if not chunk: return ""
      self.buf += chunk
    line, self.buf = self.buf.split(b"\n", 1)
    return line.decode() + "\n"

  def run(self, seed, i):
    if self.proc is not None and self.proc.poll() is not None: self.proc = None
    if self.proc is None: self._start()
    self.proc.stdin.write(f"{seed} {i}\n".encode())
    self.proc.stdin.flush()
    deadline = time.monotonic() + self.timeout + 30  # the first case also pays for the import
    start = self._line(deadline)
    if not start:
      code = self.proc.poll()
      self._kill()
      return "crash: worker died before the case started" if code is not None else "hang: worker did not start"
    line = self._line(time.monotonic() + self.timeout)
    if line is None:
      self._kill()
      return f"hang: no answer in {self.timeout} s"
    if not line:
      code = self.proc.wait()
      self.proc = None
      return f"crash: signal {-code}" if code < 0 else f"crash: exit status {code}"
    res = eval(line.split(" ", 2)[2])
    if res != "ok": self._kill()  # a finding may leave a failed device behind: start afresh
    return res

  def close(self):
    if self.proc:
      self.proc.stdin.close()
      self.proc.wait()


def run_cases(seed, cases, timeout, progress=True):
  """Returns [(seed, i, outcome)] for the findings among `cases` cases of `seed`."""
  runner, findings, t0 = Runner(timeout), [], time.monotonic()
  try:
    for i in range(cases):
      res = runner.run(seed, i)
      if res != "ok": findings.append((seed, i, res))
      if progress and (i + 1) % 50 == 0:
        print(f"misuse_fuzz: seed {seed}: {i + 1}/{cases} cases, {len(findings)} findings, {time.monotonic() - t0:.0f} s", file=sys.stderr,
              flush=True)
  finally:
    runner.close()
  return findings


def run_programs(programs, timeout):
  """Runs the given case programs (not generated ones); returns [(None, i, outcome)] of the findings."""
  import tempfile
  with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
    json.dump(list(programs), f)
    f.flush()
    old = os.environ.get("MISUSE_FUZZ_CASE_FILE")
    os.environ["MISUSE_FUZZ_CASE_FILE"] = f.name
    try:
      return [(None, i, res) for _, i, res in run_cases(0, len(programs), timeout, progress=False)]
    finally:
      if old is None: del os.environ["MISUSE_FUZZ_CASE_FILE"]
      else: os.environ["MISUSE_FUZZ_CASE_FILE"] = old


def report(findings):
  for seed, i, res in findings:
    print(f"== case {seed}:{i}: {res}  (standalone: misuse_fuzz.py --show {seed}:{i})\n{make_case(seed, i)}\n")


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--seed", type=int, default=1)
  ap.add_argument("--cases", type=int, default=400)
  ap.add_argument("--timeout", type=float, default=30.0, help="seconds one case may take (default 30)")
  ap.add_argument("--forever", action="store_true", help="run seed, seed+1, ... until interrupted")
  ap.add_argument("--show", metavar="SEED:I", help="print one case's program and exit")
  ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  a = ap.parse_args()
  if a.worker: return worker()
  if a.show:
    s, i = map(int, a.show.split(":"))
    print(standalone(s, i))
    return 0
  seed, total = a.seed, []
  while True:
    found = run_cases(seed, a.cases, a.timeout)
    report(found)
    total += found
    print(f"misuse_fuzz: seed {seed}: {a.cases} cases, {len(found)} findings", flush=True)
    if not a.forever: break
    seed += 1
  return 1 if total else 0


if __name__ == "__main__":
  sys.exit(main())
