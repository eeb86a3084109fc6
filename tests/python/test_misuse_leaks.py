# Issue 16, "leaks and poisoned devices": bounded kernel caches, an optimizer whose learning rate
# lives on the device, inputs of one op on two devices refused before anything runs, and every
# cast between float64/float32/float16/bfloat16 (and ints to and from the 16-bit floats) on
# both CPU devices, checked against an exact round-to-nearest-even oracle, numpy and torch.
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from baregrad import Tensor, dtypes
import _baregrad as _C

DEVICES = ["CPU", "CPU:C"]


def run_child(code: str, env: dict | None = None, timeout=300) -> subprocess.CompletedProcess:
  """Runs `code` in a fresh interpreter (with this one's path and environment)."""
  e = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **(env or {}))
  return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True, timeout=timeout)


def child_numbers(code: str, env: dict | None = None) -> dict:
  """`code`'s last stdout line, a dict literal of numbers."""
  r = run_child(code, env)
  assert r.returncode == 0, r.stderr[-3000:]
  return eval(r.stdout.strip().splitlines()[-1])  # noqa: S307 (our own child's output)


# ---- bounded kernel caches -----------------------------------------------------------------------

def test_program_cache_bounded_with_a_new_kernel_every_call():
  """A new kernel every call (here a new length): the device keeps at most PROGRAM_CACHE_SIZE
  programs loaded and the process stops growing once the cache is full."""
  got = child_numbers("""
    import _baregrad as C
    from baregrad import Tensor
    def rss(): return int(open('/proc/self/statm').read().split()[1]) * 4
    for i in range(400):
      assert (Tensor.ones(i + 2, device="CPU").contiguous() * 3.0).numpy()[1] == 3.0
      if i == 199: r0, s0 = rss(), C.program_cache_stats("CPU")
    s = C.program_cache_stats("CPU")
    print(dict(size=s["size"], built=s["built"] - s0["built"], evicted=s["evicted"], grew_kb=rss() - r0))
  """, {"PROGRAM_CACHE_SIZE": "64", "KERNEL_CACHE_MB": "1", "DISABLE_COMPILER_CACHE": "1"})
  assert got["size"] <= 64, got
  assert got["built"] >= 200, got  # every length is a new kernel
  assert got["evicted"] >= 400 - 64 - 10, got
  # 200 more kernels after the caches filled: unbounded, this was ~40-60 KB each (8+ MB)
  assert got["grew_kb"] < 3072, got


@pytest.mark.parametrize("dev", DEVICES)
def test_a_new_scalar_every_call_builds_at_most_two_kernels(dev):
  """`a * float(i)` in a loop: the first value compiles with the constant inlined, the second
  lifts it into a launch scalar, and every later value reuses that program; memory stays flat."""
  got = child_numbers(f"""
    import _baregrad as C
    from baregrad import Tensor
    a = Tensor.ones(16, device="{dev}").contiguous().realize()
    def rss(): return int(open('/proc/self/statm').read().split()[1]) * 4
    b0 = C.program_cache_stats("{dev}")["built"]
    for i in range(400):
      assert (a * float(i)).numpy()[3] == float(i), i
      if i == 199: r0 = rss()
    print(dict(built=C.program_cache_stats("{dev}")["built"] - b0, grew_kb=rss() - r0))
  """, {"DISABLE_COMPILER_CACHE": "1"})
  assert got["built"] == 2, got
  assert got["grew_kb"] < 1024, got


def test_program_cache_option_is_documented_and_checked():
  assert "PROGRAM_CACHE_SIZE" in _C.option_names() and "KERNEL_CACHE_MB" in _C.option_names()
  r = run_child("import baregrad; from baregrad import Tensor; Tensor([1.0]).numpy()", {"PROGRAM_CACHE_SIZE": "lots"})
  assert r.returncode != 0 and "PROGRAM_CACHE_SIZE" in r.stderr, r.stderr[-2000:]


# ---- the learning rate lives on the device ---------------------------------------------------------

@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_lr_decay_builds_no_kernel_and_does_not_grow(opt_name):
  """opt.lr *= 0.999 every step (the documented decay) after warm-up: no program is built and
  memory stays flat; the parameters follow a float64 host reference that reads the same lr."""
  got = child_numbers(f"""
    import time, numpy as np, _baregrad as C
    from baregrad import Tensor, nn, dtypes
    w0 = np.array([0.5, -1.5, 2.0, 3.0])
    w = Tensor(w0, dtype=dtypes.float64, device="CPU", requires_grad=True)
    opt = nn.optim.{opt_name}([w], lr=0.1)
    Tensor.training = True
    def rss(): return int(open('/proc/self/statm').read().split()[1]) * 4
    ref, m, v, lrs = w0.copy(), np.zeros(4), np.zeros(4), []
    t0 = None
    for i in range(300):
      lr = float(opt.lr.numpy()[0]); lrs.append(lr)
      opt.zero_grad(); (w * w).sum().backward(); opt.step()
      g = 2 * ref
      if "{opt_name}" == "SGD": ref = ref - lr * g
      else:
        m = 0.9 * m + 0.1 * g; v = 0.999 * v + 0.001 * g * g
        ref = ref - lr * (m / (1 - 0.9 ** (i + 1))) / (np.sqrt(v / (1 - 0.999 ** (i + 1))) + 1e-8)
      if i % 3 == 0: opt.lr *= 0.999
      elif i % 3 == 1: opt.lr = lr * 0.999
      else: opt.lr.assign(opt.lr * 0.999)
      if i == 49: r0, b0, t0 = rss(), C.program_cache_stats("CPU")["built"], time.perf_counter()
    ms = (time.perf_counter() - t0) * 1000 / 250
    err = float(np.max(np.abs(w.numpy() - ref)))
    print(dict(built=C.program_cache_stats("CPU")["built"] - b0, grew_kb=rss() - r0, ms=ms, err=err,
               lr_last=lrs[-1], lr_want=0.1 * 0.999 ** 299))
  """, {"DISABLE_COMPILER_CACHE": "1"})
  assert got["built"] == 0, got
  assert got["grew_kb"] < 2048, got  # was ~90-135 KB per step (20+ MB over 250 steps)
  assert got["lr_last"] == pytest.approx(got["lr_want"], rel=1e-4), got
  assert got["err"] < 1e-6, got


def test_lr_is_a_device_tensor_a_captured_step_reads():
  """A TinyJit-captured step sees a new learning rate (the rate is not baked into a kernel)."""
  from baregrad import nn, TinyJit
  w = Tensor([1.0, 2.0], dtype=dtypes.float64, device="CPU", requires_grad=True)
  opt = nn.optim.SGD([w], lr=0.5)
  assert opt.lr.shape == (1,) and opt.lr.dtype == dtypes.float64 and opt.lr.device == w.device
  assert nn.optim.SGD([Tensor([1.0], device="CPU", requires_grad=True)]).lr.dtype == dtypes.float32  # tinygrad's
  Tensor.training = True

  @TinyJit
  def step():
    opt.zero_grad(); (w * w).sum().backward(); opt.step()
    return w

  want = np.array([1.0, 2.0])
  for i in range(6):
    lr = [0.5, 0.5, 0.5, 0.25, 0.125, 0.0625][i]
    opt.lr = lr
    step()
    want = want - lr * 2 * want
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-12, err_msg=f"step {i}")
  Tensor.training = False


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("make", ["SGD", "Adam", "LAMB"])
def test_optimizer_state_lives_on_the_parameters_device(device, make):
  """Momentum, Adam's moments and step count, LAMB's ratio and the rate sit with the parameters
  (they sat on the default device, which the device check now refuses to mix)."""
  from baregrad import nn
  w = Tensor([1.0, -2.0], device=device, requires_grad=True)
  opt = {"SGD": lambda: nn.optim.SGD([w], lr=0.5, momentum=0.9), "Adam": lambda: nn.optim.Adam([w], lr=0.5),
         "LAMB": lambda: nn.optim.LAMB([w], lr=0.5)}[make]()
  Tensor.training = True
  opt.zero_grad(); (w * w).sum().backward(); opt.step()
  Tensor.training = False
  assert opt.lr.device == w.device
  want = {"SGD": [0.0, 0.0], "Adam": [0.5, -1.5], "LAMB": [1 - 0.5 * 2.5**0.5, -2 + 0.5 * 2.5**0.5]}[make]  # trust ratio |w|/|sign(g)|
  np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)


# ---- devices checked when the graph is built ---------------------------------------------------------

def _a(): return Tensor([1.0, 2.0], device="CPU")
def _b(): return Tensor([3.0, 4.0], device="CPU:C")


def _setitem_slice():
  t = Tensor.zeros(3, device="CPU").contiguous(); t[1:] = _b()


def _setitem_tensor_index():
  t = Tensor.zeros(3, device="CPU").contiguous(); t[Tensor([0, 1], device="CPU")] = _b()


MIXED = {
  "where": lambda: Tensor([True, False], device="CPU").where(_a(), _b()),
  "where_cond": lambda: Tensor([True, False], device="CPU:C").where(_a(), _a()),
  "scatter": lambda: _a().scatter(0, Tensor([1, 0], device="CPU"), _b()),
  "scatter_index": lambda: _a().scatter(0, Tensor([1, 0], device="CPU:C"), _a()),
  "cat": lambda: _a().cat(_b()),
  "stack": lambda: _a().stack(_b()),
  "add": lambda: _a() + _b(),
  "maximum": lambda: _a().maximum(_b()),
  "matmul": lambda: _a() @ _b(),
  "setitem": _setitem_slice,
  "setitem_index": _setitem_tensor_index,
  "assign": lambda: _a().contiguous().realize().assign(_b()),
}


@pytest.mark.parametrize("case", list(MIXED))
def test_mixed_devices_raise_naming_op_and_devices(case):
  """Raised at graph-build time (no kernel runs), naming the op and both devices; the CPU device
  is still good afterwards."""
  with pytest.raises(RuntimeError) as e:
    r = MIXED[case]()
    if r is not None: r.numpy()
  msg = str(e.value)
  op = case.split("_")[0]
  assert msg.startswith(f"[{op}]"), msg
  assert "CPU:C" in msg and "on CPU" in msg or "CPU and CPU:C" in msg or "CPU:C and CPU" in msg, msg
  assert "error state" not in msg and "MMU" not in msg, msg
  np.testing.assert_equal((Tensor([1.0, 2.0], device="CPU") + 1).numpy(), [2.0, 3.0])
  np.testing.assert_equal((Tensor([1.0, 2.0], device="CPU:C") * 2).numpy(), [2.0, 4.0])


def test_mixed_device_where_leaves_cpu_usable_in_a_fresh_process():
  """The issue's reproducer: it used to take an MMU fault and leave CPU failed for the process."""
  r = run_child("""
    from baregrad import Tensor
    a = Tensor([1.0, 2.0], device='CPU'); b = Tensor([3.0, 4.0], device='CPU:C')
    try:
      Tensor([True, False]).where(a, b).numpy(); print("no error")
    except RuntimeError as e: print("raised", e)
    print((Tensor([1.0]) + 1).numpy().tolist())
  """)
  assert r.returncode == 0, r.stderr[-2000:]
  out = r.stdout.splitlines()
  assert out[0].startswith("raised [where] inputs on different devices"), out
  assert out[1] == "[2.0]", out


def test_gather_moves_the_index_like_tinygrad():
  # gather takes its index to the tensor's device (as tinygrad), so this is not misuse
  np.testing.assert_equal(_a().gather(0, Tensor([1, 0], device="CPU:C")).numpy(), [2.0, 1.0])


# ---- casts between the float types (and ints to and from 16-bit floats) -------------------------------

def rne(x: float, bits: int, min_q: int, max_e: int) -> float:
  """x rounded to nearest even with a `bits`-bit significand, subnormal step 2**min_q and
  overflow to inf from 2**max_e: the exact reference for float16 (11, -24, 16) and bfloat16
  (8, -133, 128)."""
  if math.isnan(x) or math.isinf(x) or x == 0: return x
  _, e = math.frexp(x)
  q = max(e - bits, min_q)
  r = round(x / 2.0 ** q) * 2.0 ** q  # round() on a float is to nearest even; the scaling is exact
  return math.copysign(math.inf, x) if abs(r) >= 2.0 ** max_e else r


def to_f16(x): return rne(x, 11, -24, 16)
def to_bf16(x): return rne(x, 8, -133, 128)
def to_f32(x): return float(np.float64(x).astype(np.float32))


FLOAT_EDGES = [
  0.0, -0.0, 1.0, -2.5, 3.140625, math.inf, -math.inf, math.nan,
  1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-40, 1 - 2**-12,  # float16 ties and one double rounding would break
  1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-40, 1 + 2**-8 + 2**-24,  # bfloat16 ties
  65504.0, 65519.0, 65520.0, 70000.0, -65520.0,  # float16's largest, the overflow threshold
  2**-24, 2**-25, 2**-25 + 2**-45, 3 * 2**-25, 2**-14 - 2**-25, 6e-8, 1e-10,  # float16 subnormals
  2**-126, 2**-133, 2**-134, 2**-134 + 2**-150, 1e-40,  # bfloat16 / float32 subnormals
  3.3895313892515355e38, 3.3961775292304718e38, 3.4028234663852886e38, 1e39, 1e300, -1e300,
  0.1, 1 / 3, 2.0**60 + 2.0**36, 123456.789,
]


def float_inputs(src):
  """FLOAT_EDGES made exact in `src`."""
  f = {dtypes.float64: float, dtypes.float32: to_f32, dtypes.float16: to_f16, dtypes.bfloat16: to_bf16}[src]
  with np.errstate(over="ignore"):
    return [f(v) for v in FLOAT_EDGES]


def want_float(src, dst, xs):
  f = {dtypes.float64: float, dtypes.float32: to_f32, dtypes.float16: to_f16, dtypes.bfloat16: to_bf16}[dst]
  with np.errstate(over="ignore"):
    return np.array([f(v) for v in xs])


def read(t: Tensor) -> np.ndarray:
  """A tensor's values as float64. Realized first, so the cast under test is its own kernel
  (numpy() widens bfloat16 to float32 in another, exactly)."""
  return t.realize().numpy().astype(np.float64)


def assert_same(got, want, what):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  assert got.shape == want.shape, what
  bad = [(i, w, g) for i, (g, w) in enumerate(zip(got, want))
         if not (np.isnan(g) and np.isnan(w)) and not (g == w and np.signbit(g) == np.signbit(w))]
  assert not bad, f"{what}: (index, want, got) {bad[:6]}"


FLOATS = [dtypes.float64, dtypes.float32, dtypes.float16, dtypes.bfloat16]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src,dst", [(s, d) for s in FLOATS for d in FLOATS if s != d], ids=str)
def test_float_cast_table(device, src, dst):
  xs = float_inputs(src)
  t = Tensor(xs, dtype=src, device=device)
  assert_same(read(t), xs, f"{src} upload")
  assert_same(read(t.cast(dst)), want_float(src, dst, xs), f"{src} -> {dst} on {device}")


def test_rne_oracle_agrees_with_numpy_and_torch():
  """The oracle against numpy (float64 -> float16 rounds once) and torch (float32 -> bfloat16)."""
  xs = np.array(FLOAT_EDGES)
  with np.errstate(over="ignore"):
    assert_same([to_f16(x) for x in xs], xs.astype(np.float16).astype(np.float64), "numpy float16")
    x32 = xs.astype(np.float32)
  bf = torch.from_numpy(x32).to(torch.bfloat16).to(torch.float64).numpy()
  assert_same([to_bf16(float(x)) for x in x32], bf, "torch bfloat16")


INTS = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint32]
INT_VALUES = {
  dtypes.int8: [0, 1, -1, 127, -128, 3, -77],
  dtypes.uint8: [0, 1, 255, 128, 129, 3],
  dtypes.int16: [0, -1, 2049, 2051, -2049, 257, 259, 32767, -32768],
  dtypes.int32: [0, -1, 2049, 2051, 257, 259, 65504, 65519, 65520, -65520, 2**24 + 1, 2**31 - 1, -2**31],
  dtypes.int64: [0, -1, 2049, 257, 65519, 65520, 2**24 + 1, 2**40 + 2**32 + 1, -2**62, 2**63 - 1],
  dtypes.uint32: [0, 1, 2049, 65520, 2**24 + 3, 2**32 - 1],
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", INTS, ids=str)
@pytest.mark.parametrize("dst", [dtypes.float16, dtypes.bfloat16], ids=str)
def test_int_to_half_and_bfloat16(device, src, dst):
  xs = INT_VALUES[src]
  f = to_f16 if dst == dtypes.float16 else to_bf16
  got = read(Tensor(xs, dtype=src, device=device).cast(dst))
  assert_same(got, [f(float(x)) for x in xs], f"{src} -> {dst} on {device}")
  if dst == dtypes.float16:  # numpy converts int -> float16 directly
    with np.errstate(over="ignore"):
      assert_same(got, np.array(xs, dtype=np.int64 if src != dtypes.uint32 else np.uint64).astype(np.float16), "numpy")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [dtypes.float16, dtypes.bfloat16], ids=str)
@pytest.mark.parametrize("dst", INTS, ids=str)
def test_half_and_bfloat16_to_int(device, src, dst):
  """Truncation toward zero, for values every int type holds."""
  xs = [0.0, 1.5, -1.5, 2.75, -2.75, 100.0, 127.0, 0.99609375]
  if dtypes.is_unsigned(dst): xs = [abs(x) for x in xs]
  if dst not in (dtypes.int8, dtypes.uint8): xs += [256.0, 2048.0, 3.0e4] + ([] if dtypes.is_unsigned(dst) else [-3.0e4])
  f = to_f16 if src == dtypes.float16 else to_bf16
  xs = [f(x) for x in xs]
  got = Tensor(xs, dtype=src, device=device).cast(dst).numpy()
  assert got.tolist() == [int(x) for x in xs], f"{src} -> {dst} on {device}: {xs} -> {got.tolist()}"


def test_issue_reproducer_float64_to_half():
  t = Tensor([1.5, 1 + 2**-11 + 2**-40], dtype=dtypes.float64, device="CPU")
  np.testing.assert_equal(t.cast(dtypes.float16).numpy(), np.array([1.5, 1 + 2**-10], np.float16))
  np.testing.assert_equal(read(t.cast(dtypes.bfloat16)), [1.5, 1.0])
