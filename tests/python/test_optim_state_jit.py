# Optimizers against torch.optim (a few steps of the same model from the same weights), model
# state (safe_save/safe_load round trip and file format, get_state_dict/get_parameters/
# load_state_dict) and TinyJit (replays equal eager execution).
import json
import struct

import numpy as np
import pytest
import torch

from baregrad import Device, Tensor, TinyJit, dtypes, nn
from baregrad.nn import optim
from baregrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save
from helpers import compare, compare_np

# ---- optimizers --------------------------------------------------------------------------------------

def _data(seed=0):
  rng = np.random.default_rng(seed)
  f = lambda *s: rng.uniform(-1, 1, size=s).astype(np.float32)
  return f(4, 3), f(3), f(8, 4), f(8, 3)


def _loss(x, w, b, y):
  return ((x @ w + b).tanh() - y).square().mean()


def _train_both(make_bg_opt, make_torch_opt, steps=4):
  w0, b0, x0, y0 = _data()
  tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
  bw, bb = Tensor(w0.copy(), requires_grad=True), Tensor(b0.copy(), requires_grad=True)
  topt, bopt = make_torch_opt([tw, tb]), make_bg_opt([bw, bb])
  tx, ty, bx, by = torch.tensor(x0), torch.tensor(y0), Tensor(x0), Tensor(y0)
  with Tensor.train():
    for step in range(steps):
      topt.zero_grad()
      tl = _loss(tx, tw, tb, ty)
      tl.backward()
      topt.step()
      bopt.zero_grad()
      bl = _loss(bx, bw, bb, by)
      bl.backward()
      bopt.step()
      np.testing.assert_allclose(bl.numpy(), tl.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=f"loss at step {step}")
  compare("weight after training", bw, tw, atol=1e-5, rtol=1e-4)
  compare("bias after training", bb, tb, atol=1e-5, rtol=1e-4)


OPTIMIZERS = [
    ("sgd", lambda p: optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    ("sgd_momentum", lambda p: optim.SGD(p, lr=0.1, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    ("sgd_nesterov", lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)),
    ("sgd_weight_decay", lambda p: optim.SGD(p, lr=0.1, weight_decay=0.1), lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.1)),
    ("sgd_all", lambda p: optim.SGD(p, lr=0.05, momentum=0.8, weight_decay=0.01, nesterov=True),
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, weight_decay=0.01, nesterov=True)),
    ("adam", lambda p: optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    ("adam_betas", lambda p: optim.Adam(p, lr=0.02, b1=0.8, b2=0.99, eps=1e-6),
     lambda p: torch.optim.Adam(p, lr=0.02, betas=(0.8, 0.99), eps=1e-6)),
    # tinygrad's AdamW decays decoupled, as torch's AdamW
    ("adamw", lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1), lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,bg_opt,torch_opt", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_optimizer_matches_torch(name, bg_opt, torch_opt):
  _train_both(bg_opt, torch_opt)


@pytest.mark.parametrize("make", [lambda p: optim.Adam(p, lr=0.01), lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1),
                                  lambda p: optim.LAMB(p, lr=0.01)], ids=["adam", "adamw", "lamb"])
def test_optimizer_state_dict_resumes_training(make, tmp_path):
  """An optimizer's state dict (tinygrad's names: lr, m.i, v.i, b1_t, b2_t) saved after 2 steps
  and loaded into a fresh optimizer continues exactly as the uninterrupted run (the oracle)."""
  w0, b0, x0, y0 = _data()
  x, y = Tensor(x0), Tensor(y0)
  def run(opt, w, b, steps):
    with Tensor.train():
      for _ in range(steps):
        opt.zero_grad()
        _loss(x, w, b, y).backward()
        opt.step()
  wa, ba = Tensor(w0.copy(), requires_grad=True), Tensor(b0.copy(), requires_grad=True)
  run(make([wa, ba]), wa, ba, 4)
  wb, bb = Tensor(w0.copy(), requires_grad=True), Tensor(b0.copy(), requires_grad=True)
  opt = make([wb, bb])
  assert sorted(get_state_dict(opt)) == ["b1_t", "b2_t", "lr", "m.0", "m.1", "params.0", "params.1", "v.0", "v.1"]
  run(opt, wb, bb, 2)
  safe_save(get_state_dict(opt), tmp_path / "opt.safetensors")
  np.testing.assert_allclose(opt.b1_t.numpy(), [0.9 ** 2], rtol=1e-12)
  wc, bc = Tensor.zeros(*w0.shape, requires_grad=True).contiguous(), Tensor.zeros(*b0.shape, requires_grad=True).contiguous()
  opt2 = make([wc, bc])
  load_state_dict(opt2, safe_load(tmp_path / "opt.safetensors"))
  run(opt2, wc, bc, 2)
  np.testing.assert_array_equal(wc.numpy(), wa.numpy())
  np.testing.assert_array_equal(bc.numpy(), ba.numpy())


def test_optimizer_state_is_the_optimizers_own():
  """opt.m / opt.v are the tensors step() updates (tinygrad's LAMB attributes), not copies."""
  w = Tensor([1.0, -2.0], requires_grad=True)
  opt = optim.LAMB([w], lr=0.1)
  for p in opt.m + opt.v + [opt.b1_t, opt.b2_t]: p.to_(w.device)  # tinygrad's offload test, on one device
  with Tensor.train():
    opt.zero_grad()
    (w * w).sum().backward()
    opt.step()
  np.testing.assert_allclose(opt.m[0].numpy(), 0.1 * np.array([2.0, -4.0]), rtol=1e-6)
  np.testing.assert_allclose(opt.v[0].numpy(), 0.001 * np.array([4.0, 16.0]), rtol=1e-6)
  assert opt.m[0].device == w.device


def test_optimizer_lr_attribute():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = optim.SGD([w], lr=0.5)
  with Tensor.train():
    opt.zero_grad()
    (w * w).sum().backward()
    opt.step()
  compare_np("one SGD step", w, np.array([0.0, 0.0], np.float32), dtypes.float32)


def test_zero_grad_clears():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = optim.SGD([w], lr=0.1)
  (w * 3).sum().backward()
  assert w.grad is not None
  opt.zero_grad()
  (w * 1).sum().backward()
  compare_np("grad after zero_grad", w.grad, np.array([1.0, 1.0], np.float32), dtypes.float32)


def test_grad_accumulates_without_zero_grad():
  w = Tensor([1.0, 2.0], requires_grad=True)
  (w * 3).sum().backward()
  (w * 1).sum().backward()
  compare_np("accumulated grad", w.grad, np.array([4.0, 4.0], np.float32), dtypes.float32)


# ---- state: safetensors and state dicts ----------------------------------------------------------------

class _Net:
  def __init__(self):
    self.l1 = nn.Linear(3, 4)
    self.layers = [nn.Linear(4, 4), nn.Linear(4, 2, bias=False)]

  def __call__(self, x):
    x = self.l1(x).relu()
    for l in self.layers: x = l(x).tanh()
    return x


def test_safe_save_load_roundtrip(tmp_path):
  tensors = {
      "f32": Tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 7),
      "i32": Tensor([[1, -2], [3, 2147483647]]),
      "i8": Tensor(np.array([-128, 0, 127], np.int8)),
      "u8": Tensor(np.array([0, 200, 255], np.uint8)),
      "i64": Tensor(np.array([-(2 ** 40), 5], np.int64)),
      "f64": Tensor(np.array([1e-300, -2.5])),
      "f16": Tensor(np.array([0.5, -1.25], np.float16)),
      "b": Tensor([True, False, True]),
      "scalar": Tensor(np.array(3.5, np.float32)),
      "empty": Tensor(np.zeros((0, 3), np.float32)),
  }
  path = str(tmp_path / "state.safetensors")
  safe_save(tensors, path)
  loaded = safe_load(path)
  assert set(loaded) == set(tensors)
  for k, t in tensors.items():
    compare_np(f"loaded {k}", loaded[k], t.numpy(), t.dtype, atol=0, rtol=0)


def test_safe_save_file_format(tmp_path):
  # the file is standard safetensors: u64 header length, JSON header, raw little-endian data
  path = str(tmp_path / "fmt.safetensors")
  safe_save({"a": Tensor([[1.0, 2.0, 3.0]]), "b": Tensor([7, 8])}, path)
  raw = open(path, "rb").read()
  (n,) = struct.unpack("<Q", raw[:8])
  header = json.loads(raw[8:8 + n])
  assert header["a"]["dtype"] == "F32" and header["a"]["shape"] == [1, 3]
  assert header["b"]["dtype"] == "I32" and header["b"]["shape"] == [2]
  body = raw[8 + n:]
  a0, a1 = header["a"]["data_offsets"]
  np.testing.assert_equal(np.frombuffer(body[a0:a1], np.float32), [1.0, 2.0, 3.0])
  b0, b1 = header["b"]["data_offsets"]
  np.testing.assert_equal(np.frombuffer(body[b0:b1], np.int32), [7, 8])


def test_safe_load_foreign_file(tmp_path):
  # a file written by hand (as the safetensors package would) loads
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  b = np.array([1, -1], np.int64)
  header = {"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
            "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]}}
  h = json.dumps(header).encode()
  h += b" " * (-len(h) % 8)
  path = tmp_path / "foreign.safetensors"
  path.write_bytes(struct.pack("<Q", len(h)) + h + a.tobytes() + b.tobytes())
  loaded = safe_load(str(path))
  assert set(loaded) == {"a", "b"}
  compare_np("a", loaded["a"], a, dtypes.float32, atol=0, rtol=0)
  compare_np("b", loaded["b"], b, dtypes.int64, atol=0, rtol=0)


def test_get_state_dict_names():
  sd = get_state_dict(_Net())
  assert set(sd) == {"l1.weight", "l1.bias", "layers.0.weight", "layers.0.bias", "layers.1.weight"}
  assert tuple(sd["layers.1.weight"].shape) == (2, 4)


def test_get_state_dict_batchnorm():
  class M:
    def __init__(self):
      self.bn = nn.BatchNorm2d(3)
  assert {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"} <= set(get_state_dict(M()))


def test_get_parameters():
  net = _Net()
  params = get_parameters(net)
  assert len(params) == 5
  assert sum(int(np.prod(p.shape)) for p in params) == 3 * 4 + 4 + 4 * 4 + 4 + 4 * 2


def test_load_state_dict_roundtrip(tmp_path):
  Tensor.manual_seed(0)
  a = _Net()
  Tensor.manual_seed(1)
  b = _Net()
  x = Tensor(np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32))
  assert not np.array_equal(a(x).numpy(), b(x).numpy())
  path = str(tmp_path / "net.safetensors")
  safe_save(get_state_dict(a), path)
  load_state_dict(b, safe_load(path))
  np.testing.assert_equal(b(x).numpy(), a(x).numpy())


def test_load_state_dict_shape_mismatch():
  # tinygrad: ValueError naming the layer
  a, b = nn.Linear(3, 4), nn.Linear(3, 5)
  with pytest.raises(ValueError): load_state_dict(b, get_state_dict(a))


def test_load_state_dict_missing_key():
  # strict: a key missing from the state dict fails (tinygrad: KeyError); non-strict skips it
  net = _Net()
  sd = get_state_dict(_Net())
  del sd["l1.bias"]
  with pytest.raises((KeyError, ValueError)): load_state_dict(net, sd)
  before = net.l1.bias.numpy()
  load_state_dict(net, sd, strict=False)
  np.testing.assert_equal(net.l1.bias.numpy(), before)
  np.testing.assert_equal(net.l1.weight.numpy(), sd["l1.weight"].numpy())


# ---- TinyJit -------------------------------------------------------------------------------------------

def test_jit_equals_eager():
  @TinyJit
  def f(x, y):
    return ((x @ y) + 1).relu().realize()

  rng = np.random.default_rng(0)
  for i in range(5):
    a, b = rng.uniform(-1, 1, (3, 4)).astype(np.float32), rng.uniform(-1, 1, (4, 2)).astype(np.float32)
    out = f(Tensor(a), Tensor(b))
    np.testing.assert_allclose(out.numpy(), np.maximum(a @ b + 1, 0), rtol=1e-5, atol=1e-6, err_msg=f"call {i}")


def test_jit_multiple_outputs():
  @TinyJit
  def f(x):
    return (x * 2).realize(), x.sum().realize()

  for i in range(4):
    v = np.full((2, 3), float(i), np.float32)
    a, s = f(Tensor(v))
    np.testing.assert_equal(a.numpy(), v * 2)
    np.testing.assert_equal(s.numpy(), v.sum())


def test_jit_captured_lists_the_replayed_kernels():
  jf = TinyJit(lambda x: ((x * 2).contiguous().realize() + 1).realize())
  assert jf.captured is None
  for i in range(3): np.testing.assert_equal(jf(Tensor([float(i)] * 4)).numpy(), [2.0 * i + 1] * 4)
  calls = jf.captured.linear.src
  assert [c.src[0].op.name for c in calls] == ["SINK", "SINK"] and all(c.device == Device.DEFAULT for c in calls)
  assert jf.captured.kernel_count == 2 == jf.kernel_count


def test_jit_prune_runs_input_independent_kernels_once():
  # (w * 2) does not depend on the input: prune=True computes it on the capturing call only and replays read it
  rng = np.random.default_rng(1)
  w_np = rng.uniform(-1, 1, 16).astype(np.float32)
  w = Tensor(w_np).realize()
  def f(x): return ((w * 2).contiguous() + x).realize()
  kept, pruned = TinyJit(f), TinyJit(f, prune=True)
  for jf, kernels in ((kept, 2), (pruned, 1)):
    for _ in range(4):
      x = rng.uniform(-1, 1, 16).astype(np.float32)
      np.testing.assert_allclose(jf(Tensor(x)).numpy(), w_np * 2 + x, rtol=1e-6)
    assert len(jf.captured.linear.src) == kernels


def test_jit_prune_keeps_kernels_of_random_draws():
  # a random draw is not an input but differs per call: what reads it is replayed
  jf = TinyJit(lambda x: (x + Tensor.rand(8)).realize(), prune=True)
  outs = [jf(Tensor.zeros(8).contiguous()).numpy() for _ in range(4)]
  assert len({o.tobytes() for o in outs}) == 4 and all(((o >= 0) & (o < 1)).all() for o in outs)


def test_jit_capturing_off_runs_once():
  from baregrad.helpers import Context
  seen = Tensor.zeros(4).contiguous().realize()
  def f(x):
    with Context(CAPTURING=0): seen.assign(seen + 1).realize()  # runs on the eager and the capturing call only
    return (x + 1).realize()
  jf = TinyJit(f)
  for i in range(5): np.testing.assert_equal(jf(Tensor([float(i)] * 4)).numpy(), [i + 1.0] * 4)
  assert len(jf.captured.linear.src) == 1 and seen.tolist() == [2.0] * 4


def test_jit_train_step_equals_eager():
  w0, b0, x0, y0 = _data(3)

  def make():
    w, b = Tensor(w0.copy(), requires_grad=True), Tensor(b0.copy(), requires_grad=True)
    return w, b, optim.Adam([w, b], lr=0.01)

  ew, eb, eopt = make()
  jw, jb, jopt = make()

  def step(x, y, w, b, opt):
    opt.zero_grad()
    loss = _loss(x, w, b, y)
    loss.backward()
    opt.step()
    return loss

  @TinyJit
  def jit_step(x, y):
    return step(x, y, jw, jb, jopt).realize()

  rng = np.random.default_rng(1)
  with Tensor.train():
    for i in range(6):
      x = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
      y = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
      el = step(Tensor(x), Tensor(y), ew, eb, eopt).numpy()
      jl = jit_step(Tensor(x), Tensor(y)).numpy()
      np.testing.assert_allclose(jl, el, rtol=1e-6, atol=1e-7, err_msg=f"loss at step {i}")
  np.testing.assert_allclose(jw.numpy(), ew.numpy(), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(jb.numpy(), eb.numpy(), rtol=1e-6, atol=1e-7)


def test_jit_rejects_changed_input_shape():
  @TinyJit
  def f(x):
    return (x + 1).realize()

  for _ in range(3): f(Tensor.ones(2, 2))
  # tinygrad asserts; the binding raises a value misuse
  with pytest.raises((ValueError, RuntimeError, AssertionError)):
    f(Tensor.ones(3, 3))


def test_jit_output_fed_back_as_input():
  # the replay wrote the output buffer while reading it as the input: 67% of the elements wrong
  n = 1 << 20
  f = TinyJit(lambda buf, new: buf[n // 2:].cat(new))
  buf = Tensor.zeros(n, dtype=dtypes.int32).contiguous().realize()
  for i in range(6):
    buf = f(buf, Tensor(np.full(n // 2, i + 1, np.int32)))
    np.testing.assert_array_equal(buf[:n // 2].numpy(), np.full(n // 2, i, np.int32))
  np.testing.assert_array_equal(buf[n // 2:].numpy(), np.full(n // 2, 6, np.int32))
  step = TinyJit(lambda x: ((x + 1).realize() * 2).realize())
  x = Tensor([20.0]).contiguous().realize()
  for _ in range(5): x = step(x)
  assert x.item() == 2 * (2 * (2 * (2 * (2 * 21 + 1) + 1) + 1) + 1)
  y = Tensor([100.0]).contiguous().realize()  # a new input after the output was fed back
  assert step(y).item() == 202.0


def test_jit_tensors_inside_list_arguments_are_inputs():
  # they were frozen at the capture: every replay added the captured b
  @TinyJit
  def f(a, arr, d): return (a + arr[0] * d["k"]).realize()
  for i in range(5):
    got = f(Tensor([1.0, 1.0]), [Tensor([float(i), float(i)])], {"k": Tensor([2.0, 3.0])})
    np.testing.assert_allclose(got.numpy(), [1 + 2 * i, 1 + 3 * i])


@pytest.mark.parametrize("case", ["non-tensor return", "duplicate inputs", "nothing captured", "item", "tolist", "nested"])
def test_jit_misuse_raises_jit_error(case):
  # tinygrad's JitError for calls a replay would get wrong; before, replays returned the values
  # of the capture (a Python int, .item(), .tolist()) or failed inside the graph replay
  from baregrad.engine.jit import JitError
  x = Tensor([1.0, 2.0, 3.0]).realize()
  fns = {"non-tensor return": (lambda t, k: ((t * 2).realize(), k * 10), "non-Tensor value of type int"),
         "duplicate inputs": (lambda t, u: (t + u).realize(), "duplicate inputs"),
         "nothing captured": (lambda t, k: None, "didn't JIT anything"),
         "item": (lambda t, k: Tensor.zeros(int(t.sum().item())), "cannot access tensor data during JIT capture"),
         "tolist": (lambda t, k: Tensor(t.tolist()) * 2, "cannot access tensor data during JIT capture"),
         "nested": (lambda t, k: inner(t) * 3, "having TinyJit inside another TinyJit is not supported")}
  inner = TinyJit(lambda t: (t + 1).realize())
  fn, msg = fns[case]
  f = TinyJit(fn)
  with pytest.raises(JitError, match=msg):
    for k in range(3):
      if case == "duplicate inputs": f(x, x)
      else: f(Tensor([1.0, 2.0, 3.0]).realize(), k)


def test_captured_free_intermediates_returns_memory_and_replays_stay_right():
  from baregrad import GlobalCounters
  w = Tensor(np.arange(1024, dtype=np.float32)).realize()

  @TinyJit
  def f(x):
    t1 = (x * 2).contiguous().realize()
    t2 = (t1 + w).contiguous().realize()
    return t2.sum().realize()

  def want(i): return float(1024 * 2 * (i + 1) + np.arange(1024).sum())
  for i in range(4): assert f(Tensor(np.full(1024, i + 1, np.float32))).item() == want(i)
  before = GlobalCounters.mem_used
  f.captured.free_intermediates()
  assert before - GlobalCounters.mem_used >= 2 * 4096  # t1 and t2 (the output and w stay)
  assert f(Tensor(np.full(1024, 5, np.float32))).item() == want(4)
  f.captured.free_intermediates()
  f.captured.free_intermediates()
  assert f(Tensor(np.full(1024, 6, np.float32))).item() == want(5)
  np.testing.assert_array_equal(w.numpy(), np.arange(1024))


def test_capture_plans_the_intermediates_of_a_lazy_result():
  # The step returns unrealized work: its intermediate kernels' buffers are the capture's alone and share memory.
  # (A reference cycle in the Python wrapper kept the returned graph alive while the capture planned: every
  # intermediate then kept memory of its own, 105 MB instead of 50 MB for tinygrad's hlb_cifar10 forward.)
  @TinyJit
  def f(x):
    a = x.exp().sum(1, keepdim=True) + x
    b = a.sum(0, keepdim=True) * a
    return (b.sum(2, keepdim=True) * b).sum()
  xs = [np.random.default_rng(i).uniform(-0.1, 0.1, (8, 3, 32, 32)).astype(np.float32) for i in range(3)]
  for x in xs:
    got = f(Tensor(x)).item()
    a = np.exp(x.astype(np.float64)).sum(1, keepdims=True) + x
    b = a.sum(0, keepdims=True) * a
    np.testing.assert_allclose(got, (b.sum(2, keepdims=True) * b).sum(), rtol=1e-4)
  # at least the three reductions' outputs: 8x1x32x32, 1x3x32x32 and 1x3x1x32 floats
  assert f.captured.intermediate_bytes >= 4 * (8 * 32 * 32 + 3 * 32 * 32 + 3 * 32)
  assert 0 < f.captured.planned_bytes <= f.captured.intermediate_bytes
