#!/usr/bin/env python3
"""Writes an MNIST-format dataset of rendered digit glyphs, so MNIST programs (tinygrad's
examples/beautiful_mnist.py, say) run where the real MNIST cannot be downloaded.

  python3 examples/mnist_synth.py OUT_DIR [--train 60000] [--test 10000] [--seed 0] [--tinygrad-cache]

OUT_DIR gets the four idx files with MNIST's names (train-images-idx3-ubyte.gz, ...): point
$MNIST_DIR there for baregrad's nn.datasets.mnist. With --tinygrad-cache, OUT_DIR is taken as
$XDG_CACHE_HOME instead and the files are written ungzipped where tinygrad's fetch() caches the
MNIST downloads (tinygrad/downloads/<md5(url)>.gunzip), which both tinygrad and baregrad read.

Each digit is a few strokes (lines and elliptic arcs) in a unit box; every image jitters the
control points, draws with a random affine map (rotation, shear, scale, shift), stroke width and
ink level, adds a stray stroke now and then and pixel noise. Same seed and sizes, same bytes.
About as hard as the real MNIST: a linear softmax classifier reaches 92.6% (20000 training images), the
CNN of tinygrad's examples/beautiful_mnist.py 98.4-98.6% after 50 steps of 64 (bench/results/tinygrad-programs-*).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import pathlib

import numpy as np

MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _arc(cx: float, cy: float, rx: float, ry: float, a0: float, a1: float, n: int = 9) -> list[tuple[float, float]]:
  """Points of an elliptic arc from angle a0 to a1 (degrees; y points down, so 270 is the top)."""
  a = np.radians(np.linspace(a0, a1, n))
  return list(zip(cx + rx * np.cos(a), cy + ry * np.sin(a)))


# Each glyph: polylines of (x, y) points in the unit box, y down.
GLYPHS: list[list[list[tuple[float, float]]]] = [
  [_arc(0.5, 0.5, 0.3, 0.45, 0, 360, 17)],
  [[(0.3, 0.22), (0.52, 0.05), (0.52, 0.95)]],
  [_arc(0.5, 0.3, 0.3, 0.25, 180, 400) + [(0.18, 0.95), (0.85, 0.95)]],
  [_arc(0.5, 0.28, 0.27, 0.23, 200, 450), _arc(0.5, 0.72, 0.3, 0.23, 270, 520)],
  [[(0.68, 0.95), (0.68, 0.05), (0.15, 0.65), (0.88, 0.65)]],
  [[(0.8, 0.05), (0.27, 0.05), (0.23, 0.46)] + _arc(0.5, 0.68, 0.3, 0.27, 215, 510)],
  [[(0.75, 0.05), (0.45, 0.25), (0.23, 0.6)], _arc(0.5, 0.7, 0.28, 0.25, 0, 360, 13)],
  [[(0.15, 0.05), (0.85, 0.05), (0.4, 0.95)]],
  [_arc(0.5, 0.27, 0.24, 0.22, 0, 360, 13), _arc(0.5, 0.72, 0.29, 0.24, 0, 360, 13)],
  [_arc(0.5, 0.3, 0.27, 0.25, 0, 360, 13), [(0.77, 0.3), (0.72, 0.95)]],
]

_YX = np.stack(np.meshgrid(np.arange(28) + 0.5, np.arange(28) + 0.5, indexing="ij"), -1).reshape(-1, 2)[:, ::-1]  # (784, [x, y])


def _segments(glyph: list[list[tuple[float, float]]]) -> tuple[np.ndarray, np.ndarray]:
  """The glyph's strokes as segment start and end points, (S, 2) each."""
  a = np.concatenate([np.asarray(p[:-1]) for p in glyph])
  b = np.concatenate([np.asarray(p[1:]) for p in glyph])
  return a, b


def _dist(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Distance of each pixel centre p (784, 2) to the nearest segment a->b (n, S, 2): (n, 784)."""
  d = b - a
  t = np.einsum("pk,nsk->nps", p, d) - np.einsum("nsk,nsk->ns", a, d)[:, None, :]
  t = np.clip(t / np.maximum(np.einsum("nsk,nsk->ns", d, d), 1e-9)[:, None, :], 0.0, 1.0)
  q = a[:, None, :, :] + t[..., None] * d[:, None, :, :]  # (n, 784, S, 2)
  return np.sqrt(((p[None, :, None, :] - q) ** 2).sum(-1)).min(-1)


def _render(digit: int, n: int, rng: np.random.Generator) -> np.ndarray:
  """n images (n, 28, 28) uint8 of one digit."""
  a, b = _segments(GLYPHS[digit])
  pts = np.concatenate([a, b])  # jitter shared endpoints alike: jitter the unique points
  uniq, inv = np.unique(pts.round(6), axis=0, return_inverse=True)
  inv = inv.reshape(-1)
  jit = uniq[None] + rng.normal(0, 0.045, (n, len(uniq), 2))
  ang = np.radians(rng.uniform(-14, 14, n))
  shear = rng.uniform(-0.25, 0.25, n)
  sx, sy = rng.uniform(14, 18, n), rng.uniform(17, 22, n)
  m = np.empty((n, 2, 2))
  c, s = np.cos(ang), np.sin(ang)
  m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1] = c * sx, (-s + shear * c) * sy, s * sx, (c + shear * s) * sy
  shift = 14 + rng.uniform(-2.5, 2.5, (n, 2))
  img_pts = np.einsum("nij,npj->npi", m, jit - 0.5) + shift[:, None, :]
  full = img_pts[:, inv]
  sa, sb = full[:, :len(a)], full[:, len(a):]
  width = rng.uniform(0.9, 2.0, n)[:, None]
  ink = rng.uniform(0.75, 1.0, n)[:, None]
  img = ink * np.clip(width - _dist(_YX, sa, sb) + 0.5, 0.0, 1.0)
  stray = rng.random(n) < 0.3  # a short stray stroke on some images
  p0 = rng.uniform(2, 26, (n, 1, 2))
  p1 = p0 + rng.normal(0, 4, (n, 1, 2))
  img = np.maximum(img, stray[:, None] * 0.8 * np.clip(1.0 - _dist(_YX, p0, p1), 0.0, 1.0))
  img = img + rng.normal(0, 0.08, img.shape) * (rng.random(img.shape) < 0.5)
  return (np.clip(img, 0.0, 1.0) * 255).round().astype(np.uint8).reshape(n, 28, 28)


def generate(n: int, rng: np.random.Generator, chunk: int = 250) -> tuple[np.ndarray, np.ndarray]:
  """n images (n, 28, 28) and labels (n,), uint8, digits drawn uniformly."""
  labels = rng.integers(0, 10, n).astype(np.uint8)
  images = np.empty((n, 28, 28), np.uint8)
  for d in range(10):
    idx = np.flatnonzero(labels == d)
    for i in range(0, len(idx), chunk): images[idx[i:i + chunk]] = _render(d, len(idx[i:i + chunk]), rng)
  return images, labels


def idx_bytes(arr: np.ndarray) -> bytes:
  """An uint8 array as an idx file (magic 0x08 0x<ndim>, big-endian sizes, the data)."""
  return bytes([0, 0, 8, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape) + arr.tobytes()


def write(out: pathlib.Path, n_train: int, n_test: int, seed: int, tinygrad_cache: bool = False) -> list[pathlib.Path]:
  """Generates the dataset and writes its four files; returns their paths."""
  rng = np.random.default_rng(seed)
  xtr, ytr = generate(n_train, rng)
  xte, yte = generate(n_test, rng)
  paths = []
  for name, arr in zip(FILES, (xtr, ytr, xte, yte)):
    if tinygrad_cache:
      path = out / "tinygrad" / "downloads" / (hashlib.md5((MNIST_URL + name).encode("utf-8")).hexdigest() + ".gunzip")
      data = idx_bytes(arr)
    else:
      path = out / name
      data = gzip.compress(idx_bytes(arr), compresslevel=6, mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    paths.append(path)
  return paths


if __name__ == "__main__":
  ap = argparse.ArgumentParser(description="Writes a synthetic MNIST-format dataset (idx files).")
  ap.add_argument("out", type=pathlib.Path, help="folder for the idx files ($MNIST_DIR), or $XDG_CACHE_HOME with --tinygrad-cache")
  ap.add_argument("--train", type=int, default=60000, help="training images (default 60000)")
  ap.add_argument("--test", type=int, default=10000, help="test images (default 10000)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--tinygrad-cache", action="store_true", help="write where tinygrad's fetch() caches the MNIST downloads")
  args = ap.parse_args()
  for p in write(args.out, args.train, args.test, args.seed, args.tinygrad_cache): print(p)
