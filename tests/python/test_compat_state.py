# tinygrad programs run unchanged (issue 17): nn.datasets.mnist from local idx files, the optimizers
# LARS / Muon / SGD(classic=True) against float64 numpy references, and nn.state's torch_load,
# zip_extract and tar_extract against torch.load / zipfile / tarfile.
import gzip
import hashlib

import numpy as np
import pytest

from baregrad import Tensor, dtypes, nn
from baregrad.nn import optim

# ---- nn.datasets.mnist ---------------------------------------------------------------------------

_NAMES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _idx(arr: np.ndarray, magic: int) -> bytes:
  return magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in arr.shape) + arr.astype(np.uint8).tobytes()


def _write_mnist(d, n_train=3, n_test=2, gz=True, seed=0):
  rng = np.random.default_rng(seed)
  arrs = [rng.integers(0, 256, (n_train, 28, 28)), rng.integers(0, 10, n_train), rng.integers(0, 256, (n_test, 28, 28)),
          rng.integers(0, 10, n_test)]
  for name, a, magic in zip(_NAMES, arrs, (0x803, 0x801, 0x803, 0x801)):
    data = _idx(a, magic)
    if gz: (d / name).write_bytes(gzip.compress(data))
    else: (d / name.removesuffix(".gz")).write_bytes(data)
  return arrs


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_reads_idx_files(tmp_path, monkeypatch, gz):
  arrs = _write_mnist(tmp_path, gz=gz)
  monkeypatch.setenv("MNIST_DIR", str(tmp_path))
  out = nn.datasets.mnist()
  assert [t.shape for t in out] == [(3, 1, 28, 28), (3,), (2, 1, 28, 28), (2,)]
  assert all(t.dtype == dtypes.uint8 for t in out)
  for t, a in zip(out, arrs): np.testing.assert_array_equal(t.numpy().reshape(a.shape), a)


def test_mnist_default_is_tinygrads_download_cache(tmp_path, monkeypatch):
  monkeypatch.delenv("MNIST_DIR", raising=False)
  monkeypatch.delenv("FASHION_MNIST_DIR", raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  dl = tmp_path / "tinygrad" / "downloads"
  dl.mkdir(parents=True)
  # tinygrad's own cache: <md5(url)>.gunzip holding the ungzipped file
  base = "https://storage.googleapis.com/cvdf-datasets/mnist/"
  rng = np.random.default_rng(1)
  arrs = [rng.integers(0, 256, (2, 28, 28)), rng.integers(0, 10, 2), rng.integers(0, 256, (1, 28, 28)), rng.integers(0, 10, 1)]
  for name, a, magic in zip(_NAMES, arrs, (0x803, 0x801, 0x803, 0x801)):
    (dl / (hashlib.md5((base + name).encode()).hexdigest() + ".gunzip")).write_bytes(_idx(a, magic))
  out = nn.datasets.mnist()
  for t, a in zip(out, arrs): np.testing.assert_array_equal(t.numpy().reshape(a.shape), a)
  with pytest.raises(FileNotFoundError, match=r"\[mnist\].*fashion-mnist.*train-images-idx3-ubyte\.gz.*FASHION_MNIST_DIR"):
    nn.datasets.mnist(fashion=True)
  (dl / "fashion-mnist").mkdir()
  farrs = _write_mnist(dl / "fashion-mnist", 1, 1, seed=2)
  np.testing.assert_array_equal(nn.datasets.mnist(fashion=True)[1].numpy(), farrs[1])


def test_mnist_missing_and_corrupt_files(tmp_path, monkeypatch):
  monkeypatch.setenv("MNIST_DIR", str(tmp_path))
  with pytest.raises(FileNotFoundError, match=rf"\[mnist\].*{tmp_path}.*t10k-labels-idx1-ubyte\.gz"):
    nn.datasets.mnist()
  _write_mnist(tmp_path)
  lab = tmp_path / _NAMES[1]
  lab.write_bytes(gzip.compress(_idx(np.zeros(3), 0x803)[:12]))  # wrong magic
  with pytest.raises(ValueError, match=r"\[mnist\].*train-labels-idx1-ubyte\.gz.*magic"):
    nn.datasets.mnist()
  lab.write_bytes(gzip.compress(_idx(np.zeros(3), 0x801)[:-1]))  # truncated
  with pytest.raises(ValueError, match=r"\[mnist\].*train-labels-idx1-ubyte\.gz.*10 bytes"):
    nn.datasets.mnist()
  lab.write_bytes(gzip.compress(_idx(np.zeros(3), 0x801))[:-6])  # truncated gzip stream
  with pytest.raises(ValueError, match=r"\[mnist\].*train-labels-idx1-ubyte\.gz.*gzip"):
    nn.datasets.mnist()
  lab.write_bytes(gzip.compress(_idx(np.zeros(4), 0x801)))  # 4 labels for 3 images
  with pytest.raises(ValueError, match=r"\[mnist\].*3 images.*4 labels"):
    nn.datasets.mnist()


# ---- nn.optim: LARS, Muon, SGD(classic=True) against a float64 numpy reference -------------------------------

def _ns_ref(x, steps, coeffs, eps=1e-7):
  if x.shape[0] > x.shape[1]: return _ns_ref(x.T, steps, coeffs, eps).T
  g = x / (np.sqrt((x * x).sum()) + eps)
  for _ in range(steps):
    a = g @ g.T
    g = sum(c * np.linalg.matrix_power(a, i) @ g for i, c in enumerate(coeffs))
  return g


def _lars_ref(ws, cs, steps, lr, momentum, wd, ns_steps, coeffs, nesterov, classic, pre_wd, tcoef):
  """float64 LARS on the loss sum(c * w**2) (gradient 2*c*w), tinygrad's rule with decoupled decay applied."""
  ws, bs = [w.astype(np.float64) for w in ws], [np.zeros(w.shape) for w in ws]
  for _ in range(steps):
    for i, (w, c) in enumerate(zip(ws, cs)):
      g = 2 * c * w
      r = 1.0
      if tcoef:
        r1, r2 = np.linalg.norm(w), np.linalg.norm(g)
        r = tcoef * r1 / (r2 + wd * r1) if r1 > 0 and r2 > 0 else 1.0
      if pre_wd and wd > 0: g = g + wd * w
      if classic: g = g * r * lr
      if momentum:
        bs[i] = momentum * bs[i] + g
        g = g + momentum * bs[i] if nesterov else bs[i]
      if coeffs: g = _ns_ref(g.reshape(g.shape[0], -1), ns_steps, coeffs).reshape(g.shape)
      if not pre_wd and wd > 0: w = w * (1 - wd * lr)
      if not classic: g = g * r * lr
      ws[i] = w - g
  return ws


def _run_opt(make, ws, cs, steps):
  ts = [Tensor(w, requires_grad=True) for w in ws]
  opt = make(ts)
  cts = [Tensor(c) for c in cs]
  for _ in range(steps):
    opt.zero_grad()
    sum(((c * t * t).sum() for c, t in zip(cts, ts)), Tensor(0.0)).backward()
    opt.step()
  return [t.numpy() for t in ts], opt


_SHAPES = [(4, 3), (3,), (2, 3, 2)]


@pytest.mark.parametrize("name,make,ref", [
    ("muon_defaults", lambda p: optim.Muon(p, lr=0.05), dict(lr=0.05, momentum=0.95, wd=0.1, ns_steps=5, coeffs=(3.4445, -4.775, 2.0315),
                                                             nesterov=True, classic=False, pre_wd=False, tcoef=0.0)),
    ("muon_plain", lambda p: optim.Muon(p, lr=0.1, momentum=0.9, weight_decay=0.0, ns_steps=3, ns_coefficients=(2.0, -1.5, 0.5), nesterov=False),
     dict(lr=0.1, momentum=0.9, wd=0.0, ns_steps=3, coeffs=(2.0, -1.5, 0.5), nesterov=False, classic=False, pre_wd=False, tcoef=0.0)),
    ("lars_defaults", lambda p: optim.LARS(p, lr=0.5), dict(lr=0.5, momentum=0.9, wd=1e-4, ns_steps=0, coeffs=None, nesterov=False,
                                                            classic=True, pre_wd=True, tcoef=0.001)),
    ("lars_popular_nesterov", lambda p: optim.LARS(p, lr=0.3, momentum=0.5, weight_decay=0.01, nesterov=True, classic=False, tcoef=0.02),
     dict(lr=0.3, momentum=0.5, wd=0.01, ns_steps=0, coeffs=None, nesterov=True, classic=False, pre_wd=True, tcoef=0.02)),
    ("sgd_classic", lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.05, nesterov=True, classic=True),
     dict(lr=0.1, momentum=0.9, wd=0.05, ns_steps=0, coeffs=None, nesterov=True, classic=True, pre_wd=True, tcoef=0.0)),
])
def test_python_optimizers_match_float64_reference(name, make, ref):
  rng = np.random.default_rng(3)
  ws = [rng.standard_normal(s).astype(np.float32) for s in _SHAPES]
  cs = [rng.uniform(0.5, 1.5, s).astype(np.float32) for s in _SHAPES]
  got, opt = _run_opt(make, ws, cs, 3)
  want = _lars_ref(ws, cs, 3, **ref)
  for g, w, s in zip(got, want, _SHAPES):
    assert g.dtype == np.float32 and g.shape == s
    np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5, err_msg=name)
  assert isinstance(opt, optim.LARS) and opt.lr.shape == (1,) and opt.lr.dtype == dtypes.float32


def test_muon_update_is_orthogonal():
  # a convergent cubic Newton-Schulz (1.5, -0.5) without momentum makes the update lr * U V^T (SVD of the gradient)
  rng = np.random.default_rng(4)
  w = rng.standard_normal((3, 5)).astype(np.float32)
  t = Tensor(w, requires_grad=True)
  opt = optim.Muon([t], lr=0.1, momentum=0.0, weight_decay=0.0, ns_steps=30, ns_coefficients=(1.5, -0.5))
  (t * t).sum().backward()
  opt.step()
  u, _, vt = np.linalg.svd(2.0 * w.astype(np.float64), full_matrices=False)
  np.testing.assert_allclose(t.numpy(), w - 0.1 * (u @ vt), atol=1e-4)


def test_python_optimizer_lr_and_misuse():
  t = Tensor([1.0, -2.0], requires_grad=True)
  opt = optim.SGD([t], lr=0.5, classic=True)
  opt.lr = 0.25
  (t * t).sum().backward()
  opt.step()
  np.testing.assert_allclose(t.numpy(), [0.5, -1.0])
  opt.zero_grad()
  assert t.grad is None
  with pytest.raises(RuntimeError, match=r"\[step\] parameter 0 of shape \(2,\) has no gradient"):
    opt.step()
  with pytest.raises(ValueError, match=r"\[LARS\] invalid momentum -0.5"):
    optim.LARS([t], momentum=-0.5)
  with pytest.raises(ValueError, match=r"\[Muon\] invalid learning rate -1.0"):
    optim.Muon([t], lr=-1.0)
  with pytest.raises(ValueError, match=r"\[Muon\] fused=True"):
    optim.Muon([t], fused=True)
  with pytest.raises(ValueError, match=r"\[Muon\] Newton-Schulz needs parameters of at least one dimension"):
    optim.Muon([Tensor(1.0, requires_grad=True)])
  with pytest.raises(TypeError, match=r"\[Muon\] params must be Tensors, got float at index 0"):
    optim.Muon([1.0])
