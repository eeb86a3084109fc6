# Tensors over several devices (baregrad/multi.py, tinygrad's shard) and lazy copies between devices (Tensor.to),
# against numpy: each op's values, where the shards go, the errors of movements that would move elements between
# shards, writes into the shards, gradients and TinyJit.
import numpy as np
import pytest
import torch

from baregrad import Device, Tensor, TinyJit
from baregrad.uop.ops import Ops

BASE = Device.DEFAULT.split(":")[0]
D2 = (f"{BASE}:1", f"{BASE}:2")
D3 = (f"{BASE}:1", f"{BASE}:2", f"{BASE}:3")
RNG = np.random.default_rng(3)


def arr(*shape):
  return RNG.uniform(-1, 1, size=shape).astype(np.float32)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_shard_places_parts_on_each_device(axis):
  x = arr(4, 6)
  t = Tensor(x).shard(D2, axis)
  assert t.device == D2 and t.shape == (4, 6) and t.uop.axis == axis
  parts = [u._c.numpy() for u in t.uop.src]  # each device's part
  want = [x] * 2 if axis is None else np.split(x, 2, axis)
  for p, w, d in zip(parts, want, D2): np.testing.assert_array_equal(p, w)
  assert [u.device for u in t.uop.src] == list(D2)
  np.testing.assert_array_equal(t.numpy(), x)
  if axis is None:
    with pytest.raises(RuntimeError, match="axis is None"): t.uop.bounds
  else: assert t.uop.bounds == ((0, x.shape[axis] // 2), (x.shape[axis] // 2, x.shape[axis]))


@pytest.mark.parametrize("ax_a,ax_b", [(0, 0), (0, None), (None, 1), (1, 0), (None, None)])
def test_elementwise_of_any_two_shardings(ax_a, ax_b):
  a, b = arr(4, 6), arr(4, 6)
  ta, tb = Tensor(a).shard(D2, ax_a), Tensor(b).shard(D2, ax_b)
  np.testing.assert_allclose((ta * tb + 1).numpy(), a * b + 1, rtol=1e-6)
  np.testing.assert_allclose((ta > tb).where(ta, tb).numpy(), np.where(a > b, a, b))
  assert (ta + tb).uop.axis == (ax_a if ax_a is not None else ax_b)


def test_broadcast_operand_and_scalar():
  a, row = arr(6, 4), arr(4)
  t = Tensor(a).shard(D3, 0)
  np.testing.assert_allclose((t - Tensor(row)).numpy(), a - row, rtol=1e-6)
  np.testing.assert_allclose((2.0 * t).exp().numpy(), np.exp(2 * a), rtol=1e-5)
  # a sharded operand of lower rank right-aligns: its axis 0 is the output's axis 1
  col = Tensor(arr(4)).shard(D2, 0)
  assert (col + Tensor(arr(3, 4)).shard(D2, None)).uop.axis == 1


@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_reductions_over_and_beside_the_sharded_axis(op, axis):
  x = arr(6, 4)
  t = Tensor(x).shard(D2, 0)
  got = getattr(t, op)(axis=axis)
  np.testing.assert_allclose(got.numpy(), getattr(np, op)(x, axis=axis), rtol=1e-5, atol=1e-6)
  # reducing the sharded axis combines every device's part: the result is whole on each
  assert got.uop.axis == (None if axis in (0, None) else 0)


def test_matmul_sharded_on_the_contracted_axis():
  a, w = arr(3, 8), arr(8, 5)
  got = Tensor(a).shard(D2, 1) @ Tensor(w).shard(D2, 0)
  np.testing.assert_allclose(got.numpy(), a @ w, rtol=1e-5, atol=1e-6)
  w2 = arr(8, 6)
  got = Tensor(a).shard(D2, None) @ Tensor(w2).shard(D2, 1)  # column parallel
  np.testing.assert_allclose(got.numpy(), a @ w2, rtol=1e-5, atol=1e-6)
  assert got.uop.axis == 1


def test_movements_carry_the_axis():
  x = arr(4, 6)
  t = Tensor(x).shard(D2, 0)
  assert t.reshape(2, 2, 6).uop.axis == 0 and t.reshape(4, 2, 3).uop.axis == 0
  assert t.permute(1, 0).uop.axis == 1
  np.testing.assert_array_equal(t.permute(1, 0).numpy(), x.T)
  e = t.reshape(1, 4, 6).expand(3, 4, 6)
  assert e.uop.axis == 1
  np.testing.assert_array_equal(e.numpy(), np.broadcast_to(x, (3, 4, 6)))
  np.testing.assert_array_equal(t.pad(((0, 0), (1, 2))).numpy(), np.pad(x, ((0, 0), (1, 2))))
  np.testing.assert_array_equal(t.flip(1).numpy(), x[:, ::-1])
  np.testing.assert_array_equal(t[2:4].numpy(), x[2:4])  # one device's part, whole on each


def test_movements_that_would_cross_shards_raise():
  t = Tensor(arr(5, 4)).shard(D2, 1)
  with pytest.raises(RuntimeError, match="moved items between shards"): t.reshape(10, 2)
  with pytest.raises(RuntimeError, match="does not split"): Tensor(arr(256)).shard(D3, 0)
  with pytest.raises(RuntimeError, match="flipping the sharded axis"): t.flip(1)
  with pytest.raises(RuntimeError, match="padding"): t.pad(((0, 0), (1, 0)))
  with pytest.raises(RuntimeError, match="shrinking"): t.shrink(((0, 5), (1, 3)))
  with pytest.raises(RuntimeError, match="can't shard a multi-device tensor"): t.shard(D2, 0)


def test_setitem_and_assign_write_into_the_shards():
  # before: indexing a sharded tensor gathered a copy, and writes into it were silently lost
  out = Tensor.zeros(4, 4).shard(D2, 0).contiguous().realize()
  out[:, 2:3].assign(Tensor.ones(4, 1).shard(D2, 0).contiguous().realize()).realize()
  want = np.zeros((4, 4), np.float32)
  want[:, 2] = 1
  np.testing.assert_array_equal(out.numpy(), want)
  out[1:3, 0] = 7.0  # across the two devices' parts
  want[1:3, 0] = 7
  np.testing.assert_array_equal(out.numpy(), want)
  with pytest.raises(RuntimeError, match="gathered copy"):
    out[:, [0, 1]].assign(Tensor.zeros(4, 2).shard(D2, 0))


def test_gradients_through_sharded_tensors_match_torch():
  x, w = arr(4, 6), arr(6)
  tx, tw = Tensor(x).shard(D2, 0), Tensor(w).shard(D2, None)
  ((tx * tw).relu().mean() + tw.square().sum()).backward()
  px, pw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
  ((px * pw).relu().mean() + pw.square().sum()).backward()
  np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-5, atol=1e-7)  # the copies' grads summed


def test_jit_of_sharded_inputs():
  w = arr(8, 4)
  tw = Tensor(w).shard(D2, None)
  jf = TinyJit(lambda x: (x @ tw).relu().sum(axis=1).realize())
  for _ in range(4):
    x = arr(6, 8)
    out = jf(Tensor(x).shard(D2, 0))
    assert out.device == D2 and out.uop.axis == 0
    np.testing.assert_allclose(out.numpy(), np.maximum(x @ w, 0).sum(1), rtol=1e-5, atol=1e-6)
  assert jf.captured is not None


def test_to_another_device_is_lazy_and_differentiable():
  x = arr(5)
  t = Tensor(x, requires_grad=True)
  c = t.to(D2[0])
  assert c.uop.op is Ops.COPY and c.device == D2[0]  # a copy waiting for its source, not done at once
  (c * c).sum().backward()
  np.testing.assert_allclose(t.grad.numpy(), 2 * x, rtol=1e-6)
  assert t.grad.device == t.device


def test_jit_replays_copies_between_devices():
  # before: .to() read the data to the host at once, which a capture refuses
  jf = TinyJit(lambda a, b: (a.to(D2[0]) + b.to(D2[0])).realize())
  for i in range(4):
    a, b = arr(3), arr(3)
    np.testing.assert_allclose(jf(Tensor(a), Tensor(b)).numpy(), a + b, rtol=1e-6)
  assert jf.captured is not None and len(jf.captured.linear.src) == 1  # two copies and one kernel


@pytest.mark.parametrize("make", ["SGD", "SGD_momentum", "Adam", "LAMB"])
def test_data_parallel_training_matches_one_device(make):
  # the model's weights whole on every device (and one sharded along its output axis), the batch split over the devices:
  # every step equals the same step on one device (the weight copies' gradients are summed, the state is sharded alike)
  from baregrad.nn import optim
  ctor = {"SGD": lambda ps: optim.SGD(ps, lr=0.1), "SGD_momentum": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
          "Adam": lambda ps: optim.Adam(ps, lr=0.01), "LAMB": lambda ps: optim.LAMB(ps, lr=0.01, weight_decay=0.01)}[make]
  w1, w2, xs, ys = arr(8, 6), arr(6, 4), [arr(6, 8) for _ in range(3)], [arr(6, 4) for _ in range(3)]
  def train(shard: bool):
    a, b = Tensor(w1), Tensor(w2)
    if shard: a, b = a.shard(D2, None), b.shard(D2, 1)
    opt = ctor([a, b])
    with Tensor.train():
      for x, y in zip(xs, ys):
        tx, ty = Tensor(x), Tensor(y)
        if shard: tx, ty = tx.shard(D2, 0), ty.shard(D2, 0)
        opt.zero_grad()
        ((tx @ a).relu() @ b - ty).square().mean().backward()
        opt.step()
    return a.numpy(), b.numpy()
  for got, want in zip(train(True), train(False)): np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_optimizers_refuse_parameters_on_different_devices():
  from baregrad.nn import optim
  with pytest.raises(NotImplementedError, match="same devices"):
    optim.SGD([Tensor(arr(4)).shard(D2, 0), Tensor(arr(4)).shard(D3, None)])


@pytest.mark.parametrize("axis", [0, None])
def test_like_constructors_keep_the_sharding(axis):
  t = Tensor(arr(4, 6)).shard(D2, axis)
  for made in (t.rand_like(), t.zeros_like(), t.full_like(2.0), t.randn_like(), t.empty_like()):
    assert made.device == D2 and made.uop.axis == axis and made.shape == t.shape
  r = t.rand_like().numpy()
  assert ((r >= 0) & (r < 1)).all() and len(np.unique(r)) > 12  # one draw split (or copied), not one per device repeated
  np.testing.assert_array_equal(t.full_like(2.0).numpy(), np.full((4, 6), 2.0, np.float32))
  with pytest.raises(RuntimeError, match="differs from the sharded"): t.rand_like(device=D3[1:])
  with pytest.raises(ValueError, match="several devices"): Tensor.rand(4, device=D2)


@pytest.mark.parametrize("axis", [0, None])
def test_assign_at_a_variable_offset_into_a_sharded_tensor(axis):
  from baregrad import Variable
  out = Tensor.zeros(4, 6).contiguous().realize().shard(D2, axis).realize()
  col = Tensor(arr(4, 1)).shard(D2, axis).contiguous().realize()
  want = np.zeros((4, 6), np.float32)
  jf = TinyJit(lambda o, vi: o[:, vi:vi + 1].assign(col).realize())
  for i in (2, 0, 5, 3):
    jf(out, Variable("i", 0, 5).bind(i))
    want[:, i:i + 1] = col.numpy()
    np.testing.assert_array_equal(out.numpy(), want)


def test_assign_a_one_device_value_into_a_sharded_tensor():
  t = Tensor.zeros(4, 6).contiguous().realize().shard(D2, 0)
  v = arr(4, 6)
  t.assign(Tensor(v))  # split as t is
  np.testing.assert_array_equal(t.numpy(), v)
  assert t.uop.axis == 0 and t.device == D2


def test_ops_with_the_sharded_operand_second_and_other_paths():
  from baregrad import nn
  a = arr(4, 2, 6)
  x = Tensor(a).shard(D2, 0)
  one = Tensor(np.ones((4, 2, 6), np.float32))
  np.testing.assert_allclose((one / (x + 2)).numpy(), 1 / (a + 2), rtol=1e-6)  # a one-device left operand
  np.testing.assert_allclose((1 - x).numpy(), 1 - a, rtol=1e-6)
  assert [t.uop.axis for t in x.chunk(2, 2)] == [0, 0] and [t.uop.axis for t in x.split(3, 2)] == [0, 0]
  np.testing.assert_array_equal(x.chunk(3, 2)[1].numpy(), a[:, :, 2:4])
  np.testing.assert_array_equal(x[..., 1].numpy(), a[..., 1])
  assert x[None, 1:3, ..., None].shape == (1, 2, 2, 6, 1)
  np.testing.assert_array_equal(x.sort(-1)[0].numpy(), np.sort(a, -1))
  b = a.copy()
  x[:, 0, [1, 2]] = 3.0  # tensor indices into a sharded tensor
  b[:, 0, [1, 2]] = 3.0
  np.testing.assert_array_equal(x.numpy(), b)
  bn1, bn2 = nn.BatchNorm(2), nn.BatchNorm(2)  # running stats on one device, the batch split over two
  with Tensor.train():
    got = bn1(Tensor(b).shard(D2, 0).reshape(4, 2, 6, 1)).numpy()
    want = bn2(Tensor(b).reshape(4, 2, 6, 1)).numpy()
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(bn1.running_mean.numpy(), bn2.running_mean.numpy(), rtol=1e-6)


@pytest.mark.parametrize("op,ref", [(Ops.ADD, np.add), (Ops.MAX, np.maximum), (Ops.MUL, np.multiply)])
def test_uop_allreduce_combines_every_shard_on_each_device(op, ref):
  from baregrad.uop.ops import UOp
  x = arr(6, 4)
  t = Tensor(x).shard(D3, 0)
  out = Tensor(UOp.allreduce(t.uop, op, t.device))
  parts = np.split(x, 3, 0)
  combined = ref(ref(parts[0], parts[1]), parts[2])
  assert out.device == D3 and out.uop.axis == 0
  for u, d in zip(out.uop.src, D3):
    assert u.device == d
    np.testing.assert_allclose(u._c.numpy(), combined, rtol=1e-6)
  with pytest.raises(ValueError, match="allreduce"): UOp.allreduce(t.uop, Ops.WHERE, t.device)
  with pytest.raises(ValueError, match="allreduce"): UOp.allreduce(t.uop, Ops.ADD, D2)
  with pytest.raises(TypeError, match="allreduce"): UOp.allreduce(Tensor(x).uop, Ops.ADD, t.device)


@pytest.mark.parametrize("src_axis", ["plain", None, 1, 3])
def test_load_state_dict_into_a_sharded_model_keeps_its_sharding(src_axis):
  from baregrad.nn import Conv2d
  from baregrad.nn.state import load_state_dict
  layer = Conv2d(3, 5, kernel_size=3)
  layer.weight.shard_(D3, 3)
  layer.bias.shard_(D3, None)
  w, b = arr(5, 3, 3, 3), arr(5)
  sd = {"weight": Tensor(w), "bias": Tensor(b)}
  if src_axis != "plain": sd = {"weight": sd["weight"].shard(D3, src_axis), "bias": sd["bias"].shard(D3, None)}
  load_state_dict(layer, sd)
  assert (layer.weight.device, layer.weight.uop.axis) == (D3, 3)
  assert (layer.bias.device, layer.bias.uop.axis) == (D3, None)
  np.testing.assert_array_equal(layer.weight.numpy(), w)
  np.testing.assert_array_equal(layer.bias.numpy(), b)
