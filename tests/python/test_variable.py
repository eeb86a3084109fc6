# Variable (tinygrad's bounded, named int for sizes that change per call): binding and its
# errors, use in views and arithmetic against numpy, and TinyJit's capture per binding.
import pickle

import numpy as np
import pytest

from baregrad import Tensor, TinyJit, Variable, dtypes
from baregrad.engine.jit import JitError

RNG = np.random.default_rng(7)
A = RNG.uniform(-1, 1, size=(3, 10)).astype(np.float32)


def test_bind_unbind_and_attributes():
  v = Variable("i", 1, 10)
  b = v.bind(4)
  assert b == 4 and isinstance(b, int) and b.val == 4 and b.unbind() == (v, 4)
  assert (b.expr, b.vmin, b.vmax) == ("i", 1, 10) and (v.expr, v.vmin, v.vmax) == ("i", 1, 10)
  assert repr(b) == "Variable('i', 1, 10).bind(4)"
  assert Variable("i", 1, 10) == v and hash(Variable("i", 1, 10)) == hash(v) and Variable("i", 1, 11) != v
  assert pickle.loads(pickle.dumps(b)).unbind() == (v, 4)
  # +, - and * stay symbolic (a SymInt: the value, and the polynomial); the rest are plain ints
  assert b * 2 == 8 and str((b * 2).sym) == "2*i" and str((1 - b).sym) == "1 - i"
  assert type(b // 2) is int and type(b % 3) is int and type(b * 1.5) is float


@pytest.mark.parametrize("val", [0, 11, -3])
def test_bind_out_of_range(val):
  with pytest.raises(AssertionError, match=rf"\[bind\] bind {val} not in range \[1, 10\] of Variable 'i'"):
    Variable("i", 1, 10).bind(val)
  with pytest.raises(ValueError):
    Variable("i", 1, 10).bind(val)


def test_bad_variables():
  with pytest.raises(TypeError, match=r"\[Variable\] the value bound to 'i' must be an int, got float"):
    Variable("i", 1, 10).bind(2.0)
  with pytest.raises(TypeError, match="must be an int, got bool"):
    Variable("i", 1, 10).bind(True)
  with pytest.raises(ValueError, match=r"min_val 5 > max_val 2"):
    Variable("i", 5, 2)
  with pytest.raises(TypeError, match="non-empty str"):
    Variable("", 1, 2)
  with pytest.raises(AssertionError, match="not divisible by 4"):
    Variable("i", 0, 16, multiple_of=4).bind(6)
  assert Variable("i", 0, 16, multiple_of=4).bind(8) == 8


@pytest.mark.parametrize("use", [
  lambda t, v: t.reshape(v, 2),
  lambda t, v: t[:v],
  lambda t, v: t.shrink(((0, v),)),
  lambda t, v: t.pad(((v, 0),)),
  lambda t, v: Tensor.ones(v),
])
def test_unbound_variable_is_a_type_error_naming_the_op(use):
  with pytest.raises(TypeError, match=r"Variable 'n' is unbound: use Variable\(...\).bind\(value\)"):
    use(Tensor.ones(8), Variable("n", 1, 8))


def test_tensor_of_an_unbound_variable_is_a_runtime_error():
  # tinygrad raises RuntimeError("... unbound ...") when it runs; baregrad when it is made
  with pytest.raises(RuntimeError, match=r"\[Tensor\] Variable 'u' is unbound"): Tensor(Variable("u", 1, 10)).item()


def test_tensor_of_a_variable_past_int32_is_int64():
  # was int32: 2**35 became 0
  t = Tensor(Variable("b", 0, 2**40).bind(2**35))
  assert t.dtype == dtypes.int64 and t.item() == 2**35
  assert Tensor(Variable("a", 0, 2**10).bind(3) + Variable("b", 0, 2**40).bind(2**35)).item() == 2**35 + 3
  assert Tensor(Variable("c", -5, 5).bind(-2)).dtype == dtypes.int32


def test_views_match_numpy():
  a = Tensor(A)
  for i in range(1, 6):
    vi = Variable("i", 1, 10).bind(i)
    np.testing.assert_array_equal(a[:, :vi].numpy(), A[:, :i])
    np.testing.assert_array_equal(a[:, :vi][:, -1].numpy(), A[:, :i][:, -1])
    np.testing.assert_array_equal(a.shrink((None, (vi, 10))).numpy(), A[:, i:])
    np.testing.assert_array_equal(a[:, :vi].pad((None, (0, 10 - vi))).numpy(), np.pad(A[:, :i], ((0, 0), (0, 10 - i))))
    np.testing.assert_array_equal(a[:, :vi].reshape(3 * vi).numpy(), A[:, :i].reshape(3 * i))
    np.testing.assert_array_equal(a[:1, :vi].expand(vi, vi).numpy(), np.broadcast_to(A[:1, :i], (i, i)))
    np.testing.assert_array_equal(Tensor.arange(vi).numpy(), np.arange(i))
    np.testing.assert_allclose((a[:, :vi] @ a[:, :vi].T).numpy(), A[:, :i] @ A[:, :i].T, rtol=1e-5, atol=1e-6)


def test_bound_variable_as_a_scalar():
  vv = Variable("a", 0, 10).bind(2)
  assert (Tensor(vv) + 3).item() == 5 and Tensor(vv).dtype == dtypes.int32
  assert (Tensor.ones(3, dtype=dtypes.int8) * vv).tolist() == [2, 2, 2]
  assert (vv * Tensor.ones(3)).tolist() == [2.0, 2.0, 2.0]


def test_views_carry_their_bindings():
  vi = Variable("i", 1, 10).bind(3)
  t = Tensor(A)[:, :vi]
  assert t._bound == {"i": 3} and t.reshape(1, 3, vi)._bound == {"i": 3}
  with pytest.raises(ValueError, match=r"\[getitem\] Variable 'i' is bound to both 3 and 4"):
    t[:, :Variable("i", 1, 10).bind(4)]


def test_jit_shares_one_capture_across_values():
  calls = []
  def f(a):
    calls.append(tuple(int(s) for s in a.shape))
    return (a + 1).realize()
  jf = TinyJit(f)
  a = Tensor(A)
  for _ in range(4):
    for i in (1, 4, 7):
      vi = Variable("i", 1, 10).bind(i)
      out = jf(a[:, :vi])
      assert out.shape == (3, i)
      np.testing.assert_allclose(out.numpy(), A[:, :i] + 1, rtol=1e-6)
  # an eager call, the capture, its check at another value; later calls replay at their size
  assert calls == [(3, 1), (3, 4), (3, 7)]
  assert jf.captured and jf.shared and jf.why_not_shared == "" and jf.cnt == 12


def test_jit_one_capture_per_binding_when_values_are_used():
  calls = []
  def f(a, n):
    calls.append(int(n))
    return (a[:, :n] + Tensor.arange(0, 2 * n, 2)).realize()  # a step of 2: its length is computed on the host
  jf = TinyJit(f)
  a = Tensor(A)
  for _ in range(4):
    for i in (1, 4, 7):
      np.testing.assert_allclose(jf(a, Variable("i", 1, 10).bind(i)).numpy(), A[:, :i] + np.arange(0, 2 * i, 2), rtol=1e-6)
  # the first two calls (1 eager, 4 captured) made a capture that serves 4 only; 7 and 1 then
  # get their own (an eager call, a capture); every later call replays (f is not called)
  assert calls == [1, 4, 7, 1, 7, 1]
  assert jf.captured and not jf.shared and "used the value of Variable 'i'" in jf.why_not_shared


def test_arange_of_a_variable_length_serves_every_value():
  # arange(n) was made on the host at n's value, so each value got captures of its own
  calls = []
  def f(a, n):
    calls.append(int(n))
    return (a[:, :n] + Tensor.arange(n) + Tensor.arange(3, n + 3)).realize()
  jf = TinyJit(f)
  a = Tensor(A)
  for _ in range(3):
    for i in (1, 4, 7):
      want = A[:, :i] + np.arange(i) + np.arange(3, i + 3)
      np.testing.assert_allclose(jf(a, Variable("i", 1, 10).bind(i)).numpy(), want, rtol=1e-6)
  assert jf.shared and calls == [1, 4, 7]  # eager, capture, the check at another value
  vi = Variable("i", 1, 10).bind(4)
  assert str(Tensor.arange(vi).shape) == "(i(=4),)" and Tensor.arange(vi).tolist() == [0, 1, 2, 3]


def test_jit_variable_argument_and_attention():
  def f(q, k, v, n):
    return Tensor.scaled_dot_product_attention(q, k[:, :, :n], v[:, :, :n]).realize()
  jf = TinyJit(f)
  q, k, v = (RNG.uniform(-1, 1, size=s).astype(np.float32) for s in [(2, 4, 1, 8), (2, 4, 10, 8), (2, 4, 10, 8)])
  tq, tk, tv = Tensor(q), Tensor(k), Tensor(v)
  for _ in range(3):
    for i in (2, 9):
      got = jf(tq, tk, tv, n=Variable("n", 1, 10).bind(i)).numpy()
      s = q @ k[:, :, :i].transpose(0, 1, 3, 2) / np.sqrt(8)
      p = np.exp(s - s.max(-1, keepdims=True))
      np.testing.assert_allclose(got, (p / p.sum(-1, keepdims=True)) @ v[:, :, :i], rtol=1e-5, atol=1e-6)


def test_jit_keeps_the_last_bindings():
  jf = TinyJit(lambda a: (a * float(a.shape[1])).realize())  # not shared: a size as a float
  jf.MAX_BINDINGS = 2
  a = Tensor(A)
  for i in (1, 2, 3, 1):
    np.testing.assert_allclose(jf(a[:, :Variable("i", 1, 10).bind(i)]).numpy(), A[:, :i] * i)
  assert len(jf._captures) == 2 and jf.cnt == 1  # binding 1 was dropped and starts again


def test_jit_shape_change_without_a_variable_is_still_an_error():
  jf = TinyJit(lambda a: (a * 2).realize())
  for _ in range(3): jf(Tensor(A[:, :4]))
  with pytest.raises((JitError, RuntimeError), match=r"input 0 is \(3, 5\) float32 on \S+; the captured call had \(3, 4\)"):
    jf(Tensor(A[:, :5]))


def _jit_over_values(f, make, values=(2, 5, 3, 7)):
  """Calls TinyJit(f) with `make(vi)` for each value; returns the JIT and (value, output) pairs."""
  jf, outs = TinyJit(f), []
  for i in values:
    vi = Variable("i", 1, 10).bind(i)
    outs.append((i, jf(*make(vi)).numpy()))
  return jf, outs


B = RNG.uniform(-1, 1, size=(3, 2)).astype(np.float32)
C = RNG.uniform(-1, 1, size=(10, 5)).astype(np.float32)


@pytest.mark.parametrize("dim", [0, 1])
def test_jit_cat_of_variable_sizes_serves_every_value(dim):
  # cat keeps the symbolic size (each part padded by a symbolic amount and summed): one capture of one kernel serves
  # every value; before, cat made a concrete shape and every value got a capture of its own
  x, y = (A, B) if dim == 1 else (A.T.copy(), B.T.copy())
  tx, ty = Tensor(x), Tensor(y)
  jf, outs = _jit_over_values(lambda p, q: p.cat(q, dim=dim).realize(), lambda vi: (tx[:, :vi] if dim == 1 else tx[:vi], ty))
  for i, out in outs: np.testing.assert_array_equal(out, np.concatenate([x[:, :i] if dim == 1 else x[:i], y], dim))
  assert jf.shared and len(jf.captured.linear.src) == 1 and jf.cnt == 4


def test_jit_cat_of_two_variables():
  other = A[::-1].copy()
  ta, tb = Tensor(A), Tensor(other)
  jf = TinyJit(lambda p, q: p.cat(q, dim=1).realize())
  for i, j in [(2, 3), (4, 1), (5, 5), (1, 4)]:
    vi, vj = Variable("i", 1, 10).bind(i), Variable("j", 1, 10).bind(j)
    np.testing.assert_array_equal(jf(ta[:, :vi], tb[:, :vj]).numpy(), np.concatenate([A[:, :i], other[:, :j]], 1))
  assert jf.shared and len(jf.captured.linear.src) == 1


def test_jit_input_sliced_at_a_variable_offset_is_shared():
  # the input view (an offset of `vi`) is realized before the capture, so the captured kernel does not depend on the
  # value: one capture serves every value (before: "no kernel takes a Variable at launch", a capture per value)
  a = Tensor(RNG.uniform(-1, 1, size=(7, 11)).astype(np.float32))
  jf, outs = _jit_over_values(lambda x: (x + 1).realize(), lambda vi: (a.shrink(((3, 5), (vi, vi + 2))),))
  for i, out in outs: np.testing.assert_allclose(out, a.numpy()[3:5, i:i + 2] + 1, rtol=1e-6)
  assert jf.shared and jf.why_not_shared == "" and len(jf.captured.linear.src) == 1


def test_jit_symbolic_matmul_is_one_kernel():
  # the reduction's (3, 5, 1) output returned as (3, 5) is a view of its buffer, not copied into another one
  a, c = Tensor(A), Tensor(C)
  jf, outs = _jit_over_values(lambda x, y: (x @ y).realize(), lambda vi: (a[:, :vi], c[:vi, :]))
  for i, out in outs: np.testing.assert_allclose(out, A[:, :i] @ C[:i], rtol=1e-5, atol=1e-6)
  assert jf.shared and [k.src[0].op.name for k in jf.captured.linear.src] == ["SINK"]
