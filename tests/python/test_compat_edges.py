# tinygrad's edge cases that its own test_ops checks: pow gradients at 0, +-inf and negative bases
# (torch's rule), sin/cos/tan gradients at large arguments, int masks in bitwise ops, unknown dtype
# names, one_hot(-1) and scatter with a tensor src and reduce=. Oracles: torch (float32 and
# float64) and numpy.
import itertools
import math

import numpy as np
import pytest
import torch

from baregrad import Tensor, dtypes

EDGE = [-math.inf, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, math.inf, math.nan]


def torch_grads(xs, ys):
  x = torch.tensor(xs, dtype=torch.float32, requires_grad=True)
  y = torch.tensor(ys, dtype=torch.float32, requires_grad=True)
  out = x ** y
  out.sum().backward()
  return out.detach().numpy(), x.grad.numpy(), y.grad.numpy()


def assert_same(got, want, what):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN positions")
  ok = ~np.isnan(want)
  np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-6, err_msg=what)


def test_pow_tensor_gradients_match_torch_at_every_edge():
  pairs = list(itertools.product(EDGE, EDGE))
  xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
  want_out, want_dx, want_dy = torch_grads(xs, ys)
  x, y = Tensor(xs, requires_grad=True), Tensor(ys, requires_grad=True)
  out = x ** y
  out.sum().backward()
  assert_same(out.numpy(), want_out, "x ** y")
  assert_same(x.grad.numpy(), want_dx, "d/dx x ** y")
  assert_same(y.grad.numpy(), want_dy, "d/dy x ** y")


@pytest.mark.parametrize("c", [-2, -1, 0, 0.3, 0.5, 1, 2, 3, 5.5, -5.5])
def test_pow_scalar_gradient_matches_torch(c):
  # torch computes x ** 0.5 as sqrt (NaN at -inf, and a gradient of 1/(2*sqrt(-0)) = -inf at -0);
  # IEEE pow, numpy and baregrad give pow(-inf, 0.5) = +inf and pow(-0, -0.5) = +inf
  sqrt_edge = (-math.inf, -0.0) if c == 0.5 else ()
  xs = [x for x in EDGE if not math.isnan(x) and not (x in sqrt_edge and math.copysign(1, x) < 0)] + [-3.0, 2.0]
  t = torch.tensor(xs, dtype=torch.float32, requires_grad=True)
  (t ** c).sum().backward()
  x = Tensor(xs, requires_grad=True)
  (x ** c).sum().backward()
  assert_same(x.grad.numpy(), t.grad.numpy(), f"d/dx x ** {c}")


@pytest.mark.parametrize("base", [0.0, 0.7, 2.0, -2.0, 1.0])
def test_rpow_gradient_matches_torch(base):
  """base ** x; at base 0 the gradient is 0 for x >= 0 and +-inf below (torch's rule)."""
  xs = [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 0.5]
  t = torch.tensor(xs, dtype=torch.float32, requires_grad=True)
  (base ** t).sum().backward()
  x = Tensor(xs, requires_grad=True)
  (base ** x).sum().backward()
  assert_same(x.grad.numpy(), t.grad.numpy(), f"d/dx {base} ** x")


@pytest.mark.parametrize("fn", ["sin", "cos", "tan"])
def test_trig_gradients_at_large_arguments(fn):
  """float32 arguments up to 1e6: the gradient is the float64 derivative at the float32 argument,
  within float32's rounding of the result (cos's gradient does not drift with two roundings)."""
  xs = np.array([1e1, 1e2, 1e3, 1e4, 1e5, 1e6, -1e1, -1e2, -1e3, -1e4, -1e5, -1e6], dtype=np.float32)
  x = Tensor(xs, requires_grad=True)
  getattr(x, fn)().sum().backward()
  xd = xs.astype(np.float64)
  want = {"sin": np.cos(xd), "cos": -np.sin(xd), "tan": 1 / np.cos(xd) ** 2}[fn]
  np.testing.assert_allclose(x.grad.numpy(), want, rtol=3e-3, atol=3e-3)


def test_bitwise_int_masks_are_bit_patterns():
  assert (Tensor([0], dtype=dtypes.int32) | 0xFFFFFFFF).item() == -1
  np.testing.assert_equal((Tensor([5, -7], dtype=dtypes.int8) & 0xF0).numpy(), np.array([5, -7], np.int8) & np.int8(-16))
  np.testing.assert_equal((Tensor([3], dtype=dtypes.int16) ^ 0x8000).numpy(), np.array([3], np.int16) ^ np.int16(-32768))
  with pytest.raises(ValueError, match=r"\[bitwise_or\]"): Tensor([0], dtype=dtypes.int32) | (1 << 32)
  with pytest.raises(ValueError, match=r"\[add\]"): Tensor([0], dtype=dtypes.int32) + 0xFFFFFFFF  # arithmetic never wraps


def test_unknown_dtype_name_is_attribute_and_type_error():
  for exc in (AttributeError, TypeError):
    with pytest.raises(exc, match=r"\[to_dtype\] unknown dtype ''"): Tensor([1.0, 2.0]).prod(dtype="")
  with pytest.raises(AttributeError): Tensor([1.0]).cast("floaty")


def test_one_hot_and_scatter_follow_tinygrad():
  with pytest.raises(ValueError, match=r"\[one_hot\] num_classes=-1 must be non-negative"): Tensor([1, 2, 4]).one_hot(-1)
  np.testing.assert_equal(Tensor([1, 2, 4]).one_hot(6).numpy(), torch.nn.functional.one_hot(torch.tensor([1, 2, 4]), 6).numpy())
  with pytest.raises(TypeError, match=r"scatter_reduce"):
    Tensor.ones(4).scatter(dim=1, index=Tensor([0]), src=Tensor.ones(4), reduce="add")


def test_second_cpu_device():
  """CPU:1 is another CPU device (its own memory and queues), as tinygrad's: copies between the two
  and ops on either give numpy's values; CPU:0 is CPU."""
  a = Tensor([1.0, 2.0, 3.0], device="CPU:1")
  assert a.device == "CPU:1" and Tensor([1.0], device="cpu:0").device == "CPU"
  b = (a * 2).to("CPU") + Tensor([1.0, 1.0, 1.0], device="CPU")
  assert b.device == "CPU"
  np.testing.assert_equal(b.numpy(), np.array([3.0, 5.0, 7.0]))
  with pytest.raises(RuntimeError, match="CPU:1"): (a + Tensor([1.0, 1.0, 1.0], device="CPU")).numpy()


def _torch_second(fn, xs, ys):
  x = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
  y = torch.tensor(ys, dtype=torch.float64, requires_grad=True)
  gx, gy = torch.autograd.grad(fn(x, y).sum(), (x, y), create_graph=True)
  return [g.detach().numpy() for g in (gx, gy, *torch.autograd.grad((gx * gx).sum() + gy.sum(), (x, y)))]


@pytest.mark.parametrize("name,fn", [
  ("poly", lambda x, y: x ** 3 * y + x * y * y),
  ("transcendental", lambda x, y: x.sin() * y.exp() + (x * y).sigmoid() + (x * x + 1).log() / (y * y + 2).sqrt()),
  ("pow", lambda x, y: (x * x + 1) ** (y * 0.5) + x.abs() ** 1.5),
  ("reduce_matmul", lambda x, y: (x.reshape(2, 3) @ y.reshape(3, 2)).tanh().sum(1).max() + x.softmax(0).mul(y).sum()),
], ids=lambda v: v if isinstance(v, str) else "")
def test_gradient_is_differentiable(name, fn):
  """gradient() returns a differentiable graph, as tinygrad's: the gradient of a function of
  first gradients matches torch.autograd.grad(create_graph=True) in float64."""
  xs, ys = [0.5, -1.25, 2.0, 0.75, -0.3, 1.1], [1.5, 0.25, -0.5, 2.0, 0.6, -1.2]
  want = _torch_second(fn, xs, ys)
  x, y = Tensor(xs, dtype=dtypes.float64), Tensor(ys, dtype=dtypes.float64)
  gx, gy = fn(x, y).sum().gradient(x, y)
  hx, hy = ((gx * gx).sum() + gy.sum()).gradient(x, y)
  for got, w, what in zip((gx, gy, hx, hy), want, ("d/dx", "d/dy", "d2 x", "d2 y")):
    np.testing.assert_allclose(got.numpy(), w, rtol=1e-9, atol=1e-12, err_msg=f"{name} {what}")


def test_backward_grads_have_no_history():
  """backward() fills .grad without a graph (torch's create_graph=False): training keeps no
  activations alive through the gradients."""
  w = Tensor([1.0, 2.0], requires_grad=True)
  (w ** 3).sum().backward()
  np.testing.assert_equal(w.grad.numpy(), [3.0, 12.0])
  with pytest.raises(RuntimeError, match=r"\[gradient\]"): w.grad.sum().gradient(w)


def test_randn_of_any_dtype_and_dtype_tables():
  """randn(dtype=) of a non-float dtype casts float32 normal samples (tinygrad's); DTYPES_DICT /
  INVERSE_DTYPES_DICT are tinygrad.dtype's name tables."""
  from baregrad.dtype import DTYPES_DICT, INVERSE_DTYPES_DICT
  Tensor.manual_seed(3)
  f = Tensor.randn(64, dtype=dtypes.float32).numpy()
  Tensor.manual_seed(3)
  np.testing.assert_equal(Tensor.randn(64, dtype=dtypes.int16).numpy(), np.trunc(f).astype(np.int16))
  for name, dt in DTYPES_DICT.items():
    assert getattr(dtypes, name) is dt and Tensor.randn(3, dtype=dt).element_size() == dt.itemsize
  assert INVERSE_DTYPES_DICT[dtypes.float32.name] in ("float32", "float") and "default_float" not in DTYPES_DICT
