# The tinygrad internals that programs and tinygrad's own test files import: device.Buffer (raw allocations and
# views of them), uop.ops's AxisType / PatternMatcher / UPat / graph_rewrite / deconstruct_function, helpers'
# get_child, code-object pickling, and out-of-band (protocol 5) Tensor pickling. Oracles: the bytes written, numpy,
# pickle's own behaviour and Python's function objects.
import pickle
import tracemalloc
import types

import numpy as np
import pytest
import torch

from baregrad import Device, Tensor, dtypes
from baregrad.device import Buffer
from baregrad.dtype import _to_np_dtype, _to_torch_dtype
from baregrad.helpers import get_child
from baregrad.uop.ops import AxisType, PatternMatcher, UPat, deconstruct_function, graph_rewrite
from baregrad.engine.realize import compile_linear, lower_and_compile


def host(data: bytes) -> Buffer:
  return Buffer("PYTHON", len(data), dtypes.uint8, opaque=memoryview(bytearray(data)))


# ---- Buffer -------------------------------------------------------------------------------------

def test_buffer_round_trips_bytes_on_the_device():
  buf = Buffer(Device.DEFAULT, 10, dtypes.uint8, initial_value=bytes(range(10)))
  assert buf.is_allocated() and buf.nbytes == 10
  assert buf.as_memoryview().tolist() == list(range(10))
  buf.copy_from(host(bytes(range(20, 30))))
  assert bytes(buf.as_memoryview()) == bytes(range(20, 30))


def test_buffer_view_reads_and_writes_its_window_of_the_base():
  buf = Buffer(Device.DEFAULT, 10, dtypes.uint8, initial_value=bytes(range(10)))
  view = buf.view(2, dtypes.uint16, offset=3).ensure_allocated()
  assert view.as_memoryview().cast("H").tolist() == [3 | 4 << 8, 5 | 6 << 8]  # little-endian pairs of bytes 3..6
  inner = view.view(2, dtypes.uint8, offset=1).ensure_allocated()  # a view of a view: bytes 4..5 of the base
  assert inner.base is buf and inner.offset == 4
  inner.copy_from(host(b"\xaa\xbb"))
  want = bytearray(range(10))
  want[4:6] = b"\xaa\xbb"
  assert bytes(buf.as_memoryview()) == bytes(want)


def test_buffer_view_allocation_state_follows_the_base():
  buf = Buffer(Device.DEFAULT, 10, dtypes.uint8)
  sub = buf.view(3, dtypes.uint8, offset=4)
  assert not buf.is_allocated() and not sub.is_allocated()
  buf.allocate()
  assert sub.is_allocated() and not sub.is_initialized()
  sub.allocate()
  buf.deallocate()
  assert not sub.is_allocated()
  with pytest.raises(AssertionError, match="base buffer was deallocated"): sub.as_memoryview()
  sub.deallocate()
  with pytest.raises(AssertionError, match="must be allocated"): sub.deallocate()
  sub.ensure_allocated()  # allocates the base again
  assert buf.is_allocated() and sub.is_initialized()


def test_buffer_misuse_raises_naming_the_call():
  buf = Buffer(Device.DEFAULT, 4, dtypes.uint8, initial_value=b"abcd")
  with pytest.raises(AssertionError, match="offset 4"): buf.view(1, dtypes.uint8, offset=4)
  with pytest.raises(AssertionError, match="exceed"): buf.view(2, dtypes.uint16, offset=1)
  with pytest.raises(AssertionError, match="copy_from"): buf.copy_from(host(b"abc"))
  with pytest.raises(AssertionError, match="already allocated"): buf.allocate()
  with pytest.raises(ValueError, match="size"): Buffer(Device.DEFAULT, -1, dtypes.uint8)
  with pytest.raises(ValueError, match="host"): Buffer(Device.DEFAULT, 4, dtypes.uint8, opaque=bytearray(4))
  buf.deallocate()
  with pytest.raises(AssertionError, match="not allocated"): buf.as_memoryview()


# ---- uop.ops names ------------------------------------------------------------------------------

def test_axis_type_has_tinygrads_members():
  assert {a.name for a in AxisType} == {"DEVICE", "GLOBAL", "WARP", "LOCAL", "WEAK", "GROUP_REDUCE", "REDUCE", "UPCAST",
                                        "UNROLL", "THREAD", "PLACEHOLDER", "LOOP"}


def test_graph_rewriting_raises_not_implemented():
  with pytest.raises(NotImplementedError, match="PatternMatcher"): PatternMatcher([])
  with pytest.raises(NotImplementedError, match="UPat"): UPat.cvar("x")
  with pytest.raises(NotImplementedError, match="graph_rewrite"): graph_rewrite(None, None)


def test_lower_and_compile_compiles_a_schedule():
  t = Tensor([1.0, 2.0]) + 1
  linear = t.schedule_linear()
  assert lower_and_compile(linear) is linear and compile_linear(linear) is linear
  with pytest.raises(TypeError, match="lower_and_compile"): lower_and_compile([])


_SCALE = 3


def _uses_a_global(x): return [[x * _SCALE for _ in range(2)] for _ in range(2)]  # the global is two code objects deep


def test_deconstruct_function_rebuilds_the_function():
  parts = deconstruct_function(_uses_a_global)
  assert set(parts[1]) == {"_SCALE"}
  rebuilt = types.FunctionType(*pickle.loads(pickle.dumps(parts)))  # code objects pickle too
  assert rebuilt(2) == _uses_a_global(2) == [[6, 6], [6, 6]]
  k = 1
  with pytest.raises(AssertionError, match="closure"): deconstruct_function(lambda: k)


def test_get_child_follows_a_dotted_path():
  class M:
    def __init__(self): self.layers = [{"w": 1}, {"w": Tensor([2.0])}]
  assert get_child(M(), "layers.1.w").tolist() == [2.0]
  with pytest.raises(AttributeError): get_child(M(), "blocks.0")


# ---- dtypes of numpy and torch ------------------------------------------------------------------

def test_numpy_dtype_is_what_numpy_returns():
  for dt in (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2):
    assert _to_np_dtype(dt) is np.float32 and Tensor([1.5], dtype=dt).numpy().dtype == np.float32
  assert _to_np_dtype(dtypes.int16) is np.int16
  has_uint16 = hasattr(torch, "uint16")  # torch >= 2.3
  assert _to_torch_dtype(dtypes.uint16) == (torch.uint16 if has_uint16 else None)


# ---- pickling -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.bfloat16, dtypes.int64])
def test_protocol_5_pickles_values_out_of_band(dtype):
  t = Tensor([[1.5, -2.0, 3.0]], dtype=dtype)
  buffers = []
  blob = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
  assert len(buffers) == 1 and len(blob) < t.nbytes() + 200 and buffers[0].raw().nbytes == t.numel() * (8 if dtype == dtypes.int64 else 4)
  back = pickle.loads(blob, buffers=buffers)
  assert back.dtype == dtype and back.shape == (1, 3) and back.tolist() == t.tolist()
  for proto in (2, 4, 5):  # in band
    back = pickle.loads(pickle.dumps(t, protocol=proto))
    assert back.dtype == dtype and back.tolist() == t.tolist()


def test_unpickling_out_of_band_releases_each_buffer():
  n, m = 4, 250_000
  ts = [Tensor.rand(m).realize() for _ in range(n)]
  blob = pickle.dumps(ts, protocol=5, buffer_callback=lambda pb: pb.release())
  tracemalloc.start()
  try:
    back = pickle.loads(blob, buffers=(pickle.PickleBuffer(bytearray(m * 4)) for _ in range(n)))
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert peak < n * m * 4 / 2, f"unpickling kept {peak} bytes of buffers alive"
  assert [b.shape for b in back] == [(m,)] * n and back[0].sum().item() == 0


def test_disk_tensors_refuse_pickling_under_every_protocol(tmp_path):
  p = tmp_path / "x.bin"
  p.write_bytes(bytes(8))
  t = Tensor(p)
  for proto in (2, 4, 5):
    with pytest.raises(TypeError, match="file mapping"): pickle.dumps(t, protocol=proto)


def test_deviceless_const_is_on_no_device_until_it_meets_one():
  from baregrad.uop.ops import UOp
  t = Tensor(UOp.const(2.5).cast(dtypes.float16))
  assert t.device is None and t.uop.device is None and t.dtype == dtypes.float16 and t.shape == ()
  assert "<UOp None ()" in repr(t)
  u = t.uop
  assert t.realize().uop is u  # nothing to realize
  np.testing.assert_equal(t.numpy(), np.float16(2.5))
  x = Tensor([1.0, 2.0], device="CPU:1", dtype=dtypes.float16)
  for y in (t * x, x * t, x - t, t + x):
    assert y.device == "CPU:1"
  np.testing.assert_equal((t * x).numpy(), np.float16([2.5, 5.0]))
  np.testing.assert_equal((x - t).numpy(), np.float16([-1.5, -0.5]))
  c = t.clone(device="CPU:1")
  assert c.device == "CPU:1" and c.uop.has_buffer_identity()
  c = t.clone()  # on the default device
  assert c.device == Device.DEFAULT and c.uop.has_buffer_identity() and c.numpy() == np.float16(2.5)
  s = Tensor.empty(3, device="CPU:1", dtype=dtypes.float16)
  s.assign(t)
  np.testing.assert_equal(s.numpy(), np.float16([2.5] * 3))
  s[1] = Tensor(UOp.const(7).cast(dtypes.float16))
  np.testing.assert_equal(s.numpy(), np.float16([2.5, 7, 2.5]))


def test_uop_const_dtype_and_misuse():
  from baregrad.uop.ops import UOp
  assert UOp.const(3).dtype == dtypes.int32 and UOp.const(True).dtype == dtypes.bool and UOp.const(1.5).dtype == dtypes.float32
  assert UOp.const(2.7, dtypes.int32).arg == 2 and UOp.const(3).cast(dtypes.float64).arg == 3.0
  with pytest.raises(TypeError, match="UOp.const"): UOp.const("a")
  with pytest.raises(ValueError, match="UOp.const"): UOp.const(float("nan"), dtypes.int32)


def test_max_shape_takes_each_variable_at_its_bound():
  from baregrad import Variable
  t = Tensor.ones(2, Variable("v", 1, 32).bind(5), 4)
  assert t.max_shape == (2, 32, 4) and t.max_numel() == 256
  assert Tensor.empty(2, 3).max_shape == (2, 3) and Tensor.empty(2, 3).max_numel() == 6


def test_uop_alu_builds_broadcasting_ops_that_differentiate():
  from baregrad.uop.ops import Ops, UOp
  xv, pv = np.array([1.0, 2.0, 3.0], np.float32), 0.5
  x, p = Tensor(xv), Tensor(pv, dtype=dtypes.float32)
  s = p.sin()
  z = Tensor(x.uop.alu(Ops.MUL, s.uop)).sum() + s
  tp = torch.tensor(pv, requires_grad=True)
  tz = (torch.tensor(xv) * tp.sin()).sum() + tp.sin()
  tz.backward()
  (dp,) = z.gradient(p)
  assert dp.shape == ()
  np.testing.assert_allclose(dp.numpy(), tp.grad.numpy(), rtol=1e-6)
  np.testing.assert_allclose(z.numpy(), tz.detach().numpy(), rtol=1e-6)
  cond = Tensor([True, False, True])
  w = Tensor(4.0, dtype=dtypes.float32)
  assert Tensor(cond.uop.alu(Ops.WHERE, x.uop, w.uop)).sum().gradient(w)[0].item() == 1.0
  np.testing.assert_equal(Tensor(x.uop.alu(Ops.CMPLT, UOp.const(2.0))).numpy(), xv < 2)
  np.testing.assert_allclose(Tensor(x.uop.alu(Ops.RECIP)).numpy(), 1 / xv)
  with pytest.raises(TypeError, match=r"\[UOp.alu\] Ops.ADD of dtypes.float, dtypes.int"): x.uop.alu(Ops.ADD, Tensor([1, 2, 3]).uop)
  with pytest.raises(TypeError, match=r"\[UOp.alu\] Ops.ADD takes 2 sources, got 1"): x.uop.alu(Ops.ADD)
  with pytest.raises(NotImplementedError, match=r"\[UOp.alu\] Ops.STORE"): x.uop.alu(Ops.STORE, x.uop)


def test_uop_const_is_one_object_per_value():
  from baregrad.uop.ops import UOp
  assert UOp.const(2.0, dtypes.float) is UOp.const(2.0).cast(dtypes.float)
  assert UOp.const(0.0) is not UOp.const(-0.0) and UOp.const(1, dtypes.int8) is not UOp.const(1)
  t = Tensor(UOp.const(2.0, dtypes.float)).contiguous()
  assert t.uop is UOp.const(2.0, dtypes.float) and t.device is None


def test_device_buffer_as_memoryview_copies_or_views_in_place():
  x = np.arange(6, dtype=np.int32)
  t = Tensor(x, device="CPU").realize()
  buf = t.uop.base.realized
  copy, view = buf.as_memoryview(), buf.as_memoryview(allow_zero_copy=True)
  assert copy.cast("i").tolist() == x.tolist() == view.cast("i").tolist() and view.readonly
  t.assign(Tensor(x * 10, device="CPU")).realize()  # the same buffer, written in place
  Device["CPU"].synchronize()  # a view made earlier does not wait for later kernels
  assert view.cast("i").tolist() == (x * 10).tolist() and copy.cast("i").tolist() == x.tolist()
  del t, buf
  assert view.cast("i").tolist() == (x * 10).tolist()  # the view keeps the buffer alive
  m = Tensor(x, device="MOCK+NV").realize().uop.base.realized  # GPU memory: not the host's
  assert m.as_memoryview().cast("i").tolist() == x.tolist()
  assert not m.as_memoryview(allow_zero_copy=True).readonly  # a copy
  with pytest.raises(RuntimeError, match=r"\[as_memoryview\] MOCK\+NV buffers are not host memory"):
    m.as_memoryview(force_zero_copy=True)


def test_store_and_after_write_when_the_after_becomes_a_tensor():
  # tinygrad's t.uop.after(t.uop.store(v)): nothing is written until the after is a tensor (Tensor(it) or t.uop = it);
  # then each store runs once, in order, as an assign into the elements its target views
  from baregrad.uop.ops import Ops
  t = Tensor.zeros(6).contiguous().realize()
  st = t[:3].uop.store((t[:3] + 2).uop)
  aft = t.uop.after(st)
  assert st.op is Ops.STORE and aft.op is Ops.AFTER and aft.shape == (6,) and aft.src[1] is st
  assert t.tolist() == [0] * 6  # built, not run
  t.uop = aft
  assert t.tolist() == [2, 2, 2, 0, 0, 0]
  assert Tensor(aft).tolist() == [2, 2, 2, 0, 0, 0]  # run once: not 4 the second time
  a, b = Tensor.zeros(3).contiguous().realize(), Tensor.zeros(2).contiguous().realize()
  src = Tensor([1.0, 2.0, 3.0]).realize()
  nested = a.uop.after(b.uop.after(b.uop.store(src[1:].uop)), a.uop.store((src * 2).uop))
  np.testing.assert_array_equal(Tensor(nested).numpy(), [2, 4, 6])
  np.testing.assert_array_equal(b.numpy(), [2, 3])
  with pytest.raises(TypeError, match=r"\[UOp.after\]"): a.uop.after(3)
  with pytest.raises(TypeError, match=r"\[Tensor.uop\]"): setattr(a, "uop", 3)
  with pytest.raises(ValueError, match=r"\[Tensor.uop\] a node of shape \(2,\)"): a.uop = b.uop
  with pytest.raises(RuntimeError, match="dtype"): Tensor(a.uop.after(a.uop.store(Tensor([1, 2, 3]).uop)))


def test_buf_uop_and_contiguous_of_a_buffer_write_into_that_buffer():
  # Tensor(t.uop.buf_uop) is a tensor on t's whole buffer: setitem through it is seen by t. contiguous() of a
  # buffer's whole view is that tensor itself (torch's; tinygrad's gives its buffer): assign() through it is
  # assign() to it. Views and lazy work still get a copy.
  t = Tensor([5.0, 6.0, 7.0]).realize()
  on = Tensor(t[1:].uop.buf_uop)
  assert on.shape == (3,) and on.uop.buffer is t.uop.buffer
  on[:2] = Tensor([1.0, 2.0])
  assert t.tolist() == [1, 2, 7]
  assert t.contiguous() is t
  t.contiguous().assign(Tensor([1.0, 2.0, 3.0]))
  assert t.tolist() == [1, 2, 3]
  c = t[1:].contiguous()
  c.assign(Tensor([9.0, 9.0]))
  assert t.tolist() == [1, 2, 3] and c.tolist() == [9, 9]
  with pytest.raises(RuntimeError, match=r"\[buf_uop\].*not realized"): (t + 1).uop.buf_uop
