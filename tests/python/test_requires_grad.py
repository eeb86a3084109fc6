# tinygrad's tri-state requires_grad (None by default, True, False): which tensors gradient() and
# backward() reach, what detach(), optimizers and realize() do to it. Gradients against torch.
import numpy as np
import pytest
import torch

from baregrad import Tensor, GlobalCounters, dtypes
from baregrad.nn import optim

X, W = np.array([[1.0, -2.0, 0.5]], np.float32), np.array([[0.5], [1.5], [-1.0]], np.float32)


def _torch_grads():
  tx, tw = torch.tensor(X, requires_grad=True), torch.tensor(W, requires_grad=True)
  (tx @ tw).tanh().sum().backward()
  return tx.grad.numpy(), tw.grad.numpy()


def test_default_is_none_and_gradient_reaches_it():
  x, w = Tensor(X), Tensor(W)
  assert x.requires_grad is None and w.requires_grad is None
  loss = (x @ w).tanh().sum()
  assert loss.requires_grad is None
  gx, gw = loss.gradient(x, w)
  tgx, tgw = _torch_grads()
  np.testing.assert_allclose(gx.numpy(), tgx, rtol=1e-5)
  np.testing.assert_allclose(gw.numpy(), tgw, rtol=1e-5)
  assert x.grad is None and w.grad is None  # gradient() leaves .grad alone


def test_backward_fills_every_float_leaf_but_constants_and_false():
  x, w, off = Tensor(X), Tensor(W), Tensor(np.ones((1, 1), np.float32), requires_grad=False)
  two = Tensor(2.0)
  ((x @ w).tanh() * off * two).sum().backward()
  tgx, tgw = _torch_grads()
  np.testing.assert_allclose(x.grad.numpy(), 2 * tgx, rtol=1e-5)
  np.testing.assert_allclose(w.grad.numpy(), 2 * tgw, rtol=1e-5)
  assert off.grad is None and off.requires_grad is False
  assert two.grad is None  # a constant, as tinygrad skips CONST


def test_backward_with_parameters_fills_theirs_and_held_inputs():
  x, w = Tensor(X), Tensor(W, requires_grad=True)
  (x @ w).tanh().sum().backward()
  np.testing.assert_allclose(w.grad.numpy(), _torch_grads()[1], rtol=1e-5)
  np.testing.assert_allclose(x.grad.numpy(), _torch_grads()[0], rtol=1e-5)  # tinygrad's (torch leaves it None)
  np.testing.assert_allclose((x @ w).tanh().sum().gradient(x)[0].numpy(), _torch_grads()[0], rtol=1e-5)


def test_true_false_detach_and_mixing():
  x = Tensor(X, requires_grad=True)
  assert x.requires_grad is True and (x * 2).requires_grad is True
  # detach(): a new undecided leaf, as tinygrad's Ops.DETACH tensor; backward fills it, and gives x (which
  # tinygrad's toposort reaches through the DETACH) zeros: no gradient flows through it
  u = x.detach()
  assert u.requires_grad is None and u.is_param
  (u * Tensor(W.T)).sum().backward()
  np.testing.assert_allclose(u.grad.numpy(), W.T)
  np.testing.assert_array_equal(x.grad.numpy(), np.zeros_like(X))
  x.grad = Tensor(np.ones_like(X))
  (x.detach() * 3).sum().backward()  # a .grad already there is kept
  np.testing.assert_array_equal(x.grad.numpy(), np.ones_like(X))
  d = x.detach().requires_grad_(False)
  assert d.requires_grad is False and (d * 2).requires_grad is False
  with pytest.raises(RuntimeError, match=r"\[gradient\] target 0 .*requires_grad=False"):
    (d * Tensor(W.T)).sum().gradient(d)
  with pytest.raises(RuntimeError, match=r"\[backward\] the tensor has requires_grad=False"):
    (d * 2).sum().backward()
  with pytest.raises(RuntimeError, match=r"\[backward\] no tensor in this graph can have a gradient"):
    (d * Tensor(2.0)).sum().backward()  # a constant tensor gets no .grad from backward()
  with pytest.raises(RuntimeError, match=r"\[gradient\] only float tensors have gradients"):
    (Tensor([1, 2]) * 2).sum().gradient(Tensor([1.0]))
  x.requires_grad = None
  assert x.requires_grad is None
  with pytest.raises(RuntimeError, match=r"\[requires_grad\] only float tensors"):
    Tensor([1, 2]).requires_grad_()


@pytest.mark.parametrize("materialize", [False, True])
def test_gradient_of_a_tensor_outside_the_graph(materialize):
  # zeros, as tinygrad's gradient gives (it used to raise unless materialize_grads)
  x, y = Tensor(X), Tensor(W)
  gx, gy = (x * 3).sum().gradient(x, y, materialize_grads=materialize)
  np.testing.assert_array_equal(gx.numpy(), np.full_like(X, 3))
  np.testing.assert_array_equal(gy.numpy(), np.zeros_like(W))


def test_non_scalar_without_a_gradient_is_an_assertion_error():
  x = Tensor([1.0, 2.0, 3.0])
  for call in (lambda: (x * x).gradient(x), lambda: (x * x).backward()):
    with pytest.raises(AssertionError, match=r"non-scalar tensor of shape \(3,\)"): call()  # tinygrad's kind
    with pytest.raises(RuntimeError): call()  # and still a RuntimeError


def test_backward_accumulates_into_the_same_grad_object():
  # tinygrad's t.grad.assign(t.grad + g): a held .grad sees every later backward
  x = Tensor([3.0])
  (x * 2)[0].backward()
  g = x.grad
  (x * 3)[0].backward()
  assert x.grad is g
  (x * x)[0].backward()
  assert x.grad is g
  tx = torch.tensor([3.0], requires_grad=True)
  for f in (lambda t: t * 2, lambda t: t * 3, lambda t: t * t): f(tx)[0].backward()
  np.testing.assert_allclose(g.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("detached", [False, True])
def test_clone_passes_gradients_and_keeps_its_own(detached):
  # tinygrad: gradients flow through clone() to its source, and the clone gets a .grad too; a clone of a
  # detached tensor is a new undecided tensor. torch with retain_grad() is the oracle.
  src = Tensor(X)
  x = (src.detach() if detached else src).clone()
  assert x.requires_grad is None
  (x * x.exp()).sum().backward()
  ts = torch.tensor(X, requires_grad=True)
  tx = (ts.detach() if detached else ts).clone().requires_grad_(True) if detached else ts.clone()
  tx.retain_grad()
  (tx * tx.exp()).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
  if detached: np.testing.assert_array_equal(src.grad.numpy(), np.zeros_like(X))  # tinygrad's: its toposort reaches src
  else: np.testing.assert_allclose(src.grad.numpy(), ts.grad.numpy(), rtol=1e-6)


def test_optimizer_makes_undecided_parameters_true_and_leaves():
  w = Tensor.randn(3, 1) * 0.1  # built by an op: not a leaf until it becomes a parameter
  b = Tensor.zeros(1, requires_grad=False)
  opt = optim.SGD([w, b], lr=0.5)
  assert w.requires_grad is True and b.requires_grad is False
  w0 = w.numpy()
  loss = (Tensor(X) @ w + b).sum()
  loss.backward()
  np.testing.assert_allclose(w.grad.numpy(), X.T, rtol=1e-6)
  with Tensor.train(): opt.step()
  np.testing.assert_allclose(w.numpy(), w0 - 0.5 * X.T, rtol=1e-5, atol=1e-6)


def test_created_parameters_are_leaves():
  w = Tensor.scaled_uniform(3, 1, requires_grad=True)
  g = Tensor.glorot_uniform(3, 1, requires_grad=True)
  (Tensor(X) @ (w + g)).sum().backward()
  np.testing.assert_allclose(w.grad.numpy(), X.T, rtol=1e-6)
  np.testing.assert_allclose(g.grad.numpy(), X.T, rtol=1e-6)


def test_realize_ends_undecided_history_as_tinygrad():
  x = Tensor(X)
  y = (x * 3).exp().sum()
  y.realize()
  with pytest.raises(RuntimeError, match=r"\[gradient\] the graph behind this tensor was dropped when it was realized"):
    y.gradient(x)
  # True keeps it (torch's semantics); a realized view of a buffer is not a computed value.
  p = Tensor(X, requires_grad=True)
  q = (p * 3).sum()
  q.realize()
  np.testing.assert_array_equal(q.gradient(p)[0].numpy(), np.full_like(X, 3))
  v = x.reshape(3, 1)
  v.realize()
  np.testing.assert_array_equal((v * 2).sum().gradient(x)[0].numpy(), np.full_like(X, 2))


def test_a_loop_of_realized_undecided_steps_keeps_no_history():
  h = Tensor.ones(1 << 16).contiguous().realize()
  before = GlobalCounters.mem_used
  for _ in range(48):
    h = (h * 0.5 + 1).realize()
  assert GlobalCounters.mem_used - before < 8 * (1 << 18)  # 48 steps of 256 KiB would be 12 MiB
  np.testing.assert_allclose(h.numpy()[:4], 2.0, rtol=1e-6)


def test_broadcast_constants_and_their_contiguous_copies_get_gradients():
  # tinygrad's Tensor.ones/full make buffers: backward() fills their .grad (it raised "no tensor in this graph
  # can have a gradient"), and that of `Tensor.ones(3).contiguous()`, the tensor the program holds. A scalar
  # constant (Tensor(2.0), the 2 of x * 2) still gets none.
  a, b = Tensor.ones(2, 3), Tensor.full((2, 3), 2.0)
  ((a * b).exp().mean()).backward()
  ta, tb = torch.ones(2, 3, requires_grad=True), torch.full((2, 3), 2.0, requires_grad=True)
  (ta * tb).exp().mean().backward()
  np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
  np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-6)
  x, s = Tensor.ones(3).contiguous(), Tensor(2.0)
  (x * x * s).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0, 4.0])
  assert s.grad is None
  # with a parameter in the graph, a held input gets one too (a step drops it unread: see below)
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  x = Tensor.ones(3).contiguous()
  (x * w).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0, 3.0])
  np.testing.assert_allclose(w.grad.numpy(), [1.0, 1.0, 1.0])


def test_backward_fills_grad_of_the_tensors_the_program_holds():
  # tinygrad fills .grad of every tensor it can see: here the held intermediates (y, h), not the
  # temporaries between them; torch's retain_grad() is the oracle
  z = Tensor.zeros(6)
  x, y = Tensor.ones(4).contiguous(), Tensor.ones(4) * 2
  z[:4] = x
  z[2:] = y
  (z * Tensor(np.arange(6, dtype=np.float32))).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [0, 1, 0, 0])
  np.testing.assert_allclose(y.grad.numpy(), [2, 3, 4, 5])
  xv = np.array([0.5, -1.0, 0.7], np.float32)
  w, tw = Tensor(xv), torch.tensor(xv, requires_grad=True)
  h, th = (w * 3).exp(), (tw * 3).exp()
  th.retain_grad()
  loss = (h * h.sin()).sum()
  (th * th.sin()).sum().backward()
  loss.backward()
  np.testing.assert_allclose(h.grad.numpy(), th.grad.numpy(), rtol=1e-5)
  np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)
  assert loss.grad is None  # the root's would only be the seed
  # with a parameter in the graph, held tensors on both sides get theirs
  p = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  inp = Tensor.ones(3) * 2
  act = (inp * p).relu()
  act.sum().backward()
  np.testing.assert_allclose(inp.grad.numpy(), [1, 2, 3])
  np.testing.assert_allclose(act.grad.numpy(), [1, 1, 1])
  np.testing.assert_allclose(p.grad.numpy(), [2, 2, 2])


def test_inputs_beside_parameters_get_a_gradient_that_a_step_drops():
  # tinygrad fills x.grad for an input beside parameters (test_nn's test_rmsnorm reads it). It is
  # computed only if read before the optimizer step; the step drops it instead of computing it (no
  # extra kernel, checked by counting), and reading it afterwards says so.
  from baregrad import nn
  rng = np.random.default_rng(2)
  xv = rng.standard_normal((5, 8)).astype(np.float32)

  def setup(requires_grad):
    nn_l1, nn_l2 = nn.Linear(8, 16), nn.Linear(16, 4)
    for p in (nn_l1.weight, nn_l1.bias, nn_l2.weight, nn_l2.bias): p.assign(Tensor(rng.standard_normal(p.shape).astype(np.float32)))
    x = Tensor(xv, requires_grad=requires_grad)
    return [nn_l1.weight, nn_l1.bias, nn_l2.weight, nn_l2.bias], x, nn_l2(nn_l1(x).relu()).sum()

  ps, x, loss = setup(None)
  tp = [torch.tensor(p.numpy(), requires_grad=True) for p in ps]
  tx = torch.tensor(xv, requires_grad=True)
  (((tx @ tp[0].T + tp[1]).relu() @ tp[2].T + tp[3]).sum()).backward()
  loss.backward()
  np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
  counts = []
  for requires_grad in (None, False):
    ps, x, loss = setup(requires_grad)
    opt = optim.SGD(ps, lr=0.1)
    loss.backward()
    GlobalCounters.reset()
    with Tensor.train(): opt.step()
    counts.append((GlobalCounters.kernel_count, GlobalCounters.global_ops))
  assert counts[0] == counts[1], counts
  ps, x, loss = setup(None)
  loss.backward()
  with Tensor.train(): optim.SGD(ps, lr=0.1).step()
  for read in (lambda: x.grad.numpy(), lambda: (x.grad * 2).sum(0).numpy(), lambda: x.grad.cast(dtypes.float16).sum().item()):
    with pytest.raises(RuntimeError, match=r"\[realize\] a gradient of shape \(5, 8\) float32 .* was dropped when an optimizer step"):
      read()


def test_arange_and_eye_get_no_grad_from_backward():
  # tinygrad makes them without a device and backward() skips those; torch's are requires_grad=False
  r, e, s = Tensor.arange(0., 6).reshape(2, 3), Tensor.eye(3), Tensor([0, 0.5, 1])
  r.numpy()  # realized, it is still an arange
  c = r.clone()  # a buffer: a tensor like any other
  (c @ e * s).sum().backward()
  assert r.grad is None and e.grad is None
  tr, ts = torch.arange(0., 6).reshape(2, 3).requires_grad_(), torch.tensor([0, 0.5, 1], requires_grad=True)
  (tr @ torch.eye(3) * ts).sum().backward()
  np.testing.assert_allclose(c.grad.numpy(), tr.grad.numpy())
  np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy())
  # gradient() reaches them when asked (tinygrad's docs differentiate through Tensor.eye)
  y = Tensor([[2.0, 0, -2.0]])
  dx, dy = (y @ e).sum().gradient(e, y)
  np.testing.assert_allclose(dx.numpy(), [[2, 2, 2], [0, 0, 0], [-2, -2, -2]])
  np.testing.assert_allclose(dy.numpy(), [[1, 1, 1]])
