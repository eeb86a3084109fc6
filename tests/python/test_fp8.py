# fp8 dtypes (OCP float8 E4M3FN and E5M2, and the FNUZ E4M3/E5M2): storage, casts and matmul
# through float32. The oracle is written here from the OCP OFP8 spec and the FNUZ definition in
# float64: decode by the formula, encode by picking the nearest grid value (ties to the even
# code), with non-saturating overflow (e4m3 -> NaN, e5m2 -> inf, FNUZ -> its NaN 0x80; FNUZ has
# no -0), as PyTorch's float8_e4m3fn / float8_e5m2 / float8_*fnuz casts.
import math

import numpy as np
import pytest

from baregrad import Tensor, dtypes
from baregrad.dtype import least_upper_dtype

# (dtype, exponent bits, mantissa bits, bias)
FMTS = {"e4m3": (dtypes.fp8e4m3, 4, 3, 7), "e5m2": (dtypes.fp8e5m2, 5, 2, 15),
        "e4m3fnuz": (dtypes.fp8e4m3fnuz, 4, 3, 8), "e5m2fnuz": (dtypes.fp8e5m2fnuz, 5, 2, 16)}
# the grid step past the largest finite value (overflow from there) and the code overflow gives
NEXT = {"e4m3": 480.0, "e5m2": 65536.0, "e4m3fnuz": 256.0, "e5m2fnuz": 65536.0}
OVER = {"e4m3": 0x7F, "e5m2": 0x7C, "e4m3fnuz": 0x80, "e5m2fnuz": 0x80}
DEVICES = [None, "CPU:C"]  # None: the default device (DEV, e.g. CPU or MOCK+NV)


def ref_decode(code: int, fmt: str) -> float:
  """The value of fp8 `code`, from the spec's formula."""
  _, ebits, mbits, bias = FMTS[fmt]
  s, e, m = code >> 7, (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
  if fmt.endswith("fnuz") and code == 0x80: return math.nan
  if fmt == "e4m3" and e == 15 and m == 7: return math.nan
  if fmt == "e5m2" and e == 31: return math.nan if m else (-math.inf if s else math.inf)
  v = m * 2.0 ** (1 - bias - mbits) if e == 0 else (1 + m / 2**mbits) * 2.0 ** (e - bias)
  return -v if s else v


def ref_encode(x: float, fmt: str) -> int:
  """The code of `x`: nearest finite grid value, ties to the even code; past the largest finite the
  next grid step (NEXT) stands for overflow (OVER)."""
  sign = 0x80 if math.copysign(1.0, x) < 0 else 0
  fnuz = fmt.endswith("fnuz")
  if fnuz and not math.isfinite(x): return 0x80
  if math.isnan(x): return sign | 0x7F
  over = OVER[fmt]
  grid = [(ref_decode(c, fmt), c) for c in range(0x80) if math.isfinite(ref_decode(c, fmt))]
  grid.append((NEXT[fmt], over))
  a = abs(x)
  if a >= grid[-1][0]: return sign | over
  best = min(grid, key=lambda vc: (abs(vc[0] - a), vc[1] & 1))
  return 0 if fnuz and best[1] == 0 else sign | best[1]


def _bits_f32(a): return np.frombuffer(np.asarray(a, np.float32).tobytes(), np.uint32)


def _sweep() -> np.ndarray:
  """float32 values over and past the fp8 ranges: a coarse mantissa grid on every binade, each fp8
  tie and its float32 neighbours, and the specials."""
  bits = np.arange(100 << 23, 146 << 23, 1 << 17, dtype=np.uint32)
  vals = list(bits.view(np.float32))
  for fmt in FMTS:
    grid = sorted(v for v in (ref_decode(c, fmt) for c in range(0x7F)) if math.isfinite(v))
    for lo, hi in zip(grid, grid[1:] + [NEXT[fmt]]):
      mid = np.float32((lo + hi) / 2)
      vals += [mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf))]
  vals += [0.0, 1e-45, 1e-30, 1e30, 3.4e38, np.inf, np.nan]
  v = np.array(vals, np.float32)
  return np.concatenate([v, -v])


def ref_encode_all(xs: np.ndarray, fmt: str) -> np.ndarray:
  """ref_encode of every element, vectorized the same way: nearest grid value, ties to the even code."""
  over = OVER[fmt]
  codes = np.array([c for c in range(0x80) if math.isfinite(ref_decode(c, fmt))] + [over])
  grid = np.array([ref_decode(int(c), fmt) for c in codes[:-1]] + [NEXT[fmt]])
  a = np.abs(xs.astype(np.float64))
  with np.errstate(invalid="ignore"):
    dist = np.abs(np.nan_to_num(a, nan=0.0)[:, None] - grid[None, :])
    nearest = dist == dist.min(axis=1, keepdims=True)
  out = codes[np.argmax(nearest * 2 + (nearest & (codes[None, :] % 2 == 0)), axis=1)]
  out = np.where(a >= grid[-1], over, out)
  if fmt.endswith("fnuz"):  # NaN and infinities are 0x80, and zero has no sign
    out = np.where(np.isnan(a) | np.isinf(a), 0x80, out)
    return np.where(out == 0, 0, out | np.where(np.signbit(xs), 0x80, 0)).astype(np.uint8)
  out = np.where(np.isnan(a), 0x7F, out)
  return (out | np.where(np.signbit(xs), 0x80, 0)).astype(np.uint8)


SWEEP = _sweep()
REF_CODES = {fmt: ref_encode_all(SWEEP, fmt) for fmt in FMTS}


def _codes(t: Tensor) -> np.ndarray: return t.bitcast(dtypes.uint8).numpy()


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("device", DEVICES)
def test_decode_all_codes(fmt, device):
  dt = FMTS[fmt][0]
  t = Tensor(bytes(range(256)), dtype=dt, device=device)
  want = np.array([ref_decode(c, fmt) for c in range(256)])
  got = t.cast(dtypes.float32).numpy()
  assert got.dtype == np.float32
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  ok = ~np.isnan(want)
  assert (_bits_f32(got[ok]) == _bits_f32(want[ok])).all()  # -0.0 included
  np.testing.assert_array_equal(t.cast(dtypes.float64).numpy()[ok], want[ok])
  np.testing.assert_array_equal(t.numpy()[ok], got[ok])  # numpy() widens to float32, as tinygrad


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("device", DEVICES)
def test_encode_sweep_bytes(fmt, device):
  got = _codes(Tensor(SWEEP, device=device).cast(FMTS[fmt][0]))
  bad = np.nonzero(got != REF_CODES[fmt])[0]
  assert bad.size == 0, [(float(SWEEP[i]), hex(got[i]), hex(REF_CODES[fmt][i])) for i in bad[:8]]


@pytest.mark.parametrize("fmt", FMTS)
def test_encode_from_float64_rounds_once_and_host_matches(fmt):
  dt, _, mbits, _ = FMTS[fmt]
  # just past a tie by less than float32 can hold: float64 -> fp8 must round up, not to even
  xs = [1 + 2.0**-(mbits + 1) + 2.0**-40, -(1 + 2.0**-(mbits + 1) + 2.0**-40), 1 + 2.0**-(mbits + 1), 2.0**-30, -0.0]
  want = np.array([ref_encode(x, fmt) for x in xs], np.uint8)
  np.testing.assert_array_equal(_codes(Tensor(xs, dtype=dtypes.float64).cast(dt)), want)
  np.testing.assert_array_equal(_codes(Tensor(xs, dtype=dt)), want)  # host conversion of a list
  np.testing.assert_array_equal(_codes(Tensor(np.array(xs), dtype=dt)), want)


def q(x: float, fmt: str) -> float: return ref_decode(ref_encode(x, fmt), fmt)
def q_all(a, fmt: str) -> np.ndarray: return np.array([q(float(v), fmt) for v in np.ravel(a)])


@pytest.mark.parametrize("fmt", FMTS)
def test_casts_to_and_from_other_dtypes(fmt):
  dt = FMTS[fmt][0]
  vals = [0.0, 1.5, -2.75, 3.0, 100.0, -7.0]
  grid = np.array([q(v, fmt) for v in vals])
  x = Tensor(vals, dtype=dt)
  for other in (dtypes.int8, dtypes.int32, dtypes.int64, dtypes.float16, dtypes.bfloat16, dtypes.bool):
    y = x.cast(other)
    assert y.dtype is other
    want = grid != 0 if other is dtypes.bool else np.trunc(grid) if dtypes.is_int(other) else grid
    np.testing.assert_array_equal(y.cast(dtypes.float64).numpy(), want, err_msg=str(other))
    ints = [1, 0, 1] if other is dtypes.bool else [-3, 100, 17]
    back = Tensor(ints, dtype=other).cast(dt)
    np.testing.assert_array_equal(back.cast(dtypes.float64).numpy(), [q(v, fmt) for v in ints], err_msg=str(other))
  np.testing.assert_array_equal(Tensor([3, 100, 255], dtype=dtypes.uint8).cast(dt).cast(dtypes.float32).numpy(),
                                [q(3, fmt), q(100, fmt), q(255, fmt)])
  to = "e5m2" if fmt == "e4m3" else "e4m3"  # fp8 -> fp8 rounds once from the exact value
  np.testing.assert_array_equal(_codes(x.cast(FMTS[to][0])), [ref_encode(v, to) for v in grid])


def test_promotion_follows_tinygrad():
  e4, e5 = dtypes.fp8e4m3, dtypes.fp8e5m2
  assert least_upper_dtype(e4, e5) is dtypes.float16
  assert least_upper_dtype(e4, dtypes.float16) is dtypes.float16
  assert least_upper_dtype(e5, dtypes.bfloat16) is dtypes.bfloat16
  assert least_upper_dtype(e4, dtypes.float32) is dtypes.float32
  assert least_upper_dtype(e5, dtypes.int32) is e5 and least_upper_dtype(dtypes.bool, e4) is e4
  assert least_upper_dtype(dtypes.int64, dtypes.uint64) is dtypes.float16  # unchanged by fp8
  assert (Tensor([1.0], dtype=e4) + Tensor([1.0], dtype=dtypes.float32)).dtype is dtypes.float32
  assert e4.itemsize == 1 and e5.itemsize == 1 and dtypes.finfo(e4) == (4, 3) and dtypes.finfo(e5) == (5, 2)
  assert e4 in dtypes.floats and dtypes.fp8s == (e4, e5, *dtypes.fp8_fnuz) and repr(e5) == "dtypes.fp8e5m2"
  f4, f5 = dtypes.fp8_fnuz
  assert (f4.itemsize, f5.itemsize, dtypes.finfo(f4), dtypes.finfo(f5)) == (1, 1, (4, 3), (5, 2))
  assert least_upper_dtype(f4, e4) is dtypes.float16 and least_upper_dtype(f5, dtypes.bfloat16) is dtypes.bfloat16
  assert least_upper_dtype(f4, dtypes.int8) is f4 and repr(f4) == "dtypes.fp8e4m3fnuz"


@pytest.mark.parametrize("fmt", FMTS)
def test_matmul_and_arithmetic_in_float32(fmt):
  dt = FMTS[fmt][0]
  rng = np.random.default_rng(0)
  # every product is on both fp8 grids (each op rounds to fp8) and every sum is exact in float32
  a = rng.choice([0.0, 1.0, -1.0, 1.5, -1.5, 0.5, 2.0], (3, 5))
  b = rng.choice([0.0, 0.5, -0.5, 1.0, -2.0, 4.0], (5, 4))
  ta, tb = Tensor(a, dtype=dt), Tensor(b, dtype=dt)
  a, b = q_all(a, fmt).reshape(a.shape), q_all(b, fmt).reshape(b.shape)
  out = ta @ tb
  assert out.dtype is dt
  exact = a @ b  # the grid values are exact in float32 and so is every partial sum here
  want = q_all(exact, fmt).reshape(exact.shape)
  np.testing.assert_array_equal(out.cast(dtypes.float64).numpy(), want)
  np.testing.assert_array_equal((ta.cast(dtypes.float32) @ tb.cast(dtypes.float32)).numpy(), exact)
  # elementwise: each result rounded once from float32
  s = (ta[:, :4] * tb[:3, :] + 0.3).cast(dtypes.float64).numpy()
  w = [q(float(np.float32(q(float(np.float32(x * y)), fmt) + np.float32(q(0.3, fmt)))), fmt)
       for x, y in zip(q_all(a[:, :4], fmt), q_all(b[:3, :], fmt))]
  np.testing.assert_array_equal(s.ravel(), w)
  assert ta.sum().dtype is dt and ta.sum().item() == q(float(a.sum()), fmt)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_safetensors_round_trip_keeps_codes(fmt, tmp_path):
  from baregrad.nn.state import safe_load, safe_save
  dt = FMTS[fmt][0]
  codes = np.arange(256, dtype=np.uint8)
  t = Tensor(codes.tobytes(), dtype=dt)
  safe_save({"w": t}, str(tmp_path / "f8.safetensors"))
  header = (tmp_path / "f8.safetensors").read_bytes()
  assert {"e4m3": b'"F8_E4M3"', "e5m2": b'"F8_E5M2"'}[fmt] in header
  r = safe_load(str(tmp_path / "f8.safetensors"))["w"]
  assert r.dtype is dt
  np.testing.assert_array_equal(r.bitcast(dtypes.uint8).numpy(), codes)
  with pytest.raises(TypeError, match=r"\[data\]"): r.data()
