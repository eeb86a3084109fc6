"""Keccak (FIPS 202: SHA3-224/256, SHAKE128) over the last axis, and tinygrad's 16-byte
Tensor.hash, from uint64 Tensor ops. The step constants are computed from the standard's
definitions below, not tabulated."""
from __future__ import annotations

import math

import numpy as np

from baregrad.dtype import dtypes

# name -> (rate in bytes, domain-separation byte)
_KECCAK_CFG = {"sha3_224": (144, 0x06), "sha3_256": (136, 0x06), "shake_128": (168, 0x1F)}


def _round_constants() -> list[int]:
  """RC[i] of the iota step: bit 2^j - 1 is rc(j + 7 i), rc from the LFSR x^8 + x^6 + x^5 + x^4 + 1."""
  def rc(t: int) -> int:
    r = 1
    for _ in range(t % 255):
      r <<= 1
      if r & 0x100: r ^= 0x171
    return r & 1
  return [sum(rc(j + 7 * i) << ((1 << j) - 1) for j in range(7)) for i in range(24)]


def _rho_pi() -> tuple[list[int], list[int]]:
  """For lane i = x + 5 y of the result of rho then pi: the lane it comes from and its rotation."""
  offset = {(0, 0): 0}
  x, y = 1, 0
  for t in range(24):
    offset[(x, y)] = (t + 1) * (t + 2) // 2 % 64
    x, y = y, (2 * x + 3 * y) % 5
  src, rot = [0] * 25, [0] * 25
  for x in range(5):
    for y in range(5):  # pi: B[y, 2x + 3y] = rot(A[x, y], r[x, y])
      dst = y + 5 * ((2 * x + 3 * y) % 5)
      src[dst], rot[dst] = x + 5 * y, offset[(x, y)]
  return src, rot


class HashingMixin:
  __slots__ = ()

  def keccak(self, cfg="sha3_256"):
    """The Keccak digest of each row of bytes (the last axis, bitcast to uint8) as uint8: SHA3-224/256
    (28/32 bytes) or tinygrad's SHAKE128 (16 bytes); cfg may also be (rate bytes, domain byte)."""
    T = self._T
    if isinstance(cfg, str):
      if cfg not in _KECCAK_CFG: raise ValueError(f"[keccak] cfg {cfg!r} is not one of {sorted(_KECCAK_CFG)} or (rate, dsbyte)")
      rate, ds = _KECCAK_CFG[cfg]
    else: rate, ds = cfg
    if not (0 < rate < 200 and rate % 8 == 0): raise ValueError(f"[keccak] rate {rate} must be a multiple of 8 below 200")
    if self.ndim == 0: raise ValueError("[keccak] needs at least one axis (the bytes to hash)")
    data = self if self.dtype == dtypes.uint8 else self.bitcast(dtypes.uint8)
    lead, n = data.shape[:-1], data.shape[-1]
    data = data.reshape(math.prod(lead), n)
    bs, blocks = data.shape[0], n // rate + 1
    # pad10*1 after the domain byte, to whole blocks of `rate` bytes, each block widened to 200
    tail = np.zeros(blocks * rate - n, np.uint8)
    tail[0] ^= ds
    tail[-1] ^= 0x80
    data = data.cat(T(tail, device=self.device).reshape(1, -1).expand(bs, tail.size), dim=1)
    lanes = data.reshape(bs, blocks, rate).pad((None, None, (0, 200 - rate))).bitcast(dtypes.uint64)  # (bs, blocks, 25)
    src, rot = _rho_pi()
    src_t = T(np.array(src, np.int32), device=self.device)
    left = T(np.array(rot, np.uint64), device=self.device)
    right = T(np.array([(64 - r) % 64 for r in rot], np.uint64), device=self.device)  # r = 0: a | a
    x_of = T(np.arange(25, dtype=np.int32) % 5, device=self.device)  # lane i's column
    rc = [T([c] + [0] * 24, dtype=dtypes.uint64, device=self.device) for c in _round_constants()]
    state = T.zeros(bs, 25, dtype=dtypes.uint64, device=self.device)
    for b in range(blocks):
      state = state ^ lanes[:, b]
      for i in range(24):
        cols = state.reshape(bs, 5, 5)  # [y, x]
        c = cols[:, 0] ^ cols[:, 1] ^ cols[:, 2] ^ cols[:, 3] ^ cols[:, 4]  # (bs, 5) over x
        d = c.roll(1, 1) ^ ((c.roll(-1, 1) << 1) | (c.roll(-1, 1) >> 63))  # C[x-1] ^ rot(C[x+1], 1)
        state = state ^ d[:, x_of]
        moved = state[:, src_t]
        state = ((moved << left) | (moved >> right)).reshape(bs, 5, 5)  # [y, x]
        state = (state ^ (~state.roll(-1, 2) & state.roll(-2, 2))).reshape(bs, 25)
        state = state ^ rc[i]
        state = state.realize()  # a round per kernel: deeper graphs schedule slower than they save
    out = (200 - rate) // 2
    return state.bitcast(dtypes.uint8)[:, :out].reshape(*lead, out)

  def hash(self):
    """tinygrad's 16-byte hash of the tensor's bytes: 1 MiB chunks (zero-padded), each hashed as 256
    SHAKE128 digests of 4 KiB rows and SHAKE128 of those, chunk digests combined the same way until one
    chunk remains."""
    data = self.flatten().bitcast(dtypes.uint8) if self.dtype != dtypes.uint8 else self.flatten()
    mib = 1 << 20

    def one_mib(rows):  # (k, 1 MiB) -> (k, 16)
      return rows.reshape(-1, 4096).keccak("shake_128").reshape(rows.shape[0], -1).keccak("shake_128")

    chunks = math.ceil(data.shape[0] / mib)
    while chunks > 1:
      data = one_mib(data.pad((0, chunks * mib - data.shape[0])).reshape(chunks, mib)).flatten()
      chunks = math.ceil(chunks / 65536)
    return one_mib(data.pad((0, mib - data.shape[0])).reshape(1, mib)).flatten()[:16]
