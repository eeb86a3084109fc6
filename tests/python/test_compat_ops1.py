# tinygrad API ops of issue 17 against PyTorch (forward values and gradients): asin acos atan log10 fmod,
# gelu(approximate=), softmin, normalize, cummax/cummin (values, indices), logcumsumexp, var/std with
# correction=, any/all with axis keywords, sort/argsort/topk (values, indices).
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from baregrad import Tensor, dtypes
from helpers import helper_test_op


def _idx_equal(what, bg, tt):
  """Index tensors: baregrad's int32 (tinygrad's) against torch's int64, value for value."""
  assert bg.dtype == dtypes.int32, f"{what}: index dtype {bg.dtype}"
  assert tuple(bg.shape) == tuple(tt.shape), f"{what}: shape {bg.shape} | torch {tuple(tt.shape)}"
  np.testing.assert_equal(bg.numpy(), tt.numpy(), err_msg=what)


def _grads(torch_fn, bg_fn, x, w=None):
  """(baregrad grad, torch grad) of sum(fn(x) * w): w weights the outputs so that a wrong permutation shows."""
  tx, bx = torch.tensor(x, requires_grad=True), Tensor(x, requires_grad=True)
  tout, bout = torch_fn(tx), bg_fn(bx)
  if w is None: w = np.arange(1, tout.numel() + 1, dtype=x.dtype).reshape(tout.shape)
  (tout * torch.tensor(w)).sum().backward()
  (bout * Tensor(w)).sum().backward()
  return bx.grad.numpy(), tx.grad.numpy()


# ---- elementwise ---------------------------------------------------------------------------------

TRIG_IN = [-0.999, -0.7, -0.5, -0.49, -0.1, 0.0, 0.2, 0.5, 0.51, 0.93]


@pytest.mark.parametrize("op", ["asin", "acos"])
def test_asin_acos(op):
  helper_test_op(None, getattr(torch, op), lambda x: getattr(x, op)(), vals=[TRIG_IN], atol=2e-7, rtol=1e-6, grad_rtol=1e-5)
  # float64 in keeps float64 (to float32 accuracy); outside [-1, 1] and NaN give NaN; ints compute in float32
  x = np.linspace(-1, 1, 9)
  out = getattr(Tensor(x), op)()
  assert out.dtype == dtypes.float64
  np.testing.assert_allclose(out.numpy(), getattr(np, "arc" + op[1:])(x), atol=3e-7, rtol=0)
  assert np.isnan(getattr(Tensor([1.5, -2.0, math.nan]), op)().numpy()).all()
  out = getattr(Tensor([1, 0, -1]), op)()
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), getattr(np, "arc" + op[1:])([1.0, 0.0, -1.0]), atol=3e-7)


def test_atan():
  vals = [[-1e4, -3.0, -1.01, -1.0, -0.3, 0.0, 0.5, 1.0, 2.5, 1e6]]
  helper_test_op(None, torch.atan, Tensor.atan, vals=vals, atol=2e-7, rtol=1e-6)
  out = Tensor([math.inf, -math.inf, math.nan, 1e30]).atan().numpy()
  np.testing.assert_allclose(out[[0, 1, 3]], [math.pi / 2, -math.pi / 2, math.pi / 2], rtol=1e-7)
  assert np.isnan(out[2])


def test_log10():
  helper_test_op([(2, 3)], torch.log10, Tensor.log10, low=0.01, high=100)
  out = Tensor([1, 10, 1000]).log10()
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), [0, 1, 3], atol=1e-6)


def test_fmod():
  # the remainder takes the dividend's sign (Python's % the divisor's); both operands get gradients
  a, b = [[5.5, -5.5, 5.5, -5.5, 0.25, -7.0, -3.0]], [[2.0, 2.0, -2.0, -2.0, 0.5, 3.0, math.inf]]
  helper_test_op(None, torch.fmod, Tensor.fmod, vals=[a, b])
  helper_test_op(None, lambda x: torch.fmod(x, 1.5), lambda x: x.fmod(1.5), vals=[[-4.0, -1.0, 0.0, 2.0, 3.5]])
  ia, ib = [-7, 7, -7, 7, 6, -6, 0], [2, -2, -2, 2, 3, 3, 5]
  out = Tensor(ia).fmod(Tensor(ib))
  assert out.dtype == dtypes.int32
  np.testing.assert_equal(out.numpy(), torch.fmod(torch.tensor(ia), torch.tensor(ib)).numpy())
  np.testing.assert_equal(Tensor(ia).fmod(-3).numpy(), torch.fmod(torch.tensor(ia), -3).numpy())
  assert np.isnan(Tensor([1.0]).fmod(0.0).numpy()).all()  # torch.fmod(x, 0.) is NaN
  with pytest.raises(TypeError, match=r"\[fmod\]"): Tensor([1.0]).fmod("2")


def test_gelu():
  helper_test_op([(3, 4)], lambda x: F.gelu(x, approximate="none"), lambda x: x.gelu(approximate="none"),
                 low=-4, high=4, atol=3e-7)
  x = np.linspace(-4, 4, 7, dtype=np.float32)
  tanh = F.gelu(torch.tensor(x), approximate="tanh").numpy()
  np.testing.assert_allclose(Tensor(x).gelu().numpy(), tanh, atol=1e-6)  # tinygrad's default is "tanh"
  np.testing.assert_allclose(Tensor(x).gelu(approximate="tanh").numpy(), tanh, atol=1e-6)
  with pytest.raises(RuntimeError, match=r"\[gelu\] approximate='erf'"): Tensor(x).gelu(approximate="erf")


# ---- softmin, normalize --------------------------------------------------------------------------

def test_softmin():
  helper_test_op([(2, 3, 4)], lambda x: F.softmin(x, dim=-1), Tensor.softmin)
  helper_test_op([(2, 3, 4)], lambda x: F.softmin(x, dim=1), lambda x: x.softmin(axis=1))
  out = Tensor([[1, 2], [0, 3]]).softmin(0)
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), F.softmin(torch.tensor([[1.0, 2], [0, 3]]), dim=0).numpy(), rtol=1e-6)
  out = Tensor([1.0, 2.0]).softmin(dtype=dtypes.float64)
  assert out.dtype == dtypes.float64


@pytest.mark.parametrize("p", [2.0, 1, 3, math.inf, 0])
def test_normalize(p):
  x = np.array([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0], [3.0, 0.0, -4.0]], dtype=np.float32)  # a zero row: its gradient is 0
  helper_test_op(None, lambda t: F.normalize(t, p=p, dim=1), lambda t: t.normalize(p=p, dim=1), vals=[x])
  helper_test_op(None, lambda t: F.normalize(t, p=p, dim=0, eps=2.0), lambda t: t.normalize(p, 0, 2.0), vals=[x])


def test_normalize_default_and_misuse():
  helper_test_op([(2, 3, 4)], F.normalize, Tensor.normalize)  # p=2, dim=1
  with pytest.raises(IndexError): Tensor([1.0, 2.0]).normalize()  # dim=1 of a 1-D tensor (torch: IndexError)


# ---- scans -------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(op):
  # ties give the last index (torch's); a NaN wins and holds, each later NaN taking the index
  x = np.array([[1.0, 3.0, 3.0, 2.0, 0.0, 5.0], [2.0, math.nan, 1.0, 7.0, math.nan, 0.0]], dtype=np.float32)
  for axis in (1, -1, 0):
    v, i = getattr(Tensor(x), op)(axis)
    tv, ti = getattr(torch.tensor(x), op)(axis)
    np.testing.assert_equal(v.numpy(), tv.numpy())
    _idx_equal(f"{op} axis {axis}", i, ti)
  # the gradient goes to the index of each running value only (torch's), ties included
  bg, tg = _grads(lambda t: getattr(t, op)(1)[0], lambda t: getattr(t, op)(1)[0], x[:1])
  np.testing.assert_equal(bg, tg)
  xi = np.array([4, -1, 4, 9, -3, 9], dtype=np.int32)
  v, i = getattr(Tensor(xi), op)()
  tv, ti = getattr(torch.tensor(xi), op)(0)
  assert v.dtype == dtypes.int32
  np.testing.assert_equal(v.numpy(), tv.numpy())
  _idx_equal(f"{op} int32", i, ti)


def test_cummax_edges():
  v, i = Tensor(2.5).cummax()  # 0-d: itself and index 0, as torch
  assert v.shape == () and v.item() == 2.5 and i.shape == () and i.item() == 0
  v, i = Tensor.zeros(2, 0).cummin(1)
  assert v.shape == (2, 0) and i.shape == (2, 0) and i.dtype == dtypes.int32
  v, i = Tensor([True, False, True]).cummin(0)
  np.testing.assert_equal(v.numpy(), [True, False, False])
  np.testing.assert_equal(i.numpy(), [0, 1, 1])
  with pytest.raises(IndexError): Tensor([1.0, 2.0]).cummax(1)


def test_logcumsumexp():
  helper_test_op([(3, 5)], lambda x: torch.logcumsumexp(x, 1), lambda x: x.logcumsumexp(1), low=-30, high=30)
  helper_test_op([(3, 5)], lambda x: torch.logcumsumexp(x, 0), Tensor.logcumsumexp)  # axis=0 by default
  x = np.array([[-1000.0, 0.0, 2.0, -math.inf, math.inf, 1.0],
                [-math.inf, -math.inf, 1e4, 1e4 + 1, -1e4, 0.0]], dtype=np.float32)
  np.testing.assert_allclose(Tensor(x).logcumsumexp(-1).numpy(), torch.logcumsumexp(torch.tensor(x), -1).numpy(), rtol=1e-6)
  assert Tensor(1.5).logcumsumexp().item() == 1.5
  assert Tensor.zeros(0, 3).logcumsumexp(0).shape == (0, 3)
  out = Tensor([[1, 2]]).logcumsumexp(1)
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), [[1.0, math.log(math.e + math.e**2)]], rtol=1e-6)


# ---- var / std, any / all ----------------------------------------------------------------------

@pytest.mark.parametrize("correction", [0, 1, 2, 4])
def test_var_std_correction(correction):
  # (2, 3) reduced over axis 1 has N = 3: correction 4 > N divides by max(N - 4, 0) = 0, inf as torch
  for op in ("var", "std"):
    helper_test_op([(2, 3)], lambda x: getattr(x, op)(dim=1, correction=correction),
                   lambda x: getattr(x, op)(axis=1, correction=correction), forward_only=correction == 4)
    # N = 4 here: at correction 4 the forward is inf or NaN as torch's; the gradient (torch: +-inf) is not compared
    helper_test_op([(2, 3, 2)], lambda x: getattr(x, op)(dim=(0, 2), correction=correction, keepdim=True),
                   lambda x: getattr(x, op)(axis=(0, 2), keepdim=True, correction=correction), forward_only=correction == 4)
  for op in ("var_mean", "std_mean"):
    helper_test_op([(2, 3)], lambda x: getattr(torch, op)(x, dim=-1, correction=correction, keepdim=True),
                   lambda x: getattr(x, op)(axis=-1, keepdim=True, correction=correction), forward_only=correction == 4)


def test_var_degenerate():
  np.testing.assert_equal(Tensor([[1.0, 1.0]]).var(axis=1, correction=2).numpy(), [math.nan])  # 0 / 0
  np.testing.assert_equal(Tensor([2.0]).std().numpy(), torch.tensor([2.0]).std().numpy())  # N - 1 = 0: NaN
  helper_test_op([(3, 4)], lambda x: x.var(), Tensor.var)


@pytest.mark.parametrize("op", ["any", "all"])
def test_any_all_axes(op):
  x = np.array([[[True, False], [True, True], [False, False]]] * 2)
  x[1, 2, 1] = True
  for axis, keepdim in [(None, False), (0, False), (-1, True), ((0, 2), False), ((-1, -3), True), ((), False)]:
    want = getattr(np, op)(x, axis=axis, keepdims=keepdim)  # numpy takes tuples of axes; () reduces nothing
    out = getattr(Tensor(x), op)(axis=axis, keepdim=keepdim)
    assert out.dtype == dtypes.bool and tuple(out.shape) == want.shape, (axis, keepdim, out.shape)
    np.testing.assert_equal(out.numpy(), want)
  ints = np.array([[0, 3], [2, 1]], dtype=np.int32)
  np.testing.assert_equal(getattr(Tensor(ints), op)(axis=1).numpy(), getattr(torch.tensor(ints), op)(dim=1).numpy())


# ---- sort, argsort, topk -----------------------------------------------------------------------

def _distinct(shape, seed=0):
  return (np.random.default_rng(seed).permutation(math.prod(shape)).reshape(shape) * 0.5 - 3).astype(np.float32)


# NOTE: few shapes: each sorted length and direction is a new set of kernels (two per network stage)
@pytest.mark.parametrize("shape,dim", [((6,), -1), ((3, 5, 2), 1)])
def test_sort_distinct(shape, dim):
  x = _distinct(shape)
  for descending in (False, True):
    v, i = Tensor(x).sort(dim=dim, descending=descending)
    tv, ti = torch.tensor(x).sort(dim=dim, descending=descending)
    np.testing.assert_equal(v.numpy(), tv.numpy())
    _idx_equal(f"sort {shape} dim={dim} descending={descending}", i, ti)
    _idx_equal("argsort", Tensor(x).argsort(dim, descending), torch.argsort(torch.tensor(x), dim=dim, descending=descending))
  bg, tg = _grads(lambda t: t.sort(dim=dim, descending=True)[0], lambda t: t.sort(dim=dim, descending=True)[0], x)
  np.testing.assert_equal(bg, tg)


def test_sort_ties_nan_dtypes():
  # equal values keep their order (torch's stable=True); NaN sorts after every number, first when descending
  x = np.array([3.0, math.nan, math.inf, 3.0, -math.inf, math.nan], dtype=np.float32)
  for descending in (False, True):
    v, i = Tensor(x).sort(descending=descending)
    tv, ti = torch.tensor(x).sort(descending=descending, stable=True)
    np.testing.assert_equal(v.numpy(), tv.numpy())
    _idx_equal(f"ties descending={descending}", i, ti)
  for xs, dt, npdt in [([5, -2, 7, -2], dtypes.int32, np.int32), ([True, False, True, False], dtypes.bool, np.bool_),
                       ([2.5, -1.0, 0.5], dtypes.float16, np.float16)]:
    v, i = Tensor(xs, dtype=dt).sort(descending=True)
    tv, ti = torch.tensor(np.array(xs, dtype=npdt)).sort(descending=True, stable=True)
    assert v.dtype == dt
    np.testing.assert_equal(v.numpy(), tv.numpy())
    _idx_equal(f"sort {dt}", i, ti)


def test_sort_edges():
  v, i = Tensor([[4.0], [2.0]]).sort()  # one element along dim: itself, index 0
  np.testing.assert_equal(v.numpy(), [[4.0], [2.0]])
  np.testing.assert_equal(i.numpy(), [[0], [0]])
  v, i = Tensor.zeros(3, 0).sort(0)
  assert v.shape == (3, 0) and i.shape == (3, 0) and i.dtype == dtypes.int32
  v, i = Tensor(7.0).sort()
  assert v.item() == 7.0 and i.item() == 0
  with pytest.raises(IndexError): Tensor([1.0, 2.0]).sort(dim=1)


def test_topk():
  x = _distinct((3, 5, 2), seed=1)  # the kernels of test_sort_distinct's (3, 5, 2)
  for k, largest in [(3, True), (2, False), (5, True), (0, True)]:
    v, i = Tensor(x).topk(k, dim=1, largest=largest)
    tv, ti = torch.tensor(x).topk(k, dim=1, largest=largest)
    np.testing.assert_equal(v.numpy(), tv.numpy())
    _idx_equal(f"topk k={k} largest={largest}", i, ti)
  v, i = Tensor(x).topk(2, 1, True, sorted_=False)  # sorted order serves sorted_=False too (torch leaves it open)
  np.testing.assert_equal(i.numpy(), torch.tensor(x).topk(2, 1).indices.numpy())
  bg, tg = _grads(lambda t: t.topk(3, dim=1)[0], lambda t: t.topk(3, dim=1)[0], x)
  np.testing.assert_equal(bg, tg)
  with pytest.raises(ValueError, match=r"\[topk\] k=3 is out of range for size 2"): Tensor(x).topk(3)
  with pytest.raises(ValueError, match=r"\[topk\] k=-1"): Tensor(x).topk(-1)
  with pytest.raises(TypeError, match=r"\[topk\]"): Tensor(x).topk(2.0)
  with pytest.raises(IndexError): Tensor(x).topk(1, dim=3)
