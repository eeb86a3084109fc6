# Symbolic shapes: sizes holding a bound Variable (tinygrad's symbolic shapes). Kernels over
# them are compiled once and take the Variable's value at launch; every value is checked
# against numpy, and the compiles are counted with the device's program cache.
import numpy as np
import pytest

import _baregrad as _C
from baregrad import Tensor, TinyJit, Variable
from baregrad.variable import SymInt

RNG = np.random.default_rng(11)
A = RNG.uniform(-1, 1, size=(3, 10)).astype(np.float32)


def built(t: Tensor) -> int:
  """Programs compiled so far on t's device."""
  return _C.program_cache_stats(t.device)["built"]


def test_shapes_hold_the_variable():
  vi = Variable("i", 1, 10).bind(4)
  x = Tensor(A)[:, :vi]
  assert x.shape == (3, 4) and isinstance(x.shape[1], SymInt) and str(x.shape[1].sym) == "i"
  assert str((x * 2 + 1).shape[1].sym) == "i"
  assert str(x.reshape(3 * vi).shape[0].sym) == "3*i"
  assert str(x.pad((None, (1, 2))).shape[1].sym) == "3 + i"
  assert str(x[:, 1:].shape[1].sym) == "-1 + i"
  assert x.sum(1).shape == (3,) and not isinstance(x.sum(1).shape[0], SymInt)
  assert str(x.sum(0).shape[0].sym) == "i"
  assert type(Tensor(A).shape[1]) is int
  from baregrad.variable import sym_infer
  n = x.reshape(3 * vi).shape[0]
  assert sym_infer(n, {"i": 7}) == 21 and sym_infer(n, {}) == 12 and sym_infer(5, {"i": 7}) == 5


@pytest.mark.parametrize("name,fn,ref", [
  ("sum", lambda x: x.sum(1), lambda x: x.sum(1)),
  ("max", lambda x: x.max(0), lambda x: x.max(0)),
  ("softmax", lambda x: x.softmax(-1), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
  ("elementwise", lambda x: (x * 3 - 1).exp(), lambda x: np.exp(x * 3 - 1)),
  ("transpose_contiguous", lambda x: x.T.contiguous(), lambda x: x.T),
  ("pad", lambda x: x.pad((None, (2, 1))) + 1, lambda x: np.pad(x, ((0, 0), (2, 1))) + 1),
  ("gram", lambda x: x @ x.T, lambda x: x @ x.T),
  ("outer_reduce", lambda x: (x.T @ x).sum(), lambda x: (x.T @ x).sum()),
])
def test_kernels_compile_once_for_every_value(name, fn, ref):
  a = Tensor(A).realize()
  var = Variable("i", 1, 10)
  before = None
  for i in (3, 7, 10, 5, 2):
    got = fn(a[:, :var.bind(i)]).numpy()
    np.testing.assert_allclose(got, ref(A[:, :i]), rtol=1e-5, atol=1e-5, err_msg=f"{name} i={i}")
    if before is None: before = built(a)  # the first value compiles
  assert built(a) == before, f"{name}: later values of i compiled {built(a) - before} more programs"


def test_attention_over_a_variable_length_compiles_once():
  H, D, MAX = 2, 8, 16
  k, v, q = (RNG.standard_normal(s).astype(np.float32) for s in [(1, H, MAX, D), (1, H, MAX, D), (1, H, 1, D)])
  tk, tv, tq = Tensor(k).realize(), Tensor(v).realize(), Tensor(q).realize()
  sp = Variable("sp", 1, MAX)
  before = None
  for n in (3, 16, 9, 4):
    n_ = sp.bind(n)
    got = (tq @ tk[:, :, :n_].transpose(-1, -2) / np.sqrt(D)).softmax(-1) @ tv[:, :, :n_]
    s = q @ k[:, :, :n].transpose(0, 1, 3, 2) / np.sqrt(D)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(got.numpy(), (p / p.sum(-1, keepdims=True)) @ v[:, :, :n], rtol=1e-5, atol=1e-6)
    if before is None: before = built(tk)
  assert built(tk) == before


def test_assign_at_a_variable_offset_compiles_once():
  cache = Tensor.zeros(2, 8).contiguous().realize()
  p = Variable("p", 0, 7)
  want = np.zeros((2, 8), np.float32)
  before = None
  for n in (0, 3, 7, 5):
    vp = p.bind(n)
    cache[:, vp:vp + 1].assign(Tensor([[n + 1.0], [-n - 1.0]])).realize()
    want[:, n] = [n + 1, -n - 1]
    np.testing.assert_array_equal(cache.numpy(), want)
    if before is None: before = built(cache)
  assert built(cache) == before


def test_two_variables():
  a = Tensor(A).realize()
  i, j = Variable("i", 1, 3), Variable("j", 1, 10)
  before = None
  for m, n in ((2, 3), (3, 10), (2, 5)):  # (a size of 1 specializes: see below)
    x = a[:i.bind(m), :j.bind(n)]
    assert str(x.shape[0].sym) == "i" and str(x.shape[1].sym) == "j"
    np.testing.assert_allclose((x * x).sum(1).numpy(), (A[:m, :n] ** 2).sum(1), rtol=1e-5)
    np.testing.assert_allclose(x.reshape(-1).numpy(), A[:m, :n].reshape(-1))
    if before is None: before = built(a)
  assert built(a) == before


@pytest.mark.parametrize("i", [1, 4, 9])
def test_what_cannot_be_symbolic_is_computed_for_the_value(i):
  # Splitting a symbolic dim, a size of 1, and bounds past the tensor give concrete kernels:
  # right for the value bound, compiled for it.
  a = Tensor(A)
  vi = Variable("i", 1, 10).bind(i)
  x = a[:, :vi]
  if i % 2 == 0:
    np.testing.assert_array_equal(x.reshape(3, 2, i // 2).numpy(), A[:, :i].reshape(3, 2, i // 2))
  np.testing.assert_allclose(x.reshape(3, 1, i).sum(2).numpy(), A[:, :i].sum(1, keepdims=True), rtol=1e-5)
  big = Variable("b", 1, 100).bind(i)  # its max reads past A: never instantiated there
  np.testing.assert_allclose(a[:, :big].sum(1).numpy(), A[:, :i].sum(1), rtol=1e-5)


def test_conflicting_values_are_an_error():
  a = Tensor(A)
  x = a[:, :Variable("i", 1, 10).bind(3)]
  y = a[:, :Variable("i", 1, 10).bind(3)]
  np.testing.assert_allclose((x + y).numpy(), 2 * A[:, :3])
  z = a[:, 1:Variable("i", 1, 10).bind(4)]
  with pytest.raises(ValueError, match=r"\[add\] Variable 'i' is bound to both 3 and 4"):
    x + z


def test_variables_as_values_compile_once():
  # A SymInt scalar, Tensor(vi), and mean/var over a symbolic axis take the value at launch.
  a = Tensor(A).realize()
  v = Variable("i", 2, 10)
  before = None
  for i in (3, 7, 10, 4):
    vi = v.bind(i)
    x = a[:, :vi]
    np.testing.assert_allclose((x * vi + 1).numpy(), A[:, :i] * i + 1, rtol=1e-6)
    np.testing.assert_allclose(x.mean(1).numpy(), A[:, :i].mean(1), rtol=1e-5)
    np.testing.assert_allclose(x.var(1).numpy(), A[:, :i].var(1, ddof=1), rtol=1e-4)
    np.testing.assert_allclose(x.mean().numpy(), A[:, :i].mean(), rtol=1e-5)
    assert Tensor(vi).item() == i and (Tensor(vi) * 2).item() == 2 * i
    if before is None: before = built(a)
  assert built(a) == before


def test_jit_with_variables_as_values_is_shared():
  from baregrad import TinyJit
  jf = TinyJit(lambda x, n: (x.mean(1) * n + x.var(1)).realize())
  a = Tensor(A).realize()
  v = Variable("n", 2, 10)
  for i in (2, 3, 9, 5, 4):
    got = jf(a[:, :v.bind(i)], v.bind(i)).numpy()
    np.testing.assert_allclose(got, A[:, :i].mean(1) * i + A[:, :i].var(1, ddof=1), rtol=1e-4)
  assert jf.shared, jf.why_not_shared


def test_symbolic_arithmetic_in_sizes():
  a = Tensor(A)
  v = Variable("i", 1, 8)
  before = None
  for i in (2, 5, 8):
    vi = v.bind(i)
    x = a[:, vi - 1:vi + 2]  # three columns at a moving offset
    assert x.shape == (3, 3)
    np.testing.assert_array_equal(x.numpy(), A[:, i - 1:i + 2])
    if before is None: before = built(a)
  assert built(a) == before


def test_jit_kv_cache_decode_shares_one_capture():
  # A decoder's step: write this position's key and value into the caches, attend over the
  # positions so far. One capture serves every position; each step matches numpy.
  from baregrad import TinyJit
  H, D, MAX = 2, 4, 12
  ck = Tensor.zeros(1, H, MAX, D).contiguous().realize()
  cv = Tensor.zeros(1, H, MAX, D).contiguous().realize()
  calls = []
  def step(q, k_new, v_new, sp):
    calls.append(int(sp))
    ck[:, :, sp:sp + 1].assign(k_new)
    cv[:, :, sp:sp + 1].assign(v_new)
    k, v = ck[:, :, :sp + 1], cv[:, :, :sp + 1]
    return ((q @ k.transpose(-1, -2)) / np.sqrt(D)).softmax(-1) @ v
  jf = TinyJit(step)
  pos = Variable("sp", 0, MAX - 1)
  keys, vals = np.zeros((1, H, MAX, D), np.float32), np.zeros((1, H, MAX, D), np.float32)
  built_after_capture = None
  for n in range(MAX):
    q, kn, vn = (RNG.standard_normal((1, H, 1, D)).astype(np.float32) for _ in range(3))
    out = jf(Tensor(q), Tensor(kn), Tensor(vn), pos.bind(n))
    keys[:, :, n:n + 1], vals[:, :, n:n + 1] = kn, vn
    s = q @ keys[:, :, :n + 1].transpose(0, 1, 3, 2) / np.sqrt(D)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), (p / p.sum(-1, keepdims=True)) @ vals[:, :, :n + 1], rtol=1e-5, atol=1e-6,
                               err_msg=f"position {n}")
    if n == 2: built_after_capture = built(ck)
  assert calls == [0, 1, 2], calls  # an eager call, the capture, its check, then replays
  assert jf.shared, jf.why_not_shared
  assert built(ck) == built_after_capture


def test_jit_output_sizes_follow_the_value():
  from baregrad import TinyJit
  jf = TinyJit(lambda x, n: (x[:, :n] * 2).realize())
  a = Tensor(A).realize()
  for i in (2, 3, 9, 5):
    out = jf(a, Variable("n", 1, 10).bind(i))
    assert out.shape == (3, i) and str(out.shape[1].sym) == "n"
    np.testing.assert_allclose(out.numpy(), A[:, :i] * 2, rtol=1e-6)
  assert jf.shared


def test_jit_capture_with_a_kernel_for_the_values_is_not_shared():
  from baregrad import TinyJit
  jf = TinyJit(lambda x, n: x[:, :n].reshape(3, 2, -1).sum(2).realize())  # splits a symbolic dim
  a = Tensor(A).realize()
  for i in (2, 4, 6, 2, 4, 8, 6):
    np.testing.assert_allclose(jf(a, Variable("n", 1, 10).bind(i)).numpy(), A[:, :i].reshape(3, 2, -1).sum(2), rtol=1e-5)
  assert not jf.shared and "reshape of a symbolic shape has no symbolic form" in jf.why_not_shared


def test_jit_value_used_on_the_host_is_caught_by_the_check():
  # float(size) is a constant in the kernel: the capture at another value launches another
  # program, so the capture is not shared and every value stays right.
  from baregrad import TinyJit
  jf = TinyJit(lambda x: (x.sum() / float(x.shape[1] * x.shape[0])).realize())
  a = Tensor(A).realize()
  for i in (2, 3, 9, 5, 3, 9):
    np.testing.assert_allclose(jf(a[:, :Variable("n", 1, 10).bind(i)]).numpy(), A[:, :i].mean(), rtol=1e-5)
  assert not jf.shared and "launch different programs" in jf.why_not_shared


def test_empty_of_a_variable_size_takes_its_upper_bound():
  # tinygrad's: the buffer holds the largest value, the tensor sees the bound one; one TinyJit
  # capture serves every value
  vi = Variable("i", 1, 10).bind(4)
  x = Tensor.empty(2, vi)
  assert x.shape == (2, 4) and x.uop.base.buffer.size == 20
  x.assign(Tensor.full((2, vi), 2.0))
  np.testing.assert_array_equal(x.sum(1).numpy(), [8.0, 8.0])
  jf = TinyJit(lambda a, n: (Tensor.empty(2, n).full_like(1.0) * a).sum(1).realize())
  a = Tensor([3.0]).realize()
  for i in range(1, 7): np.testing.assert_array_equal(jf(a, Variable("i", 1, 10).bind(i)).numpy(), [3.0 * i] * 2)
  assert jf.shared


def test_split_and_chunk_keep_the_variable_and_refuse_to_cut_it():
  x = Tensor(A)[:Variable("i", 1, 3).bind(2)]
  a, b = x.chunk(2, dim=1)
  assert str(a.shape[0].sym) == "i" and str(x.shrink((None, (0, 4))).shape[0].sym) == "i"
  p, q = x.split([3, 7], dim=1)
  assert str(q.shape[0].sym) == "i" and q.shape[1] == 7
  before = built(x)
  for v in (1, 2, 3):  # one compile serves every value: the pieces hold the Variable
    piece = Tensor(A)[:Variable("i", 1, 3).bind(v)].chunk(2, dim=1)[1]
    np.testing.assert_allclose((piece * 2).numpy(), A[:v, 5:] * 2)
  assert built(x) - before == 1
  # pieces sized by the Variable's current value would be wrong for its other values
  with pytest.raises(AssertionError, match=r"\[chunk\] cannot split dim 0 of symbolic size"): x.chunk(2, dim=0)
  with pytest.raises(ValueError, match=r"\[split\] cannot split dim 0 of symbolic size"): x.split(1, dim=0)
