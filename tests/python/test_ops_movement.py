# Movement ops against PyTorch: reshape, permute, expand, pad (constant and modes), shrink, flip,
# transpose, flatten/unflatten, squeeze/unsqueeze, cat/stack, split/chunk, repeat, roll, gather,
# scatter, one_hot, masked_fill, contiguous and detach, with gradients.
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from baregrad import Tensor, dtypes
from helpers import helper_test_op

# ---- reshape / permute / expand --------------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [
    ((3, 4), (4, 3)), ((3, 4), (12,)), ((3, 4), (2, -1)), ((3, 4), (-1,)), ((2, 3, 4), (4, 2, 3)),
    ((1,), ()), ((), (1, 1)), ((0, 3), (3, 0)), ((0, 3), (-1, 3)), ((2, 1, 3), (2, 3)),
], ids=str)
def test_reshape(src, dst):
  helper_test_op([src], lambda x: x.reshape(dst), lambda x: x.reshape(dst))


def test_reshape_varargs():
  helper_test_op([(3, 4)], lambda x: x.reshape(2, 6), lambda x: x.reshape(2, 6))
  helper_test_op([(3, 4)], lambda x: x.reshape(-1, 2), lambda x: x.reshape(-1, 2))


def test_reshape_noncontiguous():
  helper_test_op([(3, 4)], lambda x: x.T.reshape(12), lambda x: x.T.reshape(12))
  helper_test_op([(4, 6)], lambda x: x[:, 1::2].reshape(2, 6), lambda x: x[:, 1::2].reshape(2, 6))


@pytest.mark.parametrize("shape,order", [((3, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (0, 2, 1)), ((1, 2, 3, 4), (3, 1, 0, 2)),
                                         ((), ())], ids=str)
def test_permute(shape, order):
  helper_test_op([shape], lambda x: torch.permute(x, order), lambda x: x.permute(order))


def test_permute_varargs_and_negative():
  helper_test_op([(2, 3, 4)], lambda x: x.permute(2, 0, 1), lambda x: x.permute(2, 0, 1))
  helper_test_op([(2, 3, 4)], lambda x: x.permute(-1, 0, 1), lambda x: x.permute(-1, 0, 1))


@pytest.mark.parametrize("src,dst", [((3, 1), (3, 4)), ((1,), (5,)), ((), (2, 3)), ((3, 1), (2, 3, 4)), ((1, 4), (-1, 4)),
                                     ((3, 1), (3, -1)), ((2, 1, 1), (2, 3, 0))], ids=str)
def test_expand(src, dst):
  helper_test_op([src], lambda x: x.expand(dst), lambda x: x.expand(dst))


def test_expand_varargs():
  helper_test_op([(3, 1)], lambda x: x.expand(3, 5), lambda x: x.expand(3, 5))


# ---- pad / shrink -----------------------------------------------------------------------------------

def test_pad_per_dim_pairs():
  helper_test_op([(3, 4)], lambda x: F.pad(x, (1, 2, 3, 0)), lambda x: x.pad(((3, 0), (1, 2))))


def test_pad_flat_torch_style():
  # a flat sequence pads the last dim first, as torch.nn.functional.pad
  helper_test_op([(2, 3, 4)], lambda x: F.pad(x, (1, 2, 0, 1)), lambda x: x.pad((1, 2, 0, 1)))


def test_pad_value():
  helper_test_op([(3, 4)], lambda x: F.pad(x, (1, 1, 2, 0), value=2.5), lambda x: x.pad(((2, 0), (1, 1)), value=2.5))
  helper_test_op([(3, 4)], lambda x: F.pad(x, (1, 1), value=-math.inf), lambda x: x.pad(((0, 0), (1, 1)), value=-math.inf),
                 forward_only=True)


def test_pad_none_dims():
  helper_test_op([(3, 4)], lambda x: F.pad(x, (0, 0, 1, 2)), lambda x: x.pad(((1, 2), None)))


def test_pad_negative_crops():
  helper_test_op([(4, 5)], lambda x: F.pad(x, (-1, 2, 1, -2)), lambda x: x.pad(((1, -2), (-1, 2))))


def test_pad_int():
  helper_test_op(None, lambda x: F.pad(x, (1, 1), value=7), lambda x: x.pad(((0, 0), (1, 1)), value=7), vals=[[[1, 2], [3, 4]]],
                 forward_only=True)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes(mode):
  helper_test_op([(1, 2, 4, 5)], lambda x: F.pad(x, (1, 2, 2, 1), mode=mode), lambda x: x.pad((1, 2, 2, 1), mode=mode))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_1d(mode):
  helper_test_op([(2, 3, 6)], lambda x: F.pad(x, (2, 3), mode=mode), lambda x: x.pad((2, 3), mode=mode))


def test_shrink():
  helper_test_op([(4, 5)], lambda x: x[1:3, 0:4], lambda x: x.shrink(((1, 3), (0, 4))))
  helper_test_op([(4, 5)], lambda x: x[:, 2:5], lambda x: x.shrink((None, (2, 5))))
  helper_test_op([(4, 5)], lambda x: x[2:2, :], lambda x: x.shrink(((2, 2), (0, 5))))


# ---- flip / transpose / flatten / squeeze ----------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1, (0, 1), (0, 2)], ids=str)
def test_flip(axis):
  dims = axis if isinstance(axis, tuple) else (axis,)
  helper_test_op([(2, 3, 4)], lambda x: x.flip(dims), lambda x: x.flip(axis))


@pytest.mark.parametrize("shape,a,b", [((3, 4), 0, 1), ((2, 3, 4), 0, 2), ((2, 3, 4), -1, -2), ((2, 3, 4), 1, 1)], ids=str)
def test_transpose(shape, a, b):
  helper_test_op([shape], lambda x: x.transpose(a, b), lambda x: x.transpose(a, b))


def test_transpose_default_and_T():
  # tinygrad: transpose() swaps dims 1 and 0
  helper_test_op([(3, 4)], lambda x: x.transpose(0, 1), lambda x: x.transpose())
  helper_test_op([(3, 4)], lambda x: x.T, lambda x: x.T)


@pytest.mark.parametrize("shape,start,end", [((2, 3, 4), 0, -1), ((2, 3, 4), 1, -1), ((2, 3, 4), 0, 1), ((2, 3, 4, 5), 1, 2), ((), 0, -1),
                                             ((3,), 0, 0)], ids=str)
def test_flatten(shape, start, end):
  helper_test_op([shape], lambda x: x.flatten(start, end), lambda x: x.flatten(start, end))


def test_flatten_default():
  helper_test_op([(2, 3, 4)], lambda x: x.flatten(), lambda x: x.flatten())


@pytest.mark.parametrize("shape,dim,sizes", [((2, 6), 1, (2, 3)), ((2, 6), -1, (3, -1)), ((12,), 0, (2, 2, 3)), ((4, 3), 0, (1, 4))],
                         ids=str)
def test_unflatten(shape, dim, sizes):
  helper_test_op([shape], lambda x: x.unflatten(dim, sizes), lambda x: x.unflatten(dim, sizes))


@pytest.mark.parametrize("dim", [None, 1, -1, 0, 3], ids=str)
def test_squeeze(dim):
  # squeezing a dim that is not 1 is a no-op (torch and tinygrad)
  helper_test_op([(3, 1, 4, 1)], lambda x: x.squeeze() if dim is None else x.squeeze(dim),
                 lambda x: x.squeeze() if dim is None else x.squeeze(dim))


def test_squeeze_0d():
  helper_test_op([()], lambda x: x.squeeze(), lambda x: x.squeeze())
  helper_test_op([(1,)], lambda x: x.squeeze(0), lambda x: x.squeeze(0))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3], ids=str)
def test_unsqueeze(dim):
  helper_test_op([(3, 4)], lambda x: x.unsqueeze(dim), lambda x: x.unsqueeze(dim))


def test_unsqueeze_0d():
  helper_test_op([()], lambda x: x.unsqueeze(0), lambda x: x.unsqueeze(0))
  helper_test_op([()], lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(-1))


# ---- cat / stack / split / chunk ---------------------------------------------------------------------

@pytest.mark.parametrize("shapes,dim", [
    (((2, 3), (4, 3)), 0), (((2, 3), (2, 5)), 1), (((2, 3), (2, 1)), -1), (((2, 3, 4), (2, 3, 4), (2, 3, 4)), 1),
    (((0, 3), (2, 3)), 0), (((2,), (3,), (1,)), 0), (((1, 2, 3), (1, 2, 3)), -3),
], ids=str)
def test_cat(shapes, dim):
  helper_test_op(list(shapes), lambda *xs: torch.cat(xs, dim=dim), lambda *xs: Tensor.cat(*xs, dim=dim))


def test_cat_method():
  helper_test_op([(2, 3), (2, 3)], lambda x, y: torch.cat((x, y), dim=1), lambda x, y: x.cat(y, dim=1))
  helper_test_op([(2, 3), (1, 3), (3, 3)], lambda x, y, z: torch.cat((x, y, z)), lambda x, y, z: x.cat(y, z))


def test_cat_promotes():
  helper_test_op(None, lambda x, y: torch.cat((x, y)), lambda x, y: x.cat(y), vals=[[1, 2], [0.5, 1.5]], forward_only=True)


def test_cat_stack_int_bool():
  helper_test_op(None, lambda x, y: torch.cat((x, y)), lambda x, y: x.cat(y), vals=[[True, False], [True]], forward_only=True)
  helper_test_op(None, lambda x, y: torch.stack((x, y), dim=1), lambda x, y: x.stack(y, dim=1), vals=[[1, 2], [3, 4]], forward_only=True)


def test_cat_noncontiguous():
  helper_test_op([(3, 2), (2, 4)], lambda x, y: torch.cat((x.T, y), dim=1), lambda x, y: x.T.cat(y, dim=1))


@pytest.mark.parametrize("shape,n,dim", [((3, 4), 2, 0), ((3, 4), 3, 1), ((3, 4), 2, -1), ((2, 3), 3, 2), ((), 2, 0)], ids=str)
def test_stack(shape, n, dim):
  helper_test_op([shape] * n, lambda *xs: torch.stack(xs, dim=dim), lambda *xs: Tensor.stack(*xs, dim=dim))


def test_stack_method():
  helper_test_op([(2, 3), (2, 3)], lambda x, y: torch.stack((x, y), dim=1), lambda x, y: x.stack(y, dim=1))


@pytest.mark.parametrize("shape,size,dim", [((6, 3), 2, 0), ((5, 3), 2, 0), ((3, 7), 3, 1), ((4, 4), [1, 3], 0), ((4, 6), [2, 0, 4], -1),
                                            ((4, 3), 4, 0)], ids=str)
def test_split(shape, size, dim):
  helper_test_op([shape], lambda x: x.split(size, dim=dim), lambda x: x.split(size, dim=dim))


@pytest.mark.parametrize("shape,chunks,dim", [((6, 3), 3, 0), ((7, 3), 3, 0), ((3, 5), 2, 1), ((3, 4), 5, 1), ((2, 6), 4, -1)], ids=str)
def test_chunk(shape, chunks, dim):
  helper_test_op([shape], lambda x: x.chunk(chunks, dim=dim), lambda x: x.chunk(chunks, dim=dim))


# ---- repeat / roll ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 1)), ((2, 3), (1, 3)), ((2, 3), (2, 2, 2)), ((3,), (4,)), ((), (3,)), ((2, 3), (0, 1))],
                         ids=str)
def test_repeat(shape, reps):
  helper_test_op([shape], lambda x: x.repeat(reps), lambda x: x.repeat(reps))


def test_repeat_varargs():
  helper_test_op([(2, 3)], lambda x: x.repeat(2, 3), lambda x: x.repeat(2, 3))


@pytest.mark.parametrize("shift,dims", [(1, 0), (-2, 1), (5, -1), (3, None), (0, 0), ((1, 2), (0, 1))], ids=str)
def test_roll(shift, dims):
  helper_test_op([(3, 4)], lambda x: x.roll(shift, dims), lambda x: x.roll(shift, dims))


# ---- gather / scatter --------------------------------------------------------------------------------

def _index(shape, high, seed=1):
  return np.random.default_rng(seed).integers(0, high, size=shape)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather(dim):
  idx = _index((3, 4, 2), (4, 5, 6)[dim], seed=dim + 10)
  ti, bi = torch.from_numpy(idx), Tensor(idx.astype(np.int32))
  helper_test_op([(4, 5, 6)], lambda x: x.gather(dim, ti), lambda x: x.gather(dim, bi))


def test_gather_repeated_index():
  # repeated picks accumulate their gradients
  ti, bi = torch.tensor([[0, 0, 1], [2, 2, 2]]), Tensor([[0, 0, 1], [2, 2, 2]])
  helper_test_op([(2, 3)], lambda x: x.gather(1, ti), lambda x: x.gather(1, bi))


def _perm_index(shape, dim, n, seed):
  # distinct indices along `dim` (a slice of a random permutation), so that scatter is deterministic
  rng = np.random.default_rng(seed)
  dim = dim % len(shape)
  moved = [s for i, s in enumerate(shape) if i != dim]
  rows = [rng.permutation(n)[:shape[dim]] for _ in range(int(np.prod(moved)))]
  return np.moveaxis(np.stack(rows).reshape(*moved, shape[dim]), -1, dim)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter(dim):
  idx = _perm_index((2, 3, 3), dim, (4, 5, 6)[dim], seed=dim + 20)
  ti, bi = torch.from_numpy(idx), Tensor(idx.astype(np.int32))
  helper_test_op([(4, 5, 6), (2, 3, 3)], lambda x, s: x.scatter(dim, ti, s), lambda x, s: x.scatter(dim, bi, s))


def test_scatter_src_larger_than_index():
  idx = _perm_index((2, 2), 1, 4, seed=3)
  ti, bi = torch.from_numpy(idx), Tensor(idx.astype(np.int32))
  # forward only: torch 1.13's scatter backward fails when src is larger than index
  helper_test_op([(3, 4), (3, 5)], lambda x, s: x.scatter(1, ti, s), lambda x, s: x.scatter(1, bi, s), forward_only=True)


# ---- one_hot / masked_fill ---------------------------------------------------------------------------

def test_one_hot():
  # tinygrad: one_hot gives int32 (torch int64)
  helper_test_op([], lambda: F.one_hot(torch.tensor([1, 2, 4]), 6).to(torch.int32), lambda: Tensor([1, 2, 4]).one_hot(6),
                 forward_only=True)


def test_one_hot_nd():
  data = [[[1, 2, 3], [0, 3, 5]], [[1, 2, 3], [0, 3, 5]]]
  helper_test_op([], lambda: F.one_hot(torch.tensor(data), 8).to(torch.int32), lambda: Tensor(data).one_hot(8), forward_only=True)


def test_one_hot_as_float_weights():
  helper_test_op([(3, 4)], lambda w: F.one_hot(torch.tensor([0, 2, 1]), 3).float() @ w,
                 lambda w: Tensor([0, 2, 1]).one_hot(3).float() @ w)


@pytest.mark.parametrize("value", [0.0, -math.inf, 3.5])
def test_masked_fill(value):
  helper_test_op([(4, 5)], lambda x: x.masked_fill((x > 0.1).detach(), value), lambda x: x.masked_fill(x > 0.1, value))


def test_masked_fill_broadcast_mask():
  mask = [[True], [False], [True]]
  helper_test_op([(3, 4)], lambda x: x.masked_fill(torch.tensor(mask), -1.0), lambda x: x.masked_fill(Tensor(mask), -1.0))


# ---- contiguous / detach -------------------------------------------------------------------------------

def test_contiguous():
  helper_test_op([(3, 4)], lambda x: x.T.contiguous() * 2, lambda x: x.T.contiguous() * 2)


def test_detach_blocks_gradient():
  helper_test_op([(3, 4)], lambda x: x * x.detach(), lambda x: x * x.detach())


def test_view_chain():
  # a chain of views: reshape after permute after pad after shrink
  helper_test_op([(4, 6)], lambda x: F.pad(x[1:3, 2:5], (1, 0, 0, 1)).permute(1, 0).reshape(-1).flip(0),
                 lambda x: x.shrink(((1, 3), (2, 5))).pad(((0, 1), (1, 0))).permute(1, 0).reshape(-1).flip(0))


def test_dtype_preserved_by_views():
  x = Tensor([[1, 2], [3, 4]])
  for t in (x.reshape(4), x.permute(1, 0), x.expand(2, 2, 2), x.flip(0), x.pad(((1, 0), (0, 0))), x[1:], x.unsqueeze(0)):
    assert t.dtype == dtypes.int32
