# qr, svd and newton_schulz against numpy in float64 (LAPACK's QR and SVD; the Newton-Schulz formula written out).
import numpy as np
import pytest

from baregrad import Tensor, dtypes


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (1, 1), (2, 4, 3), (6, 2)])
def test_qr_matches_lapack(shape):
  a = np.random.default_rng(len(shape) * 10 + shape[-1]).standard_normal(shape).astype(np.float32)
  q, r = (t.numpy() for t in Tensor(a).qr())
  m, n = shape[-2:]
  assert q.shape == shape[:-2] + (m, m) and r.shape == shape
  np.testing.assert_allclose(q @ r, a, atol=2e-6)
  np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(m), q.shape), atol=2e-6)
  assert np.all(np.tril(r, -1) == 0) or np.abs(np.tril(r, -1)).max() < 2e-6
  for i in np.ndindex(*shape[:-2]):
    want = np.linalg.qr(a[i].astype(np.float64), mode="complete")[1]
    np.testing.assert_allclose(r[i], want, atol=2e-5)  # the same reflections: R itself, signs included


def test_qr_of_a_rank_deficient_matrix_stays_finite():
  a = np.array([[1, 2, 3], [2, 4, 6], [0, 0, 0]], dtype=np.float32)
  q, r = (t.numpy() for t in Tensor(a).qr())
  assert np.isfinite(q).all() and np.isfinite(r).all()
  np.testing.assert_allclose(q @ r, a, atol=1e-5)


def _check_svd(a, full):
  u, s, vh = (t.numpy() for t in Tensor(a).svd(full))
  m, n = a.shape[-2:]
  k = min(m, n)
  cols, rows = (m, n) if full else (k, k)
  assert u.shape == a.shape[:-2] + (m, cols) and s.shape == a.shape[:-2] + (k,) and vh.shape == a.shape[:-2] + (rows, n)
  np.testing.assert_allclose(s, np.linalg.svd(a.astype(np.float64), compute_uv=False), atol=2e-5)
  assert np.all(np.diff(s, axis=-1) <= 0)  # descending
  d = np.zeros(a.shape[:-2] + (cols, rows))
  for i in range(k): d[..., i, i] = s[..., i]
  np.testing.assert_allclose(u @ d @ vh, a, atol=2e-5)
  np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(np.eye(cols), a.shape[:-2] + (cols, cols)), atol=2e-5)
  np.testing.assert_allclose(vh @ np.swapaxes(vh, -1, -2), np.broadcast_to(np.eye(rows), a.shape[:-2] + (rows, rows)), atol=2e-5)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", [(2, 2), (5, 3), (3, 5), (3, 4, 4), (2, 2, 2, 3), (1, 1), (7, 7)])
def test_svd_matches_numpy(shape, full):
  _check_svd(np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32), full)


@pytest.mark.parametrize("a", [np.zeros((2, 2)), np.eye(4), [[1.0, 1.0], [2.0, 2.0]], [[1.0, 2, 3], [2, 4, 6], [0, 0, 0]]])
def test_svd_of_rank_deficient_matrices_keeps_u_and_v_orthonormal(a):
  _check_svd(np.asarray(a, dtype=np.float32), True)


def _np_newton_schulz(x, steps, params, eps=1e-7):
  if x.shape[-2] > x.shape[-1]: return _np_newton_schulz(x.T, steps, params, eps).T
  g = x / (np.sqrt((x * x).sum()) + eps)
  for _ in range(steps):
    a = g @ g.T
    g = sum(p * np.linalg.matrix_power(a, i) @ g for i, p in enumerate(params))
  return g


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6)])
def test_newton_schulz_matches_the_formula(shape):
  x = np.random.default_rng(5).standard_normal(shape)
  got = Tensor(x.astype(np.float32)).newton_schulz(5, (2, -1.5, 0.5)).numpy()
  np.testing.assert_allclose(got, _np_newton_schulz(x, 5, (2, -1.5, 0.5)), atol=1e-5)


def test_matrix_ops_refuse_what_they_cannot_factor():
  with pytest.raises(ValueError, match=r"\[qr\] needs at least 2 dims"): Tensor([1.0, 2.0]).qr()
  with pytest.raises(TypeError, match=r"\[qr\] needs a float tensor"): Tensor([[1, 2]], dtype=dtypes.int32).qr()
  with pytest.raises(ValueError, match=r"\[newton_schulz\] params"): Tensor.ones(2, 2).newton_schulz(1, ())
  with pytest.raises(ValueError, match=r"\[svd\] needs at least 2 dims"): Tensor([1.0]).svd()


def test_image_dot_and_image_conv2d_are_dot_and_conv2d():
  import torch
  rng = np.random.default_rng(9)
  a, w = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
  np.testing.assert_allclose(Tensor(a).image_dot(Tensor(w)).numpy(), a @ w, atol=1e-5)
  x, k, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 7, 6), (6, 2, 3, 3), (6,)))
  want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(k), torch.tensor(b), stride=2, padding=1, groups=2).numpy()
  got = Tensor(x).image_conv2d(Tensor(k), Tensor(b), groups=2, stride=2, padding=1).numpy()
  np.testing.assert_allclose(got, want, atol=1e-4)
  with pytest.raises(RuntimeError, match=r"\[image_dot\] cannot image_dot \(2, 3, 5\) and \(4, 4\)"):
    Tensor(a).image_dot(Tensor.ones(4, 4))
  with pytest.raises(ValueError, match=r"\[image_conv2d\] needs a 4-D input"): Tensor.ones(1, 2, 3).image_conv2d(Tensor.ones(1, 2, 1))
