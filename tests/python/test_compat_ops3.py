# Behaviour tinygrad's own test_ops.py checks, against PyTorch or numpy: shifts by int tensors near the bit width,
# diagonal with offset and dims, einsum diagonals and traces, meshgrid "xy", tril/triu of bool, reflect/replicate
# padding with negative pads, cross_entropy targets, clip gradients on the bounds, copysign of -0.0, and the
# RuntimeError kinds torch raises for shape and dtype misuse (baregrad's ValueError/TypeError, also RuntimeErrors).
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from baregrad import Tensor, dtypes
from baregrad.helpers import CI, IMAGE, mv_address
from helpers import helper_test_op

# ---- shifts --------------------------------------------------------------------------------------


def test_shift_by_tensor_near_bit_width():
  data = [[-1, -3, 1, 7], [0, -2**31, 2**31 - 1, -1]]
  n = [0, 2, 8, 31]
  tor, ten = torch.tensor(data, dtype=torch.int32), Tensor(data, dtype=dtypes.int32)
  np.testing.assert_array_equal((ten >> Tensor(n, dtype=dtypes.int32)).numpy(), (tor >> torch.tensor(n).int()).numpy())
  np.testing.assert_array_equal((ten << Tensor(n, dtype=dtypes.int32)).numpy(), (tor << torch.tensor(n).int()).numpy())
  u = Tensor([[1, 3], [5, 2**31 - 1]], dtype=dtypes.uint32) << Tensor([31, 1], dtype=dtypes.uint32)
  np.testing.assert_array_equal(u.numpy(), np.array([[2**31, 6], [2**31, 2**32 - 2]], dtype=np.uint32))


@pytest.mark.parametrize("f", [lambda: Tensor([1.0]) << 2, lambda: Tensor([1]) >> Tensor([1.0]), lambda: Tensor([1]) << 1.0],
                         ids=["float-tensor", "float-amount-tensor", "float-amount"])
def test_shift_of_floats_raises_runtime_and_type_error(f):
  with pytest.raises(RuntimeError, match=r"\[(l|r)shift\]"): f()
  with pytest.raises(TypeError): f()

# ---- movement ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,kw", [((3, 4), {}), ((4, 3), dict(offset=-1)), ((2, 3, 5), dict(offset=1, dim1=-1, dim2=1)),
                                      ((3, 5), dict(offset=7))], ids=["rect", "below", "batched", "past-end"])
def test_diagonal(shape, kw):
  helper_test_op([shape], lambda x: x.diagonal(**kw))


def test_diagonal_same_dims_raises():
  with pytest.raises(RuntimeError, match=r"\[diagonal\] dim1 and dim2"): Tensor.ones(3, 3).diagonal(dim1=0, dim2=-2)


def test_meshgrid_xy_shapes_and_values():
  x, y = [0., 1., 2.], [3., 4., 5., 6.]
  for tor, ten in zip(torch.meshgrid(torch.tensor(x), torch.tensor(y), indexing="xy"), Tensor(x).meshgrid(Tensor(y), indexing="xy")):
    np.testing.assert_array_equal(ten.numpy(), tor.numpy())


def test_tril_triu_keep_bool():
  m = [[True, False, True], [True, True, True]]
  for fn in ("tril", "triu"):
    out = getattr(Tensor(m), fn)(1)
    assert out.dtype == dtypes.bool
    np.testing.assert_array_equal(out.numpy(), getattr(torch.tensor(m), fn)(1).numpy())


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_mode_negative_pads_crop_after_padding(mode):
  helper_test_op([(1, 1, 5, 5)], lambda x: F.pad(x, (3, -5, 1, -5), mode=mode), lambda x: x.pad((3, -5, 1, -5), mode=mode))
  helper_test_op([(1, 2, 3, 3)], lambda x: F.pad(x, (-1, 2, 2, -1), mode=mode), lambda x: x.pad((-1, 2, 2, -1), mode=mode))


def test_stack_of_one_tuple():
  helper_test_op([(2, 3), (2, 3)], lambda x, y: torch.stack((x, y), 1), lambda x, y: Tensor.stack((x, y), dim=1))
  with pytest.raises(ValueError): Tensor.stack((Tensor([1]), Tensor([2])), Tensor([3]))


def test_roll_flat_tuple_and_mismatched_dims():
  helper_test_op([(2, 4)], lambda x: x.roll((3,)))
  with pytest.raises(RuntimeError, match=r"\[roll\]"): Tensor.ones(3, 3).roll(1, (0, 1))
  with pytest.raises(RuntimeError, match=r"\[roll\]"): Tensor.ones(3, 3).roll((1, 2))


def test_gather_scatter_shape_and_dtype_errors_are_runtime_errors():
  with pytest.raises(RuntimeError, match=r"\[gather\] .* ndims differ"): Tensor.ones(4, 5).gather(0, Tensor([1]))
  with pytest.raises(ValueError, match=r"\[gather\] index \(3, 4\) exceeds"): Tensor.ones(2, 1).gather(0, Tensor.zeros(3, 4, dtype=dtypes.int32))
  with pytest.raises(RuntimeError, match=r"\[scatter\] index .* exceeds src"):
    Tensor.ones(2, 3).scatter(1, Tensor.zeros(2, 4, dtype=dtypes.int32), Tensor.ones(2, 3))
  with pytest.raises(RuntimeError, match=r"\[scatter\] src dtype"):
    Tensor.ones(2, 3, dtype=dtypes.half).scatter(1, Tensor.zeros(2, 3, dtype=dtypes.int32), Tensor.ones(2, 3))

# ---- reductions and products ---------------------------------------------------------------------


@pytest.mark.parametrize("formula,shapes", [("ii->i", [(4, 4)]), ("ii->", [(4, 4)]), ("...ii->...", [(2, 3, 3)]),
                                            ("bij,bjj->bi", [(2, 3, 3), (2, 3, 3)])], ids=["diag", "trace", "batch-trace", "mixed"])
def test_einsum_diagonals(formula, shapes):
  helper_test_op(shapes, lambda *xs: torch.einsum(formula, *xs), lambda *xs: Tensor.einsum(formula, *xs), atol=1e-5)


def test_einsum_and_matmul_shape_errors_are_runtime_errors():
  with pytest.raises(RuntimeError, match=r"\[einsum\] index 'j'"): Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3), Tensor.ones(4, 2))
  with pytest.raises(ValueError, match=r"\[matmul\] inner dims differ"): Tensor.ones(2, 4) @ Tensor.ones(1, 3)
  with pytest.raises(RuntimeError, match=r"\[matmul\] both operands need a dim"): Tensor(3.0) @ Tensor.ones(3, 3)
  assert (Tensor.ones(5, 2, 6) @ Tensor.ones(6, 4)).shape == (5, 2, 4)


def test_allclose_is_a_tensor_as_tinygrads():
  a = np.array([1.0, 2.0, np.nan], np.float32)
  for b, kw in [(a + 1e-7, {}), (a + 1e-3, {}), (a, {"equal_nan": True}), (a + 1e-3, {"atol": 1e-2})]:
    got = Tensor(a).allclose(Tensor(b), **kw)
    assert isinstance(got, Tensor) and got.shape == () and got.dtype == dtypes.bool
    assert got.item() == np.allclose(a, b, **kw), (b, kw)


def test_isclose_python_scalar():
  v = [1.0, 1.0 + 1e-7, 2.0, math.inf, math.nan]
  np.testing.assert_array_equal(Tensor(v).isclose(1.0).numpy(), torch.tensor(v).isclose(torch.tensor(1.0)).numpy())


def test_cummax_axis_out_of_range_on_scalar():
  with pytest.raises(IndexError, match=r"\[cummax\] axis 1"): Tensor(1.0).cummax(1)

# ---- elementwise ---------------------------------------------------------------------------------


def test_clip_gradient_is_one_on_the_bounds():
  vals = [[-3.0, -2.5, 0.0, 1.5, 2.0, math.nan]]
  helper_test_op(None, lambda x: x.clip(-2.5, 1.5), vals=vals)
  helper_test_op(None, lambda x: x.clip(3, 0), vals=vals)  # min > max: every value is max, as torch


def test_copysign_negative_zero_and_zero_gradient_of_sign():
  helper_test_op(None, torch.copysign, Tensor.copysign, vals=[[1.0, -2.0, 3.0, 0.0], [-0.0, 0.0, -math.inf, -1.0]])

# ---- nn ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("xs,ys", [((6,), (6,)), ((3, 4, 2), (3, 2)), ((3, 4, 2), (3, 4, 2))], ids=["1d-probs", "idx-spatial", "probs"])
def test_cross_entropy_target_kinds(xs, ys):
  if xs == ys: helper_test_op([xs, ys], lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1),
                              lambda x, y: x.cross_entropy(y, label_smoothing=0.1), low=[-2, 0], high=[2, 1])
  else:
    y = np.random.default_rng(0).integers(0, xs[1], ys)
    helper_test_op([xs], lambda x: F.cross_entropy(x, torch.tensor(y)), lambda x: x.cross_entropy(Tensor(y.astype(np.int32))))


def test_cross_entropy_bad_target_shape_and_conv_window_raise_runtime_errors():
  with pytest.raises(RuntimeError, match=r"\[cross_entropy\] target \(4, 1\)"): Tensor.ones(4, 3).cross_entropy(Tensor.ones(4, 1))
  with pytest.raises(RuntimeError, match=r"\[conv2d\] kernel \(3, 3\)"): Tensor.ones(1, 1, 2, 2).conv2d(Tensor.ones(1, 1, 3, 3))
  with pytest.raises(RuntimeError, match=r"\[conv2d\] kernel \(3, 3\) \(dilation \(3, 3\)\)"):
    Tensor.ones(1, 1, 6, 7).conv2d(Tensor.ones(2, 1, 3, 3), dilation=3)

# ---- helpers -------------------------------------------------------------------------------------


def test_helpers_flags_and_mv_address():
  assert IMAGE == 0 and isinstance(CI, bool)
  buf = bytearray(b"abc")
  import ctypes
  assert ctypes.string_at(mv_address(memoryview(buf)), 3) == b"abc"


def test_pad_to_value_and_shrink_to():
  np.testing.assert_array_equal(Tensor([[1, 2]]).pad_to(2, 3, value=-1).numpy(), np.pad([[1, 2]], ((0, 1), (0, 1)), constant_values=-1))
  np.testing.assert_array_equal(Tensor([1, 2]).pad_to(None, value=5).numpy(), [1, 2])
  t = Tensor(np.arange(32).reshape(4, 8))
  np.testing.assert_array_equal(t.shrink_to(None, 3).numpy(), np.arange(32).reshape(4, 8)[:, :3])
  with pytest.raises(ValueError, match=r"\[shrink_to\]"): t.shrink_to(2)
