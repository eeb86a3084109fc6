# Test helpers in the style of tinygrad's test/test_ops.py: run the same function through PyTorch
# (CPU, the oracle) and baregrad on identical inputs, compare the forward result (exact shape,
# exact dtype, tolerances for floats, equality otherwise) and the gradients of the summed output
# with respect to every float input.
import numpy as np
import pytest
import torch

from baregrad import Tensor, dtypes

# torch dtype -> baregrad dtype name (tinygrad's names).
_DTYPE_NAMES = {
    torch.bool: "bool",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.float16: "float16",
    torch.float32: "float32",
    torch.float64: "float64",
}


def bg_dtype(torch_dtype):
  """The baregrad dtype matching a torch dtype."""
  return getattr(dtypes, _DTYPE_NAMES[torch_dtype])


def _per_input(v, n):
  return list(v) if isinstance(v, (list, tuple)) else [v] * n


def prepare_inputs(shapes, vals, low=-2, high=2, forward_only=False, dtype=np.float32, seed=0):
  """(torch inputs, baregrad inputs) holding the same data.

  shapes: random inputs from np.random.default_rng(seed), uniform in [low, high) for floats,
  integers in [low, high] for ints, fair coins for bool; low/high may be per-input lists.
  vals: explicit values (lists or numpy arrays). Python ints become int32 (tinygrad's default
  int), Python floats float32. Float inputs require grad unless forward_only.
  """
  if shapes is None:
    ts = [v.clone() if isinstance(v, torch.Tensor) else
          torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else torch.tensor(v) for v in vals]
    ts = [t.to(torch.int32) if t.dtype == torch.int64 and not isinstance(v, np.ndarray) else t
          for t, v in zip(ts, vals)]
  else:
    rng = np.random.default_rng(seed)
    lows, highs, kinds = _per_input(low, len(shapes)), _per_input(high, len(shapes)), _per_input(dtype, len(shapes))
    ts = []
    for shape, lo, hi, kind in zip(shapes, lows, highs, kinds):
      kind = np.dtype(kind)
      if kind == np.bool_: a = rng.random(shape) < 0.5
      elif np.issubdtype(kind, np.integer): a = rng.integers(lo, hi, size=shape, endpoint=True)
      else: a = rng.uniform(lo, hi, size=shape)
      # NOTE: np.array, not np.ascontiguousarray: the latter turns a 0-d shape () into (1,)
      ts.append(torch.from_numpy(np.array(a, dtype=kind).reshape(shape)))
  ts = [t.detach().requires_grad_(not forward_only and t.is_floating_point()) for t in ts]
  bts = [Tensor(t.detach().numpy().copy(), requires_grad=True) if t.requires_grad else Tensor(t.detach().numpy().copy())
         for t in ts]
  return ts, bts


def _as_list(out):
  return list(out) if isinstance(out, (list, tuple)) else [out]


def compare(what, bg, tt, atol=1e-6, rtol=1e-3):
  """Asserts that baregrad tensor `bg` equals torch tensor `tt`: shape, dtype and values."""
  assert isinstance(bg, Tensor), f"{what}: baregrad returned {type(bg).__name__}, not a Tensor"
  tn = tt.detach().cpu().numpy()
  assert tuple(bg.shape) == tn.shape, f"{what}: shape baregrad {tuple(bg.shape)} | torch {tn.shape}"
  assert bg.dtype == bg_dtype(tt.dtype), f"{what}: dtype baregrad {bg.dtype} | torch {tt.dtype}"
  bn = bg.numpy()
  assert isinstance(bn, np.ndarray), f"{what}: numpy() returned {type(bn).__name__}"
  assert bn.shape == tn.shape, f"{what}: numpy() shape {bn.shape} | torch {tn.shape}"
  assert bn.dtype == tn.dtype, f"{what}: numpy() dtype {bn.dtype} | torch {tn.dtype}"
  if np.issubdtype(tn.dtype, np.floating): np.testing.assert_allclose(bn, tn, atol=atol, rtol=rtol, err_msg=what)
  else: np.testing.assert_equal(bn, tn, err_msg=what)


def compare_np(what, bg, expected, dtype=None, atol=1e-6, rtol=1e-3):
  """Asserts that baregrad tensor `bg` equals numpy array `expected` (and has baregrad `dtype`)."""
  expected = np.asarray(expected)
  assert isinstance(bg, Tensor), f"{what}: baregrad returned {type(bg).__name__}, not a Tensor"
  assert tuple(bg.shape) == expected.shape, f"{what}: shape baregrad {tuple(bg.shape)} | expected {expected.shape}"
  if dtype is not None: assert bg.dtype == dtype, f"{what}: dtype baregrad {bg.dtype} | expected {dtype}"
  bn = bg.numpy()
  assert bn.dtype == expected.dtype, f"{what}: numpy() dtype {bn.dtype} | expected {expected.dtype}"
  if np.issubdtype(expected.dtype, np.floating): np.testing.assert_allclose(bn, expected, atol=atol, rtol=rtol, err_msg=what)
  else: np.testing.assert_equal(bn, expected, err_msg=what)


def _bg_sum(outs):
  total = None
  for o in outs:
    s = o.sum()
    total = s if total is None else total + s
  return total


def helper_test_op(shapes, torch_fxn, baregrad_fxn=None, vals=None, atol=1e-6, rtol=1e-3, grad_atol=1e-4, grad_rtol=1e-3,
                   forward_only=False, low=-2, high=2, dtype=np.float32, seed=0):
  """Runs torch_fxn and baregrad_fxn (default: the same function) on the same inputs; compares the
  forward outputs and, unless forward_only, the gradients of the summed output(s) with respect
  to every float input."""
  if baregrad_fxn is None: baregrad_fxn = torch_fxn
  ts, bts = prepare_inputs(shapes, vals, low, high, forward_only, dtype, seed)
  touts, bouts = _as_list(torch_fxn(*ts)), _as_list(baregrad_fxn(*bts))
  assert len(touts) == len(bouts), f"torch gave {len(touts)} outputs, baregrad {len(bouts)}"
  for i, (b, t) in enumerate(zip(bouts, touts)): compare(f"forward output {i}", b, t, atol, rtol)

  grad_idx = [i for i, t in enumerate(ts) if t.requires_grad]
  if forward_only or not grad_idx: return
  tloss = sum(o.sum() for o in _as_list(torch_fxn(*ts)))
  tgrads = torch.autograd.grad(tloss, [ts[i] for i in grad_idx], allow_unused=True)
  # NOTE: the forward is recomputed, as tinygrad's helper does: the first one was realized.
  _bg_sum(_as_list(baregrad_fxn(*bts))).backward()
  for i, tg in zip(grad_idx, tgrads):
    bg = bts[i].grad
    if tg is None and bg is None: continue  # an input the output does not depend on
    if tg is None: tg = torch.zeros_like(ts[i])
    assert bg is not None, f"input {i} got no gradient from baregrad (torch's is {tg})"
    compare(f"gradient of input {i}", bg, tg, grad_atol, grad_rtol)


def _realize(out):
  for o in _as_list(out):
    if isinstance(o, Tensor): o.realize()


def helper_test_exception(shapes, torch_fxn, baregrad_fxn=None, expected=ValueError, torch_expected=None, vals=None,
                          low=-1.5, high=1.5, dtype=np.float32):
  """Misuse compared by exception kind: torch must raise `torch_expected` (default `expected`) and
  baregrad one of `expected` (a kind or a tuple of kinds: those tinygrad or torch raise)."""
  if baregrad_fxn is None: baregrad_fxn = torch_fxn
  ts, bts = prepare_inputs(shapes, vals, low, high, True, dtype)
  with pytest.raises(torch_expected or expected):
    torch_fxn(*ts)
  with pytest.raises(expected):
    _realize(baregrad_fxn(*bts))


def np_threefry(k0, k1, x0, x1):
  """Threefry-2x32, 20 rounds, in numpy uint32 (the oracle; checked against Random123's known answers)."""
  m = np.uint64(0xFFFFFFFF)
  def rotl(v, r): return ((v << np.uint64(r)) | (v >> np.uint64(32 - r))) & m
  k0, k1, x0, x1 = (np.asarray(v, np.uint64) for v in (k0, k1, x0, x1))
  ks = [k0, k1, k0 ^ k1 ^ np.uint64(0x1BD11BDA)]
  x0, x1 = (x0 + ks[0]) & m, (x1 + ks[1]) & m
  for i in range(5):
    for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
      x0 = (x0 + x1) & m
      x1 = x0 ^ rotl(x1, r)
    x0, x1 = (x0 + ks[(i + 1) % 3]) & m, (x1 + ks[(i + 2) % 3] + np.uint64(i + 1)) & m
  return x0.astype(np.uint32), x1.astype(np.uint32)
