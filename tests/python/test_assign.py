# In-place updates: assign() and the augmented operators write into a tensor's storage; lazy
# results computed from the old value keep the old value (tinygrad's semantics).
import numpy as np
import pytest

from baregrad import Tensor, dtypes
from helpers import compare_np


def test_assign_replaces_value():
  a = Tensor([1.0, 2.0])
  a.assign(Tensor([5.0, 6.0]))
  compare_np("assigned", a, np.array([5.0, 6.0], np.float32), dtypes.float32)


def test_lazy_reader_keeps_old_value():
  a = Tensor([1.0, 2.0])
  b = a * 2  # not yet computed
  a.assign(Tensor([5.0, 5.0]))
  compare_np("old reader", b, np.array([2.0, 4.0], np.float32), dtypes.float32)
  compare_np("new value", a * 2, np.array([10.0, 10.0], np.float32), dtypes.float32)


def test_the_assigned_value_keeps_its_value():
  # new_a read a's buffer after the assign overwrote it: the next assign (of b, which new_a
  # also read) raised "reads a buffer that assign() has overwritten"
  a, b = Tensor([0.0, 1.0, 2.0, 3.0]), Tensor([4.0, 5.0, 6.0, 7.0])
  new_a, new_b = a + b, a * 2
  a.assign(new_a)
  b.assign(new_b)
  compare_np("a", a, np.array([4.0, 6.0, 8.0, 10.0], np.float32), dtypes.float32)
  compare_np("b, from the old a", b, np.array([0.0, 2.0, 4.0, 6.0], np.float32), dtypes.float32)
  compare_np("the value assigned to a", new_a, np.array([4.0, 6.0, 8.0, 10.0], np.float32), dtypes.float32)
  a.assign(Tensor([9.0, 9.0, 9.0, 9.0]))
  compare_np("new_a after a changes again", new_a, np.array([4.0, 6.0, 8.0, 10.0], np.float32), dtypes.float32)


def test_augmented_ops_update_in_place():
  a = Tensor([1.0, 2.0, 3.0])
  alias = a
  a += 1
  a *= Tensor([1.0, 2.0, 3.0])
  compare_np("augmented", a, np.array([2.0, 6.0, 12.0], np.float32), dtypes.float32)
  compare_np("same tensor object", alias, np.array([2.0, 6.0, 12.0], np.float32), dtypes.float32)


def test_assign_from_expression_of_itself():
  a = Tensor(np.arange(4, dtype=np.float32))
  a.assign(a.flip(0) + a)
  compare_np("self-referencing assign", a, np.array([3.0, 3.0, 3.0, 3.0], np.float32), dtypes.float32)


def test_assign_shape_mismatch():
  # tinygrad asserts on a shape mismatch; the binding raises its shape kind
  a = Tensor([1.0, 2.0])
  with pytest.raises((ValueError, AssertionError)): a.assign(Tensor([1.0, 2.0, 3.0]))
  compare_np("unchanged after a failed assign", a, np.array([1.0, 2.0], np.float32), dtypes.float32)


def test_assign_keeps_requires_grad():
  w = Tensor([1.0, 2.0], requires_grad=True)
  w.assign(Tensor([3.0, 4.0]))
  (w * w).sum().backward()
  compare_np("gradient after assign", w.grad, np.array([6.0, 8.0], np.float32), dtypes.float32)


def test_assign_and_setitem_never_cast_a_tensor_value():
  # tinygrad's "assign dtype mismatch": int64 -> float32 would silently round 2**24 + 1
  a = Tensor.zeros(2, dtype=dtypes.float32).contiguous().realize()
  with pytest.raises(RuntimeError, match=r"\[assign\] assign dtype mismatch: a dtypes.long value into a dtypes.float tensor"):
    a.assign(Tensor([16777217, 1], dtype=dtypes.int64))
  with pytest.raises(RuntimeError, match=r"\[setitem\] setitem dtype mismatch"):
    a[0:1] = Tensor([1], dtype=dtypes.int32)
  a[0:1] = 7  # Python values take the tensor's dtype
  a.assign(Tensor([3, 4], dtype=dtypes.int32).cast(dtypes.float32))
  compare_np("cast first", a, np.array([3.0, 4.0], np.float32), dtypes.float32)


# A realized constant (Tensor.full, ones, Tensor(2.0)) used to keep a 1-element buffer read as the
# constant it was made from: a reduction over its broadcast summed one element (ones(360) seen as
# (120, 3) summed to 1 per row), and a value written into it was ignored by later reads.
def _realized_through_a_pad():  # the scheduler computes a padded constant into memory
  t = Tensor.ones(360)
  t.pad((0, 4)).realize()
  return t


@pytest.mark.parametrize("make", [lambda: Tensor.ones(360).realize(), lambda: Tensor.full((360,), 1.0).realize(),
                                  _realized_through_a_pad])
def test_realized_constant_reduces_over_its_full_shape(make):
  t = make()
  compare_np("row sums", t.reshape(120, 3).sum(1), np.full(120, 3.0, np.float32), dtypes.float32)
  got = t.reshape(3, 120).T @ Tensor.ones(3, 12)
  compare_np("matmul", got, np.full((120, 12), 3.0, np.float32), dtypes.float32)


def test_write_into_a_realized_scalar_constant_is_read_back():
  t = Tensor(2.0)
  t.realize()
  t[...] = 5
  compare_np("t * 1", t * 1, np.array(5.0, np.float32), dtypes.float32)
  compare_np("broadcast sum", t.reshape(1).expand(3).sum(), np.array(15.0, np.float32), dtypes.float32)


@pytest.mark.parametrize("shape", [(1,), (4,), (2, 3)])
def test_setitem_into_a_realized_constant(shape):
  t = Tensor.full(shape, 2.0)
  t.realize()
  idx = (0,) * len(shape)
  t[idx] = 5
  ref = np.full(shape, 2.0, np.float32)
  ref[idx] = 5
  compare_np("t", t, ref, dtypes.float32)
  compare_np("t * 1", t * 1, ref, dtypes.float32)
  compare_np("sum", t.sum(), np.array(ref.sum(), np.float32), dtypes.float32)


def test_assign_into_an_empty_slice_writes_nothing():
  # a KV cache update of 0 tokens at a Variable position (tinygrad's test_attention_pos_0_sz_0) raised
  # "cannot write through this view of shape (2, 1, 0, 8, 16)"
  from baregrad import Variable
  c = Tensor.arange(2 * 6 * 3, dtype=dtypes.float32).reshape(2, 6, 3).contiguous().realize()
  ref = c.numpy()
  sp = Variable("start_pos", 0, 6).bind(2)
  c[:, sp:sp + 0, :].assign(Tensor.ones(2, 0, 3)).realize()
  c[:, 4:4].assign(Tensor.ones(2, 0, 3))
  compare_np("unchanged", c, ref, dtypes.float32)


def test_setitem_into_a_buffer_writes_only_the_selected_elements():
  # ints and slices into a realized buffer: one kernel that touches the written elements, not a
  # where() over the whole buffer (a KV cache update), and no kernel for the constant value
  from baregrad import GlobalCounters
  n = 1 << 20
  x = np.arange(n, dtype=np.float32).reshape(1024, 1024)
  t = Tensor(x).realize()
  GlobalCounters.reset()
  t[0, 5] = 7.5  # global_mem counts each buffer up to the last element a kernel reaches
  assert GlobalCounters.kernel_count == 1 and GlobalCounters.global_mem < 64
  x[0, 5] = 7.5
  t[:, 9] = t[:, 10] * 2  # reads other elements of the same buffer
  x[:, 9] = x[:, 10] * 2
  t[10:0:-3, ::7] = Tensor(np.ones((4, 147), np.float32))
  x[10:0:-3, ::7] = 1
  np.testing.assert_array_equal(t.numpy(), x)


def test_setitem_of_a_number_into_lazy_work_stays_lazy():
  # the number fast path must not take lazy work for a buffer (nor hold a reader of it)
  from baregrad import GlobalCounters
  GlobalCounters.reset()
  t = Tensor.arange(4, dtype=dtypes.int32).reshape(2, 2)
  t[1] = 5
  w = Tensor.arange(8, dtype=dtypes.int32).reshape(2, 4)
  w = w[0] + w[1]
  w[1] = 99
  assert GlobalCounters.kernel_count == 0
  assert t.tolist() == [[0, 1], [5, 5]] and w.tolist() == [4, 99, 8, 10]
  assert GlobalCounters.kernel_count == 2


def test_updates_reading_the_elements_they_write_run_in_place():
  # x[2:4] += 1 and a.assign(a + a's own elements where a pad leaves them) read each element where
  # they write it: one kernel, no copy aside. A read of other elements (shifted, flipped) still
  # goes aside first; numpy is the oracle for both.
  from baregrad import GlobalCounters
  x = np.arange(8, dtype=np.float32)
  t = Tensor(x).realize()
  GlobalCounters.reset()
  t[2:6] += 1
  assert GlobalCounters.kernel_count == 1
  x[2:6] += 1
  a = Tensor.ones(4, 4).contiguous().realize()
  GlobalCounters.reset()
  a.assign(a + a.shrink((None, (0, 2))).pad((None, (0, 2)), value=2)).realize()
  assert GlobalCounters.kernel_count == 1
  ref = np.ones((4, 4), np.float32) + np.pad(np.ones((4, 2), np.float32), ((0, 0), (0, 2)), constant_values=2)
  np.testing.assert_array_equal(a.numpy(), ref)
  GlobalCounters.reset()
  t[1:5].assign(t[2:6] + 1)  # shifted: aside, then the write
  assert GlobalCounters.kernel_count == 2
  x[1:5] = x[2:6] + 1
  v = t[::-1]
  v.assign(v + t)  # flipped
  x[::-1] = x[::-1] + x
  m = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4)).realize()
  m[:, 1:3] = m[:, 1:3] + m.T[:, 1:3]  # the same box through a transposed view: other elements
  r = np.arange(16, dtype=np.float32).reshape(4, 4)
  r[:, 1:3] = r[:, 1:3] + r.T[:, 1:3]
  np.testing.assert_array_equal(t.numpy(), x)
  np.testing.assert_array_equal(m.numpy(), r)


def test_augmented_setitem_stores_back_only_what_it_must():
  # t[k] += x: Python stores t[k] back after the += wrote it in place; that store writes nothing. A gathered
  # copy (advanced index) is scattered back, and a view of a buffer assign() replaced since still raises.
  from baregrad import GlobalCounters
  x = np.arange(10, dtype=np.float32)
  t = Tensor(x).realize()
  k = slice(2, 5)
  GlobalCounters.reset()
  t[k] += 1
  t[k] = t[k]
  assert GlobalCounters.kernel_count == 1
  x[k] += 1
  t[Tensor([1, 3, 3])] += 10
  x[[1, 3, 3]] += 10  # numpy: a repeated index is added once, as torch and tinygrad
  np.testing.assert_array_equal(t.numpy(), x)
  v = t[k]
  t.assign(t * 2)
  with pytest.raises(RuntimeError, match="overwritten"): t[k] = v
