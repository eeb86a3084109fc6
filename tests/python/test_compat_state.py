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
