# tinygrad's top-level names, Device objects and baregrad.helpers as scripts import them
# (`import baregrad as tinygrad`): behaviour against numpy, hashlib, the filesystem and captured output.
import ctypes
import gzip
import hashlib
import io
import os
import pathlib
import pstats
import re
import sys
import tarfile
import urllib.error

import numpy as np
import pytest

import baregrad as tinygrad
from baregrad import Context, Device, GlobalCounters, Tensor, dtypes
from baregrad import helpers


# ---- top level ---------------------------------------------------------------------------------

def test_top_level_names_are_the_package_objects():
  from baregrad.device import Device as D
  from baregrad.engine.jit import TinyJit
  from baregrad.function import function
  from baregrad.helpers import Context as C, GlobalCounters as G, fetch, getenv
  assert (tinygrad.Device, tinygrad.TinyJit, tinygrad.function, tinygrad.Context) == (D, TinyJit, function, C)
  assert (tinygrad.GlobalCounters, tinygrad.fetch, tinygrad.getenv, tinygrad.dtypes) == (G, fetch, getenv, dtypes)
  assert tinygrad.Tensor is Tensor


def test_uop_is_the_variable_api_programs_use():
  from baregrad.uop.ops import UOp
  assert tinygrad.UOp is UOp
  v = UOp.variable("start_pos", 0, 7)
  assert isinstance(v, UOp) and isinstance(v.bind(3), UOp) and isinstance(v.bind(3) + 1, UOp)
  assert not isinstance(3, UOp) and not isinstance(Tensor([1]), UOp)
  table = Tensor([10, 20, 30, 40, 50, 60, 70, 80])
  np.testing.assert_equal(table[v.bind(5)].numpy(), 60)
  np.testing.assert_equal(table[:UOp.variable("sz", 1, 8).bind(3)].sum().numpy(), 60)
  with pytest.raises(TypeError, match=r"\[UOp\] .*only UOp.variable"): UOp()
  assert isinstance(UOp.const(1.0), UOp)  # a deviceless constant (test_compat_internals.py)
  from baregrad.uop.ops import sym_infer
  assert sym_infer((v.bind(3) + 1) * 2, {"start_pos": 5}) == 12


def test_uop_ops_names_the_ir_and_refuses_custom_kernels(capfd):
  from baregrad.uop.ops import KernelInfo, Ops, ProgramInfo
  with Context(DEBUG=4): (Tensor([1.0, 2.0]).contiguous().realize() * 3).sum().realize()
  printed = set(re.findall(r"= ([A-Z_0-9]+) ", capfd.readouterr().err + capfd.readouterr().out))
  assert {"SINK", "LOAD", "STORE", "MUL"} <= printed and printed <= {o.name for o in Ops}, printed
  from baregrad.uop import GroupOp as G, Ops as O
  assert O is Ops and Ops.ADD in G.Binary and Ops.SQRT in G.Unary and Ops.WHERE in G.Ternary and Ops.LOAD in G.Memory
  assert G.ALU == G.Unary | G.Binary | G.Ternary and Ops.STORE not in G.ALU
  for cls in (KernelInfo, ProgramInfo):
    with pytest.raises(NotImplementedError, match=rf"\[{cls.__name__}\] custom kernels"): cls(name="k")


def test_invalid_is_a_value_that_may_be_anything():
  from baregrad.dtype import Invalid, InvalidType
  import pickle
  assert InvalidType() is Invalid and pickle.loads(pickle.dumps(Invalid)) is Invalid and repr(Invalid) == "Invalid"
  e = Tensor.full((2, 3), Invalid, dtype=dtypes.float32)
  assert e.shape == (2, 3) and e.dtype == dtypes.float32
  assert Tensor.full((4,), Invalid).dtype == dtypes.bool  # tinygrad's dtype for it
  mask = Tensor.arange(4) < 2
  x = Tensor([1.0, 2.0, 3.0, 4.0])
  np.testing.assert_equal(mask.where(x, Invalid).numpy()[:2], [1.0, 2.0])  # the rest is unspecified
  np.testing.assert_equal(mask.where(Invalid, x).numpy()[2:], [3.0, 4.0])
  np.testing.assert_equal((mask.reshape(4, 1).where(x, Invalid)).numpy()[:2], [[1, 2, 3, 4]] * 2)  # broadcasts
  with pytest.raises(TypeError, match=r"\[where\] both values are Invalid"): mask.where(Invalid, Invalid)


@pytest.mark.parametrize("buffer", [True, False])
def test_full_buffer_flag_gives_the_same_values(buffer):
  t = Tensor.full((2, 2), 3.0, buffer=buffer)
  z = Tensor.zeros(3, buffer=buffer)
  np.testing.assert_equal(t.numpy(), np.full((2, 2), 3.0))
  t[0, 1] = 7  # writable either way
  np.testing.assert_equal(t.numpy(), [[3, 7], [3, 3]])
  np.testing.assert_equal((z + 1).numpy(), [1, 1, 1])


class _Model:
  def __init__(self):
    self.w = Tensor([[1.0, -2.0], [0.5, 3.0]])

  @tinygrad.function
  def __call__(self, x): return (x @ self.w).relu()

  @tinygrad.function(precompile=True)
  def both(self, x): return x + 1, x * self.w


def test_function_on_a_method_gives_the_undecorated_values_and_gradients():
  m, xn = _Model(), np.array([[1.0, 2.0], [-3.0, 0.25]], np.float32)
  x = Tensor(xn, requires_grad=True)
  out = m(x)
  np.testing.assert_allclose(out.numpy(), np.maximum(xn @ m.w.numpy(), 0), rtol=1e-6)
  out.sum().backward()
  ref = (xn @ m.w.numpy() > 0).astype(np.float32) @ m.w.numpy().T
  np.testing.assert_allclose(x.grad.numpy(), ref, rtol=1e-6)
  a, b = m.both(x)
  np.testing.assert_allclose(a.numpy(), xn + 1)
  np.testing.assert_allclose(b.numpy(), xn * m.w.numpy())


def test_function_realizes_nothing_and_prints_its_time_at_debug_2(capsys):
  f = tinygrad.function(lambda x: x * 2 + 1)
  x = Tensor([1.0, 2.0]).realize()
  before = GlobalCounters.kernel_count
  with Context(DEBUG=2): y = f(x)
  assert GlobalCounters.kernel_count == before
  assert re.search(r"^function in +\d+\.\d\d ms: \S*<lambda>$", capsys.readouterr().out, re.M)
  assert y.tolist() == [3.0, 5.0]


def test_function_misuse():
  with pytest.raises(RuntimeError, match=r"\[function\] .* returned int"): tinygrad.function(lambda x: 3)(Tensor([1.0]))
  with pytest.raises(RuntimeError, match=r"returned list"): tinygrad.function(lambda x: [x])(Tensor([1.0]))
  with pytest.raises(NotImplementedError, match=r"\[function\] grad_fxn"): tinygrad.function(grad_fxn=lambda *a: a)(abs)
  with pytest.raises(TypeError, match=r"\[function\] needs a callable"): tinygrad.function(3)


# ---- Device ------------------------------------------------------------------------------------

def test_device_objects_are_cached_and_canonical():
  d = Device["cpu"]
  assert d is Device["CPU"] and d is Device["CPU:0"] and d.device == "CPU"
  assert Device.default is Device[Device.DEFAULT] and Device.default.device == Device.DEFAULT
  d.synchronize()
  assert Device["CPU"].renderer is d.renderer


def test_device_graph_names_how_tinyjit_replays():
  # tinygrad tests skip when Device[d].graph is None; here every device replays a capture as one graph
  from baregrad import TinyJit
  from baregrad.device import HCQGraph
  assert Device["CPU"].graph is HCQGraph
  with pytest.raises(TypeError, match=r"\[HCQGraph\] graphs are made by TinyJit"): HCQGraph()
  step = TinyJit(lambda x: ((x + 1).realize() * 2).realize())
  x = Tensor([1.0]).realize()
  for want in (4.0, 10.0, 22.0, 46.0):  # the output fed back in as the next input (aliasing)
    x = step(x)
    assert x.item() == want
  assert step._cur.jit.uses_graph


def test_device_dtypes_are_those_that_compute():
  supported = Device[Device.DEFAULT].renderer.supported_dtypes()
  assert isinstance(supported, set) and {dtypes.float32, dtypes.int32, dtypes.bool} <= supported
  assert supported <= set(dtypes.all)
  for dt in sorted(supported):
    a = Tensor([0, 1, 3], dtype=dt)
    np_dt = np.float32 if dt is dtypes.bfloat16 else np.dtype(dt.fmt)
    want = (np.array([0, 1, 3]).astype(np_dt) * 2).astype(np_dt) if dt is not dtypes.bool else np.array([False, True, True])
    got = (a + a).numpy()
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64), err_msg=str(dt))


def test_renderer_code_for_op_names_the_ops_rendered_as_themselves():
  from baregrad.uop.ops import Ops
  ops = Device["CPU"].renderer.code_for_op
  # LLVM's x86 target has no native exp2/log2/sin/pow: the compiler expands them into polynomials first
  assert {Ops.ADD, Ops.MUL, Ops.SQRT, Ops.WHERE, Ops.CMPLT} <= set(ops) and not {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW} & set(ops)
  assert all(v is None for v in ops.values()) and Ops.LOAD not in ops


def test_device_allocator_round_trip_and_misuse():
  alloc = Device[Device.DEFAULT].allocator
  buf = alloc.alloc(6)
  alloc._copyin(buf, memoryview(bytearray(b"\x01\x02\xff\x00\x7f\x10")))
  out = bytearray(6)
  alloc._copyout(memoryview(out), buf)
  assert bytes(out) == b"\x01\x02\xff\x00\x7f\x10"
  with pytest.raises(ValueError, match=r"\[copyin\] 3 bytes into a buffer of 6"): alloc._copyin(buf, memoryview(b"abc"))
  alloc.free(buf, 6)
  with pytest.raises(RuntimeError, match=r"\[copyout\] the buffer was freed"): alloc._copyout(memoryview(out), buf)
  with pytest.raises(AssertionError, match=r"\[alloc\] size must be a positive int, got 0"): alloc.alloc(0)


def test_device_misuse():
  with pytest.raises(ModuleNotFoundError, match=r"\[device\] no device named 'FOO' \(this build has: CPU"): Device["foo"]
  with pytest.raises(ModuleNotFoundError, match=r"'NV:ABC'"): Device["NV:abc"]
  with pytest.raises(NotImplementedError, match=r"\[compile\] CPU"): Device["CPU"].compiler.compile("void f(){}")


def test_device_default_is_settable():
  old = Device.DEFAULT
  try:
    Device.DEFAULT = "cpu"
    assert Device.DEFAULT == "CPU" and Tensor([1]).device == "CPU"
  finally:
    Device.DEFAULT = old
  assert Device.DEFAULT == old


# ---- helpers: options --------------------------------------------------------------------------

def test_getenv_converts_to_the_default_type(monkeypatch):
  monkeypatch.setenv("BAREGRAD_TEST_COMPAT_INT", "7")
  monkeypatch.setenv("BAREGRAD_TEST_COMPAT_BAD", "x7")
  assert helpers.getenv("BAREGRAD_TEST_COMPAT_INT") == 7
  assert helpers.getenv("BAREGRAD_TEST_COMPAT_INT", "") == "7"
  assert helpers.getenv("BAREGRAD_TEST_COMPAT_UNSET", 2.5) == 2.5
  with pytest.raises(ValueError, match=r"BAREGRAD_TEST_COMPAT_BAD=x7: must be an int"):
    helpers.getenv("BAREGRAD_TEST_COMPAT_BAD", 0)


def test_debug_follows_context():
  from baregrad.helpers import DEBUG
  before = DEBUG.value
  with Context(DEBUG=2):
    assert DEBUG.value == 2 and DEBUG >= 2 and not DEBUG > 2 and DEBUG == 2 and int(DEBUG) == 2
  assert DEBUG.value == before and not DEBUG >= 2


def test_training_and_dev_follow_context():
  from baregrad.helpers import DEV, TRAINING
  assert not TRAINING and Tensor.training is False
  with Context(TRAINING=1):
    assert TRAINING and TRAINING.value == 1 and Tensor.training is True
  assert Tensor.training is False
  before = DEV.value
  with Context(DEV="NULL"):
    assert (DEV.value, DEV.device, DEV.interface, repr(DEV)) == ("NULL", "NULL", "", "NULL")
    assert Device.DEFAULT == "NULL"
  assert DEV.value == before
  with Context(DEV="MOCK+NV:1"): assert (DEV.interface, DEV.device, DEV.renderer) == ("MOCK", "NV", "")
  assert DEV.value == before


# ---- helpers: small functions ------------------------------------------------------------------

def test_sequence_helpers():
  H = helpers
  assert (H.prod([2, 3, 4]), H.prod([]), H.prod((0.5, 4))) == (24, 1, 2.0)
  assert H.dedup([3, 1, 3, 2, 1]) == [3, 1, 2]
  assert H.flatten([[1, 2], (3,), []]) == [1, 2, 3]
  assert H.all_same([1, 1, 1]) and H.all_same([]) and not H.all_same([1, 2])
  assert H.get_single_element([7]) == 7
  with pytest.raises(AssertionError, match="expected one element, got 2"): H.get_single_element([1, 2])
  assert H.all_int((1, 2)) and not H.all_int((1, 2.0))
  assert H.argsort([3.0, 1.0, 2.0]) == [1, 2, 0] and H.argsort((5, 4)) == (1, 0)
  assert H.partition(range(6), lambda x: x % 3 == 0) == ([0, 3], [1, 2, 4, 5])
  assert H.unwrap(0) == 0
  with pytest.raises(AssertionError, match=r"\[unwrap\]"): H.unwrap(None)


def test_poly_n_and_disable_gc():
  import gc
  assert helpers.polyN(3.0, [2.0, -1.0, 5.0]) == 2 * 9 - 3 + 5
  np.testing.assert_allclose(helpers.polyN(Tensor([1.0, 2.0, 3.0]), [1.0, -2.0, 1.0]).numpy(), [0.0, 1.0, 4.0])
  was = gc.isenabled()
  gc.enable()
  try:
    @helpers.disable_gc()
    def depth(n):
      assert not gc.isenabled()
      return 0 if n == 0 else 1 + depth(n - 1)
    assert depth(3) == 3 and gc.isenabled()  # restored when the outermost call ends
    with helpers.disable_gc(): assert not gc.isenabled()
    assert gc.isenabled()
  finally:
    (gc.enable if was else gc.disable)()
  assert tinygrad.tensor.is_numpy_ndarray(np.zeros(2)) and not tinygrad.tensor.is_numpy_ndarray(Tensor([1]))


def test_jit_zero_runs_every_call_eagerly():
  calls = []
  def f(x):
    calls.append(1)
    return (x * 2).realize()
  jf = tinygrad.TinyJit(f)
  with Context(JIT=0):
    for i in range(4): np.testing.assert_allclose(jf(Tensor([float(i)])).numpy(), [2.0 * i])
  assert len(calls) == 4 and not jf.captured
  for i in range(4): jf(Tensor([float(i)]))
  assert len(calls) == 6  # JIT=1 again: an eager call, a capture, then replays


def test_context_var_tolist_and_switches_that_change_nothing():
  with Context(EMULATED_DTYPES="half, long"):
    assert helpers.EMULATED_DTYPES.tolist(dtypes) == [dtypes.half, dtypes.long]
    assert helpers.EMULATED_DTYPES.tolist() == ["half", "long"]
    np.testing.assert_allclose((Tensor([1.5], dtype=dtypes.half) * 2).numpy(), [3.0])
  assert helpers.EMULATED_DTYPES.tolist(dtypes) == [] and not helpers.CHECK_OOB and not helpers.WINO


def test_scalar_dtype_conversions():
  import torch
  from baregrad.dtype import truncate, float_to_fp8, fp8_to_float, strong_dtype, _to_torch_dtype, _from_torch_dtype
  # int wrap and float rounding, against numpy's
  for d, n in [(dtypes.int8, np.int8), (dtypes.uint8, np.uint8), (dtypes.int32, np.int32), (dtypes.uint16, np.uint16)]:
    for x in (200, -1, 2**31, 70000, -129):
      assert truncate[d](x) == np.array(x).astype(np.int64).astype(n).item(), (d, x)
  assert truncate[dtypes.float16](1 / 3) == float(np.float16(1 / 3)) and truncate[dtypes.float32](0.1) == float(np.float32(0.1))
  assert truncate[dtypes.bfloat16](1 / 3) == torch.tensor(1 / 3).to(torch.bfloat16).item()
  assert truncate[dtypes.bfloat16](1.0 + 2**-8) == 1.0 and truncate[dtypes.bfloat16](1.0 + 3 * 2**-8) == 1.0 + 2**-6  # ties to even
  # fp8 codes from the OCP formats' definitions (e4m3: bias 7, 3 mantissa bits; e5m2: bias 15, 2)
  assert [float_to_fp8(x, dtypes.fp8e4m3) for x in (1.0, -2.0, 448.0, 0.0, 2**-9)] == [0x38, 0xC0, 0x7E, 0x00, 0x01]
  assert [float_to_fp8(x, dtypes.fp8e5m2) for x in (1.0, 57344.0, -0.5)] == [0x3C, 0x7B, 0xB8]
  assert [fp8_to_float(c, dtypes.fp8e4m3) for c in (0x38, 0xC0, 0x7E, 0x01)] == [1.0, -2.0, 448.0, 2**-9]
  assert np.isnan(fp8_to_float(0x7F, dtypes.fp8e4m3)) and fp8_to_float(0x7C, dtypes.fp8e5m2) == float("inf")
  assert truncate[dtypes.fp8e4m3](1.06) == 1.0 and truncate[dtypes.fp8e4m3](1.07) == 1.125
  with pytest.raises(TypeError, match=r"\[float_to_fp8\].*not an fp8"): float_to_fp8(1.0, dtypes.float32)
  with pytest.raises(ValueError, match=r"\[fp8_to_float\] code 256"): fp8_to_float(256, dtypes.fp8e4m3)
  assert strong_dtype(dtypes.int8) is dtypes.int8
  assert _to_torch_dtype(dtypes.float32) == torch.float32 and _to_torch_dtype(dtypes.fp8e5m2) == torch.uint8
  assert _from_torch_dtype(torch.int16) is dtypes.int16 and _to_torch_dtype(dtypes.bfloat16) == torch.bfloat16


def test_number_helpers():
  assert [helpers.ceildiv(n, 4) for n in (0, 1, 4, 5, -5)] == [0, 1, 1, 2, -1]
  assert helpers.ceildiv(5.0, 2) == 3 and isinstance(helpers.ceildiv(5.0, 2), int)
  assert [helpers.round_up(n, 8) for n in (0, 1, 8, 9)] == [0, 8, 8, 16]


def test_colored_and_ansilen():
  assert helpers.colored("hi", "red") == "\x1b[31mhi\x1b[0m"
  assert helpers.colored("hi", "RED") == "\x1b[91mhi\x1b[0m"
  assert helpers.colored("hi", "green", background=True) == "\x1b[42mhi\x1b[0m"
  assert helpers.colored("hi", None) == "hi"
  with Context(NO_COLOR=1): assert helpers.colored("hi", "red") == "hi"
  assert helpers.ansilen(helpers.colored("four", "blue") + "!") == 5
  with pytest.raises(ValueError, match=r"\[colored\] unknown color 'pink'"): helpers.colored("x", "pink")


def test_platform_temp_and_to_mv():
  assert helpers.OSX is (sys.platform == "darwin")
  import getpass, tempfile
  assert helpers.temp("x.bin") == os.path.join(tempfile.gettempdir(), "x.bin")
  assert helpers.temp("x", append_user=True).endswith(f"x.{getpass.getuser()}")
  buf = (ctypes.c_uint8 * 4)(1, 2, 3, 4)
  mv = helpers.to_mv(ctypes.addressof(buf), 4)
  assert bytes(mv) == b"\x01\x02\x03\x04" and mv.format == "B"
  mv[1] = 9
  assert buf[1] == 9  # aliases the memory, no copy


# ---- helpers: Timing, Profiling, tqdm -----------------------------------------------------------

def test_timing_prints_milliseconds(capsys):
  with helpers.Timing("step: ", on_exit=lambda ns: f" ({ns} ns)") as _: sum(range(1000))
  out = capsys.readouterr().out
  m = re.fullmatch(r"step: +(\d+\.\d\d) ms \((\d+) ns\)\n", out)
  assert m and abs(float(m.group(1)) - int(m.group(2)) * 1e-6) < 0.01, out
  with helpers.Timing("quiet", enabled=False): pass
  assert capsys.readouterr().out == ""

  @helpers.Timing("deco ")
  def f(): return 5
  assert f() == 5 and re.fullmatch(r"deco +\d+\.\d\d ms\n", capsys.readouterr().out, re.M)


def _profiled_work(): return sorted(range(2000), key=lambda x: -x)


def test_profiling_prints_and_saves_stats(capsys, tmp_path):
  fn = tmp_path / "prof.stats"
  with helpers.Profiling(frac=1.0, fn=str(fn)): _profiled_work()
  out = capsys.readouterr().out
  assert re.search(r"^n: +1  tm: +\d+\.\d\dms  tot: +\d+\.\d\dms .*_profiled_work", out, re.M), out
  assert any(f[2] == "_profiled_work" for f in pstats.Stats(str(fn)).stats)
  with helpers.Profiling(enabled=False): _profiled_work()
  assert capsys.readouterr().out == ""


def test_tqdm_iterates_and_draws_on_stderr(capsys):
  assert list(helpers.tqdm([5, 6, 7], desc="load")) == [5, 6, 7]
  err = capsys.readouterr().err
  assert err.endswith("\n") and err.count("\n") == 1
  last = err.rstrip("\n").split("\r")[-1]
  assert re.fullmatch(r"load: 100%\|█+\| 3/3 \[00:00<00:00, +[\d.]+it/s\]", last), repr(last)
  assert list(helpers.trange(3, disable=True)) == [0, 1, 2]
  assert capsys.readouterr().err == ""


def test_tqdm_manual_updates(capsys):
  with helpers.tqdm(total=4, unit="B") as t:
    t.update(1)
    t.set_description("half")
    t.update(1)
  err = capsys.readouterr().err
  last = err.rstrip("\n").split("\r")[-1]
  assert re.fullmatch(r"half:  50%\| *█*[ ]+\| 2/4 \[00:00<00:00, +[\d.]+B/s\]", last), repr(last)
  t = helpers.tqdm(unit="img")  # no total: a count, no bar
  t.update(3)
  t.close()
  last = capsys.readouterr().err.rstrip("\n").split("\r")[-1]
  assert re.fullmatch(r"3img \[00:00, +[\d.]+img/s\]", last), repr(last)
  with pytest.raises(TypeError, match=r"\[tqdm\] needs an iterable"): list(helpers.tqdm(total=2, disable=True))


def test_tqdm_unit_scale_uses_si_prefixes(capsys):
  t = helpers.tqdm(total=2048, unit="B", unit_scale=True, desc="get")
  t.update(1500)
  t.close()
  last = capsys.readouterr().err.rstrip("\n").split("\r")[-1]
  assert re.fullmatch(r"get:  73%\|█+ +\| 1\.50k/2\.05k \[00:00<00:00, +[\d.]+[kMG]?B/s\]", last), repr(last)


# ---- helpers: fetch ----------------------------------------------------------------------------

@pytest.fixture
def cache(monkeypatch, tmp_path):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
  return tmp_path / "xdg" / "tinygrad" / "downloads"


def test_fetch_local_paths_and_file_urls(cache, tmp_path):
  src = tmp_path / "data.bin"
  src.write_bytes(b"weights")
  assert helpers.fetch(str(src)) == src and isinstance(helpers.fetch(str(src)), pathlib.Path)
  url = src.as_uri()
  p = helpers.fetch(url)
  assert p == cache / hashlib.md5(url.encode()).hexdigest() and p.read_bytes() == b"weights"
  p2 = helpers.fetch(url, name="w.bin", subdir="models", sha256=hashlib.sha256(b"weights").hexdigest())
  assert p2 == cache / "models" / "w.bin" and p2.read_bytes() == b"weights"
  gz = tmp_path / "d.gz"
  gz.write_bytes(gzip.compress(b"unzipped"))
  p3 = helpers.fetch(gz.as_uri(), gunzip=True)
  assert p3.name.endswith(".gunzip") and p3.read_bytes() == b"unzipped"
  with pytest.raises(RuntimeError, match=r"\[fetch\] sha256 mismatch"): helpers.fetch(url, name="bad", sha256="0" * 64)
  assert not (cache / "bad").exists()


def test_from_url_reads_local_files_and_refuses_the_network(cache, tmp_path):
  src = tmp_path / "w.bin"
  src.write_bytes(bytes(range(10)))
  t = Tensor.from_url(src.as_uri(), device=Device.DEFAULT)
  assert t.dtype == dtypes.uint8 and t.tolist() == list(range(10))
  gz = tmp_path / "w.gz"
  gz.write_bytes(gzip.compress(b"xyz"))
  assert Tensor.from_url(gz.as_uri(), gunzip=True, device=Device.DEFAULT).tolist() == list(b"xyz")
  with pytest.raises(urllib.error.URLError, match=r"https://example\.invalid/w\.bin"):
    Tensor.from_url("https://example.invalid/w.bin")


def test_target_parses_device_strings_as_tinygrad():
  T = helpers.Target
  assert T.parse("MOCK+NV") == T("NV", interface="MOCK") and repr(T.parse("MOCK+NV")) == "MOCK+NV"
  assert T.parse("nv:ptx:sm_90") == T("NV", "PTX", "sm_90") and repr(T.parse("nv:ptx:sm_90")) == "NV:PTX:sm_90"
  assert T.parse("PCI:0,1+amd") == T("AMD", interface="PCI", indices="0,1") and repr(T.parse("PCI:0,1+amd")) == "PCI:0,1+AMD"
  assert T.parse("NV").replacedefault(renderer="PTX", device="X") == T("NV", "PTX")
  for bad in ("A+B+C", "A:B:C:D"):
    with pytest.raises(RuntimeError, match=r"\[Target\] too many"): T.parse(bad)


def test_void_is_a_dtype_no_tensor_holds():
  assert dtypes.void.itemsize == 0 and dtypes.void not in dtypes.all and repr(dtypes.void) == "dtypes.void"
  for make in (lambda: Tensor.empty(2, dtype=dtypes.void), lambda: Tensor([1, 2], dtype="void"), lambda: Tensor([1.0]).cast(dtypes.void),
               lambda: Tensor([1.0]).bitcast(dtypes.void)):
    with pytest.raises(TypeError, match=r"void has no values"): make()


def test_const_const_like_and_invalids():
  t = Tensor([[1, 2, 3]], dtype=dtypes.int16)
  c = t.const_like(7)
  assert c.shape == (1, 3) and c.dtype == dtypes.int16 and c.device == t.device and c.tolist() == [[7, 7, 7]]
  assert t.const_like(0.5, dtypes.float32).tolist() == [[0.5, 0.5, 0.5]]
  k = Tensor.const(2.5)
  assert k.shape == () and k.dtype == dtypes.float32 and k.item() == 2.5
  assert Tensor.const(3, dtypes.int8).dtype == dtypes.int8
  v = Tensor.invalids(2, 3, dtype=dtypes.float16)
  assert v.shape == (2, 3) and v.dtype == dtypes.float16


def test_fetch_extracts_tars(cache, tmp_path):
  tar = tmp_path / "a.tar"
  with tarfile.open(tar, "w") as t:
    info = tarfile.TarInfo("sub/x.txt")
    info.size = 3
    t.addfile(info, io.BytesIO(b"abc"))
  out = helpers.fetch(tar.as_uri(), name="a.tar", extract=True)
  assert out == cache / "a.tar.extract" and (out / "sub" / "x.txt").read_bytes() == b"abc"


def test_fetch_http_uses_the_cache_or_says_there_is_no_network(cache):
  url = "https://example.com/model.safetensors"
  with pytest.raises(urllib.error.URLError, match=r"\[fetch\] baregrad has no network access .*example.com/model"):
    helpers.fetch(url)
  placed = cache / hashlib.md5(url.encode()).hexdigest()
  placed.parent.mkdir(parents=True)
  placed.write_bytes(b"cached")
  assert helpers.fetch(url) == placed
  with pytest.raises(urllib.error.URLError, match=r"does not match sha256"): helpers.fetch(url, sha256="1" * 64)


def test_fetch_misuse(cache):
  with pytest.raises(ValueError, match=r"\[fetch\] 'data/x.bin' is neither a URL nor a path"): helpers.fetch("data/x.bin")


def test_schedule_linear_lists_the_kernels_and_run_linear_runs_them():
  from baregrad.engine.realize import compile_linear, run_linear
  from baregrad.uop.ops import Ops
  from baregrad import Variable
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  a = Tensor(x).realize()
  b, c = (a * 2).sum(1), (a + 1).exp()
  GlobalCounters.reset()
  lin = Tensor.schedule_linear(b, c)
  assert len(lin.src) == 2 and all(call.src[0].op is Ops.SINK for call in lin.src) and GlobalCounters.kernel_count == 0
  assert {(call.shape, call.dtype, call.inputs) for call in lin.src} == {((3, 1), "float32", 1), ((3, 4), "float32", 1)}
  assert compile_linear(lin) is lin and GlobalCounters.kernel_count == 0
  from baregrad.engine.realize import estimate_uop
  est = [estimate_uop(call) for call in lin.src]
  run_linear(lin)
  assert GlobalCounters.kernel_count == 2
  assert (GlobalCounters.global_ops, GlobalCounters.global_mem) == (sum(e.ops for e in est), sum(e.mem for e in est))
  assert sum(e.mem for e in est) >= 4 * (12 + 3 + 12 + 12)  # at least each input read and output written once
  np.testing.assert_allclose(b.numpy(), (x * 2).sum(1))
  np.testing.assert_allclose(c.numpy(), np.exp(x + 1), rtol=1e-6)
  assert len(Tensor.schedule_linear(b, c).src) == 0  # realized by the schedule
  with pytest.raises(RuntimeError, match=r"\[run_linear\] this schedule has run already"): run_linear(lin)
  assert [(e.ops, e.mem) for e in est] == [(e.ops, e.mem) for e in map(estimate_uop, lin.src)]  # after it ran too
  assert len(Tensor.zeros(3, 3).schedule_linear().src) == 0  # a broadcast constant computes nothing
  d = (a[:, :Variable("i", 1, 4).bind(3)] * 2).sum(1)
  with pytest.raises(ValueError, match=r"\[schedule_linear\] the schedule binds Variables \{'i': 3\}"): d.schedule_linear()
  lin, var_vals = d.linear_with_vars()
  assert var_vals == {"i": 3}
  with pytest.raises(ValueError, match=r"\[run_linear\] var_vals \{'i': 2\} differ"): run_linear(lin, {"i": 2})
  run_linear(lin, var_vals)
  np.testing.assert_allclose(d.numpy(), (x[:, :3] * 2).sum(1))


def test_data_is_a_memoryview_of_the_values():
  x = np.arange(6, dtype=np.int32).reshape(2, 3)
  d = Tensor(x).data()
  assert d.format == "i" and d.shape == (2, 3) and d.tolist() == x.tolist()
  e = Tensor([], dtype=dtypes.int32).reshape(0, 2).data()  # tinygrad's: empty ones are flat, so list() works
  assert e.itemsize == 4 and e.shape == (0,) and list(e) == []


def test_more_tinygrad_helpers():
  from baregrad.helpers import ansistrip, cdiv, cmod, colored, count, from_mv, get_shape, getbits, merge_dicts, profile_marker, strip_parens, time_to_str, word_wrap
  for x in range(-9, 10):
    for y in (-4, -3, 3, 4):
      assert cdiv(x, y) == int(np.trunc(x / y)) and cmod(x, y) == int(np.fmod(x, y))
  assert cdiv(5, 0) == 0
  assert getbits(0b1011_0110, 2, 5) == 0b1101
  assert get_shape([[1, 2, 3], [4, 5, 6]]) == (2, 3) and get_shape("abc") == () and get_shape(np.float32(1)) == ()
  with pytest.raises(ValueError, match="inhomogeneous"): get_shape([[1, 2], [3]])
  assert strip_parens("(a+b)") == "a+b" and strip_parens("(a)+(b)") == "(a)+(b)" and strip_parens("a") == "a"
  assert merge_dicts([{"a": 1}, {"b": 2}, {"a": 1}]) == {"a": 1, "b": 2}
  with pytest.raises(RuntimeError, match="'a'"): merge_dicts([{"a": 1}, {"a": 2}])
  assert time_to_str(20).strip() == "20.00s" and time_to_str(0.5).strip() == "500.00ms" and time_to_str(2e-5).strip() == "20.00us"
  assert word_wrap("x" * 25, 10).splitlines() == ["x" * 10, "x" * 10, "x" * 5]
  wrapped = word_wrap(colored("x" * 20, "red"), 10)  # escapes take no width; the closing one stays on the last line
  assert len(wrapped.splitlines()) == 2 and all(len(ansistrip(line)) == 10 for line in wrapped.splitlines())
  buf = bytearray(b"abcd")
  arr = from_mv(memoryview(buf), ctypes.c_uint8)
  arr[0] = ord("z")
  assert buf == bytearray(b"zbcd") and next(count(3)) == 3 and profile_marker("step") is None


def test_default_float_is_a_context_var():
  from baregrad import Context, nn
  from baregrad.helpers import DEFAULT_FLOAT
  with Context(DEFAULT_FLOAT=dtypes.float16):
    assert DEFAULT_FLOAT.value == dtypes.float16 == dtypes.default_float
    assert Tensor.randn(3).dtype == nn.Linear(2, 2).weight.dtype == Tensor([1.5]).dtype == dtypes.float16
  assert dtypes.default_float == dtypes.float32 and Tensor([1.5]).dtype == dtypes.float32
  with Context(DEFAULT_INT="int64"): assert Tensor([1, 2]).dtype == dtypes.int64
  assert Tensor([1, 2]).dtype == dtypes.int32
  with pytest.raises(ValueError, match=r"\[DEFAULT_FLOAT\] dtypes.int is not a float dtype"):
    with Context(DEFAULT_FLOAT=dtypes.int32): pass
  assert dtypes.default_float == dtypes.float32
