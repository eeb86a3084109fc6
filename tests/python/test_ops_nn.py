# Linear algebra and network ops against PyTorch: matmul (1-D, batched, broadcast, zero-size),
# einsum, conv2d (stride, padding, dilation, groups, bias), max/avg pooling, scaled dot-product
# attention (masks, causal), losses, dropout; nn layers with weights copied from torch.nn.
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from baregrad import Tensor, dtypes, nn
from helpers import compare, compare_np, helper_test_op

# ---- matmul ----------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)), ((4,), (2, 4, 3)),
    ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 2)), ((3, 0), (0, 4)), ((0, 4), (4, 2)),
    ((1, 1), (1, 1)), ((5, 17), (17, 3)),
]


@pytest.mark.parametrize("a,b", MATMUL_SHAPES, ids=str)
def test_matmul(a, b):
  helper_test_op([a, b], lambda x, y: x @ y, lambda x, y: x @ y, atol=1e-5)


@pytest.mark.parametrize("a,b", [((33, 65), (65, 17)), ((2, 31, 40), (40, 9)), ((128, 64), (64, 128))], ids=str)
def test_matmul_medium(a, b):
  # odd and larger sizes exercise tiling and vector remainders of the matmul kernels
  helper_test_op([a, b], lambda x, y: x @ y, lambda x, y: x @ y, atol=1e-4, grad_atol=1e-3, low=-1, high=1)


def test_conv2d_medium():
  helper_test_op([(2, 8, 17, 17), (16, 8, 3, 3), (16,)], lambda x, w, b: F.conv2d(x, w, b, padding=1),
                 lambda x, w, b: x.conv2d(w, b, padding=1), atol=1e-4, grad_atol=1e-3, low=-1, high=1)


def test_matmul_method_and_dot():
  helper_test_op([(3, 4), (4, 5)], lambda x, y: x.matmul(y), lambda x, y: x.matmul(y), atol=1e-5)
  helper_test_op([(3, 4), (4, 5)], lambda x, y: x.matmul(y), lambda x, y: x.dot(y), atol=1e-5)


def test_matmul_noncontiguous():
  helper_test_op([(4, 3), (5, 4)], lambda x, y: x.T @ y.T, lambda x, y: x.T @ y.T, atol=1e-5)
  helper_test_op([(3, 8), (4, 5)], lambda x, y: x[:, ::2] @ y, lambda x, y: x[:, ::2] @ y, atol=1e-5)


def test_small_int_matmul_keeps_the_operands_dtype():
  a = np.array([[100, 100], [-3, 7]], dtype=np.int8)
  b = np.array([[1, 2], [1, -1]], dtype=np.int8)
  out = Tensor(a) @ Tensor(b)
  want = (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()  # wraps in int8, as torch does
  assert out.dtype == dtypes.int8 and out.numpy().tolist() == want.tolist()
  assert (Tensor(a) @ Tensor(b.astype(np.uint8))).dtype == dtypes.int16  # the promoted dtype, as tinygrad's


def test_matmul_int():
  helper_test_op(None, lambda x, y: x @ y, vals=[[[1, 2], [3, 4]], [[5, -6], [7, 8]]], forward_only=True)


def test_matmul_chain():
  helper_test_op([(2, 3), (3, 4), (4, 2)], lambda x, y, z: (x @ y).relu() @ z, lambda x, y, z: (x @ y).relu() @ z, atol=1e-5)


# ---- einsum ------------------------------------------------------------------------------------------

EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij->ji", [(3, 4)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]), ("ij,jk", [(3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("ijk->kji", [(2, 3, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]), ("i,jk->ijk", [(2,), (3, 1)]),
]


@pytest.mark.parametrize("formula,shapes", EINSUM, ids=[f for f, _ in EINSUM])
def test_einsum(formula, shapes):
  helper_test_op(shapes, lambda *xs: torch.einsum(formula, *xs), lambda *xs: Tensor.einsum(formula, *xs), atol=1e-5)


def test_einsum_list_operands():
  helper_test_op([(3, 4), (4, 5)], lambda x, y: torch.einsum("ij,jk->ik", x, y), lambda x, y: Tensor.einsum("ij,jk->ik", [x, y]),
                 atol=1e-5)


# ---- conv2d ------------------------------------------------------------------------------------------

CONV = [
    # x shape, w shape, kwargs
    ((2, 3, 7, 7), (4, 3, 3, 3), {}),
    ((1, 1, 5, 5), (1, 1, 3, 3), {}),
    ((2, 3, 7, 7), (4, 3, 3, 3), {"stride": 2}),
    ((2, 3, 6, 6), (4, 3, 3, 3), {"padding": 1}),
    ((2, 3, 6, 6), (4, 3, 3, 3), {"padding": 2, "stride": 2}),
    ((2, 3, 9, 9), (4, 3, 3, 3), {"dilation": 2}),
    ((2, 4, 6, 6), (6, 2, 3, 3), {"groups": 2}),
    ((2, 4, 6, 6), (4, 1, 3, 3), {"groups": 4, "padding": 1}),  # depthwise
    ((2, 3, 6, 7), (5, 3, 2, 3), {}),  # non-square kernel and input
    ((2, 3, 5, 5), (4, 3, 1, 1), {}),  # 1x1
    ((1, 2, 8, 8), (3, 2, 3, 3), {"stride": 3, "padding": 1, "dilation": 2}),
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("xs,ws,kw", CONV, ids=[f"{x}-{w}-{k}" for x, w, k in CONV])
def test_conv2d(xs, ws, kw, bias):
  shapes = [xs, ws] + ([(ws[0],)] if bias else [])
  helper_test_op(shapes, lambda x, w, *b: F.conv2d(x, w, *b, **kw), lambda x, w, *b: x.conv2d(w, *b, **kw), atol=1e-5, grad_atol=1e-4)


def test_conv2d_tuple_padding():
  # tinygrad accepts (pad_h, pad_w) as torch does
  helper_test_op([(1, 2, 5, 6), (3, 2, 3, 3)], lambda x, w: F.conv2d(x, w, padding=(1, 2)), lambda x, w: x.conv2d(w, padding=(1, 2)),
                 atol=1e-5)


def test_conv2d_noncontiguous_input():
  helper_test_op([(2, 5, 5, 3), (4, 3, 3, 3)], lambda x, w: F.conv2d(x.permute(0, 3, 1, 2), w),
                 lambda x, w: x.permute(0, 3, 1, 2).conv2d(w), atol=1e-5)


# ---- pooling -----------------------------------------------------------------------------------------

POOL = [((1, 1, 4, 4), 2, None), ((2, 3, 6, 6), 2, None), ((2, 3, 7, 7), 3, 1), ((2, 3, 7, 7), 3, 2), ((1, 2, 5, 8), 2, 2),
        ((1, 1, 6, 6), (2, 2), (2, 2))]


@pytest.mark.parametrize("shape,k,s", POOL, ids=str)
def test_max_pool2d(shape, k, s):
  helper_test_op([shape], lambda x: F.max_pool2d(x, k, s), lambda x: x.max_pool2d(k, s) if s is not None else x.max_pool2d(k))


@pytest.mark.parametrize("shape,k,s", POOL, ids=str)
def test_avg_pool2d(shape, k, s):
  helper_test_op([shape], lambda x: F.avg_pool2d(x, k, s), lambda x: x.avg_pool2d(k, s) if s is not None else x.avg_pool2d(k))


def test_pool_defaults():
  # tinygrad's default kernel is (2, 2) with stride = kernel
  helper_test_op([(1, 2, 4, 6)], lambda x: F.max_pool2d(x, 2), lambda x: x.max_pool2d())
  helper_test_op([(1, 2, 4, 6)], lambda x: F.avg_pool2d(x, 2), lambda x: x.avg_pool2d())


def test_pool_3d_input():
  # (C, H, W) without a batch dim: the pooling runs over the last two axes
  helper_test_op([(3, 4, 4)], lambda x: F.max_pool2d(x, 2), lambda x: x.max_pool2d(2))


# ---- scaled dot-product attention (torch 1.13 has none: reference written out) -------------------------

def _sdpa_ref(q, k, v, mask=None, causal=False):
  s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
  if causal: s = s.masked_fill(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1), -math.inf)
  if mask is not None: s = s.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else s + mask
  return s.softmax(-1) @ v


def test_sdpa():
  helper_test_op([(2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6)], _sdpa_ref, lambda q, k, v: q.scaled_dot_product_attention(k, v), atol=1e-5)


def test_sdpa_3d():
  helper_test_op([(2, 4, 8), (2, 4, 8), (2, 4, 8)], _sdpa_ref, lambda q, k, v: q.scaled_dot_product_attention(k, v), atol=1e-5)


def test_sdpa_bool_mask():
  m = np.random.default_rng(5).random((4, 5)) < 0.7
  m[:, 0] = True  # every row keeps one key
  tm, bm = torch.from_numpy(m), Tensor(m)
  helper_test_op([(2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)], lambda q, k, v: _sdpa_ref(q, k, v, tm),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=bm), atol=1e-5)


def test_sdpa_float_mask():
  m = np.random.default_rng(6).uniform(-1, 1, (4, 5)).astype(np.float32)
  tm, bm = torch.from_numpy(m), Tensor(m)
  helper_test_op([(2, 4, 8), (2, 5, 8), (2, 5, 8)], lambda q, k, v: _sdpa_ref(q, k, v, tm),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=bm), atol=1e-5)


def test_sdpa_causal():
  helper_test_op([(2, 3, 5, 8), (2, 3, 5, 8), (2, 3, 5, 8)], lambda q, k, v: _sdpa_ref(q, k, v, causal=True),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True), atol=1e-5)


# ---- losses --------------------------------------------------------------------------------------------

def _labels(shape, n, seed=7, ignore=False):
  y = np.random.default_rng(seed).integers(0, n, size=shape)
  if ignore: y.flat[::3] = -1
  return torch.from_numpy(y), Tensor(y.astype(np.int32))


def test_sparse_categorical_crossentropy():
  ty, by = _labels((6,), 10)
  helper_test_op([(6, 10)], lambda x: F.cross_entropy(x, ty), lambda x: x.sparse_categorical_crossentropy(by))


def test_sparse_categorical_crossentropy_3d():
  # classes on the last axis (tinygrad), torch wants them on axis 1
  ty, by = _labels((2, 3), 5)
  helper_test_op([(2, 3, 5)], lambda x: F.cross_entropy(x.reshape(-1, 5), ty.reshape(-1)), lambda x: x.sparse_categorical_crossentropy(by))


def test_sparse_categorical_crossentropy_ignore_index():
  # tinygrad's default ignore_index is -1
  ty, by = _labels((6,), 4, ignore=True)
  helper_test_op([(6, 4)], lambda x: F.cross_entropy(x, ty, ignore_index=-1), lambda x: x.sparse_categorical_crossentropy(by))


def test_sparse_categorical_crossentropy_label_smoothing():
  ty, by = _labels((6,), 4)
  helper_test_op([(6, 4)], lambda x: F.cross_entropy(x, ty, label_smoothing=0.1),
                 lambda x: x.sparse_categorical_crossentropy(by, label_smoothing=0.1))


def test_binary_crossentropy():
  t = (np.random.default_rng(8).random((4, 5)) < 0.5).astype(np.float32)
  tt, bt = torch.from_numpy(t), Tensor(t)
  helper_test_op([(4, 5)], lambda x: F.binary_cross_entropy(x.sigmoid(), tt), lambda x: x.sigmoid().binary_crossentropy(bt))


def test_binary_crossentropy_logits():
  t = (np.random.default_rng(9).random((4, 5)) < 0.5).astype(np.float32)
  tt, bt = torch.from_numpy(t), Tensor(t)
  helper_test_op([(4, 5)], lambda x: F.binary_cross_entropy_with_logits(x, tt), lambda x: x.binary_crossentropy_logits(bt))
  # large logits stay finite
  helper_test_op(None, lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor([1.0, 0.0, 1.0])),
                 lambda x: x.binary_crossentropy_logits(Tensor([1.0, 0.0, 1.0])), vals=[[-200.0, 200.0, 50.0]])


def test_mse():
  if not hasattr(Tensor, "mse"): pytest.skip("Tensor.mse is not exposed (tinygrad has none)")
  helper_test_op([(4, 5), (4, 5)], lambda x, y: F.mse_loss(x, y), lambda x, y: x.mse(y))


# ---- dropout ---------------------------------------------------------------------------------------------

def test_dropout_eval_is_identity():
  Tensor.training = False
  helper_test_op([(4, 5)], lambda x: F.dropout(x, 0.5, training=False), lambda x: x.dropout(0.5))


def test_dropout_p0_training_is_identity():
  Tensor.training = True
  helper_test_op([(4, 5)], lambda x: x * 1, lambda x: x.dropout(0.0))


def test_dropout_training_scales_kept():
  Tensor.training = True
  Tensor.manual_seed(11)
  x = Tensor.ones(100, 100)
  v = x.dropout(0.25).numpy()
  kept = v != 0
  np.testing.assert_allclose(v[kept], 1 / 0.75, rtol=1e-6)
  assert 0.70 < kept.mean() < 0.80


# ---- nn layers, weights copied from torch.nn -------------------------------------------------------------

def _copy_params(tl, bl, names):
  for n in names:
    getattr(bl, n).assign(Tensor(getattr(tl, n).detach().numpy().copy()))


def _check_layer(tl, bl, x_np, names, atol=1e-5, grad_atol=1e-4, x_int=False):
  _copy_params(tl, bl, names)
  tx = torch.from_numpy(x_np.copy())
  bx = Tensor(x_np.copy(), requires_grad=not x_int)
  if not x_int: tx.requires_grad_(True)
  tout, bout = tl(tx), bl(bx)
  compare("layer forward", bout, tout, atol=atol)
  tout.sum().backward()
  bout.sum().backward()
  if not x_int: compare("input gradient", bx.grad, tx.grad, atol=grad_atol)
  for n in names:
    tp, bp = getattr(tl, n), getattr(bl, n)
    assert bp.grad is not None, f"{n} got no gradient"
    compare(f"{n} gradient", bp.grad, tp.grad, atol=grad_atol)


def _x(shape, seed=0):
  return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)


@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias):
  torch.manual_seed(0)
  _check_layer(torch.nn.Linear(4, 3, bias=bias), nn.Linear(4, 3, bias=bias), _x((5, 4)), ["weight", "bias"] if bias else ["weight"])


def test_linear_batched_input():
  torch.manual_seed(0)
  _check_layer(torch.nn.Linear(4, 3), nn.Linear(4, 3), _x((2, 5, 4)), ["weight", "bias"])


def test_linear_init_shapes_and_range():
  l = nn.Linear(16, 8)
  assert tuple(l.weight.shape) == (8, 16) and tuple(l.bias.shape) == (8,)
  w = l.weight.numpy()
  assert np.abs(w).max() <= 1 / math.sqrt(16) + 1e-6 and w.std() > 0


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"groups": 2, "bias": False}, {"dilation": 2, "padding": 2}], ids=str)
def test_conv2d_layer(kw):
  torch.manual_seed(0)
  tl, bl = torch.nn.Conv2d(4, 6, 3, **kw), nn.Conv2d(4, 6, 3, **kw)
  _check_layer(tl, bl, _x((2, 4, 6, 6)), ["weight", "bias"] if kw.get("bias", True) else ["weight"])


def test_batchnorm2d_training():
  torch.manual_seed(0)
  tl, bl = torch.nn.BatchNorm2d(3), nn.BatchNorm2d(3)
  tl.weight.data.uniform_(0.5, 1.5)
  tl.bias.data.uniform_(-0.5, 0.5)
  Tensor.training = True
  tl.train()
  _check_layer(tl, bl, _x((4, 3, 5, 5)), ["weight", "bias"])
  # running statistics: momentum 0.1, the variance unbiased
  compare("running_mean", bl.running_mean, tl.running_mean, atol=1e-6)
  compare("running_var", bl.running_var, tl.running_var, atol=1e-6)


def test_batchnorm2d_eval():
  torch.manual_seed(0)
  tl, bl = torch.nn.BatchNorm2d(3), nn.BatchNorm2d(3)
  tl.running_mean.uniform_(-1, 1)
  tl.running_var.uniform_(0.5, 2)
  _copy_params(tl, bl, ["running_mean", "running_var"])
  Tensor.training = False
  tl.eval()
  _check_layer(tl, bl, _x((2, 3, 4, 4)), ["weight", "bias"])


@pytest.mark.parametrize("shape,norm", [((3, 5), 5), ((2, 3, 4, 5), (4, 5))], ids=str)
def test_layernorm(shape, norm):
  tl, bl = torch.nn.LayerNorm(norm), nn.LayerNorm(norm)
  torch.nn.init.uniform_(tl.weight, 0.5, 1.5)
  torch.nn.init.uniform_(tl.bias, -0.5, 0.5)
  _check_layer(tl, bl, _x(shape), ["weight", "bias"])


def test_layernorm_no_affine():
  _check_layer(torch.nn.LayerNorm(6, elementwise_affine=False), nn.LayerNorm(6, elementwise_affine=False), _x((3, 6)), [])


@pytest.mark.parametrize("groups,channels,shape", [(2, 4, (3, 4, 5, 5)), (1, 3, (2, 3, 4)), (3, 3, (2, 3, 2, 2))], ids=str)
def test_groupnorm(groups, channels, shape):
  tl, bl = torch.nn.GroupNorm(groups, channels), nn.GroupNorm(groups, channels)
  torch.nn.init.uniform_(tl.weight, 0.5, 1.5)
  torch.nn.init.uniform_(tl.bias, -0.5, 0.5)
  _check_layer(tl, bl, _x(shape), ["weight", "bias"])


def test_embedding():
  torch.manual_seed(0)
  tl, bl = torch.nn.Embedding(10, 3), nn.Embedding(10, 3)
  idx = np.array([[1, 2, 9], [0, 2, 2]], np.int64)
  _copy_params(tl, bl, ["weight"])
  tout, bout = tl(torch.from_numpy(idx)), bl(Tensor(idx.astype(np.int32)))
  compare("embedding forward", bout, tout)
  tout.sum().backward()
  bout.sum().backward()
  compare("embedding weight gradient", bl.weight.grad, tl.weight.grad)


def test_sequential_call():
  # tinygrad's x.sequential([layers...]) applies callables in order
  l1, l2 = nn.Linear(3, 4), nn.Linear(4, 2)
  x = Tensor(_x((2, 3)))
  compare_np("sequential", x.sequential([l1, Tensor.relu, l2]), l2(l1(x).relu()).numpy(), dtypes.float32)


def test_groupnorm_with_more_groups_than_channels_splits_positions_as_tinygrad():
  # tinygrad's GroupNorm normalises (N, groups, -1) slices of each sample, so 32 groups of an
  # 8-channel map (its stable diffusion UNet at small sizes) is valid; float64 reference
  x = _x((2, 8, 4, 4))
  bl = nn.GroupNorm(32, 8)
  bl.weight, bl.bias = Tensor(np.linspace(0.5, 1.5, 8).astype(np.float32)), Tensor(np.linspace(-1, 1, 8).astype(np.float32))
  g = x.astype(np.float64).reshape(2, 32, -1)
  ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
  ref = ref * np.linspace(0.5, 1.5, 8).reshape(1, 8, 1, 1) + np.linspace(-1, 1, 8).reshape(1, 8, 1, 1)
  np.testing.assert_allclose(bl(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)
  with pytest.raises(ValueError): nn.GroupNorm(5, 8)(Tensor(_x((2, 8, 3, 3))))  # 72 values in 5 groups
