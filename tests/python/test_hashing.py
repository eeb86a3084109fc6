# keccak and hash against Python's hashlib (FIPS 202 SHA3 and SHAKE128).
import hashlib

import numpy as np
import pytest

from baregrad import Tensor, dtypes

_REF = {"sha3_256": lambda b: hashlib.sha3_256(b).digest(), "sha3_224": lambda b: hashlib.sha3_224(b).digest(),
        "shake_128": lambda b: hashlib.shake_128(b).digest(16)}


@pytest.mark.parametrize("cfg", sorted(_REF))
def test_keccak_matches_hashlib_across_block_boundaries(cfg):
  rate = {"sha3_256": 136, "sha3_224": 144, "shake_128": 168}[cfg]
  rng = np.random.default_rng(rate)
  for n in (0, 1, rate - 1, rate, rate + 1, 2 * rate + 5):
    rows = rng.integers(0, 256, (3, n), dtype=np.uint8)
    got = Tensor(rows).keccak(cfg).numpy() if n else Tensor.empty(3, 0, dtype=dtypes.uint8).keccak(cfg).numpy()
    assert got.dtype == np.uint8 and got.shape == (3, len(_REF[cfg](b"")))
    for r in range(3): assert bytes(got[r]) == _REF[cfg](rows[r].tobytes()), (cfg, n, r)


def test_keccak_hashes_the_bytes_of_any_dtype_over_the_last_axis():
  x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
  got = Tensor(x).keccak().numpy()
  assert got.shape == (2, 3, 32)
  for i in np.ndindex(2, 3): assert bytes(got[i]) == hashlib.sha3_256(x[i].tobytes()).digest()
  with pytest.raises(ValueError, match=r"\[keccak\] cfg 'md5'"): Tensor([1, 2]).keccak("md5")
  with pytest.raises(ValueError, match=r"\[keccak\] rate 7"): Tensor([1, 2]).keccak((7, 6))


def test_hash_is_two_levels_of_shake128_over_a_mib():
  msg = b"Hello World!"
  data = msg.ljust(1 << 20, b"\0")  # one zero-padded MiB: 256 rows of 4 KiB, then their digests
  rows = b"".join(hashlib.shake_128(data[i:i + 4096]).digest(16) for i in range(0, 1 << 20, 4096))
  got = Tensor(np.frombuffer(msg, np.uint8).copy()).hash().numpy()
  assert got.dtype == np.uint8 and bytes(got) == hashlib.shake_128(rows).digest(16)
