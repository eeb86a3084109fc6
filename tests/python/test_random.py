# The generator is tinygrad's, value for value. The oracle is a numpy model of the scheme
# tinygrad documents in tinygrad/mixin/rand.py and Tensor._next_counter (a9069c17): Threefry-2x32
# (helpers.np_threefry, checked against Random123's known answers), per-device keys from hashlib's
# sha256, a 64-bit word counter per device, floats from the top mantissa bits.
import hashlib

import numpy as np
import pytest

from baregrad import Device, Tensor, TinyJit, dtypes
from helpers import np_threefry

_MANT = {"float16": (np.uint16, 10, np.float16), "bfloat16": (np.uint16, 7, None),
         "float32": (np.uint32, 23, np.float32), "float64": (np.uint64, 52, np.float64)}


class Stream:
  """One device's stream as tinygrad defines it: device number `index` since the seed."""
  def __init__(self, seed: int, index: int):
    sha = int.from_bytes(hashlib.sha256(index.to_bytes(4, "big")).digest(), "big")
    self.key, self.counter = (sha & 0xFFFFFFFF, seed & 0xFFFFFFFF), 0

  def words(self, n: int) -> np.ndarray:
    c, self.counter = self.counter, self.counter + n
    k0, k1 = np_threefry(*self.key, c & 0xFFFFFFFF, c >> 32)
    half = (n + 1) // 2
    w0, w1 = np_threefry(k0, k1, np.arange(half), np.arange(half) + half)
    return np.concatenate([w0, w1])[:n]

  def rand(self, n: int, dtype: str = "float32") -> np.ndarray:
    """Uniform [0, 1) as float64 (every value is exact there)."""
    uint, mant, _ = _MANT[dtype]
    size = np.dtype(uint).itemsize
    raw = np.frombuffer(self.words((n * size + 3) // 4).astype("<u4").tobytes(), dtype=uint)[:n]
    return (raw >> np.array(8 * size - mant, dtype=uint)).astype(np.float64) * 2.0**-mant


def _other_device() -> str:
  return "CPU" if Device.DEFAULT != "CPU" else "CPU:C"


def test_rand_is_tinygrads_stream_in_every_float_dtype():
  Tensor.manual_seed(1337)
  s = Stream(1337, 0)
  np.testing.assert_array_equal(Tensor.rand(5).numpy(), s.rand(5).astype(np.float32))
  np.testing.assert_array_equal(Tensor.rand(2, 3).numpy(), s.rand(6).astype(np.float32).reshape(2, 3))
  np.testing.assert_array_equal(Tensor.rand(7, dtype=dtypes.float16).numpy(), s.rand(7, "float16").astype(np.float16))
  np.testing.assert_array_equal(Tensor.rand(3, dtype=dtypes.float64).numpy(), s.rand(3, "float64"))
  np.testing.assert_array_equal(Tensor.rand(5, dtype=dtypes.bfloat16).float().numpy(), s.rand(5, "bfloat16").astype(np.float32))
  np.testing.assert_array_equal(Tensor.rand(4).numpy(), s.rand(4).astype(np.float32))  # the counter went on


def test_each_device_has_its_own_key_and_counter_and_the_seed_restarts_them():
  other = _other_device()
  Tensor.manual_seed(7)
  first, second = Stream(7, 0), Stream(7, 1)
  np.testing.assert_array_equal(Tensor.rand(4, device=other).numpy(), first.rand(4).astype(np.float32))
  np.testing.assert_array_equal(Tensor.rand(4).numpy(), second.rand(4).astype(np.float32))
  np.testing.assert_array_equal(Tensor.rand(3, device=other).numpy(), first.rand(3).astype(np.float32))
  Tensor.manual_seed(7)  # forgets both: the default device is now device number 0
  np.testing.assert_array_equal(Tensor.rand(4).numpy(), Stream(7, 0).rand(4).astype(np.float32))


def test_low_precision_rand_never_reaches_one():
  # a float32 draw rounded to float16 reaches 1.0 (about 1 in 2000 draws); tinygrad's bits cannot
  for dt in (dtypes.float16, dtypes.bfloat16):
    x = Tensor.rand(2, 128, 128, dtype=dt).float().numpy()
    assert x.max() < 1.0 and x.min() == 0.0, dt


def test_uniform_randint_randn_randperm_use_tinygrads_formulas():
  Tensor.manual_seed(3)
  s = Stream(3, 0)
  f32 = np.float32
  want = (f32(5.0) * s.rand(6).astype(f32)).astype(f32) + f32(-2.0)  # a kernel may fuse it to one rounding
  np.testing.assert_allclose(Tensor.uniform(6, low=-2, high=3).numpy(), want, rtol=0, atol=3e-7)
  want = (f32(103.0) * s.rand(6).astype(f32)).astype(np.int32) - 3
  np.testing.assert_array_equal(Tensor.randint(6, low=-3, high=100).numpy(), want)
  u = s.rand(10).astype(f32)  # Box-Muller over rand((2, 5)) in float32
  want = np.cos(u[:5] * f32(2 * np.pi)) * np.sqrt(-2 * np.log(f32(1) - u[5:]))
  np.testing.assert_allclose(Tensor.randn(5).numpy(), want, rtol=2e-6, atol=2e-6)
  np.testing.assert_array_equal(Tensor.randperm(9).numpy(), np.argsort(s.rand(9).astype(f32), kind="stable"))


def test_tinygrads_threefry_helpers_match_the_model():
  key, c0, c1 = (0, 1337), np.arange(10, dtype=np.uint32), np.arange(10, 20, dtype=np.uint32)
  w0, w1 = np_threefry(*key, c0, c1)
  got = Tensor._threefry_random_bits(Tensor(list(key), dtype=dtypes.uint32), Tensor(c0), Tensor(c1)).numpy()
  np.testing.assert_array_equal(got, np.concatenate([w0, w1]))
  x, k = np.array([5, 2**40 + 7], dtype=np.uint64), 2**33 + 9
  w0, w1 = np_threefry(k & 0xFFFFFFFF, k >> 32, x & np.uint64(0xFFFFFFFF), x >> np.uint64(32))
  got = Tensor(x).threefry(Tensor([k], dtype=dtypes.uint64)).numpy()
  np.testing.assert_array_equal(got, (w1.astype(np.uint64) << np.uint64(32)) | w0.astype(np.uint64))
  with pytest.raises(TypeError, match=r"\[threefry\] self must be a uint64 Tensor"):
    Tensor([1, 2]).threefry(Tensor([3], dtype=dtypes.uint64))


def test_a_jit_replay_draws_the_next_words():
  Tensor.manual_seed(11)
  s = Stream(11, 0)
  f = TinyJit(lambda x: (x + Tensor.rand(4)).realize())
  zero = Tensor.zeros(4).contiguous().realize()
  for _ in range(4):
    np.testing.assert_array_equal(f(zero).numpy(), s.rand(4).astype(np.float32))
