# tinygrad programs run unchanged (issue 17): nn.datasets.mnist from local idx files, the optimizers
# LARS / Muon / SGD(classic=True) against float64 numpy references, and nn.state's torch_load,
# zip_extract and tar_extract against torch.load / zipfile / tarfile, and gguf_load against ggml dequantisers.
import collections
import gzip
import hashlib
import io
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import pytest

from baregrad import Context, Device, Tensor, dtypes, nn
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



def _cifar_records(rng, n):
  return np.concatenate([rng.integers(0, 10, (n, 1)), rng.integers(0, 256, (n, 3072))], axis=1).astype(np.uint8)


def test_cifar_reads_the_binary_archive(tmp_path, monkeypatch):
  rng = np.random.default_rng(6)
  recs = [_cifar_records(rng, 2) for _ in range(5)] + [_cifar_records(rng, 1)]
  names = [f"cifar-10-batches-bin/data_batch_{i}.bin" for i in range(1, 6)] + ["cifar-10-batches-bin/test_batch.bin"]
  with tarfile.open(tmp_path / "cifar-10-binary.tar.gz", "w:gz") as tar:
    for n, r in zip(names, recs):
      info = tarfile.TarInfo(n)
      info.size = r.nbytes
      tar.addfile(info, io.BytesIO(r.tobytes()))
  monkeypatch.setenv("CIFAR_DIR", str(tmp_path))
  xtr, ytr, xte, yte = nn.datasets.cifar()
  train = np.concatenate(recs[:5])
  assert (xtr.shape, ytr.shape, xte.shape, yte.shape) == ((10, 3, 32, 32), (10,), (1, 3, 32, 32), (1,)) and xtr.dtype == dtypes.uint8
  np.testing.assert_array_equal(xtr.numpy().reshape(10, -1), train[:, 1:])
  np.testing.assert_array_equal(ytr.numpy(), train[:, 0])
  np.testing.assert_array_equal(xte.numpy().reshape(1, -1), recs[5][:, 1:])
  # an extracted folder whose test batch is cut short
  (tmp_path / "cifar-10-binary.tar.gz").unlink()
  (tmp_path / "cifar-10-batches-bin").mkdir()
  for n, r in zip(names, recs): (tmp_path / n).write_bytes(r.tobytes()[:-1] if "test" in n else r.tobytes())
  with pytest.raises(ValueError, match=r"\[cifar\] .*test_batch\.bin holds 3072 bytes, not whole 3073-byte records"):
    nn.datasets.cifar()
  monkeypatch.setenv("CIFAR_DIR", str(tmp_path / "nothing"))
  with pytest.raises(FileNotFoundError, match=r"\[cifar\] CIFAR-10 not found in .*nothing.*cifar-10-binary\.tar\.gz.*CIFAR_DIR"):
    nn.datasets.cifar()

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
    with Tensor.train(): opt.step()
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
    ("sgd_device", lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.05, nesterov=True, device=Device.DEFAULT),
     dict(lr=0.1, momentum=0.9, wd=0.05, ns_steps=0, coeffs=None, nesterov=True, classic=False, pre_wd=True, tcoef=0.0)),
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


def _lamb_ref(ws, cs, steps, lr, b1, b2, eps, wd, adam):
  """LAMB / Adam(W) in float64 (tinygrad's update) for the loss sum(c * w * w)."""
  ws = [w.astype(np.float64) for w in ws]
  ms, vs = [np.zeros_like(w) for w in ws], [np.zeros_like(w) for w in ws]
  for k in range(1, steps + 1):
    for i, (w, c) in enumerate(zip(ws, cs)):
      g = 2 * c * w
      ms[i] = b1 * ms[i] + (1 - b1) * g
      vs[i] = b2 * vs[i] + (1 - b2) * g * g
      up = (ms[i] / (1 - b1**k)) / (np.sqrt(vs[i] / (1 - b2**k)) + eps) + wd * w
      r1, r2 = np.sqrt((w * w).sum()), np.sqrt((up * up).sum())
      r = 1.0 if adam or r1 == 0 or r2 == 0 else r1 / r2
      ws[i] = w - lr * r * up
  return ws


@pytest.mark.parametrize("name", ["adam", "adamw", "lamb"])
def test_adam_family_with_state_on_another_device(name):
  other = "CPU" if Device.DEFAULT != "CPU" else "CPU:C"
  make = {"adam": lambda p: optim.Adam(p, lr=0.01, device=other), "adamw": lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1, device=other),
          "lamb": lambda p: optim.LAMB(p, lr=0.01, weight_decay=0.05, device=other)}[name]
  ref = {"adam": (0.01, 0.9, 0.999, 1e-8, 0.0, True), "adamw": (0.01, 0.9, 0.999, 1e-8, 0.1, True),
         "lamb": (0.01, 0.9, 0.999, 1e-6, 0.05, False)}[name]
  rng = np.random.default_rng(7)
  ws = [rng.standard_normal(s).astype(np.float32) for s in _SHAPES]
  cs = [rng.uniform(0.5, 1.5, s).astype(np.float32) for s in _SHAPES]
  got, opt = _run_opt(make, ws, cs, 3)
  for g, w in zip(got, _lamb_ref(ws, cs, 3, *ref)): np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=name)
  assert all(t.device == other for t in opt.m + opt.v + [opt.b1_t, opt.b2_t, opt.lr])
  assert all(p.device == Device.DEFAULT for p in opt.params)
  np.testing.assert_allclose(opt.b1_t.numpy(), [0.9**3], rtol=1e-6)


def test_muon_update_is_orthogonal():
  # a convergent cubic Newton-Schulz (1.5, -0.5) without momentum makes the update lr * U V^T (SVD of the gradient)
  rng = np.random.default_rng(4)
  w = rng.standard_normal((3, 5)).astype(np.float32)
  t = Tensor(w, requires_grad=True)
  opt = optim.Muon([t], lr=0.1, momentum=0.0, weight_decay=0.0, ns_steps=30, ns_coefficients=(1.5, -0.5))
  (t * t).sum().backward()
  with Tensor.train(): opt.step()
  u, _, vt = np.linalg.svd(2.0 * w.astype(np.float64), full_matrices=False)
  np.testing.assert_allclose(t.numpy(), w - 0.1 * (u @ vt), atol=1e-4)


def test_python_optimizer_lr_and_misuse():
  t = Tensor([1.0, -2.0], requires_grad=True)
  opt = optim.SGD([t], lr=0.5, classic=True)
  opt.lr = 0.25
  (t * t).sum().backward()
  with pytest.raises(RuntimeError, match=r"\[step\] TRAINING=0: the optimizer runs only in training mode"):
    opt.step()  # tinygrad's rule: stepping outside training mode is an error, and nothing changes
  np.testing.assert_equal(t.numpy(), [1.0, -2.0])
  with Context(TRAINING=1): opt.step()
  np.testing.assert_allclose(t.numpy(), [0.5, -1.0])
  opt.zero_grad()
  assert t.grad is None
  with pytest.raises(RuntimeError, match=r"\[step\] parameter 0 of shape \(2,\) has no gradient"), Tensor.train():
    opt.step()
  with pytest.raises(ValueError, match=r"\[LARS\] invalid momentum -0.5"):
    optim.LARS([t], momentum=-0.5)
  import torch  # the same misuse is a ValueError in torch
  for ours, theirs in [(lambda: optim.AdamW([t], weight_decay=-0.1), lambda p: torch.optim.AdamW(p, weight_decay=-0.1)),
                       (lambda: optim.SGD([t], weight_decay=-0.1), lambda p: torch.optim.SGD(p, weight_decay=-0.1)),
                       (lambda: optim.Adam([t], b1=1.0), lambda p: torch.optim.Adam(p, betas=(1.0, 0.999))),
                       (lambda: optim.Adam([t], b2=-0.1), lambda p: torch.optim.Adam(p, betas=(0.9, -0.1))),
                       (lambda: optim.Adam([t], eps=-1e-8), lambda p: torch.optim.Adam(p, eps=-1e-8))]:
    with pytest.raises(ValueError): theirs([torch.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match=r"\[(AdamW|SGD|Adam|LAMB|LARS)\] invalid (weight_decay|beta|epsilon)"): ours()
  with pytest.raises(ValueError, match=r"\[Muon\] invalid learning rate -1.0"):
    optim.Muon([t], lr=-1.0)
  with pytest.raises(ValueError, match=r"\[Muon\] fused=True"):
    optim.Muon([t], fused=True)
  with pytest.raises(ValueError, match=r"\[Muon\] Newton-Schulz needs parameters of at least one dimension"):
    optim.Muon([Tensor(1.0, requires_grad=True)])
  with pytest.raises(TypeError, match=r"\[Muon\] params must be Tensors, got float at index 0"):
    optim.Muon([1.0])


# ---- nn.state: torch_load (zip and legacy formats), tar_extract, zip_extract --------------------------------

try:
  import torch
except ImportError:  # the torch tests skip; the rest of the file runs
  torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is the oracle (torch.save / torch.load)")


class _Evil:
  def __init__(self, path): self.path = path
  def __reduce__(self):
    import os
    return (os.system, (f"touch {self.path}",))


def _checkpoint():
  g = torch.Generator().manual_seed(0)
  base = torch.randn(4, 6, generator=g)
  sd = collections.OrderedDict()
  for i, dt in enumerate([torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16, torch.int8,
                          torch.uint8, torch.bool]):
    sd[f"d{i}"] = (torch.randn(2, 3, generator=g) * 50).to(dt)
  sd["transpose"] = base.t()                       # strides (1, 6) of base's storage
  sd["offset_slice"] = base[1:3, 2:5]              # offset 8 into base's storage, row stride 6
  sd["step_slice"] = base[:, ::2]
  sd["bf16_transpose"] = base.to(torch.bfloat16).t()
  sd["scalar"] = torch.tensor(3.5)
  sd["empty"] = torch.zeros(0, 3, dtype=torch.int64)
  sd["param"] = torch.nn.Parameter(torch.ones(2, 2))
  sd["nested"] = {"linear": torch.nn.Linear(3, 2).state_dict(), "list": [torch.arange(3), (torch.arange(2) > 0, 7)], "step": 12}
  return sd


def _assert_same(got, want, where="root"):
  if isinstance(want, torch.Tensor):
    assert isinstance(got, Tensor), where
    want = want.detach()
    assert got.shape == tuple(want.shape), where
    assert got.dtype == {torch.float32: dtypes.float32, torch.float16: dtypes.float16, torch.bfloat16: dtypes.bfloat16,
                   torch.float64: dtypes.float64, torch.int64: dtypes.int64, torch.int32: dtypes.int32, torch.int16: dtypes.int16,
                   torch.int8: dtypes.int8, torch.uint8: dtypes.uint8, torch.bool: dtypes.bool}[want.dtype], where
    if want.dtype == torch.bfloat16: np.testing.assert_array_equal(got.float().numpy(), want.float().numpy(), err_msg=where)
    else: np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=where)
  elif isinstance(want, dict):
    assert type(got) is type(want) and list(got) == list(want), where
    for k in want: _assert_same(got[k], want[k], f"{where}.{k}")
  elif isinstance(want, (list, tuple)):
    assert type(got) is type(want) and len(got) == len(want), where
    for i, (g, w) in enumerate(zip(got, want)): _assert_same(g, w, f"{where}[{i}]")
  else: assert got == want, where


@needs_torch
@pytest.mark.parametrize("zipped", [True, False])
def test_torch_load_matches_torch(tmp_path, zipped):
  sd = _checkpoint()
  fn = tmp_path / "ckpt.pth"
  torch.save(sd, fn, _use_new_zipfile_serialization=zipped)
  assert zipfile.is_zipfile(fn) == zipped
  got = nn.state.torch_load(fn)
  _assert_same(got, torch.load(fn))
  _assert_same(nn.state.torch_load(str(fn))["transpose"], sd["transpose"])
  # a uint8 Tensor of the file's bytes, as tinygrad's accept_filename takes
  _assert_same(nn.state.torch_load(Tensor(fn.read_bytes()))["offset_slice"], sd["offset_slice"])
  lin = nn.Linear(3, 2)
  nn.state.load_state_dict(lin, got["nested"]["linear"])
  np.testing.assert_array_equal(lin.weight.numpy(), sd["nested"]["linear"]["weight"].numpy())


@needs_torch
def test_torch_load_single_tensor_and_unknown_classes(tmp_path):
  fn, marker = tmp_path / "t.pt", tmp_path / "pwned"
  torch.save(torch.arange(5, dtype=torch.int32)[1:], fn)
  _assert_same(nn.state.torch_load(fn), torch.arange(5, dtype=torch.int32)[1:])
  torch.save({"w": torch.ones(2), "evil": _Evil(marker), "np": np.arange(3, dtype=np.int16), "raw": b"xy"}, fn)
  out = nn.state.torch_load(fn)  # the pickle's os.system global becomes an inert object: nothing runs
  assert not marker.exists()
  np.testing.assert_array_equal(out["w"].numpy(), [1.0, 1.0])
  assert out["np"].dtype == np.int16 and out["np"].tolist() == [0, 1, 2] and out["raw"] == b"xy"  # as torch.load gives them
  with zipfile.ZipFile(fn, "w") as z: z.writestr("x.txt", "hi")
  with pytest.raises(ValueError, match=r"\[torch_load\] .*t\.pt: a zip file without <archive>/data\.pkl is not a torch checkpoint"):
    nn.state.torch_load(fn)


def _old_tar_checkpoint(path):
  """torch < 0.4's tar layout, built by hand: a float storage of 12 seen as a (3, 2) transpose at offset 2, an int64 one."""
  class Ref:
    def __init__(self, key): self.key = key
  class P(pickle.Pickler):
    def persistent_id(self, obj): return obj.key if isinstance(obj, Ref) else None
  def pk(o): return pickle.dumps(o, protocol=2)
  storages = pk(2) + pk((10, "cpu", torch.FloatStorage)) + struct.pack("<q", 12) + np.arange(12, dtype=np.float32).tobytes() \
    + pk((11, "cpu", torch.LongStorage)) + struct.pack("<q", 2) + np.array([5, -7], np.int64).tobytes() + pk([])
  def rec(key, sid, size, stride, off):
    return pk((key, sid, torch.FloatTensor)) + struct.pack("<i", len(size)) + b"\0" * 4 + struct.pack(f"<{len(size)}q", *size) \
      + struct.pack(f"<{len(size)}q", *stride) + struct.pack("<q", off)
  buf = io.BytesIO()
  P(buf, protocol=2).dump(collections.OrderedDict(w=Ref(20), nested={"b": Ref(21)}))
  with tarfile.open(path, "w:", format=tarfile.PAX_FORMAT) as tar:
    for n, d in (("sys_info", pk({})), ("storages", storages), ("tensors", pk(2) + rec(20, 10, (3, 2), (1, 3), 2) + rec(21, 11, (2,), (1,), 0)),
                 ("pickle", buf.getvalue())):
      info = tarfile.TarInfo(n)
      info.size = len(d)
      tar.addfile(info, io.BytesIO(d))


@needs_torch
def test_torch_load_old_tar_format(tmp_path):
  fn = tmp_path / "old.tar"
  _old_tar_checkpoint(fn)
  _assert_same(nn.state.torch_load(fn), torch.load(fn))
  raw = fn.read_bytes()
  (tmp_path / "cut.tar").write_bytes(raw[:raw.index(np.arange(12, dtype=np.float32).tobytes()) + 10])  # inside the float storage
  with pytest.raises(ValueError, match=r"\[torch_load\] .*cut\.tar"):
    nn.state.torch_load(tmp_path / "cut.tar")


@needs_torch
def test_torch_load_does_not_import_torch(tmp_path):
  fn = tmp_path / "a.pt"
  torch.save({"a": torch.arange(3, dtype=torch.int16)}, fn, _use_new_zipfile_serialization=False)
  code = f"import sys; sys.modules['torch'] = None\nfrom baregrad.nn.state import torch_load\nprint(torch_load({str(fn)!r})['a'].tolist())"
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ.copy())
  assert r.returncode == 0 and r.stdout.strip() == "[0, 1, 2]", r.stderr


@needs_torch
@pytest.mark.parametrize("zipped", [True, False])
def test_torch_load_corrupt_files_raise_valueerror(tmp_path, zipped):
  fn = tmp_path / "c.pth"
  torch.save({"a": torch.arange(40, dtype=torch.float32).reshape(5, 8).t(), "b": {"c": torch.ones(3, dtype=torch.float16)}}, fn,
             _use_new_zipfile_serialization=zipped)
  raw = fn.read_bytes()
  rng = np.random.default_rng(5)
  bad = tmp_path / "bad.pth"
  cuts = sorted({int(x) for x in rng.integers(1, len(raw), 12)} | {len(raw) - 1, len(raw) // 2})
  mutants = [raw[:c] for c in cuts]
  for pos in rng.integers(0, len(raw), 20):
    b = bytearray(raw)
    b[pos] ^= int(rng.integers(1, 256))
    mutants.append(bytes(b))
  n_err = 0
  for m in mutants:
    bad.write_bytes(m)
    try: nn.state.torch_load(bad)
    except ValueError as e:
      assert str(e).startswith(f"[torch_load] {bad}"), str(e)
      n_err += 1
  assert n_err >= len(cuts)  # every truncation is refused
  bad.write_bytes(b"not a checkpoint at all")
  with pytest.raises(ValueError, match=r"\[torch_load\] .*bad\.pth: neither a zip nor a legacy torch checkpoint"):
    nn.state.torch_load(bad)
  with pytest.raises(FileNotFoundError):
    nn.state.torch_load(tmp_path / "missing.pth")
  with pytest.raises(ValueError, match=r"\[torch_load\] a Tensor source must be 1-D uint8"):
    nn.state.torch_load(Tensor([1.0, 2.0]))
  with pytest.raises(TypeError, match=r"\[torch_load\] expected a path or a uint8 Tensor, got int"):
    nn.state.torch_load(3)


def test_tar_and_zip_extract(tmp_path):
  files = {"a.bin": bytes(range(7)), "dir/b.txt": b"hello", "empty": b""}
  tar_fn, zip_fn = tmp_path / "x.tar", tmp_path / "x.zip"
  with tarfile.open(tar_fn, "w") as tar:
    tar.add(tmp_path, arcname="topdir", recursive=False)  # a directory entry: not in the result
    for k, v in files.items():
      info = tarfile.TarInfo(k)
      info.size = len(v)
      tar.addfile(info, io.BytesIO(v))
  with zipfile.ZipFile(zip_fn, "w") as z:
    z.writestr("a.bin", files["a.bin"], compress_type=zipfile.ZIP_STORED)
    z.writestr("dir/b.txt", files["dir/b.txt"] * 50, compress_type=zipfile.ZIP_DEFLATED)
  tt = nn.state.tar_extract(tar_fn)
  assert set(tt) == set(files) and all(t.dtype == dtypes.uint8 and t.ndim == 1 for t in tt.values())
  for k, v in files.items(): assert tt[k].numpy().tobytes() == v
  zz = nn.state.zip_extract(Tensor(zip_fn.read_bytes()))
  assert zz["a.bin"].numpy().tobytes() == files["a.bin"] and zz["dir/b.txt"].numpy().tobytes() == b"hello" * 50
  (tmp_path / "t.tar").write_bytes(tar_fn.read_bytes()[:700])
  with pytest.raises(ValueError, match=r"\[tar_extract\] .*t\.tar"):
    nn.state.tar_extract(tmp_path / "t.tar")
  for junk in [Tensor(b"This is not a valid tar file"), tmp_path / "t.tar"]:  # tinygrad raises tarfile.ReadError
    with pytest.raises(tarfile.ReadError): nn.state.tar_extract(junk)
  zb = bytearray(zip_fn.read_bytes())
  zb[40] ^= 0x55  # inside the first (stored) file's data: a CRC mismatch
  (tmp_path / "c.zip").write_bytes(bytes(zb))
  with pytest.raises(ValueError, match=r"\[zip_extract\] .*c\.zip"):
    nn.state.zip_extract(tmp_path / "c.zip")
  with pytest.raises(ValueError, match=r"\[zip_extract\] .*x\.tar: not a readable zip archive"):
    nn.state.zip_extract(tar_fn)


# ---- nn.state.gguf_load: a GGUF writer and ggml's dequantisers, written from the block layouts ---------------

def _f16(b): return float(np.frombuffer(bytes(b), np.float16)[0])


def _k4_scale_min(j, q):
  if j < 4: return q[j] & 63, q[j + 4] & 63
  return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def _deq_block(typ, b):
  """One block of ggml type `typ` (bytes as a list of ints) to float64, as ggml-quants.c dequantize_row_* loops."""
  y = np.zeros(32 if typ in (2, 3, 6, 7, 8) else 256)
  if typ in (2, 3):
    d, qs = _f16(b[0:2]), b[2:18] if typ == 2 else b[4:20]
    m = _f16(b[2:4]) if typ == 3 else -8 * d
    for j in range(16): y[j], y[j + 16] = (qs[j] & 0xF) * d + m, (qs[j] >> 4) * d + m
  elif typ in (6, 7):
    o = 2 if typ == 6 else 4
    d, qh, qs = _f16(b[0:2]), int.from_bytes(bytes(b[o:o + 4]), "little"), b[o + 4:o + 20]
    m = _f16(b[2:4]) if typ == 7 else -16 * d
    for j in range(16):
      y[j] = ((qs[j] & 0xF) | (((qh >> j) << 4) & 0x10)) * d + m
      y[j + 16] = ((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) * d + m
  elif typ == 8:
    y[:] = _f16(b[0:2]) * np.array(b[2:34], np.uint8).view(np.int8)
  elif typ in (12, 13):
    d, dmin, sc = _f16(b[0:2]), _f16(b[2:4]), b[4:16]
    qh, ql = (b[16:48], b[48:176]) if typ == 13 else (None, b[16:144])
    for j in range(4):
      (s1, m1), (s2, m2) = _k4_scale_min(2 * j, sc), _k4_scale_min(2 * j + 1, sc)
      for l in range(32):
        h1 = 16 if typ == 13 and qh[l] & (1 << (2 * j)) else 0
        h2 = 16 if typ == 13 and qh[l] & (2 << (2 * j)) else 0
        y[64 * j + l] = d * s1 * ((ql[32 * j + l] & 0xF) + h1) - dmin * m1
        y[64 * j + 32 + l] = d * s2 * ((ql[32 * j + l] >> 4) + h2) - dmin * m2
  elif typ == 14:
    d, sc = _f16(b[208:210]), np.array(b[192:208], np.uint8).view(np.int8)
    for n in range(2):
      ql, qh, s, out = b[64 * n:64 * n + 64], b[128 + 32 * n:160 + 32 * n], sc[8 * n:8 * n + 8], 128 * n
      for l in range(32):
        i = l // 16
        y[out + l] = d * s[i] * (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32)
        y[out + l + 32] = d * s[i + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32)
        y[out + l + 64] = d * s[i + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32)
        y[out + l + 96] = d * s[i + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32)
  return y


_QSIZE = {2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 12: (256, 144), 13: (256, 176), 14: (256, 210)}
_F16_FIELDS = {2: [0], 3: [0, 2], 6: [0], 7: [0, 2], 8: [0], 12: [0, 2], 13: [0, 2], 14: [208]}


def _random_blocks(typ, nblocks, rng):
  el, nb = _QSIZE[typ]
  raw = rng.integers(0, 256, (nblocks, nb), dtype=np.uint8)
  for o in _F16_FIELDS[typ]: raw[:, o:o + 2] = np.frombuffer(rng.uniform(-2, 2, nblocks).astype(np.float16).tobytes(), np.uint8).reshape(-1, 2)
  return raw


def _gguf_str(s): return len(s.encode()).to_bytes(8, "little") + s.encode()


def _gguf_bytes(kv, tensors, align=32, version=3):
  """kv: {key: (type, value)}; tensors: [(name, dims in ggml order, ggml type, raw bytes)]."""
  def val(typ, v):
    fmts = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    if typ == 8: return _gguf_str(v)
    if typ == 9: return struct.pack("<IQ", v[0], len(v[1])) + b"".join(val(v[0], x) for x in v[1])
    return struct.pack(fmts.get(typ, "<I"), v)  # an unknown type: 4 bytes
  out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
  for k, (typ, v) in kv.items(): out += _gguf_str(k) + struct.pack("<I", typ) + val(typ, v)
  off, data = 0, b""
  for name, dims, typ, raw in tensors:
    out += _gguf_str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", x) for x in dims) + struct.pack("<IQ", typ, off)
    pad = -len(raw) % align
    data += raw + b"\0" * pad
    off += len(raw) + pad
  return out + b"\0" * (-len(out) % align) + data


def test_gguf_load_dequantises_like_ggml(tmp_path):
  rng = np.random.default_rng(7)
  tensors, want = [], {}
  f32 = rng.standard_normal((3, 4)).astype(np.float32)
  f16 = rng.standard_normal((2, 5)).astype(np.float16)
  tensors += [("f32", (4, 3), 0, f32.tobytes()), ("f16", (5, 2), 1, f16.tobytes()), ("i32", (3,), 26, np.arange(3, dtype=np.int32).tobytes())]
  for typ, nblocks in ((2, 2), (3, 1), (6, 2), (7, 1), (8, 2), (12, 1), (13, 1), (14, 2)):
    blocks = _random_blocks(typ, nblocks, rng)
    el = _QSIZE[typ][0]
    tensors.append((f"q{typ}", (el, nblocks), typ, blocks.tobytes()))  # ggml dims reversed: shape (nblocks, el)
    want[f"q{typ}"] = np.stack([_deq_block(typ, list(b)) for b in blocks])
  kv = {"general.architecture": (8, "llama"), "general.alignment": (4, 32), "llama.block_count": (4, 2), "f": (6, 0.5),
        "flag": (7, True), "u8": (0, 200), "ints": (9, (5, [1, -2, 3])), "toks": (9, (8, ["a", "bc"]))}
  fn = tmp_path / "m.gguf"
  fn.write_bytes(_gguf_bytes(kv, tensors))
  got_kv, sd = nn.state.gguf_load(fn)
  assert got_kv == {"general.architecture": "llama", "general.alignment": 32, "llama.block_count": 2, "f": 0.5, "flag": True, "u8": 200,
                    "ints": [1, -2, 3], "toks": ["a", "bc"]}
  np.testing.assert_array_equal(sd["f32"].numpy(), f32)
  assert sd["f16"].dtype == dtypes.float16 and sd["i32"].dtype == dtypes.int32
  np.testing.assert_array_equal(sd["f16"].numpy(), f16)
  for k, w in want.items():
    assert sd[k].dtype == dtypes.float32 and sd[k].shape == w.shape, k
    np.testing.assert_allclose(sd[k].numpy(), w, rtol=1e-6, atol=1e-6, err_msg=k)
  assert nn.state.gguf_load(Tensor(fn.read_bytes()))[1]["q8"].shape == (2, 32)


def test_gguf_hand_made_blocks(tmp_path):
  h = lambda x: np.float16(x).tobytes()  # noqa: E731
  q8 = h(0.5) + bytes(np.arange(-16, 16, dtype=np.int8).view(np.uint8))                     # Q8_0: d * q
  q4 = h(2.0) + bytes([0x10 * (15 - j) + j for j in range(16)])                              # Q4_0: low nibble j, high 15-j
  q6 = bytes(128) + bytes(64) + bytes([1] * 16) + h(1.0)                                     # Q6_K: every q = 0 - 32
  q4k = h(1.0) + h(0.5) + bytes([1, 2, 3, 4, 1, 1, 1, 1, 0x21, 0x21, 0x21, 0x21]) + bytes([0x31] * 128)  # scales 1..4 then 1, mins 1, 2
  fn = tmp_path / "h.gguf"
  fn.write_bytes(_gguf_bytes({}, [("q8", (32,), 8, q8), ("q4", (32,), 2, q4), ("q6", (256,), 14, q6), ("q4k", (256,), 12, q4k)]))
  _, sd = nn.state.gguf_load(fn)
  np.testing.assert_array_equal(sd["q8"].numpy(), np.arange(-16, 16) * 0.5)
  np.testing.assert_array_equal(sd["q4"].numpy(), np.concatenate([np.arange(16), 15 - np.arange(16)]) * 2.0 - 16)
  np.testing.assert_array_equal(sd["q6"].numpy(), np.full(256, -32.0))
  # sub-blocks 0..7: scale 1,2,3,4,1,1,1,1 (low 4 bits of 0x21 | top bits 0), min 1,1,1,1,2,2,2,2; q = 1 (even) / 3 (odd sub-block)
  sc, mn, q = [1, 2, 3, 4, 1, 1, 1, 1], [1, 1, 1, 1, 2, 2, 2, 2], [1, 3] * 4
  np.testing.assert_array_equal(sd["q4k"].numpy(), np.repeat([1.0 * s * v - 0.5 * m for s, m, v in zip(sc, mn, q)], 32))


def test_gguf_split_and_corrupt_files(tmp_path):
  one = lambda no, name, v: _gguf_bytes({"split.count": (2, 2), "split.no": (2, no)},  # noqa: E731
                                        [(name, (2,), 0, np.array([v, v], np.float32).tobytes())])
  (tmp_path / "m-00001-of-00002.gguf").write_bytes(one(0, "a", 1.0))
  (tmp_path / "m-00002-of-00002.gguf").write_bytes(one(1, "b", 2.0))
  _, sd = nn.state.gguf_load(tmp_path / "m-00001-of-00002.gguf")
  assert sorted(sd) == ["a", "b"] and sd["b"].numpy().tolist() == [2.0, 2.0]
  with pytest.raises(ValueError, match=r"\[gguf_load\] .*split.no=1"):
    nn.state.gguf_load(tmp_path / "m-00002-of-00002.gguf")
  good = _gguf_bytes({"k": (8, "v")}, [("q", (32,), 8, bytes(34))])
  bad = tmp_path / "bad.gguf"
  for raw, msg in [(b"GGUX" + good[4:], "not a GGUF file"), (good[:4] + struct.pack("<I", 1) + good[8:], "GGUF version 1"),
                   (good[:30], "truncated header"), (good[:-31], r"tensor 'q' needs bytes 96..130 of 129"),
                   (_gguf_bytes({}, [("q", (32,), 99, bytes(34))]), "GGML type 99"),
                   (_gguf_bytes({}, [("q", (31,), 8, bytes(34))]), "not whole Q8_0 blocks of 32"),
                   (_gguf_bytes({"k": (13, 0)}, []), "unknown metadata value type 13")]:
    bad.write_bytes(raw)
    with pytest.raises(ValueError, match=rf"\[gguf_load\] {bad}: .*{msg}"):
      nn.state.gguf_load(bad)


def test_tensorio_accept_filename_and_safe_dtypes(tmp_path):
  data = bytes(range(10))
  f = nn.state.TensorIO(Tensor(data))
  assert f.read(3) == data[:3] and f.seek(-2, 2) == 8 and f.read() == data[8:] and f.read(5) == b""
  assert f.seek(4) == 4 and io.BufferedReader(nn.state.TensorIO(Tensor(data))).read() == data
  with pytest.raises(io.UnsupportedOperation):
    f.write(b"x")
  with pytest.raises(ValueError, match=r"\[TensorIO\] the Tensor must be 1-D uint8"):
    nn.state.TensorIO(Tensor([1, 2]))
  (tmp_path / "f.bin").write_bytes(data)
  size = nn.state.accept_filename(lambda t: (t.shape, t.dtype))
  assert size(tmp_path / "f.bin") == ((10,), dtypes.uint8) and size(str(tmp_path / "f.bin")) == ((10,), dtypes.uint8)
  assert nn.state.safe_dtypes["BF16"] == dtypes.bfloat16 and nn.state.inverse_safe_dtypes[dtypes.int64] == "I64"
