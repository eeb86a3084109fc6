# Misuse of the command-line tools, the options and the Python API's argument types (issue 16):
# bad environment variables name the variable and exit 2 in every tool and fail the Python
# import with a ValueError; bare_bench refuses a --filter std::regex would overflow its stack on;
# examples/digits{,.py} refuse an empty, corrupt or mislabelled file naming it and the row; and
# wrong argument types are TypeErrors naming the op and the type, never AttributeErrors. Tools
# run from the build the _baregrad extension comes from, each in a subprocess with a timeout.
import gzip
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import _baregrad
from baregrad import Context, Tensor, nn
from baregrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(_baregrad.__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = {
    "bare_info": [os.path.join(BUILD, "tools", "bare_info"), "CPU"],
    "bare_bench": [os.path.join(BUILD, "bench", "bare_bench"), "--filter", "^no such bench$"],
    "digits": [os.path.join(BUILD, "examples", "digits"), "--epochs", "0"],
}
PYENV = {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(BUILD, "python")])}


def run(cmd, timeout=120, **env):
  e = {k: v for k, v in os.environ.items() if k not in ("THREADS", "DEBUG", "SPEC", "DEV",
                                                         "AMD_AQL")}
  e.update(env)
  return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)


def py(code, **env):
  return run([sys.executable, "-c", code], **PYENV, **env)


def tool(name):
  if not os.path.exists(TOOLS[name][0]): pytest.skip(f"{TOOLS[name][0]} is not built")
  return TOOLS[name]


# ---- options -------------------------------------------------------------------------------

BAD_OPTIONS = [
    ("THREADS", "-3", "must be an integer in [0, 1024]"),
    ("THREADS", "100000", "must be an integer in [0, 1024]"),
    ("THREADS", "1e3", "must be an integer in [0, 1024]"),
    ("DEBUG", "abc", "must be an integer >= 0"),
    ("DEBUG", "99999999999999", "must be an integer >= 0"),
    ("SPEC", "maybe", "must be 0 or 1"),
    ("DISABLE_COMPILER_CACHE", "2", "must be 0 or 1"),
    ("BEAM", "abc", "must be an integer in [0, 256]"),
]


@pytest.mark.parametrize("name", sorted(TOOLS))
@pytest.mark.parametrize("var,value,want", BAD_OPTIONS)
def test_bad_option_is_a_usage_error_naming_the_variable(name, var, value, want):
  r = run(tool(name), **{var: value})
  assert r.returncode == 2, (r.returncode, r.stderr)
  assert f"{name}: {var}={value}: {want}" in r.stderr
  assert "terminate called" not in r.stderr and "Aborted" not in r.stderr


@pytest.mark.parametrize("var,value,want", BAD_OPTIONS)
def test_bad_option_fails_the_python_import_naming_the_variable(var, value, want):
  r = py("import baregrad", **{var: value})
  assert r.returncode == 1
  assert f"ValueError: [options] {var}={value}: {want}" in r.stderr, r.stderr


@pytest.mark.parametrize("var", ["NOOPT"])
def test_python_only_option_that_does_not_parse_names_the_variable(var):
  r = py("import baregrad", **{var: "abc"})
  assert r.returncode == 1
  assert f"ValueError: [getenv] {var}=abc: must be an int" in r.stderr, r.stderr


def test_threads_sets_the_cpu_device_threads():
  r = run(tool("bare_info"), THREADS="3")
  assert r.returncode == 0, r.stderr
  assert re.search(r"^CPU: .*, 3 threads$", r.stdout, re.M), r.stdout
  r = run(tool("bare_info"), THREADS="1024")
  assert r.returncode == 0 and "1024 threads" in r.stdout, r.stderr


def test_info_describes_the_opencl_devices_or_says_why_there_are_none():
  r = run([os.path.join(BUILD, "tools", "bare_info"), "CL"])
  listing = run([os.path.join(BUILD, "tools", "bare_info")])
  assert listing.returncode == 0, listing.stderr
  if r.returncode != 0:  # no OpenCL platform on this machine: the reason, named
    assert re.search(r"^CL: not available: .*OpenCL", r.stdout, re.M), r.stdout
    assert re.search(r"^CL: (not available|0 platform)", listing.stdout, re.M), listing.stdout
    return
  assert re.search(r"^CL: .+ \(.+\)$", r.stdout, re.M), r.stdout
  assert "our OpenCL C, built by the platform (clBuildProgram)" in r.stdout, r.stdout
  assert re.search(r"^  kernels        work-groups of up to \d+ threads \(LOCAL, 3-D\); shared memory "
                   r"\(GROUP, GROUPTOP, STAGE\); no warp exchanges; element-aligned buffers$",
                   r.stdout, re.M), r.stdout
  assert re.search(r"^  CL:0  .+, \d+ compute units, ", listing.stdout, re.M), listing.stdout


def test_info_describes_the_kernel_shapes_of_the_fake_nvidia_gpu():
  r = run([os.path.join(BUILD, "tools", "bare_info"), "MOCK+NV"])
  if r.returncode != 0:  # no ptxas on this machine: the reason, named
    assert re.search(r"^MOCK\+NV: not available: .*ptxas", r.stdout, re.M), r.stdout
    return
  assert "  kernels        work-groups of up to 128 threads (LOCAL, 3-D); shared memory (GROUP, " \
         "GROUPTOP, STAGE); warp exchanges of 32 lanes; buffers 16-byte aligned (vector accesses)" \
         in r.stdout, r.stdout


def test_info_describes_the_fake_amd_gpu_and_names_why_amd_is_missing():
  r = run([os.path.join(BUILD, "tools", "bare_info"), "MOCK+AMD"])
  if r.returncode != 0:  # no ld.lld on this machine: the reason, named
    assert re.search(r"^MOCK\+AMD: not available: .*ld\.lld", r.stdout, re.M), r.stdout
    return
  assert re.search(r"^MOCK\+AMD: AMD GPU 0 \(gpu_id 0x[0-9a-f]+, gfx1100\) \(a fake GPU: a test "
                   r"instrument\)$", r.stdout, re.M), r.stdout
  assert re.search(r"^  architecture   gfx1100 \(gfx_target_version 110000; GC 11\.0\.0\); wave32; "
                   r"nv PM4; SDMA 6$", r.stdout, re.M), r.stdout
  assert "  queues         PM4 compute queue (AMD_AQL=0), SDMA copy queue\n" in r.stdout, r.stdout
  assert "  libdrm         not queried (a fake GPU has no DRM device)\n" in r.stdout, r.stdout
  aql = run([os.path.join(BUILD, "tools", "bare_info"), "MOCK+AMD"], AMD_AQL="1")
  assert "  queues         AQL compute queue (AMD_AQL=1), SDMA copy queue\n" in aql.stdout, aql.stdout
  bad = run([os.path.join(BUILD, "tools", "bare_info"), "MOCK+AMD"], AMD_AQL="2")
  assert "AMD_AQL=2: must be 1 (AQL compute queue), 0 (PM4) or empty" in bad.stdout, bad.stdout
  assert "  kernels        work-groups of up to 128 threads (LOCAL, 3-D); shared memory (GROUP, " \
         "GROUPTOP, STAGE); warp exchanges of 32 lanes; buffers 16-byte aligned (vector accesses)" \
         in r.stdout, r.stdout
  listing = run([os.path.join(BUILD, "tools", "bare_info")])
  if not os.path.exists("/dev/kfd"):
    assert re.search(r"^AMD: not available: no AMD GPU: /dev/kfd does not exist \(load the amdgpu "
                     r"kernel module", listing.stdout, re.M), listing.stdout
    # And what DRM sees (libdrm): render nodes, or none.
    assert re.search(r"^AMD: not available: .*\n  DRM            (no render node|/dev/dri/renderD)",
                     listing.stdout, re.M), listing.stdout


def test_context_refuses_a_bad_thread_count_and_keeps_the_old_one():
  from baregrad.helpers import ContextVar
  before = _baregrad.option_value("THREADS")
  with pytest.raises(ValueError, match=r"\[options\] THREADS=-3: must be an integer in \[0, 1024\]"):
    with Context(THREADS=-3): pass
  assert _baregrad.option_value("THREADS") == before
  with pytest.raises(ValueError, match=r"DEBUG=abc: must be an integer >= 0"):
    ContextVar._cache["DEBUG"].value = "abc"


# ---- bare_bench --filter -------------------------------------------------------------------

def bench(*args):
  return run([tool("bare_bench")[0], *args], timeout=60)


@pytest.mark.parametrize("pattern,why", [
    ("(" * 60000 + ")" * 60000, "120000 characters; at most 256"),
    ("a" * 60000, "60000 characters; at most 256"),
    ("(" * 33 + "a" + ")" * 33, "33 nested groups; at most 32"),
    ("x{0,99000}", "repetition {99000}; at most {100}"),
    ("(a?){101}", "repetition {101}; at most {100}"),
])
def test_bench_refuses_a_filter_that_would_overflow_the_regex_stack(pattern, why):
  r = bench("--filter", pattern)
  assert r.returncode == 2, (r.returncode, r.stderr[-500:])
  assert f"bare_bench: --filter regex is too big: {why}" in r.stderr


def test_bench_filter_at_the_limits_still_compiles_and_matches():
  # 32 nested groups, 256 characters, {100}: accepted, compiled and matched (against no name).
  for pattern in ["(" * 32 + "zz" + ")" * 32, "q" * 256, "(zz){100}"]:
    r = bench("--filter", pattern)
    assert r.returncode == 2 and "matches no benchmark" in r.stderr, (pattern, r.stderr[-300:])


def test_bench_filter_errors_and_selection():
  r = bench("--filter", "[")
  assert r.returncode == 2 and "bare_bench: bad --filter regex '['" in r.stderr
  r = bench("--filter", "zz_no_such_bench")
  assert r.returncode == 2 and "bare_bench: --filter 'zz_no_such_bench' matches no benchmark" in r.stderr
  r = bench("--filter")
  assert r.returncode == 2 and "--filter needs a value" in r.stderr


def test_bench_filter_runs_exactly_the_matching_benchmark(tmp_path):
  import json
  out = tmp_path / "rows.json"
  r = run([tool("bare_bench")[0], "--filter", "^peak fma fp32$", "--quick", "--threads", "1", "--json", str(out)], timeout=300)
  assert r.returncode == 0, r.stderr[-500:]
  assert "[1/1] peak fma fp32 ..." in r.stderr
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [row["name"] for row in rows] == ["peak fma fp32 1 thread", "peak fma fp32"]
  assert all(row["unit"] == "GFLOP/s" and row["value"] > 0 for row in rows)


# ---- examples/digits and examples/digits.py ------------------------------------------------

def row(pixels=0.0, label=3, n=64):
  return ",".join(str(pixels) for _ in range(n)) + f",{label}"


def write(tmp_path, name, text, gz=True):
  p = tmp_path / name
  data = text.encode() if isinstance(text, str) else text
  p.write_bytes(gzip.compress(data) if gz else data)
  return str(p)


GOOD = "\n".join(row(label=i % 10) for i in range(10)) + "\n"
BAD_FILES = [
    # name, content, whether to gzip, what the message says
    ("empty.csv.gz", "", True, r"empty: no rows of 64 pixels and a label"),
    ("blank.csv", "\n\n", False, r"empty: no rows of 64 pixels and a label"),
    ("corrupt.csv.gz", gzip.compress(GOOD.encode())[:40], False, r"cannot read"),
    ("short.csv.gz", GOOD + row(n=10) + "\n", True, r"row 11 has 11 values, want 65"),
    ("junk.csv.gz", GOOD + row().replace("0.0", "zz", 1) + "\n", True, r"row 11: .*zz"),
    ("label.csv.gz", GOOD + row(label=12) + "\n", True, r"row 11: label 12(\.0+)? is out of range"),
    ("neglabel.csv.gz", row(label=-1) + "\n" + GOOD, True, r"row 1: label -1(\.0+)? is out of range"),
    ("fraclabel.csv.gz", GOOD + row(label=3.5) + "\n", True, r"row 11: label 3\.50* is out of range"),
    ("nanlabel.csv.gz", GOOD + row(label="nan") + "\n", True, r"row 11: (label nan is out of range|'nan' is not a number)"),
    ("pixel.csv.gz", GOOD + row(pixels=17) + "\n", True, r"row 11: .*pixel.* out of range \[0, 16\]"),
    ("few.csv.gz", row() + "\n" + row() + "\n", True, r"only 2 rows; at least 5"),
]


@pytest.mark.parametrize("name,content,gz,want", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_digits_refuses_a_bad_file_naming_it(tmp_path, name, content, gz, want):
  path = write(tmp_path, name, content, gz)
  r = run([tool("digits")[0], path, "--epochs", "1"])
  assert r.returncode == 2, (r.returncode, r.stdout[-300:], r.stderr)
  assert re.search(re.escape(f"digits: {path}: ") + want, r.stderr), r.stderr
  assert "nan%" not in r.stdout


@pytest.mark.parametrize("name,content,gz,want", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_digits_py_refuses_a_bad_file_naming_it(tmp_path, name, content, gz, want):
  path = write(tmp_path, name, content, gz)
  r = run([sys.executable, os.path.join(ROOT, "examples", "digits.py"), path], EPOCHS="1", **PYENV)
  assert r.returncode != 0, r.stdout[-300:]
  assert re.search(re.escape(f"digits.py: {path}: ") + want, r.stderr), r.stderr
  assert "nan%" not in r.stdout and "Traceback" not in r.stderr


def test_digits_reads_a_small_good_file(tmp_path):
  path = write(tmp_path, "good.csv.gz", GOOD)
  r = run([tool("digits")[0], path, "--epochs", "0"])
  assert "digits: 8 train, 2 held-out images" in r.stdout, r.stderr
  m = re.search(r"held-out accuracy ([0-9.]+)% after 0 epochs", r.stdout)
  assert m and 0 <= float(m.group(1)) <= 100, r.stdout


@pytest.mark.parametrize("args,want", [
    (["--epochs", "abc"], "digits: --epochs wants an integer in [0, 100000], got 'abc'"),
    (["--epochs", "-1"], "digits: --epochs wants an integer in [0, 100000], got '-1'"),
    (["--epochs"], "digits: --epochs wants an integer in [0, 100000], got 'nothing'"),
    (["--seed", "1x"], "digits: --seed wants a non-negative integer, got '1x'"),
])
def test_digits_bad_arguments(args, want):
  r = run([tool("digits")[0], *args])
  assert r.returncode == 2 and want in r.stderr, r.stderr


# ---- wrong types: TypeError naming the op, never AttributeError -----------------------------

def test_grad_must_be_a_tensor():
  x = Tensor([1.0])
  with pytest.raises(TypeError, match=r"\[grad\] grad must be a Tensor or None, got list"):
    x.grad = [1.0]
  x.grad = Tensor([2.0])
  np.testing.assert_equal(x.grad.numpy(), [2.0])
  x.grad = None
  assert x.grad is None


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW", "LAMB"])
def test_optimizer_params_must_be_tensors(opt):
  make = getattr(nn.optim, opt)
  with pytest.raises(TypeError, match=r"params must be Tensors, got float at index 0"):
    make([1.0])
  with pytest.raises(TypeError, match=r"params must be Tensors, got list at index 1"):
    make([Tensor([1.0]), [2.0]])
  with pytest.raises(TypeError, match=r"params must be a list of Tensors, got (Tensor|int)"):
    make(Tensor([1.0]))
  with pytest.raises(TypeError, match=r"params must be a list of Tensors, got int"):
    make(3)


def test_safe_save_wants_a_dict_of_tensors(tmp_path):
  f = str(tmp_path / "x.safetensors")
  with pytest.raises(TypeError, match=r"\[safe_save\] 'a' must be a Tensor, got list"):
    safe_save({"a": [1.0]}, f)
  with pytest.raises(TypeError, match=r"\[safe_save\] tensor names must be str, got int 3"):
    safe_save({3: Tensor([1.0])}, f)
  with pytest.raises(TypeError, match=r"\[safe_save\] tensors must be a dict of Tensors, got list"):
    safe_save([Tensor([1.0])], f)
  with pytest.raises(TypeError, match=r"\[safe_save\] metadata must be a dict, got str"):
    safe_save({"a": Tensor([1.0])}, f, metadata="x")
  assert not os.path.exists(f)
  safe_save({"a": Tensor([1.0, 2.0])}, f)
  np.testing.assert_equal(safe_load(f)["a"].numpy(), [1.0, 2.0])


class _Model:
  def __init__(self): self.w = Tensor([1.0, 2.0])


def test_load_state_dict_wrong_types():
  m = _Model()
  with pytest.raises(TypeError, match=r"\[load_state_dict\] state_dict must be a dict of Tensors, got list"):
    load_state_dict(m, [Tensor([1.0, 2.0])])
  with pytest.raises(TypeError, match=r"\[load_state_dict\] 'w' must be a Tensor \(or array-like\), got object"):
    load_state_dict(m, {"w": object()})
  load_state_dict(m, {"w": [5.0, 6.0]})  # array-likes are converted, as before
  np.testing.assert_equal(m.w.numpy(), [5.0, 6.0])


def test_get_state_dict_of_a_cycle_ends():
  m = _Model()
  m.me, m.items = m, [m, {"again": m}]
  sd = get_state_dict(m)
  assert list(sd) == ["w"] and sd["w"] is m.w
  assert get_parameters(m) == [m.w]
  # A tensor reached twice without a cycle keeps both names (tied weights), as tinygrad.
  m2 = _Model()
  m2.tied = [m2.w]
  assert sorted(get_state_dict(m2)) == ["tied.0", "w"]


X = Tensor([[1.0, 2.0]])
TENSOR_ARGS = [
    ("replace", lambda: Tensor([1.0]).replace([1.0]), r"\[replace\] the value must be a Tensor, got list"),
    ("cat", lambda: X.cat([1.0]), r"\[cat\] every argument must be a Tensor, got list"),
    ("cat int", lambda: Tensor.cat(X, 3), r"\[cat\] every argument must be a Tensor, got int"),
    ("stack", lambda: Tensor.stack(X, [1.0]), r"\[stack\] every argument must be a Tensor, got list"),
    ("gather", lambda: X.gather(1, [[0]]), r"\[gather\] index must be a Tensor, got list"),
    ("scatter", lambda: X.scatter(1, [[0]], 5.0), r"\[scatter\] index must be a Tensor, got list"),
    ("linear", lambda: X.linear([[1.0], [2.0]]), r"\[linear\] weight must be a Tensor, got list"),
    ("linear bias", lambda: X.linear(Tensor.ones(2, 1), [1.0]), r"\[linear\] bias must be a Tensor, got list"),
    ("conv2d", lambda: Tensor.ones(1, 1, 3, 3).conv2d([[[[1.0]]]]), r"\[conv2d\] weight must be a Tensor, got list"),
    ("sparse_ce", lambda: X.sparse_categorical_crossentropy([1]), r"\[sparse_categorical_crossentropy\] Y must be a Tensor, got list"),
    ("cross_entropy", lambda: X.cross_entropy([1]), r"\[cross_entropy\] Y must be a Tensor, got list"),
    ("nll_loss", lambda: X.nll_loss([1]), r"\[nll_loss\] Y must be a Tensor, got list"),
    ("bce", lambda: X.sigmoid().binary_crossentropy([[1.0, 0.0]]), r"\[binary_crossentropy\] Y must be a Tensor, got list"),
    ("bce logits", lambda: X.binary_crossentropy_logits([[1.0, 0.0]]), r"\[binary_crossentropy_logits\] Y must be a Tensor, got list"),
    ("mse", lambda: X.mse([[1.0, 0.0]]), r"\[mse\] target must be a Tensor, got list"),
    ("Linear", lambda: nn.Linear(2, 2)([1.0, 2.0]), r"\[Linear\] input must be a Tensor, got list"),
    ("Conv2d", lambda: nn.Conv2d(1, 1, 3)(np.ones((1, 1, 3, 3))), r"\[Conv2d\] input must be a Tensor, got ndarray"),
    ("BatchNorm", lambda: nn.BatchNorm(2)([1.0]), r"\[BatchNorm\] input must be a Tensor, got list"),
    ("LayerNorm", lambda: nn.LayerNorm(2)([1.0, 2.0]), r"\[LayerNorm\] input must be a Tensor, got list"),
    ("Embedding", lambda: nn.Embedding(4, 2)([1]), r"\[Embedding\] input must be a Tensor, got list"),
    ("OptimizerGroup", lambda: nn.optim.OptimizerGroup([1]), r"\[OptimizerGroup\] optimizers must be Optimizers, got list at index 0"),
]


@pytest.mark.parametrize("name,call,want", TENSOR_ARGS, ids=[c[0] for c in TENSOR_ARGS])
def test_tensor_arguments_must_be_tensors(name, call, want):
  with pytest.raises(TypeError, match=want):
    call()


def test_tensor_argument_checks_keep_the_ops_working():
  np.testing.assert_equal(X.cat(X).numpy(), [[1, 2], [1, 2]])
  np.testing.assert_equal(X.gather(1, Tensor([[1]])).numpy(), [[2]])
  np.testing.assert_allclose(X.linear(Tensor([[1.0], [2.0]]), Tensor([0.5])).numpy(), [[5.5]])
  np.testing.assert_allclose(nn.Linear(2, 3)(X).shape, (1, 3))
