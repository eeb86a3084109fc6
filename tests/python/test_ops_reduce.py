# Reductions against PyTorch: sum/max/min/mean/prod over axis None/int/tuple/negative with and
# without keepdim, var/std, logsumexp, any/all, argmax/argmin, cumsum/cumprod, softmax and
# log_softmax; integer dtypes, zero-size and 0-d tensors, non-contiguous inputs.
import math

import numpy as np
import pytest
import torch

from baregrad import Tensor
from helpers import helper_test_op


def _dims(x, axis):
  if axis is None: return tuple(range(x.ndim))
  return axis if isinstance(axis, tuple) else (axis,)


def _seq(fn, x, axis, keepdim):
  # torch's prod/any/all take one dim: reduce the axes one at a time, highest first
  dims = sorted((d % x.ndim for d in _dims(x, axis)), reverse=True) if x.ndim else []
  for d in dims: x = fn(x, d, keepdim)
  return x if dims or x.ndim else fn(x, 0, keepdim)


TORCH_REDUCE = {
    "sum": lambda x, axis, keepdim: x.sum(dim=_dims(x, axis), keepdim=keepdim),
    "max": lambda x, axis, keepdim: torch.amax(x, dim=_dims(x, axis), keepdim=keepdim),
    "min": lambda x, axis, keepdim: torch.amin(x, dim=_dims(x, axis), keepdim=keepdim),
    "mean": lambda x, axis, keepdim: x.mean(dim=_dims(x, axis), keepdim=keepdim),
    "prod": lambda x, axis, keepdim: _seq(lambda t, d, k: t.prod(dim=d, keepdim=k), x, axis, keepdim),
}

AXES = [None, 0, 1, -1, (0, 2), (-2, -1)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("op", ["sum", "max", "min", "mean", "prod"])
def test_reduce(op, axis, keepdim):
  # prod of 24 values: magnitudes near 1 keep it representable and its gradient well scaled
  low, high = (0.6, 1.4) if op == "prod" else (-2, 2)
  helper_test_op([(2, 3, 4)], lambda x: TORCH_REDUCE[op](x, axis, keepdim),
                 lambda x: getattr(x, op)(axis=axis, keepdim=keepdim), low=low, high=high)


def test_prod_signs_and_zeros():
  helper_test_op(None, lambda x: x.prod(), lambda x: x.prod(), vals=[[-1.5, 2.0, -0.5, 3.0]])
  helper_test_op(None, lambda x: x.prod(dim=1), lambda x: x.prod(axis=1), vals=[[[0.0, 2.0], [-1.0, 3.0]]], forward_only=True)


@pytest.mark.parametrize("op", ["sum", "max", "mean"])
def test_reduce_0d(op):
  helper_test_op([()], lambda x: TORCH_REDUCE[op](x, None, False), lambda x: getattr(x, op)())
  helper_test_op([()], lambda x: TORCH_REDUCE[op](x, 0, False), lambda x: getattr(x, op)(axis=0))


def test_reduce_noncontiguous():
  helper_test_op([(3, 4)], lambda x: x.T.sum(dim=1), lambda x: x.T.sum(axis=1))
  helper_test_op([(2, 3, 4)], lambda x: torch.amax(x.permute(2, 0, 1), dim=0), lambda x: x.permute(2, 0, 1).max(axis=0))
  helper_test_op([(4, 6)], lambda x: x[::2, 1:].mean(dim=0), lambda x: x[::2, 1:].mean(axis=0))


def test_reduce_size1_axes():
  helper_test_op([(3, 1, 4)], lambda x: x.sum(dim=1), lambda x: x.sum(axis=1))
  helper_test_op([(1, 1)], lambda x: torch.amax(x, dim=(0, 1)), lambda x: x.max())


@pytest.mark.parametrize("shape,axis", [((257, 31), 0), ((257, 31), 1), ((257, 31), None), ((3, 1000), -1), ((64, 64), (0, 1))], ids=str)
def test_sum_medium(shape, axis):
  # sizes that are not multiples of vector widths or local sizes exercise the kernel remainders
  helper_test_op([shape], lambda x: x.sum(dim=_dims(x, axis)), lambda x: x.sum(axis=axis), atol=1e-4)


def test_max_softmax_medium():
  helper_test_op([(7, 129)], lambda x: torch.amax(x, dim=1), lambda x: x.max(axis=1))
  helper_test_op([(7, 129)], lambda x: x.softmax(dim=1), lambda x: x.softmax(axis=1))


def test_sum_float16():
  # tinygrad: half sums accumulate in float32 and return half (torch: half)
  helper_test_op(None, lambda x: x.sum(), lambda x: x.sum(), vals=[np.array([0.5, 1.25, 100.0, 3.0], np.float16)], forward_only=True)


def test_sum_zero_size():
  helper_test_op([(0, 3)], lambda x: x.sum(dim=0), lambda x: x.sum(axis=0))
  helper_test_op([(0, 3)], lambda x: x.sum(dim=1), lambda x: x.sum(axis=1))
  helper_test_op([(0, 3)], lambda x: x.sum(), lambda x: x.sum())


def test_prod_mean_zero_size():
  # the product of nothing is 1, the mean of nothing NaN
  helper_test_op([(0, 3)], lambda x: x.prod(dim=0), lambda x: x.prod(axis=0), forward_only=True)
  helper_test_op([(0, 3)], lambda x: x.mean(dim=0), lambda x: x.mean(axis=0), forward_only=True)


def test_max_zero_size_kept_axis():
  helper_test_op([(0, 3)], lambda x: torch.amax(x, dim=1), lambda x: x.max(axis=1), forward_only=True)


def test_sum_int():
  # tinygrad's sum accumulates int32 in int32 (sum_acc_dtype); torch promotes to int64
  helper_test_op(None, lambda x: x.sum().to(torch.int32), lambda x: x.sum(), vals=[[1, -2, 3, 40]], forward_only=True)
  helper_test_op(None, lambda x: x.sum(dim=1).to(torch.int32), lambda x: x.sum(axis=1), vals=[[[1, 2], [3, -4]]], forward_only=True)


def test_sum_bool():
  # tinygrad: a bool sum counts in int32 (torch: int64)
  helper_test_op(None, lambda x: x.sum().to(torch.int32), lambda x: x.sum(), vals=[[True, False, True, True]], forward_only=True)


def test_sum_small_int():
  # int8 sums accumulate in int32 in tinygrad (torch: int64), so they do not wrap
  helper_test_op(None, lambda x: x.sum().to(torch.int32), lambda x: x.sum(), vals=[np.array([100, 100, 100], np.int8)], forward_only=True)


def test_max_min_int():
  helper_test_op(None, lambda x: torch.amax(x, dim=0), lambda x: x.max(axis=0), vals=[[[1, -5], [3, -7]]], forward_only=True)
  helper_test_op(None, lambda x: torch.amin(x, dim=(0, 1)), lambda x: x.min(), vals=[[[1, -5], [3, -7]]], forward_only=True)


def test_mean_int():
  # tinygrad: the mean of ints is float32 (torch refuses ints; compare with its float mean)
  helper_test_op(None, lambda x: x.float().mean(), lambda x: x.mean(), vals=[[1, 2, 4]], forward_only=True)


def test_prod_int():
  # tinygrad: prod keeps the input dtype (torch promotes int32 to int64)
  helper_test_op(None, lambda x: x.prod().to(torch.int32), lambda x: x.prod(), vals=[[2, -3, 4]], forward_only=True)


def test_max_nan_inf():
  helper_test_op(None, lambda x: x.max(), lambda x: x.max(), vals=[[-math.inf, 1.0, -2.0]], forward_only=True)
  helper_test_op(None, lambda x: x.min(), lambda x: x.min(), vals=[[math.inf, 1.0, -2.0]], forward_only=True)


# ---- var / std --------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("axis,keepdim,correction", [
    (None, False, 1), (None, False, 0), (0, False, 1), (-1, True, 1), ((0, 2), False, 0), ((1, 2), True, 1),
], ids=str)
def test_var_std(op, axis, keepdim, correction):
  helper_test_op([(2, 3, 4)], lambda x: getattr(x, op)(dim=axis, keepdim=keepdim, correction=correction),
                 lambda x: getattr(x, op)(axis=axis, keepdim=keepdim, correction=correction))


def test_var_one_element_axis():
  # n - correction = 0: torch and tinygrad give inf/NaN rather than raising
  helper_test_op([(3, 1)], lambda x: x.var(dim=1), lambda x: x.var(axis=1), forward_only=True)


# ---- logsumexp, softmax -----------------------------------------------------------------------------

@pytest.mark.parametrize("axis,keepdim", [(None, False), (0, False), (-1, True), ((0, 1), False)], ids=str)
def test_logsumexp(axis, keepdim):
  helper_test_op([(3, 4, 2)], lambda x: torch.logsumexp(x, dim=_dims(x, axis), keepdim=keepdim),
                 lambda x: x.logsumexp(axis=axis, keepdim=keepdim))


def test_logsumexp_large():
  # shifted by the max: no overflow for large values
  helper_test_op(None, lambda x: torch.logsumexp(x, dim=0), lambda x: x.logsumexp(axis=0), vals=[[1000.0, 1000.0, -1000.0]])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis):
  helper_test_op([(3, 4, 5)], lambda x: x.softmax(dim=axis), lambda x: x.softmax(axis=axis))


@pytest.mark.parametrize("axis", [-1, 0])
def test_log_softmax(axis):
  helper_test_op([(3, 4, 5)], lambda x: x.log_softmax(dim=axis), lambda x: x.log_softmax(axis=axis))


def test_softmax_default_axis_and_large():
  helper_test_op([(4, 6)], lambda x: x.softmax(dim=-1), lambda x: x.softmax())
  helper_test_op(None, lambda x: x.softmax(dim=-1), lambda x: x.softmax(), vals=[[500.0, 0.0, -500.0]], atol=1e-6)
  helper_test_op(None, lambda x: x.log_softmax(dim=-1), lambda x: x.log_softmax(), vals=[[500.0, 0.0, -500.0]], forward_only=True)


def test_softmax_0d_and_1d():
  helper_test_op([(5,)], lambda x: x.softmax(dim=0), lambda x: x.softmax(0))


# ---- any / all ----------------------------------------------------------------------------------------

ANY_ALL_CASES = [None, 0, -1, (0, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", ANY_ALL_CASES, ids=str)
@pytest.mark.parametrize("op", ["any", "all"])
def test_any_all(op, axis, keepdim):
  helper_test_op([(2, 3, 4)], lambda x: _seq(lambda t, d, k: getattr(t, op)(dim=d, keepdim=k), x, axis, keepdim),
                 lambda x: getattr(x, op)(axis=axis, keepdim=keepdim), dtype=np.bool_, forward_only=True)


def test_any_all_values():
  for v in ([True, True], [True, False], [False, False]):
    helper_test_op(None, lambda x: x.any(), lambda x: x.any(), vals=[v], forward_only=True)
    helper_test_op(None, lambda x: x.all(), lambda x: x.all(), vals=[v], forward_only=True)


def test_any_all_nonbool():
  # nonzero counts as true
  helper_test_op(None, lambda x: x.any(), lambda x: x.any(), vals=[[0.0, -0.0, 0.5]], forward_only=True)
  helper_test_op(None, lambda x: x.all(), lambda x: x.all(), vals=[[1, 2, 0]], forward_only=True)


def test_any_all_empty():
  # any of nothing is false, all of nothing true
  helper_test_op([(0, 3)], lambda x: x.any(dim=0), lambda x: x.any(axis=0), dtype=np.bool_, forward_only=True)
  helper_test_op([(0, 3)], lambda x: x.all(dim=0), lambda x: x.all(axis=0), dtype=np.bool_, forward_only=True)


# ---- argmax / argmin (tinygrad returns int32; torch int64) -----------------------------------------

@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis,keepdim", [(None, False), (0, False), (1, True), (-1, False), (-1, True)], ids=str)
def test_argmax_argmin(op, axis, keepdim):
  helper_test_op([(3, 4, 5)], lambda x: getattr(x, op)(dim=axis, keepdim=keepdim).to(torch.int32),
                 lambda x: getattr(x, op)(axis=axis, keepdim=keepdim), forward_only=True)


def test_argmax_ties_first():
  helper_test_op(None, lambda x: x.argmax().to(torch.int32), lambda x: x.argmax(), vals=[[1.0, 3.0, 3.0, 2.0]], forward_only=True)
  helper_test_op(None, lambda x: x.argmin(dim=1).to(torch.int32), lambda x: x.argmin(axis=1),
                 vals=[[[0.0, 0.0, 1.0], [2.0, -1.0, -1.0]]], forward_only=True)


def test_argmax_int_and_bool():
  helper_test_op(None, lambda x: x.argmax().to(torch.int32), lambda x: x.argmax(), vals=[[1, 9, -3, 9]], forward_only=True)
  helper_test_op(None, lambda x: x.to(torch.uint8).argmax(dim=0).to(torch.int32), lambda x: x.argmax(axis=0),
                 vals=[[False, True, True]], forward_only=True)


# ---- cumsum / cumprod ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), -2), ((), 0), ((2, 0, 3), 1)],
                         ids=str)
def test_cumsum(shape, axis):
  helper_test_op([shape], lambda x: x.cumsum(dim=axis), lambda x: x.cumsum(axis=axis))


def test_cumsum_int():
  # tinygrad: cumsum of int32 stays int32 (sum's accumulation dtype); torch gives int64
  helper_test_op(None, lambda x: x.cumsum(dim=0).to(torch.int32), lambda x: x.cumsum(axis=0), vals=[[1, -2, 3, 4]], forward_only=True)


def test_cumsum_noncontiguous():
  helper_test_op([(3, 4)], lambda x: x.T.cumsum(dim=1), lambda x: x.T.cumsum(axis=1))


# Past 256 elements the scan runs in blocks (a scan of block totals added in; recursive past 256 blocks).
@pytest.mark.parametrize("shape,axis", [((2, 257), 1), ((700, 2), 0), ((1, 66000), 1)], ids=str)
def test_cumsum_long_axes_blocked(shape, axis):
  helper_test_op([shape], lambda x: x.cumsum(dim=axis), lambda x: x.cumsum(axis=axis), atol=2e-4, grad_atol=2e-3)


def test_cumsum_and_cumprod_long_int_exact():
  x = np.random.default_rng(1).integers(-9, 9, (3, 1000)).astype(np.int32)
  np.testing.assert_array_equal(Tensor(x).cumsum(1).numpy(), np.cumsum(x, 1))
  p = np.random.default_rng(2).choice([-1, 1], (2, 600)).astype(np.int32)
  np.testing.assert_array_equal(Tensor(p).cumprod(1).numpy(), np.cumprod(p, 1))


@pytest.mark.parametrize("shape,axis", [((6,), 0), ((3, 4), 1), ((2, 3, 4), -2)], ids=str)
def test_cumprod(shape, axis):
  helper_test_op([shape], lambda x: x.cumprod(dim=axis), lambda x: x.cumprod(axis), low=0.5, high=1.5)


def test_cumprod_signs_zeros():
  helper_test_op(None, lambda x: x.cumprod(dim=0), lambda x: x.cumprod(0), vals=[[-2.0, 0.5, 0.0, 3.0]], forward_only=True)
  # tinygrad: cumprod of ints keeps int32 (torch promotes to int64)
  helper_test_op(None, lambda x: x.cumprod(dim=0).to(torch.int32), lambda x: x.cumprod(0), vals=[[2, -3, 4]], forward_only=True)
