# Creation and data access with tinygrad's dtypes: Tensor from lists/numpy/scalars, zeros, ones,
# full, empty, arange, eye, linspace, *_like, seeded random tensors; numpy(), tolist(), item(),
# shape, ndim, numel, len.
import math

import numpy as np
import pytest
import torch

from baregrad import Tensor, dtypes
from helpers import compare_np, helper_test_op

# ---- Tensor(...) from Python data: tinygrad's default dtypes ---------------------------------------

FROM_PY = [
    ([1, 2, 3], np.array([1, 2, 3], np.int32), "int32"),  # tinygrad: Python ints -> int32 (torch: int64)
    ([1.0, 2.5], np.array([1.0, 2.5], np.float32), "float32"),
    ([1, 2.5], np.array([1.0, 2.5], np.float32), "float32"),  # mixed -> float
    ([True, False], np.array([True, False]), "bool"),
    ([[1, 2], [3, 4]], np.array([[1, 2], [3, 4]], np.int32), "int32"),
    ([], np.zeros((0,), np.float32), "float32"),  # an empty list is float32 of shape (0,)
    (3, np.array(3, np.int32), "int32"),
    (2.5, np.array(2.5, np.float32), "float32"),
    (True, np.array(True), "bool"),
    ([[[1.5]]], np.array([[[1.5]]], np.float32), "float32"),
    ([-2147483648, 2147483647], np.array([-2147483648, 2147483647], np.int32), "int32"),
]


@pytest.mark.parametrize("data,expected,dtype", FROM_PY, ids=[repr(d) for d, _, _ in FROM_PY])
def test_from_python(data, expected, dtype):
  compare_np(f"Tensor({data!r})", Tensor(data), expected, getattr(dtypes, dtype), atol=0, rtol=0)


@pytest.mark.parametrize("np_dtype,name", [(np.float32, "float32"), (np.float64, "float64"), (np.int32, "int32"), (np.int64, "int64"),
                                           (np.int8, "int8"), (np.uint8, "uint8"), (np.int16, "int16"), (np.bool_, "bool"),
                                           (np.float16, "float16")], ids=str)
def test_from_numpy_keeps_dtype(np_dtype, name):
  a = (np.arange(6).reshape(2, 3) % 3).astype(np_dtype)
  compare_np(f"Tensor(np {name})", Tensor(a), a, getattr(dtypes, name), atol=0, rtol=0)


def test_from_numpy_noncontiguous():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  compare_np("Tensor(a.T)", Tensor(a.T), np.ascontiguousarray(a.T), dtypes.float32, atol=0, rtol=0)
  compare_np("Tensor(a[:, ::-2])", Tensor(a[:, ::-2]), np.ascontiguousarray(a[:, ::-2]), dtypes.float32, atol=0, rtol=0)


def test_from_numpy_zero_size_and_0d():
  compare_np("Tensor(empty)", Tensor(np.zeros((0, 3), np.float32)), np.zeros((0, 3), np.float32), dtypes.float32)
  compare_np("Tensor(0-d)", Tensor(np.array(4.5, np.float32)), np.array(4.5, np.float32), dtypes.float32)


def test_from_numpy_is_a_copy():
  a = np.array([1.0, 2.0], np.float32)
  t = Tensor(a)
  a[0] = 100.0
  compare_np("copy", t, np.array([1.0, 2.0], np.float32), dtypes.float32, atol=0, rtol=0)


@pytest.mark.parametrize("dtype,expected", [
    (dtypes.float32, np.array([1.0, 2.0], np.float32)), (dtypes.int8, np.array([1, 2], np.int8)),
    (dtypes.float64, np.array([1.0, 2.0])), (dtypes.bool, np.array([True, True])), (dtypes.uint8, np.array([1, 2], np.uint8)),
], ids=str)
def test_from_python_with_dtype(dtype, expected):
  compare_np(f"Tensor([1, 2], dtype={dtype})", Tensor([1, 2], dtype=dtype), expected, dtype, atol=0, rtol=0)


def test_dtype_by_name():
  assert Tensor([1, 2], dtype="float32").dtype == dtypes.float32
  assert dtypes.float == dtypes.float32 and dtypes.int == dtypes.int32 and dtypes.double == dtypes.float64


# ---- constant tensors --------------------------------------------------------------------------------

def test_zeros_ones():
  helper_test_op([], lambda: torch.zeros(2, 3), lambda: Tensor.zeros(2, 3), forward_only=True)
  helper_test_op([], lambda: torch.zeros((2, 3)), lambda: Tensor.zeros((2, 3)), forward_only=True)
  helper_test_op([], lambda: torch.ones(4), lambda: Tensor.ones(4), forward_only=True)
  helper_test_op([], lambda: torch.ones(()), lambda: Tensor.ones(()), forward_only=True)
  helper_test_op([], lambda: torch.zeros(0, 3), lambda: Tensor.zeros(0, 3), forward_only=True)


def test_zeros_ones_dtype():
  helper_test_op([], lambda: torch.zeros(2, 3, dtype=torch.int32), lambda: Tensor.zeros(2, 3, dtype=dtypes.int32), forward_only=True)
  helper_test_op([], lambda: torch.ones(3, dtype=torch.bool), lambda: Tensor.ones(3, dtype=dtypes.bool), forward_only=True)


def test_full():
  # tinygrad: full with a Python int is int32 (torch: int64)
  helper_test_op([], lambda: torch.full((2, 3), 4, dtype=torch.int32), lambda: Tensor.full((2, 3), 4), forward_only=True)
  helper_test_op([], lambda: torch.full((2, 3), 2.5), lambda: Tensor.full((2, 3), 2.5), forward_only=True)
  helper_test_op([], lambda: torch.full((2,), True), lambda: Tensor.full((2,), True), forward_only=True)
  helper_test_op([], lambda: torch.full((3,), -math.inf), lambda: Tensor.full((3,), -math.inf), forward_only=True)
  helper_test_op([], lambda: torch.full((2,), 3, dtype=torch.float32), lambda: Tensor.full((2,), 3, dtype=dtypes.float32), forward_only=True)


def test_like():
  a = Tensor([[1, 2, 3], [4, 5, 6]])
  b = torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.int32)
  helper_test_op([], lambda: torch.zeros_like(b), lambda: a.zeros_like(), forward_only=True)
  helper_test_op([], lambda: torch.ones_like(b), lambda: a.ones_like(), forward_only=True)
  helper_test_op([], lambda: torch.full_like(b, 7), lambda: a.full_like(7), forward_only=True)
  af, bf = Tensor([1.5, 2.5]), torch.tensor([1.5, 2.5])
  helper_test_op([], lambda: torch.full_like(bf, -1.25), lambda: af.full_like(-1.25), forward_only=True)
  helper_test_op([], lambda: torch.zeros_like(bf, dtype=torch.int32), lambda: af.zeros_like(dtype=dtypes.int32), forward_only=True)


def test_empty():
  t = Tensor.empty(2, 3)
  assert tuple(t.shape) == (2, 3) and t.dtype == dtypes.float32
  t = Tensor.empty(4, dtype=dtypes.int32)
  assert tuple(t.shape) == (4,) and t.dtype == dtypes.int32
  assert t.numpy().shape == (4,)


# ---- arange / eye / linspace --------------------------------------------------------------------------

ARANGE = [
    ((5,), {}), ((2, 8), {}), ((2, 8, 3), {}), ((5, 0, -1), {}), ((0,), {}), ((3, 3), {}), ((-3, 4, 2), {}),
    ((0.0, 1.0, 0.25), {}), ((5,), {"dtype": "float32"}), ((1, 4, 0.5), {}),
    # computed in the kernels that read them (integral values): every dtype, negative steps
    ((-7, 20, 3), {"dtype": "float32"}), ((30, -4, -5), {"dtype": "int8"}), ((250, 256), {"dtype": "uint8"}),
    ((-300, 300, 97), {"dtype": "int16"}), ((-2**40, -2**40 + 9, 2), {"dtype": "float64"}),
    # on the host: past float32's exact integers, and fractional steps
    ((2**24 - 2, 2**24 + 3), {"dtype": "float32"}), ((0.5, 3), {"dtype": "float32"}),
]


@pytest.mark.parametrize("args,kwargs", ARANGE, ids=[f"{a}{k}" for a, k in ARANGE])
def test_arange(args, kwargs):
  # tinygrad: integer arguments give int32 (torch: int64); floats give float32
  def t():
    r = torch.arange(*args, dtype=getattr(torch, kwargs["dtype"]) if kwargs else None)
    return r.to(torch.int32) if r.dtype == torch.int64 else r
  helper_test_op([], t, lambda: Tensor.arange(*args, dtype=getattr(dtypes, kwargs["dtype"]) if kwargs else None), forward_only=True)


def test_a_float_arange_gets_no_grad_but_its_clone_does():
  # tinygrad makes an arange without a device and backward() skips it (torch: requires_grad=False)
  a = Tensor.arange(0.0, 20)
  with pytest.raises(RuntimeError, match=r"\[backward\] no tensor in this graph can have a gradient.*an arange"):
    (a.reshape(4, 5)[:, [1, 3]] * 2).sum().backward()
  c = a.clone()
  (c.reshape(4, 5)[:, [1, 3]] * 2).sum().backward()
  want = np.zeros((4, 5), np.float32)
  want[:, [1, 3]] = 2
  np.testing.assert_equal(c.grad.numpy(), want.reshape(20))
  assert a.grad is None and Tensor.arange(3.0).requires_grad is None
  np.testing.assert_equal(a.sum().gradient(a)[0].numpy(), np.ones(20))  # asked for, it has one


@pytest.mark.parametrize("n,m", [(3, None), (2, 4), (4, 2), (1, None), (0, None)], ids=str)
def test_eye(n, m):
  helper_test_op([], lambda: torch.eye(n) if m is None else torch.eye(n, m), lambda: Tensor.eye(n) if m is None else Tensor.eye(n, m),
                 forward_only=True)


def test_eye_dtype():
  helper_test_op([], lambda: torch.eye(3, dtype=torch.int32), lambda: Tensor.eye(3, dtype=dtypes.int32), forward_only=True)


@pytest.mark.parametrize("start,stop,steps", [(0, 1, 5), (5, 10, 1), (5, 10, 0), (-5.5, 5.5, 10), (5.5, -5.5, 10), (0, 1, 30)], ids=str)
def test_linspace(start, stop, steps):
  helper_test_op([], lambda: torch.linspace(start, stop, steps), lambda: Tensor.linspace(start, stop, steps), forward_only=True)


def test_linspace_int():
  # tinygrad computes in float and casts (truncation toward zero); torch 1.13's integer linspace
  # rounds some values differently (-1 where 5 + 10 * -10/19 = -0.26), so numpy is the reference
  for start, stop, steps in ((5, 10, 3), (5, -5, 20), (5, 10, 20)):
    expected = torch.from_numpy(np.linspace(start, stop, steps).astype(np.int32))
    helper_test_op([], lambda: expected, lambda: Tensor.linspace(start, stop, steps, dtype=dtypes.int32), forward_only=True)


# ---- random -------------------------------------------------------------------------------------------

def test_rand_range_and_dtype():
  Tensor.manual_seed(0)
  t = Tensor.rand(64, 32)
  assert tuple(t.shape) == (64, 32) and t.dtype == dtypes.float32
  v = t.numpy()
  assert v.min() >= 0.0 and v.max() < 1.0
  assert 0.45 < v.mean() < 0.55 and len(np.unique(v)) > 1000


def test_randn_statistics():
  Tensor.manual_seed(1)
  v = Tensor.randn(20000).numpy()
  assert v.dtype == np.float32
  assert abs(v.mean()) < 0.05 and abs(v.std() - 1) < 0.05


def test_manual_seed_reproducible():
  Tensor.manual_seed(1234)
  a = Tensor.rand(10).numpy()
  b = Tensor.rand(10).numpy()
  Tensor.manual_seed(1234)
  np.testing.assert_equal(Tensor.rand(10).numpy(), a)
  np.testing.assert_equal(Tensor.rand(10).numpy(), b)
  assert not np.array_equal(a, b)


def test_randint():
  Tensor.manual_seed(2)
  t = Tensor.randint(1000, low=-3, high=5)
  assert t.dtype == dtypes.int32
  v = t.numpy()
  assert v.min() == -3 and v.max() == 4


def test_uniform_normal():
  Tensor.manual_seed(3)
  u = Tensor.uniform(5000, low=2.0, high=3.0).numpy()
  assert u.min() >= 2.0 and u.max() < 3.0
  n = Tensor.normal(20000, mean=3.0, std=0.5).numpy()
  assert abs(n.mean() - 3.0) < 0.03 and abs(n.std() - 0.5) < 0.03
  # the shape is checked before the bounds (glorot_uniform(-3, 2) computes a complex bound first)
  for bad in (lambda: Tensor.uniform(-3, 2), lambda: Tensor.glorot_uniform(-3, 2), lambda: Tensor.uniform(2, low=1, high=1)):
    with pytest.raises(ValueError, match=r"\[uniform\]"): bad()


def test_rand_like():
  Tensor.manual_seed(4)
  t = Tensor.zeros(3, 5).rand_like()
  assert tuple(t.shape) == (3, 5) and t.dtype == dtypes.float32


# ---- data access and properties -------------------------------------------------------------------------

def test_properties():
  t = Tensor(np.zeros((2, 3, 4), np.float32))
  assert t.shape == (2, 3, 4)  # a tuple, as tinygrad's
  assert t.ndim == 3 and t.numel() == 24 and len(t) == 2
  assert t.dtype == dtypes.float32 and t.dtype != dtypes.int32
  assert Tensor(1.0).shape == ()


def test_tolist_item():
  assert Tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
  assert Tensor([1.5, -2.0]).tolist() == [1.5, -2.0]
  assert Tensor([True, False]).tolist() == [True, False]
  assert Tensor(3).item() == 3 and isinstance(Tensor(3).item(), int)
  assert Tensor(2.5).item() == 2.5 and isinstance(Tensor(2.5).item(), float)
  assert Tensor([[7]]).item() == 7


def test_numpy_of_lazy_result():
  a = Tensor([1.0, 2.0]) + 1
  np.testing.assert_equal(a.numpy(), np.array([2.0, 3.0], np.float32))
  np.testing.assert_equal(a.numpy(), np.array([2.0, 3.0], np.float32))  # reading twice is stable


def test_requires_grad_flag():
  assert Tensor([1.0], requires_grad=True).requires_grad
  t = Tensor([1.0, 2.0], requires_grad=True)
  (t * t).sum().backward()
  np.testing.assert_allclose(t.grad.numpy(), [2.0, 4.0])


def test_repr_mentions_shape_or_dtype():
  r = repr(Tensor([1.0, 2.0]))
  assert "Tensor" in r


def test_arange_int_ranges_never_wrap():
  # arange(2**31, 2**31 + 3) was int32 [-2147483648, ...]: silently wrapped
  t = Tensor.arange(2**31, 2**31 + 3)
  assert t.dtype == dtypes.int64
  np.testing.assert_array_equal(t.numpy(), np.arange(2**31, 2**31 + 3))
  np.testing.assert_array_equal(Tensor.arange(127, -129, -1, dtype=dtypes.int8).numpy(), np.arange(127, -129, -1, dtype=np.int8))
  for args, dt in [((2**33,), dtypes.int32), ((129,), dtypes.int8), ((-129, 128), dtypes.int8), ((128, 0, -1), dtypes.int8),
                   ((127, -130, -1), dtypes.int8)]:
    with pytest.raises(OverflowError, match=r"\[arange\] arange\("): Tensor.arange(*args, dtype=dt)
  assert Tensor.arange(10, 0).shape == (0,) and Tensor.arange(10, 0).dtype == dtypes.int32
