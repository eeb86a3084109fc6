# Silent wrong answers of issue 16 (dtype and op semantics), each checked against numpy or torch:
# NaN in argmax/argmin, bool and small-int inputs of float ops, integer literals that do not fit,
# IEEE pow at special values, out-of-range setitem indices, setitem through views, and backward
# after assign. Each either gives the oracle's answer or raises a clear exception.
import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from baregrad import Tensor, dtypes

NAN, INF = math.nan, math.inf

# ---- 1. argmax / argmin with NaN: the first NaN wins, the index is always in range -------------

NAN_CASES = [[1.0, NAN, 3.0], [NAN, 1.0], [3.0, 1.0, NAN], [NAN, NAN], [1.0, 2.0, NAN, NAN, 0.5], [-INF, NAN, INF]]


@pytest.mark.parametrize("vals", NAN_CASES, ids=str)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_nan_first_wins(vals, op):
  got = int(getattr(Tensor(vals), op)().item())
  assert got == int(getattr(np, op)(np.array(vals, np.float32)))
  assert got == int(getattr(torch, op)(torch.tensor(vals)))
  assert 0 <= got < len(vals)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1])
def test_arg_nan_axis(op, axis):
  x = np.array([[1.0, NAN, 3.0], [2.0, 1.0, 0.0], [NAN, NAN, 5.0]], np.float32)
  np.testing.assert_equal(getattr(Tensor(x), op)(axis).numpy(), getattr(np, op)(x, axis))


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32"])
def test_min_argmin_extreme_ints(dt):
  # -x wraps at int8 -128 and reverses nothing for unsigned ints
  info = np.iinfo(dt)
  x = np.array([5, info.min, 0, info.max, 3], dt)
  t = Tensor(x, dtype=getattr(dtypes, dt))
  assert t.min().item() == x.min()
  assert t.argmin().item() == x.argmin()
  np.testing.assert_equal(t.minimum(Tensor(x[::-1].copy(), dtype=t.dtype)).numpy(), np.minimum(x, x[::-1]))


def test_min_bool():
  np.testing.assert_equal(Tensor([True, False, True]).min().numpy(), np.array([True, False, True]).min())
  assert Tensor([True, True]).min().item() is True or Tensor([True, True]).min().item() == 1

# ---- 2. bool and small-int inputs ---------------------------------------------------------------


def test_bool_sub_raises_like_torch():
  with pytest.raises(RuntimeError): torch.tensor([True, False]) - torch.tensor([True, True])
  with pytest.raises(TypeError, match=r"\[sub\].*bool"): Tensor([True, False]) - Tensor([True, True])
  with pytest.raises(TypeError, match=r"\[sub\].*bool"): Tensor([True, False]) - True


def test_bool_softmax_and_uint8_softmax():
  np.testing.assert_allclose(Tensor([True, False]).softmax().numpy(), torch.tensor([1.0, 0.0]).softmax(-1).numpy(), rtol=1e-6)
  np.testing.assert_allclose(Tensor([1, 0], dtype=dtypes.uint8).softmax().numpy(), torch.tensor([1.0, 0.0]).softmax(-1).numpy(), rtol=1e-6)


# float ops: the oracle is torch on the input cast to float32
FLOAT_OPS = {
  "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "sin": torch.sin, "cos": torch.cos, "sigmoid": torch.sigmoid,
  "tanh": torch.tanh, "reciprocal": torch.reciprocal, "exp2": torch.exp2, "log2": torch.log2, "rsqrt": torch.rsqrt,
  "softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: torch.log_softmax(x, -1),
  "logsumexp": lambda x: torch.logsumexp(x, 0), "gelu": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "mish": F.mish,
  "softplus": F.softplus, "elu": F.elu, "celu": F.celu, "selu": F.selu, "logsigmoid": F.logsigmoid, "hardsigmoid": F.hardsigmoid,
  "hardswish": F.hardswish, "softsign": F.softsign, "erf": torch.erf, "sinh": torch.sinh, "cosh": torch.cosh, "atanh": torch.atanh,
  "asinh": torch.asinh, "acosh": torch.acosh, "mean": torch.mean, "var": torch.var, "std": torch.std,
}
SMALL = {"bool": [True, False, True], "int8": [1, 0, -3, 5, -128, 127], "uint8": [1, 0, 3, 200, 255], "int16": [1, 0, -3, 5, 300, -300]}


@pytest.mark.parametrize("dt", list(SMALL))
@pytest.mark.parametrize("op", list(FLOAT_OPS))
def test_float_ops_promote_small_ints(op, dt):
  vals = SMALL[dt]
  out = getattr(Tensor(vals, dtype=getattr(dtypes, dt)), op)()
  assert dtypes.is_float(out.dtype)
  want = FLOAT_OPS[op](torch.tensor(vals, dtype=getattr(torch, dt)).float()).numpy()
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5, equal_nan=True)


# int-keeping ops: the oracle is torch in the same int dtype (wrapping where torch wraps)
@pytest.mark.parametrize("dt", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("op,ref", [("relu6", lambda x: torch.clamp(x.long(), 0, 6).to(x.dtype)),
                                    # torch.clamp(uint8, -1, 1) itself wraps -1 to 255: clamp in int64
                                    ("hardtanh", lambda x: torch.clamp(x.long(), -1, 1).to(x.dtype)),
                                    ("relu", torch.relu), ("neg", torch.neg), ("abs", torch.abs), ("square", torch.square),
                                    ("max", torch.max), ("min", torch.min)])
def test_int_ops_keep_dtype(op, ref, dt):
  vals = SMALL[dt]
  got = getattr(Tensor(vals, dtype=getattr(dtypes, dt)), op)()
  want = ref(torch.tensor(vals, dtype=getattr(torch, dt)))
  assert got.dtype is getattr(dtypes, dt)
  np.testing.assert_equal(got.numpy(), want.numpy())


def test_clamp_uint8_bound_below_range():
  # a -1 bound wrapped to 255 in uint8 and clamped everything to 1
  x = np.array([1, 0, 3, 200, 255], np.uint8)
  np.testing.assert_equal(Tensor(x).clamp(-1, 1).numpy(), np.clip(x.astype(np.int64), -1, 1))

# ---- 3. integer literals never wrap -------------------------------------------------------------


@pytest.mark.parametrize("vals,dt", [([2**40], dtypes.int64), ([1, 2**31], dtypes.int64), ([-2**31, 5], dtypes.int32),
                                     ([-2**63, 2**63 - 1], dtypes.int64), ([2**63], dtypes.uint64), ([0, 2**64 - 1], dtypes.uint64)], ids=str)
def test_int_literal_dtype(vals, dt):
  # numpy: int64 where it fits, uint64 for 2**63 .. 2**64-1 (torch has no uint64 and raises there)
  t = Tensor(vals)
  assert t.dtype is dt
  np.testing.assert_equal(t.numpy(), np.array(vals))
  assert Tensor(vals[-1]).dtype is dt and Tensor(vals[-1]).item() == vals[-1]


@pytest.mark.parametrize("vals", [[-1, 2**63], [2**64], [-2**63 - 1]], ids=str)
def test_int_literal_too_wide(vals):
  with pytest.raises(ValueError, match="int64"): Tensor(vals)


@pytest.mark.parametrize("vals,dt,npdt", [([2**40], dtypes.int32, np.int32), ([300], dtypes.uint8, np.uint8), ([-1], dtypes.uint8, np.uint8),
                                          ([-3.5, 2.5, 2**33 + 0.5], dtypes.int32, np.int32), ([2**64 - 1, -1], dtypes.uint64, np.uint64),
                                          ([-2**63, 2**63 + 5], dtypes.int64, np.int64)], ids=str)
def test_int_literal_explicit_dtype_is_a_cast(vals, dt, npdt):
  """An explicit int dtype converts as numpy's astype (tinygrad's rule): ints wrap, floats truncate first."""
  want = np.array([math.trunc(v) % 2**64 for v in vals], dtype=np.uint64).astype(npdt)
  np.testing.assert_equal(Tensor(vals, dtype=dt).numpy(), want)


@pytest.mark.parametrize("vals,dt,msg", [([1e20], dtypes.int32, "64 bits"), ([2**64], dtypes.uint8, "64 bits"), ([NAN], dtypes.int32, "non-finite"),
                                         ([1.0, INF], dtypes.uint8, "non-finite")], ids=str)
def test_int_literal_explicit_dtype_without_a_value(vals, dt, msg):
  with pytest.raises(ValueError, match=rf"\[Tensor\].*{msg}"): Tensor(vals, dtype=dt)


def test_int_literal_explicit_dtype_overflow_torch():
  with pytest.raises(RuntimeError, match="overflow"): torch.tensor([2**40], dtype=torch.int32)
  with pytest.raises(RuntimeError, match="overflow"): torch.full((2,), 2**40, dtype=torch.int32)
  with pytest.raises(ValueError, match=r"\[full\].*overflow"): Tensor.full((2,), 2**40, dtype=dtypes.int32)
  with pytest.raises(ValueError, match=r"\[full\].*overflow"): Tensor.full((2,), 1e20, dtype=dtypes.int32)


@pytest.mark.parametrize("fn,name", [(lambda t: t + 2**40, "add"), (lambda t: 2**40 - t, "sub"), (lambda t: t * 2**33, "mul"),
                                     (lambda t: t.maximum(2**40), "maximum"), (lambda t: t.cast(dtypes.uint8) + 300, "add"),
                                     (lambda t: t.cast(dtypes.uint8) + (-1), "add")], ids=str)
def test_int_scalar_overflow_raises(fn, name):
  # torch >= 2: "value cannot be converted to type int32 without overflow"; never a wrapped result
  with pytest.raises(ValueError, match=rf"\[{name}\].*without overflow"): fn(Tensor([1, 2]))


@pytest.mark.parametrize("fn", [lambda t: t < 2**40, lambda t: t == 2**40, lambda t: t >= -2**40, lambda t: t != 2**33,
                                lambda t: t / 2**40, lambda t: t > -1], ids=["lt", "eq", "ge", "ne", "div", "gt"])
def test_int_scalar_wide_compare_and_div(fn):
  # results that keep no int dtype widen instead: the math answer (numpy's in int64)
  for dt in (dtypes.int32, dtypes.uint8):
    np.testing.assert_allclose(fn(Tensor([1, 2], dtype=dt)).numpy(), fn(np.array([1, 2], np.int64)), rtol=1e-6)


def test_bool_plus_wide_int_like_torch():
  t = Tensor([True]) + 2**40
  np.testing.assert_equal(t.numpy(), (torch.tensor([True]) + 2**40).numpy())
  assert t.dtype is dtypes.int64

# ---- 4. pow at special values -------------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, -1.5, 2.5]
PAIRS = list(itertools.product(SPECIAL, SPECIAL))


def _check_pow(got, b, e):
  with np.errstate(all="ignore"): want = np.power(np.float32(b), np.float32(e))
  assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(float(want), rel=1e-5), f"{b} ** {e}: {got} != {want}"
  if want == 0: assert math.copysign(1, got) == math.copysign(1, want), f"{b} ** {e}: sign of zero {got} != {want}"


def test_pow_special_tensor_tensor():
  b, e = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
  for g, bb, ee in zip((Tensor(b) ** Tensor(e)).numpy().tolist(), b, e): _check_pow(g, bb, ee)


@pytest.mark.parametrize("b", SPECIAL, ids=str)
def test_pow_special_tensor_scalar_and_scalar_tensor(b):
  for e in SPECIAL:
    _check_pow((Tensor([b]) ** e).numpy()[0], b, e)
    _check_pow((b ** Tensor([e])).numpy()[0], b, e)


def test_pow_issue_reproducers():
  assert (Tensor([1.0]) ** NAN).item() == 1.0 and (Tensor([-1.0]) ** INF).item() == 1.0
  assert (Tensor([-1.0]) ** -INF).item() == 1.0 and (Tensor([1.0]) ** Tensor([NAN])).item() == 1.0

# ---- 5. setitem indices out of range ------------------------------------------------------------


@pytest.mark.parametrize("idx", [([0, 2], [1, 30]), ([0, 5],), ([0, -4],), (slice(None), [4]), (Ellipsis, [-5])], ids=str)
def test_setitem_index_out_of_range(idx):
  with pytest.raises(IndexError): np.zeros((3, 4))[idx] = 1.0
  t = Tensor.zeros(3, 4).contiguous().realize()
  with pytest.raises(IndexError, match=r"\[setitem\] index -?\d+ is out of bounds for axis \d with size \d"): t[idx] = 7.0
  np.testing.assert_equal(t.numpy(), np.zeros((3, 4)))  # nothing written
  with pytest.raises(IndexError, match=r"\[getitem\] index -?\d+ is out of bounds"): t[idx]


def test_setitem_tensor_index_out_of_range():
  t = Tensor.zeros(3, 4).contiguous()
  with pytest.raises(IndexError, match=r"index 30 is out of bounds for axis 1 with size 4"): t[Tensor([0, 2]), Tensor([1, 30])] = Tensor([7.0, 8.0])
  np.testing.assert_equal(t.numpy(), np.zeros((3, 4)))


@pytest.mark.parametrize("idx", [([0, -1], [1, -2]), ([-3, 2],), (slice(None), [-1, 0]), (None, [2, -3])], ids=str)
def test_negative_list_indices_like_numpy(idx):
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  t = Tensor(x).contiguous()
  np.testing.assert_equal(t[idx].numpy(), x[idx])
  t[idx] = -1.0
  x[idx] = -1.0
  np.testing.assert_equal(t.numpy(), x)

# ---- 6. setitem through views writes the shared buffer (numpy views share memory) ---------------

VIEW_CASES = {
  "T": (lambda b: b.T, lambda v: v.__setitem__((0, 1), 100.0)),
  "slice": (lambda b: b[1:], lambda v: v.__setitem__((0, 1), 5.0)),
  "step": (lambda b: b[1:, ::2], lambda v: v.__setitem__(1, np.array([7.0, 8.0, 9.0], np.float32))),
  "negative step": (lambda b: b[::-1, ::-2], lambda v: v.__setitem__((0, slice(None)), -1.0)),
  "reshape": (lambda b: b.reshape(24), lambda v: v.__setitem__(slice(5, 9), 0.0)),
  "T advanced": (lambda b: b.T, lambda v: v.__setitem__(([0, 2], [1, 3]), np.array([1000.0, 2000.0], np.float32))),
  "permute shrink": (lambda b: b.transpose(1, 0)[1:3], lambda v: v.__setitem__((0, 0), 9.0)),
}


@pytest.mark.parametrize("case", list(VIEW_CASES))
def test_setitem_through_view(case):
  view, write = VIEW_CASES[case]
  x = np.arange(24, dtype=np.float32).reshape(4, 6)
  b = Tensor(x).contiguous()
  vt, vx = view(b), view(x)
  write(vt if not isinstance(vt, np.ndarray) else vt)
  write(vx)
  np.testing.assert_equal(b.numpy(), x)
  np.testing.assert_equal(vt.numpy(), vx)


def test_setitem_issue_reproducers():
  b = Tensor.zeros(2, 3).contiguous()
  v = b.T
  v[0, 1] = 5.0
  np.testing.assert_equal(b.numpy(), [[0, 0, 0], [5, 0, 0]])
  b = Tensor.zeros(2, 3).contiguous()
  v = b[1:]
  v[0, 1] = 5.0
  np.testing.assert_equal(b.numpy(), [[0, 0, 0], [0, 5, 0]])


def test_inplace_operator_on_view_and_overlap():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  b = Tensor(x).contiguous()
  v = b[1]
  v += 1
  x[1] += 1
  np.testing.assert_equal(b.numpy(), x)
  b[1:] = b[:-1]
  x[1:] = x[:-1].copy()
  np.testing.assert_equal(b.numpy(), x)


def test_setitem_view_lazy_readers_keep_old_value():
  b = Tensor.arange(4.0).contiguous().realize()
  y = b * 2
  b[1:][0] = 100.0
  np.testing.assert_equal(y.numpy(), [0, 2, 4, 6])
  np.testing.assert_equal(b.numpy(), [0, 100, 2, 3])


@pytest.mark.parametrize("make", [lambda b: b.expand(3, 2), lambda b: b.pad(((1, 1),)), lambda b: b.reshape(2, 1).T.reshape(2)[None].expand(2, 2)])
def test_setitem_unwritable_view_raises(make):
  b = Tensor([1.0, 2.0]).contiguous()
  v = make(b)
  with pytest.raises(RuntimeError, match=r"\[setitem\] cannot write through this view"): v[0] = 5.0
  np.testing.assert_equal(b.numpy(), [1.0, 2.0])


def test_setitem_view_of_constant_raises_on_read():
  b = Tensor.zeros(2, 3)  # no storage: the views cannot share the write
  v = b.T
  b[0, 1] = 5.0
  np.testing.assert_equal(b.numpy(), [[0, 5, 0], [0, 0, 0]])
  with pytest.raises(RuntimeError, match="constant"): v.numpy()

# ---- 7. backward after the inputs changed -------------------------------------------------------


def test_backward_after_assign_raises_like_torch():
  xt = torch.tensor([2.0], requires_grad=True)
  yt = (xt * xt).sum()
  with torch.no_grad(): xt.copy_(torch.tensor([5.0]))
  with pytest.raises(RuntimeError, match="inplace"): yt.backward()
  x = Tensor([2.0], requires_grad=True)
  y = (x * x).sum()
  x.assign(Tensor([5.0]))
  with pytest.raises(RuntimeError, match=r"\[backward\].*mul.*shape \(1,\) float32.*modified"): y.backward()


def test_backward_after_setitem_of_saved_tensor_raises():
  w = Tensor([3.0, 4.0]).contiguous().realize()
  x = Tensor([1.0, 1.0], requires_grad=True)
  y = (x * w).sum()
  w[0] = 10.0
  with pytest.raises(RuntimeError, match=r"\[backward\]"): y.backward()


def test_backward_without_assign_still_works():
  x = Tensor([2.0], requires_grad=True)
  (x * x).sum().backward()
  assert x.grad.item() == 4.0
  x.assign(Tensor([5.0]))
  (x * x).sum().backward()  # a new graph on the new value
  assert x.grad.item() == 14.0
