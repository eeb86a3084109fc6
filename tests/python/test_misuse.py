# Misuse compared by exception kind. torch's own kind is checked too; baregrad must raise the
# kind tinygrad or torch raises, or the kind the binding documents for that class of misuse
# (ValueError: shapes and values, IndexError: out-of-range axes and indices, TypeError: dtypes).
# Where they differ the accepted kinds are listed per case, with the reason.
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from baregrad import Tensor, dtypes
from helpers import helper_test_exception

SHAPE = (ValueError, RuntimeError)  # torch: RuntimeError; tinygrad and numpy: ValueError for most shape misuse
DTYPE = (TypeError, RuntimeError)  # torch and tinygrad: RuntimeError; numpy and the binding: TypeError

# ---- shapes -----------------------------------------------------------------------------------------

# NOTE: tinygrad <= 0.10 (and numpy) raise ValueError for a failed broadcast, torch RuntimeError
@pytest.mark.parametrize("a,b", [((3,), (4,)), ((2, 3), (3, 2)), ((0,), (2,)), ((2, 3, 4), (3, 3))], ids=str)
def test_broadcast_mismatch(a, b):
  helper_test_exception([a, b], lambda x, y: x + y, expected=SHAPE, torch_expected=RuntimeError)


def test_broadcast_mismatch_where():
  helper_test_exception([(3,), (4,)], lambda x, y: torch.where(x > 0, x, y), lambda x, y: (x > 0).where(x, y), expected=SHAPE,
                        torch_expected=RuntimeError)


@pytest.mark.parametrize("a,b", [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3, 4), (3, 4, 5)), ((4,), (3, 2))], ids=str)
def test_matmul_mismatch(a, b):
  # tinygrad: RuntimeError("cannot dot ..."), torch RuntimeError; ValueError is the binding's shape kind
  helper_test_exception([a, b], lambda x, y: x @ y, expected=SHAPE, torch_expected=RuntimeError)


def test_matmul_0d():
  helper_test_exception([(), (3,)], lambda x, y: x @ y, expected=SHAPE, torch_expected=RuntimeError)


@pytest.mark.parametrize("dst", [(5,), (4, 4), (-1, 5), (2, -1, -1), (-2, 6)], ids=str)
def test_reshape_bad(dst):
  # tinygrad: ValueError (size mismatch) or RuntimeError (two -1s); torch RuntimeError
  helper_test_exception([(3, 4)], lambda x: x.reshape(dst), expected=SHAPE, torch_expected=RuntimeError)


@pytest.mark.parametrize("order", [(0,), (0, 0), (0, 1, 2)], ids=str)
def test_permute_bad(order):
  helper_test_exception([(3, 4)], lambda x: x.permute(order), expected=SHAPE + (IndexError,), torch_expected=(RuntimeError, IndexError))


@pytest.mark.parametrize("dst", [(3, 4), (4,), (2, 3)], ids=str)
def test_expand_bad(dst):
  # tinygrad: ValueError("cannot broadcast ..."); torch RuntimeError
  helper_test_exception([(3, 2)], lambda x: x.expand(dst), expected=SHAPE, torch_expected=RuntimeError)


def test_cat_mismatch():
  # tinygrad asserts; torch RuntimeError
  helper_test_exception([(2, 3), (2, 4)], lambda x, y: torch.cat((x, y), dim=0), lambda x, y: x.cat(y, dim=0), expected=SHAPE,
                        torch_expected=RuntimeError)
  helper_test_exception([(2, 3), (3,)], lambda x, y: torch.cat((x, y), dim=0), lambda x, y: x.cat(y, dim=0), expected=SHAPE,
                        torch_expected=RuntimeError)


def test_stack_mismatch():
  helper_test_exception([(2, 3), (3, 2)], lambda x, y: torch.stack((x, y)), lambda x, y: Tensor.stack(x, y), expected=SHAPE,
                        torch_expected=RuntimeError)


def test_split_bad_sizes():
  helper_test_exception([(5, 2)], lambda x: x.split([2, 2], dim=0), expected=SHAPE, torch_expected=RuntimeError)


@pytest.mark.parametrize("xs,ws,kw", [((1, 3, 5, 5), (2, 4, 3, 3), {}), ((1, 4, 5, 5), (3, 2, 3, 3), {"groups": 2}),
                                      ((1, 3, 2, 2), (2, 3, 3, 3), {})], ids=str)
def test_conv2d_bad(xs, ws, kw):
  # channel mismatch, groups not dividing the output channels, kernel larger than the input
  helper_test_exception([xs, ws], lambda x, w: F.conv2d(x, w, **kw), lambda x, w: x.conv2d(w, **kw), expected=SHAPE,
                        torch_expected=RuntimeError)


def test_pad_bad():
  # odd flat padding; more pads than dims (tinygrad ValueError, torch RuntimeError)
  helper_test_exception([(3, 3)], lambda x: F.pad(x, (2, 0, 2)), lambda x: x.pad((2, 0, 2)), expected=SHAPE, torch_expected=RuntimeError)
  helper_test_exception([(3, 3)], lambda x: F.pad(x, (0, 0, 0, 0, 1, 0)), lambda x: x.pad((0, 0, 0, 0, 1, 0)), expected=SHAPE,
                        torch_expected=RuntimeError)


def test_pad_mode_typo():
  # torch and tinygrad: NotImplementedError; ValueError is the binding's value kind
  helper_test_exception([(1, 3, 3)], lambda x: F.pad(x, (1, 0), mode="typo"), lambda x: x.pad((1, 0), mode="typo"),
                        expected=(NotImplementedError, ValueError), torch_expected=NotImplementedError)


def test_einsum_bad():
  # operand count (tinygrad ValueError, torch RuntimeError) and a size mismatch of a shared index
  helper_test_exception([(2, 3)], lambda x: torch.einsum("ij,jk->ik", x), lambda x: Tensor.einsum("ij,jk->ik", x), expected=SHAPE,
                        torch_expected=RuntimeError)
  helper_test_exception([(2, 3), (4, 5)], lambda x, y: torch.einsum("ij,jk->ik", x, y), lambda x, y: Tensor.einsum("ij,jk->ik", x, y),
                        expected=SHAPE, torch_expected=RuntimeError)


def test_backward_non_scalar():
  # torch RuntimeError; tinygrad asserts (a value misuse)
  tx = torch.tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises(RuntimeError): (tx * 2).backward()
  bx = Tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises(SHAPE): (bx * 2).backward()


# ---- axes and indices out of range: IndexError in torch and tinygrad ----------------------------------

AXIS_CASES = [
    # name, torch, baregrad (tinygrad's keyword names)
    ("sum", lambda x: x.sum(2), lambda x: x.sum(axis=2)),
    ("sum_neg", lambda x: x.sum(-3), lambda x: x.sum(axis=-3)),
    ("max", lambda x: x.max(5), lambda x: x.max(axis=5)),
    ("softmax", lambda x: x.softmax(2), lambda x: x.softmax(2)),
    ("log_softmax", lambda x: x.log_softmax(-3), lambda x: x.log_softmax(-3)),
    ("cumsum", lambda x: x.cumsum(2), lambda x: x.cumsum(axis=2)),
    ("transpose", lambda x: x.transpose(0, 2), lambda x: x.transpose(0, 2)),
    ("unsqueeze", lambda x: x.unsqueeze(3), lambda x: x.unsqueeze(3)),
    ("unsqueeze_neg", lambda x: x.unsqueeze(-4), lambda x: x.unsqueeze(-4)),
    ("flatten", lambda x: x.flatten(2), lambda x: x.flatten(2)),
    ("squeeze", lambda x: x.squeeze(2), lambda x: x.squeeze(2)),
    # tinygrad's flip asserts on a bad axis; torch raises IndexError
    ("flip", lambda x: x.flip((2,)), lambda x: x.flip(2)),
    ("argmax", lambda x: x.argmax(2), lambda x: x.argmax(axis=2)),
    ("roll", lambda x: x.roll(1, 2), lambda x: x.roll(1, 2)),
    ("split", lambda x: x.split(1, 2), lambda x: x.split(1, dim=2)),
]


@pytest.mark.parametrize("name,tfn,bfn", AXIS_CASES, ids=[c[0] for c in AXIS_CASES])
def test_axis_out_of_range(name, tfn, bfn):
  helper_test_exception([(3, 4)], tfn, bfn, expected=IndexError)


def test_cat_axis_out_of_range():
  helper_test_exception([(2, 3), (2, 3)], lambda x, y: torch.cat((x, y), dim=2), lambda x, y: x.cat(y, dim=2), expected=IndexError)


def test_cumsum_0d_axis():
  helper_test_exception([()], lambda x: torch.cumsum(x, dim=1), lambda x: x.cumsum(axis=1), expected=IndexError)


@pytest.mark.parametrize("idx", [5, -6, (0, 4), (3, 0), (0, 0, 0), (-4, 0)], ids=repr)
def test_getitem_out_of_range(idx):
  helper_test_exception([(3, 4)] if isinstance(idx, tuple) else [(5,)], lambda x: x[idx], expected=IndexError)


def test_getitem_two_ellipses():
  # numpy and tinygrad: IndexError (torch 1.13 accepts it)
  with pytest.raises(IndexError): np.zeros((3, 4))[..., 1, ...]
  with pytest.raises(IndexError): Tensor.zeros(3, 4)[..., 1, ...]


def test_getitem_bad_type():
  # float indices: IndexError in torch and tinygrad
  helper_test_exception([(5,)], lambda x: x[1.5], expected=IndexError)


def test_getitem_zero_step():
  # torch and tinygrad: ValueError
  helper_test_exception([(5,)], lambda x: x[::0], expected=ValueError)


def test_setitem_out_of_range():
  tx, bx = torch.zeros(4), Tensor.zeros(4)
  with pytest.raises(IndexError): tx[4] = 1.0
  with pytest.raises(IndexError): bx[4] = 1.0


def test_gather_bad_index_ndim():
  helper_test_exception([(3, 4)], lambda x: x.gather(1, torch.tensor([0, 1])), lambda x: x.gather(1, Tensor([0, 1])), expected=SHAPE,
                        torch_expected=RuntimeError)


# ---- dtypes ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,fn", [
    ("and", lambda x: x & x), ("or", lambda x: x | 1), ("xor", lambda x: x ^ x), ("invert", lambda x: ~x),
    ("lshift", lambda x: x << 2), ("rshift", lambda x: x >> 1),
])
def test_bitwise_on_float(name, fn):
  helper_test_exception([(3,)], fn, expected=DTYPE, torch_expected=(RuntimeError, TypeError))


def test_shift_by_float():
  tx, bx = torch.tensor([1, 2], dtype=torch.int32), Tensor([1, 2])
  with pytest.raises((RuntimeError, TypeError)): tx << 1.5
  with pytest.raises(DTYPE): bx << 1.5


def test_one_hot_float():
  helper_test_exception([(3,)], lambda x: F.one_hot(x, 4), lambda x: x.one_hot(4), expected=DTYPE, torch_expected=RuntimeError)


def test_gather_float_index():
  helper_test_exception([(3, 4), (3, 2)], lambda x, i: x.gather(1, i), lambda x, i: x.gather(1, i), expected=DTYPE + (IndexError,),
                        torch_expected=RuntimeError)


def test_requires_grad_int():
  with pytest.raises(RuntimeError): torch.tensor([1, 2]).requires_grad_(True)
  # tinygrad: RuntimeError("only float Tensors have gradient"); the binding's dtype kind is TypeError
  with pytest.raises(DTYPE): Tensor([1, 2], requires_grad=True).sum().backward()


def test_int_pow_negative_int():
  # torch: "Integers to negative integer powers are not allowed"; tinygrad's test expects RuntimeError
  helper_test_exception(None, lambda x: x ** -2, vals=[[-2, 0, 2]], expected=(RuntimeError, ValueError), torch_expected=RuntimeError)


def test_scatter_src_dtype():
  helper_test_exception(None, lambda x, s: x.scatter(0, torch.tensor([[0, 1]]), s), lambda x, s: x.scatter(0, Tensor([[0, 1]]), s),
                        vals=[[[1.0, 2.0], [3.0, 4.0]], [[1, 2]]], expected=DTYPE, torch_expected=RuntimeError)


# ---- creation ----------------------------------------------------------------------------------------

def test_negative_dims():
  # tinygrad: ValueError; torch RuntimeError
  for fn in (lambda: Tensor.zeros(2, -3), lambda: Tensor.ones((-1,)), lambda: Tensor.full((2, -3), 4), lambda: Tensor.rand(-2),
             lambda: Tensor.empty(-1, 2)):
    with pytest.raises(ValueError): fn().realize()
  with pytest.raises(RuntimeError): torch.zeros(2, -3)


def test_eye_linspace_negative():
  helper_test_exception([], lambda: torch.eye(-1), lambda: Tensor.eye(-1), expected=ValueError, torch_expected=RuntimeError)
  helper_test_exception([], lambda: torch.linspace(1, 2, -1), lambda: Tensor.linspace(1, 2, -1), expected=ValueError,
                        torch_expected=RuntimeError)


def test_ragged_list():
  with pytest.raises(ValueError): torch.tensor([[1, 2], [3]])
  with pytest.raises(ValueError): Tensor([[1, 2], [3]])


def test_bool_of_tensor():
  # tinygrad: __bool__ on a Tensor is not defined (TypeError), so `if t:` cannot silently realize
  with pytest.raises(TypeError): bool(Tensor([1.0]))


def test_item_of_many():
  with pytest.raises((ValueError, RuntimeError)): torch.tensor([1.0, 2.0]).item()
  with pytest.raises(SHAPE): Tensor([1.0, 2.0]).item()


def test_error_is_not_a_crash():
  # after a misuse the module keeps working
  with pytest.raises(SHAPE):
    (Tensor.ones(2, 3) @ Tensor.ones(4, 5)).realize()
  np.testing.assert_equal((Tensor.ones(2, 3) @ Tensor.ones(3, 1)).numpy(), np.full((2, 1), 3.0, np.float32))
  assert dtypes.float32 == Tensor.ones(1).dtype


# Every error names its op first, "[op] message", with the values involved, whether C++ or the
# Python layer raised it.
@pytest.mark.parametrize("fn,kind,text", [
  (lambda: Tensor.ones(2, 3) + Tensor.ones(2), ValueError, "[add] cannot broadcast (2, 3) and (2,)"),
  (lambda: Tensor.ones(2, 3)[5], IndexError, "[getitem] index 5 is out of bounds for axis 0 with size 2"),
  (lambda: Tensor.ones(2, 3).reshape(4, 4), ValueError, "[reshape] cannot reshape (2, 3) to (4, 4)"),
  (lambda: Tensor.ones(2, 3).sum(axis=3), IndexError, "[sum] axis 3 is out of range for (2, 3)"),
  (lambda: Tensor.ones(2, 3).unsqueeze(-5), IndexError, "[unsqueeze] axis -5 is out of range for (2, 3)"),
  (lambda: Tensor([1.0]) & Tensor([2.0]), TypeError, "[bitwise_and] dtypes.float is not supported"),
  (lambda: Tensor.ones(2, 3).permute(0, 0), RuntimeError, "[permute] (0, 0) is not a permutation"),
  (lambda: Tensor.ones(1, 3, 4, 4).conv2d(Tensor.ones(2, 2, 3, 3)), ValueError, "[conv2d] input (1, 3, 4, 4) has 3 channels"),
  (lambda: Tensor([1, 2]) ** -1, RuntimeError, "[pow] dtypes.int ** -1"),
])
def test_error_names_the_op_and_values(fn, kind, text):
  with pytest.raises(kind) as e: fn().realize()
  assert str(e.value).startswith(text), str(e.value)


@pytest.mark.parametrize("call,msg", [(lambda t: t.permute("a"), r"\[permute\] an axis must be an int, got str"),
                                      (lambda t: t.sum("a"), r"\[sum\] axis must be an int or a tuple of ints, got str"),
                                      (lambda t: t.max(axis=1.5), r"\[max\] axis must be an int or a tuple of ints, got float"),
                                      (lambda t: t.transpose("a", 1), r"\[transpose\] an axis must be an int, got str")],
                         ids=["permute", "sum", "max", "transpose"])
def test_axis_of_a_wrong_type_names_the_op(call, msg):
  # a bare "'<=' not supported between int and str" before (issue 16); torch raises TypeError too
  with pytest.raises(TypeError, match=msg): call(Tensor.ones(2, 3))
