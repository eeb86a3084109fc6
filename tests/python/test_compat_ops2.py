# tinygrad API added for issue 17, against PyTorch (forward and gradients) or numpy: max_pool2d indices and
# max_unpool2d, interpolate, scatter(reduce=) and scatter_reduce, masked_select, nonzero, unfold, multinomial,
# random_bits (Threefry known answers), rearrange, conv_transpose2d with per-dim parameters, from_blob.
import ctypes

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from baregrad import Device, Tensor, TinyJit, dtypes
from helpers import compare, compare_np, helper_test_op, np_threefry

pytestmark = pytest.mark.filterwarnings("ignore:scatter_reduce\\(\\) is in beta")

# ---- max_pool2d(return_indices=True), max_unpool2d -----------------------------------------------


@pytest.mark.parametrize("shape,kw", [
    ((2, 2, 5, 5), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 6, 7), dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1), ceil_mode=True)),
], ids=["pad", "dilation-ceil"])
def test_max_pool2d_indices(shape, kw):
  helper_test_op([shape], lambda x: F.max_pool2d(x, **kw, return_indices=True)[0],
                 lambda x: x.max_pool2d(**kw, return_indices=True)[0])
  x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
  _, ti = F.max_pool2d(torch.tensor(x), **kw, return_indices=True)
  compare_np("indices", Tensor(x).max_pool2d(**kw, return_indices=True)[1], ti.numpy().astype(np.int32), dtypes.int32)


def test_max_pool_indices_ties_and_1d():
  # ties: torch keeps the first maximum of each window, padding never wins over -inf inputs
  x = torch.tensor([[[[1., 1, 2, 2], [1, 1, 2, 2], [-np.inf, -np.inf, 0, 0]]]])
  v, i = Tensor(x.numpy()).max_pool2d(2, 1, padding=1, return_indices=True)
  tv, ti = F.max_pool2d(x, 2, 1, padding=1, return_indices=True)
  compare_np("values", v, tv.numpy())
  compare_np("indices", i, ti.numpy().astype(np.int32))
  y = np.random.default_rng(2).standard_normal((2, 3, 9)).astype(np.float32)
  tv, ti = F.max_pool1d(torch.tensor(y), 3, 2, return_indices=True)
  v, i = Tensor(y).max_pool2d((3,), 2, return_indices=True)
  compare_np("1-D values", v, tv.numpy())
  compare_np("1-D indices", i, ti.numpy().astype(np.int32))
  z = np.random.default_rng(4).standard_normal((1, 1, 2, 3, 4)).astype(np.float32)
  compare_np("3-D indices", Tensor(z).max_pool2d((2, 2, 2), 1, return_indices=True)[1],
             F.max_pool3d(torch.tensor(z), 2, 1, return_indices=True)[1].numpy().astype(np.int32))


def test_max_unpool2d():
  x = np.random.default_rng(3).standard_normal((2, 2, 4, 6)).astype(np.float32)
  tv, ti = F.max_pool2d(torch.tensor(x), 2, return_indices=True)
  t_in = tv.detach().clone().requires_grad_(True)
  expected = F.max_unpool2d(t_in, ti, 2)
  expected.mul(torch.arange(expected.numel()).reshape(expected.shape)).sum().backward()
  v = Tensor(tv.numpy(), requires_grad=True)
  out = v.max_unpool2d(Tensor(ti.numpy().astype(np.int32)), 2)
  compare("unpool", out, expected)
  out.mul(Tensor(np.arange(out.numel(), dtype=np.float32).reshape(out.shape))).sum().backward()
  compare("unpool grad", v.grad, t_in.grad)
  # output_size picks the larger plane torch also allows; the round trip through max_pool2d's indices
  val, idx = Tensor(x).max_pool2d(kernel_size=2, stride=2, return_indices=True)
  compare("output_size", val.max_unpool2d(idx, 2, output_size=(5, 7)), F.max_unpool2d(tv, ti, 2, output_size=(5, 7)))
  with pytest.raises(ValueError, match=r"\[max_unpool2d\]"): val.max_unpool2d(idx[:, :1], 2)


# ---- interpolate -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,size,mode,torch_mode,align", [
    ((2, 3, 5), (8,), "linear", "linear", False),
    ((1, 2, 4, 5), (3, 7), "linear", "bilinear", True),
    ((1, 2, 4, 5), (7, 3), "bilinear", "bilinear", False),
    ((1, 1, 2, 3, 4), (3, 5, 2), "trilinear", "trilinear", False),
    ((1, 2, 5, 4), (3, 9), "nearest", "nearest", False),
    ((1, 2, 5, 4), (7, 3), "nearest-exact", "nearest-exact", False),
], ids=["linear1d", "bilinear-align", "bilinear", "trilinear", "nearest", "nearest-exact"])
def test_interpolate(shape, size, mode, torch_mode, align):
  helper_test_op([shape], lambda x: F.interpolate(x, size=size, mode=torch_mode, align_corners=align if "linear" in mode else None),
                 lambda x: x.interpolate(size, mode=mode, align_corners=align), atol=1e-5)


def test_interpolate_int_and_misuse():
  x = torch.arange(12, dtype=torch.uint8).reshape(1, 1, 3, 4)
  compare("uint8 nearest", Tensor(x.numpy()).interpolate((5, 2), mode="nearest"), F.interpolate(x, size=(5, 2), mode="nearest"))
  t = Tensor.ones(1, 1, 3, 4)
  with pytest.raises(ValueError, match=r"\[interpolate\].*mode"): t.interpolate((2, 2), mode="bicubic")
  with pytest.raises(ValueError, match=r"\[interpolate\].*align_corners"): t.interpolate((2, 2), mode="nearest", align_corners=True)
  with pytest.raises(ValueError, match=r"\[interpolate\].*size"): t.interpolate((1, 1, 1, 1, 1))
  with pytest.raises(ValueError, match=r"\[interpolate\].*positive"): t.interpolate((0, 2))


# ---- scatter(reduce=), scatter_reduce ----------------------------------------------------------------

_IDX = np.array([[0, 2, 2, 1], [2, 2, 0, 0]])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(reduce):
  for include_self in (True, False):
    helper_test_op([(3, 5), (2, 4)], lambda s, x: s.scatter_reduce(0, torch.tensor(_IDX), x, reduce, include_self=include_self),
                   lambda s, x: s.scatter_reduce(0, Tensor(_IDX.astype(np.int32)), x, reduce, include_self=include_self), atol=1e-5)


def test_scatter_reduce_int_and_dim1():
  s, src, idx = torch.tensor([[5, 1, 0], [2, -3, 4]]), torch.tensor([[3, 4], [-7, 2]]), torch.tensor([[0, 0], [1, 1]])
  for reduce in ("mean", "amax", "prod"):
    compare(reduce, Tensor(s.numpy()).scatter_reduce(1, Tensor(idx.numpy()), Tensor(src.numpy()), reduce),
            s.scatter_reduce(1, idx, src, reduce))
  compare("negative dim", Tensor(s.numpy()).scatter_reduce(-1, Tensor(idx.numpy()), Tensor(src.numpy()), "sum", include_self=False),
          s.scatter_reduce(-1, idx, src, "sum", include_self=False))
  t = Tensor(s.numpy())
  with pytest.raises(RuntimeError, match=r"\[scatter_reduce\]"): t.scatter_reduce(1, Tensor(idx.numpy()), Tensor(src.numpy()), "max")
  with pytest.raises(TypeError, match=r"\[scatter_reduce\]"): t.scatter_reduce(1, Tensor(idx.numpy()), Tensor(src.numpy()).float(), "sum")
  with pytest.raises(ValueError, match=r"\[scatter_reduce\]"): t.scatter_reduce(1, Tensor([0, 1]), Tensor(src.numpy()), "sum")


def test_scatter_reduce_arg():
  idx = torch.tensor([[2], [3]])
  for reduce in ("add", "multiply"):
    compare(reduce, Tensor.full((2, 4), 2.0).scatter(1, Tensor(idx.numpy()), 1.5, reduce=reduce),
            torch.full((2, 4), 2.0).scatter(1, idx, 1.5, reduce=reduce))
  # a tensor src with reduce= is tinygrad's TypeError (torch accepts it): scatter_reduce does that
  with pytest.raises(TypeError, match=r"\[scatter\].*scatter_reduce"):
    Tensor.ones(4).scatter(dim=1, index=Tensor([0]), src=Tensor.ones(4), reduce="add")
  with pytest.raises(TypeError, match=r"\[scatter\]"): Tensor.zeros(2, 4).scatter(1, Tensor(idx.numpy()), 1.0, reduce="max")


# ---- masked_select, nonzero ---------------------------------------------------------------------------


def test_masked_select():
  m = np.array([[True, False, True], [False, False, True]])
  helper_test_op([(2, 3)], lambda x: torch.masked_select(x, torch.tensor(m)), lambda x: x.masked_select(Tensor(m)))
  helper_test_op([(2, 3)], lambda x: torch.masked_select(x, torch.tensor(m[1])), lambda x: x.masked_select(Tensor(m[1])))  # broadcast
  # size= (the jittable form): padded with fill_value 0, the gradient reaches the selected elements only
  helper_test_op([(2, 3)], lambda x: F.pad(torch.masked_select(x, torch.tensor(m)), (0, 2)), lambda x: x.masked_select(Tensor(m), size=5))
  x = Tensor([[1, 2, 3], [4, 5, 6]])
  compare_np("size pads", x.masked_select(Tensor(m), size=5, fill_value=-1), np.array([1, 3, 6, -1, -1], np.int32))
  compare_np("size truncates", x.masked_select(Tensor(m), size=2), np.array([1, 3], np.int32))
  compare_np("none selected", x.masked_select(Tensor(np.zeros((2, 3), bool))), np.zeros(0, np.int32))
  with pytest.raises(RuntimeError, match=r"\[masked_select\]"): x.masked_select(Tensor([[1, 0, 1], [0, 0, 1]]))
  with pytest.raises(ValueError, match=r"\[masked_select\]"): x.masked_select(Tensor([True, False]))


def test_nonzero():
  for a in (np.array([[1., 0, 3], [0, 0, -2]], np.float32), np.array([0, 5, 0, 7], np.int32), np.zeros((2, 0, 3), np.float32),
            np.array([[[0, 1], [1, 0]], [[1, 1], [0, 0]]], np.int32)):
    compare_np(f"nonzero {a.shape}", Tensor(a).nonzero(), np.argwhere(a).astype(np.int32), dtypes.int32)
  compare_np("0-d", Tensor(3.0).nonzero(), np.zeros((1, 0), np.int32))
  compare_np("size pads", Tensor([[1, 0], [0, 2]]).nonzero(size=3, fill_value=-1), np.array([[0, 0], [1, 1], [-1, -1]], np.int32))
  compare_np("size truncates", Tensor([[1, 0], [0, 2]]).nonzero(size=1), np.array([[0, 0]], np.int32))


# ---- unfold --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim,size,step", [(1, 2, 1), (-1, 2, 3), (0, 2, 1), (2, 0, 2)])
def test_unfold(dim, size, step):
  helper_test_op([(2, 3, 5)], lambda x: x.unfold(dim, size, step), lambda x: x.unfold(dim, size, step))


def test_unfold_misuse():
  t = Tensor.ones(2, 3)
  with pytest.raises(RuntimeError, match=r"\[unfold\]"): t.unfold(1, 4, 1)
  with pytest.raises(RuntimeError, match=r"\[unfold\]"): t.unfold(1, 2, 0)
  with pytest.raises(TypeError, match=r"\[unfold\]"): t.unfold(1, 2.0, 1)
  with pytest.raises(IndexError): t.unfold(2, 1, 1)


# ---- multinomial, random_bits -------------------------------------------------------------------


def test_multinomial():
  Tensor.manual_seed(1234)
  p = np.array([0.2, 0.0, 0.5, 0.3], np.float32)
  draws = Tensor(p).multinomial(4000, replacement=True)
  assert draws.shape == (4000,) and draws.dtype == dtypes.int32
  freq = np.bincount(draws.numpy(), minlength=4) / 4000
  assert freq[1] == 0 and np.abs(freq - p).max() < 0.04, freq
  w = Tensor([[1., 0, 2, 1, 1], [0, 3, 1, 1, 0]])
  out = w.multinomial(3).numpy()
  assert out.shape == (2, 3)
  for row, drawn in zip(w.numpy(), out):
    assert len(set(drawn)) == 3 and all(row[drawn] > 0), (row, drawn)
  assert sorted(Tensor([[0., 1, 1, 1]]).multinomial(3).numpy()[0]) == [1, 2, 3]
  assert Tensor([0., 0, 1]).multinomial().numpy().tolist() == [2]
  with pytest.raises(ValueError, match=r"\[multinomial\]"): Tensor([1., 1]).multinomial(3)
  with pytest.raises(ValueError, match=r"\[multinomial\]"): Tensor.ones(2, 2, 2).multinomial()
  with pytest.raises(ValueError, match=r"\[multinomial\]"): Tensor([1., 1]).multinomial(0)
  with pytest.raises(AssertionError, match=r"\[multinomial\]"): Tensor(2.0).multinomial(1)  # tinygrad asserts


def test_multinomial_without_replacement_under_tinyjit():
  # the draw is a sort on the device (before: keys ranked on the host, which a capture refuses); each replay draws anew
  Tensor.manual_seed(5)
  jf = TinyJit(lambda: Tensor([0.1, 0.9]).multinomial(1, replacement=False).realize())
  first = [jf().item() for _ in range(600)]
  assert abs(np.mean(first) - 0.9) < 0.05, np.mean(first)
  three = TinyJit(lambda: Tensor([[1., 2, 0, 3, 4]]).multinomial(3, replacement=False).realize())
  seen = [tuple(three().numpy()[0]) for _ in range(40)]
  assert all(len(set(d)) == 3 and 2 not in d for d in seen) and len(set(seen)) > 5


def test_random_bits():
  kat = [((0, 0), (0, 0), (0x6b200159, 0x99ba4efe)), ((0xffffffff,) * 2, (0xffffffff,) * 2, (0x1cb996fc, 0xbb002be7)),
         ((0x13198a2e, 0x03707344), (0x243f6a88, 0x85a308d3), (0xc4923a9c, 0x483df7a0))]
  for key, ctr, want in kat: assert tuple(int(v) for v in np_threefry(*key, *ctr)) == want
  key, ctr = (7, 0xdeadbeef), (0xfffffffe, 5)
  nk = np_threefry(*key, *ctr)
  w0, w1 = np_threefry(*nk, np.arange(4), np.arange(4) + 4)
  bits = Tensor.random_bits(Tensor(list(key), dtype=dtypes.uint32), Tensor(list(ctr), dtype=dtypes.uint32), 7)
  compare_np("random_bits", bits, np.concatenate([w0, w1])[:7], dtypes.uint32)
  assert Tensor.random_bits(Tensor([1, 2], dtype=dtypes.uint32), Tensor([0, 0], dtype=dtypes.uint32), 0).shape == (0,)
  with pytest.raises(ValueError, match=r"\[random_bits\]"): Tensor.random_bits(Tensor([1, 2]), Tensor([0, 0], dtype=dtypes.uint32), 3)


# ---- rearrange -----------------------------------------------------------------------------------


def test_rearrange():
  a = np.arange(48).reshape(2, 4, 6)
  t = Tensor(a)
  compare_np("split", t.rearrange("b (h w) c -> b h w c", h=2), a.reshape(2, 2, 2, 6))
  compare_np("merge+permute", t.rearrange("b h w -> (w b) h"), a.transpose(2, 0, 1).reshape(12, 4))
  compare_np("ellipsis", t.rearrange("b ... -> ... b"), a.transpose(1, 2, 0))
  compare_np("ellipsis group", t.rearrange("b ... -> b (...)"), a.reshape(2, 24))
  compare_np("unit dims", t.rearrange("b h (w1 w2) -> b 1 w2 h () w1", w2=3), a.reshape(2, 4, 2, 3).transpose(0, 3, 1, 2)[:, None, :, :, None])
  compare_np("drop unit", Tensor(a.reshape(2, 1, 24)).rearrange("b 1 n -> n b"), a.reshape(2, 24).T)
  helper_test_op([(2, 6, 3)], lambda x: x.reshape(2, 2, 3, 3).permute(0, 3, 1, 2), lambda x: x.rearrange("b (g n) c -> b c g n", n=3))
  for bad, kw in (("b h -> b", {}), ("b h w -> b h w", dict(x=2)), ("b (h w) c -> b h w c", {}), ("b h w -> (b h w", {}),
                  ("b h w c -> b h w c", {}), ("b (h w) c -> b h w c", dict(h=5)), ("b h w -> h w", {})):
    with pytest.raises(ValueError, match=r"\[rearrange\]"): t.rearrange(bad, **kw)


# ---- conv_transpose2d with per-dim parameters ----------------------------------------------------


@pytest.mark.parametrize("cin,groups,cout_g,k,stride,dilation,padding,output_padding", [
    (4, 2, 3, (3, 2), (2, 1), (1, 2), (1, 0), (1, 0)),
    (2, 1, 2, (2, 3), (3, 2), (2, 1), (0, 2), (2, 1)),
    (2, 2, 1, (3, 3), 2, 1, 1, 1),
], ids=["groups-dilation", "stride-outpad", "uniform"])
def test_conv_transpose2d_per_dim(cin, groups, cout_g, k, stride, dilation, padding, output_padding):
  kw = dict(groups=groups, stride=stride, dilation=dilation, padding=padding, output_padding=output_padding)
  helper_test_op([(2, cin, 3, 4), (cin, cout_g, *k), (groups * cout_g,)], lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
                 lambda x, w, b: x.conv_transpose2d(w, b, **kw), atol=1e-5, grad_atol=1e-4)


def test_conv_transpose1d_3d_and_misuse():
  kw = dict(groups=2, stride=2, dilation=2, padding=1, output_padding=1)
  helper_test_op([(2, 4, 5), (4, 3, 3)], lambda x, w: F.conv_transpose1d(x, w, **kw), lambda x, w: x.conv_transpose2d(w, **kw), atol=1e-5)
  kw3 = dict(stride=(2, 1, 1), padding=(0, 1, 0), output_padding=(1, 0, 0))
  helper_test_op([(1, 2, 2, 3, 2), (2, 1, 2, 2, 2)], lambda x, w: F.conv_transpose3d(x, w, **kw3), lambda x, w: x.conv_transpose2d(w, **kw3),
                 atol=1e-5, forward_only=True)
  x, w = Tensor.ones(1, 2, 3, 3), Tensor.ones(2, 1, 2, 2)
  with pytest.raises(ValueError, match=r"\[conv_transpose2d\].*output_padding"): x.conv_transpose2d(w, stride=(2, 1), output_padding=(0, 1))
  with pytest.raises(ValueError, match=r"\[conv_transpose2d\]"): x.conv_transpose2d(Tensor.ones(3, 1, 2, 2))
  with pytest.raises(ValueError, match=r"\[conv_transpose2d\].*stride"): x.conv_transpose2d(w, stride=(0, 1))


# ---- from_blob -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dev", ["CPU", "CPU:C"])
def test_from_blob(dev):
  """The memory is used in place (tinygrad's): kernels read what it holds when they run, and
  writes land in it. numpy is the oracle and the memory's owner."""
  a = np.arange(6, dtype=np.float32)
  t = Tensor.from_blob(a.ctypes.data, (2, 3), device=dev)
  compare_np("float32", t, a.reshape(2, 3), dtypes.float32)
  a[0] = 100  # no copy: the next kernel sees the new value
  np.testing.assert_equal((t * 2).numpy(), a.reshape(2, 3) * 2)
  t.assign(Tensor(np.full((2, 3), 7.5, np.float32), device=dev))
  Device[dev].synchronize()  # the write is in the memory once the device finished it
  np.testing.assert_equal(a, np.full(6, 7.5, np.float32))
  buf = (ctypes.c_int16 * 4)(1, -2, 3, -4)
  compare_np("int16", Tensor.from_blob(ctypes.addressof(buf), (4,), dtype=dtypes.int16, device=dev), np.array([1, -2, 3, -4], np.int16))
  assert Tensor.from_blob(0, (0, 3), device=dev).shape == (0, 3)
  with pytest.raises(ValueError, match=r"\[from_blob\] a null pointer"): Tensor.from_blob(0, (2,), device=dev)
  with pytest.raises(TypeError, match=r"\[from_blob\] unexpected keyword"): Tensor.from_blob(a.ctypes.data, (2,), device=dev, strides=(1,))
  # memory that is already a buffer of the device is refused, not aliased
  owned = Tensor([1.0, 2.0], device=dev).realize()
  with pytest.raises(RuntimeError, match=r"\[from_blob\].*overlaps a buffer of"): Tensor.from_blob(np.asarray(owned).ctypes.data, (2,), device=dev)


def test_from_blob_needs_a_host_addressable_device():
  a = np.zeros(4, np.float32)
  with pytest.raises(RuntimeError, match=r"\[from_blob\].*NULL cannot use host memory in place"):
    Tensor.from_blob(a.ctypes.data, (4,), device="NULL")
