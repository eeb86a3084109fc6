# Shapes and sizes at the edge of int64 (issue 16): every shape, pad, slice and allocation size is
# computed with overflow checks, so a size too large is a named error, never a wrapped shape, a
# crash or a hang. Oracle: numpy (slicing, values) and torch (which arguments are errors).
# Cases that used to crash or hang the process run in a subprocess with a timeout.
import os
import subprocess
import sys

import numpy as np
import pytest

from baregrad import Tensor, dtypes

PRE = "from baregrad import Tensor, dtypes\n"


def _run(code: str, timeout: float = 60):
  """Runs `code` in a fresh interpreter; returns (exit status, last stderr line, stdout)."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  r = subprocess.run([sys.executable, "-c", PRE + code], env=env, capture_output=True, text=True, timeout=timeout)
  lines = r.stderr.strip().splitlines()
  return r.returncode, lines[-1] if lines else "", r.stdout.strip()


def _expect_error(code: str, kind: str, *parts: str):
  rc, last, out = _run(code)
  assert rc == 1, f"exit status {rc} (a signal is negative), stderr: {last!r}, stdout: {out!r}"
  assert last.startswith(kind + ": "), last
  for p in parts: assert p in last, (p, last)


# ---- shapes beyond int64: errors, in a subprocess (they crashed with SIGSEGV / SIGFPE or hung) ----

def test_ones_2p32_squared_is_a_shape_error():
  _expect_error("Tensor.ones(2**32, 2**32)[5, 7].numpy()", "ValueError",
                "[full] shape (4294967296, 4294967296) has more than 2**63-1 elements")


def test_zero_size_shape_with_overflowing_sizes_is_rejected_like_numpy():
  with pytest.raises(ValueError): np.zeros((0, 2**40, 2**40))
  with pytest.raises(ValueError, match=r"\[full\] shape \(0, 1099511627776, 1099511627776\) has more than 2\*\*63-1"):
    Tensor.zeros(0, 2**40, 2**40)
  with pytest.raises(ValueError, match=r"\[reshape\] shape \(0, 1099511627776, 1099511627776\) has more than 2\*\*63-1"):
    Tensor.zeros(0).reshape(0, 2**40, 2**40)


def test_reshape_of_2p64_elements_is_not_shape_0():
  _expect_error("print(Tensor.ones(2**32, 2**32).reshape(-1).shape)", "ValueError", "(4294967296, 4294967296)", "2**63-1")


def test_pad_past_int64_is_a_pad_error():
  _expect_error("t = Tensor.ones(3).pad(((2**62, 2**62),)); print(t.shape, t.sum().numpy())", "ValueError", "[pad]",
                "4611686018427387904", "does not fit int64")


def test_pad_to_2p80_elements_errors_instead_of_summing_forever():
  _expect_error("print(Tensor.ones(2, 2).pad(((2**40, 0), (2**40, 0))).sum().numpy())", "ValueError", "[pad]",
                "(1099511627778, 1099511627778) has more than 2**63-1 elements")


def test_conv2d_huge_padding_is_a_conv2d_error():
  _expect_error("Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 3, 3, 3), padding=2**40)", "ValueError", "[conv2d]", "padding",
                "2**63-1")


def test_empty_2p62_floats_is_a_memory_error():
  _expect_error("t = Tensor.empty(2**62).realize(); print(t[2**40].numpy())", "MemoryError", "[empty]",
                "(4611686018427387904,) of 4-byte elements needs more than 2**63-1 bytes")


@pytest.mark.parametrize("code,op,nbytes", [("Tensor.arange(2**40).realize()", "realize", 8 * 2**40),
                                            ("Tensor.rand(2**33).realize()", "rand", 4 * 2**33),
                                            ("Tensor.eye(2**40, 1).realize()", "realize", 4 * 2**40)],
                         ids=["arange", "rand", "eye"])
def test_allocation_too_large_for_memory_names_the_bytes(code, op, nbytes):
  # a bare std::bad_alloc before; now the op and the bytes asked. The host allocator (CPU) also
  # says how many bytes are available; a fake GPU may accept the buffer and fail the host
  # staging vector instead (8-byte values: twice the bytes). arange and eye are lazy (computed
  # in the kernel that writes them): their output buffer fails at realize.
  if (os.environ.get("DEV") or "CPU").startswith("CPU"): _expect_error(code, "MemoryError", f"[{op}]", f"{nbytes} bytes", "available")
  else:
    rc, last, _ = _run(code)
    assert rc == 1 and last.startswith("MemoryError: [") and (f"{nbytes} bytes" in last or f"{2 * nbytes} bytes" in last), (rc, last)


# ---- huge but representable: right answers ----------------------------------------------------------

def test_huge_broadcast_indexes_exactly():
  rc, last, out = _run("t = Tensor.ones(2**31, 2**31)\nprint(t[5, 7].numpy(), t.reshape(-1).shape, t.shape)")
  assert rc == 0, last
  assert out == f"1.0 ({2**62},) ({2**31}, {2**31})"


def test_huge_pad_then_crop_reads_the_data():
  t = Tensor([1.0, 2.0, 3.0]).pad(((2**61, 2**61),))
  assert t.shape == (2**62 + 3,)
  np.testing.assert_equal(t[2**61 - 1:2**61 + 4].numpy(), np.array([0, 1, 2, 3, 0], np.float32))


# ---- slicing: numpy is the oracle, including steps beyond the axis and int64 ------------------------

BIG = [None, 0, 1, 2, -1, -2, 3, -3, 5, -5, 2**31, -2**31, 2**62, -2**62, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 2**70, -2**70]
STEPS = [1, 2, 3, -1, -2, -3, 5, -5, 2**31, -2**31, 2**62, -2**62, 2**63 - 1, -2**63, 2**64, -2**64]


@pytest.mark.parametrize("step", STEPS, ids=str)
def test_slices_match_numpy(step):
  a = np.arange(12).reshape(3, 4)
  t = Tensor(a.astype(np.int32))
  for start in BIG:
    for stop in BIG:
      s = slice(start, stop, step)
      want = a[s]
      got = t[s]
      assert got.shape == want.shape, (s, got.shape, want.shape)
      np.testing.assert_equal(got.numpy(), want, err_msg=str(s))
      got1 = t[:, s]
      assert got1.shape == a[:, s].shape, (s, got1.shape)
      np.testing.assert_equal(got1.numpy(), a[:, s], err_msg=str(s))


@pytest.mark.parametrize("step", [-(2**62), -(2**63)], ids=str)
def test_huge_negative_step_takes_the_last_row(step):
  a = np.arange(12).reshape(3, 4)
  np.testing.assert_equal(Tensor(a.astype(np.int32))[::step].numpy(), a[::step])  # row 2 only


# ---- size-like arguments: ValueError naming the op and the value ------------------------------------

@pytest.mark.parametrize("args,part", [((0, float("inf")), "finite"), ((0, float("nan")), "finite"), ((0, 1e30, 1e-30), "2**63-1")],
                         ids=["inf", "nan", "1e60 elements"])
def test_arange_bad_range(args, part):
  with pytest.raises(ValueError, match=r"\[arange\]") as e: Tensor.arange(*args)
  assert part in str(e.value)


def test_repeat_interleave_negative():
  with pytest.raises(ValueError, match=r"\[repeat_interleave\] repeats=-1"): Tensor([1, 2]).repeat_interleave(-1)
  np.testing.assert_equal(Tensor([1, 2]).repeat_interleave(0).numpy(), np.repeat([1, 2], 0))
  np.testing.assert_equal(Tensor([1, 2]).repeat_interleave(3).numpy(), np.repeat([1, 2], 3))


def test_one_hot_negative_classes():
  with pytest.raises(ValueError, match=r"\[one_hot\] num_classes=-5"): Tensor([1, 2]).one_hot(-5)
  with pytest.raises(ValueError, match=r"\[one_hot\] num_classes=-1"): Tensor([1, 2]).one_hot(-1)  # tinygrad's rule, not torch's


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
def test_pool_stride_0(op):
  with pytest.raises(ValueError, match=rf"\[{op}\] stride=\(0, 0\)"): getattr(Tensor.ones(1, 1, 4, 4), op)(kernel_size=2, stride=0)


@pytest.mark.parametrize("kw,part", [({"stride": 0}, "stride=(0, 0)"), ({"dilation": 0}, "dilation=(0, 0)")], ids=["stride", "dilation"])
def test_conv2d_bad_stride_names_conv2d(kw, part):
  with pytest.raises(ValueError, match=r"\[conv2d\]") as e: Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 3, 3, 3), **kw)
  assert part in str(e.value)


def test_conv2d_zero_output_channels_errors_like_torch():
  import torch
  with pytest.raises(RuntimeError): torch.nn.functional.conv2d(torch.ones(1, 3, 5, 5), torch.ones(0, 3, 3, 3))
  with pytest.raises(ValueError, match=r"\[conv2d\] weight \(0, 3, 3, 3\) has 0 output channels"):
    Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(0, 3, 3, 3))


@pytest.mark.parametrize("op", ["triu", "tril"])
def test_triu_needs_2_dims(op):
  with pytest.raises(ValueError, match=rf"\[{op}\] needs a tensor of at least 2 dims, got shape \(3,\)"): getattr(Tensor.ones(3), op)()


@pytest.mark.parametrize("vals", [[True], [False], [True, False], [[True, True], [False, True]]], ids=str)
def test_bool_min_max(vals):
  a = np.array(vals)
  t = Tensor(vals)
  assert t.min().dtype == dtypes.bool
  np.testing.assert_equal(t.min().numpy(), a.min())
  np.testing.assert_equal(t.max().numpy(), a.max())
  if a.ndim == 2: np.testing.assert_equal(t.min(axis=1).numpy(), a.min(axis=1))


# ---- windows with a stride past the input: one window, as with any stride >= the input size -------

@pytest.mark.parametrize("stride", [2**40, 2**62, 2**63 - 1], ids=str)
def test_huge_stride_pooling_and_conv_take_one_window(stride):
  import torch
  import torch.nn.functional as F
  x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
  tx, w = torch.tensor(x), torch.ones(1, 1, 3, 3)
  # torch overflows on such strides ("integer out of range"); stride 5 (the input size) is the same
  np.testing.assert_allclose(Tensor(x).max_pool2d(kernel_size=2, stride=stride).numpy(), F.max_pool2d(tx, 2, 5).numpy())
  np.testing.assert_allclose(Tensor(x).avg_pool2d(kernel_size=3, stride=stride, dilation=2).numpy(), F.avg_pool2d(tx[..., ::2, ::2], 3, 5).numpy())
  np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w.numpy()), stride=stride).numpy(), F.conv2d(tx, w, stride=5).numpy())
  np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w.numpy()), stride=(stride, 1)).numpy(), F.conv2d(tx, w, stride=(5, 1)).numpy())


# ---- realizing the impossibly large: errors before any allocation or loop ---------------------------

def test_realize_of_more_than_int64_bytes_is_a_memory_error():
  with pytest.raises(MemoryError, match=r"\[realize\] shape \(2147483648, 2147483648\) of 4-byte elements needs more than 2\*\*63-1 bytes"):
    Tensor.ones(2**31, 2**31).contiguous().realize()


def test_kernel_of_2p60_steps_errors_instead_of_spinning():
  _expect_error("print(Tensor.rand(2**20).reshape(1, -1).expand(2**40, 2**20).sum().numpy())", "ValueError", "[realize]",
                "more than the limit 2**40")


@pytest.mark.parametrize("i", [2**63, 2**64, -2**63 - 1, -2**64], ids=str)
def test_index_past_int64_is_an_index_error(i):
  with pytest.raises((IndexError, OverflowError)): np.ones(3)[i]  # numpy: OverflowError for 2**63, IndexError past 2**64
  with pytest.raises(IndexError, match=rf"\[getitem\] index {i} is out of range"): Tensor.ones(3)[i]


def test_one_hot_with_too_many_classes_is_a_memory_error():
  # was ValueError "cannot create std::vector larger than max_size()" (pybind's length_error);
  # the one-hot is lazy (no host arange): realizing it names the bytes
  t = Tensor([1, 2]).one_hot(2**61)
  assert t.shape == (2, 2**61)
  with pytest.raises(MemoryError, match=r"\[realize\].*needs more than 2\*\*63-1 bytes"): t.realize()


# ---- Python ints past int64: a ValueError naming the op (was pybind's "incompatible function arguments") --

@pytest.mark.parametrize("name,fn", [
  ("reshape", lambda v: Tensor.ones(3).reshape(v)),
  ("pad", lambda v: Tensor.ones(3).pad(((v, 0),))),
  ("expand", lambda v: Tensor.ones(1).expand(v)),
  ("shrink", lambda v: Tensor.ones(3).shrink(((0, v),))),
  ("repeat", lambda v: Tensor.ones(3).repeat(v)),
  ("empty", lambda v: Tensor.empty(v)),
  ("rand", lambda v: Tensor.rand(v)),
], ids=lambda x: x if isinstance(x, str) else "")
@pytest.mark.parametrize("v", [2**63, 2**64, -2**63 - 1], ids=str)
def test_ints_past_int64_name_the_op(name, fn, v):
  with pytest.raises(ValueError, match=rf"^\[{name}\] {v} does not fit int64$"):
    fn(v)
