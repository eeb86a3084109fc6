# __getitem__ and __setitem__ against numpy (torch has no negative slice steps): ints, negative
# ints, slices with any step, None, Ellipsis, integer tensor indices and their combinations. The
# gradient of x[idx].sum() is checked against np.add.at(zeros, idx, 1).
import numpy as np
import torch
import pytest

from baregrad import Tensor, dtypes
from helpers import compare_np


def _to_bg(idx):
  # numpy integer arrays in an index become baregrad int32 tensors
  if isinstance(idx, tuple): return tuple(_to_bg(i) for i in idx)
  if isinstance(idx, np.ndarray): return Tensor(idx.astype(np.int32))
  return idx


def check_getitem(shape, idx, grad=True, seed=0):
  data = np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)
  expected = data[idx]
  x = Tensor(data.copy(), requires_grad=True)
  out = x[_to_bg(idx)]
  compare_np(f"x{shape}[{idx!r}]", out, np.array(expected), dtypes.float32, atol=0, rtol=0)
  if not grad: return
  out.sum().backward()
  g = np.zeros(shape, np.float32)
  np.add.at(g, idx, 1)
  compare_np(f"gradient of x{shape}[{idx!r}]", x.grad, g, dtypes.float32, atol=0, rtol=0)


S = slice
GETITEM_CASES = [
    # ints and negative ints
    ((5,), 0), ((5,), 4), ((5,), -1), ((5,), -5), ((3, 4), 1), ((3, 4), (1, 2)), ((3, 4), (-1, -4)), ((2, 3, 4), (1, -1, 0)),
    # slices with steps (incl. negative steps and out-of-range bounds)
    ((6,), S(1, 4)), ((6,), S(None, None, 2)), ((6,), S(None, None, -1)), ((6,), S(4, 0, -2)), ((6,), S(-2, None)),
    ((6,), S(None, -2)), ((6,), S(-100, 100)), ((6,), S(5, 1)), ((6,), S(3, 3)), ((6,), S(None, None, 4)), ((6,), S(-1, -7, -3)),
    ((4, 5), (S(1, None), S(None, None, -2))), ((4, 5), (S(None, None, 3), 2)), ((4, 5), (-1, S(None, None, -1))),
    # None and Ellipsis
    ((3, 4), None), ((3, 4), (None, 1)), ((3, 4), (S(None), None, S(1, 3))), ((3, 4), (1, None, None)),
    ((2, 3, 4), Ellipsis), ((2, 3, 4), (Ellipsis, 1)), ((2, 3, 4), (0, Ellipsis)), ((2, 3, 4), (1, Ellipsis, S(None, None, -1))),
    ((2, 3, 4), (Ellipsis, None)), ((2, 3, 4), (None, Ellipsis, None, 2)),
    # 0-d results and 0-d sources
    ((), ()), ((), None), ((), Ellipsis), ((3,), (1, None)),
    # empty results
    ((3, 4), (S(2, 2), S(None))), ((0, 3), S(None)),
]


@pytest.mark.parametrize("shape,idx", GETITEM_CASES, ids=[f"{s}-{i!r}" for s, i in GETITEM_CASES])
def test_getitem_basic(shape, idx):
  check_getitem(shape, idx)


ADV = np.array
ADVANCED_CASES = [
    ((5,), ADV([0, 4, 1])),
    ((5,), ADV([-1, -5, 2])),  # negative tensor values wrap once
    ((5,), ADV([[0, 1], [2, 2]])),  # repeated picks accumulate gradients
    ((4, 5), ADV([3, 0])),
    ((4, 5), (S(None), ADV([4, 0, 1]))),
    ((4, 5), (ADV([0, 3]), ADV([1, 4]))),
    ((4, 5), (ADV([[0], [3]]), ADV([1, 2, 4]))),  # index tensors broadcast together
    ((3, 4, 5), (ADV([0, 2]), S(None), ADV([1, 3]))),  # non-adjacent: the index dims lead the result
    ((3, 4, 5), (1, ADV([0, 3]))),  # an int counts as basic: adjacent (torch/tinygrad)
    ((3, 4, 5), (Ellipsis, ADV([4, 0]))),
    ((3, 4, 5), (S(1, None), ADV([1, 1]), S(None, None, 2))),
    ((3, 4, 5), (None, ADV([2, 0]))),
    ((3, 4), ADV(1)),  # a 0-d index tensor drops the axis
]


@pytest.mark.parametrize("shape,idx", ADVANCED_CASES, ids=[f"{s}-{i!r}".replace("\n", "") for s, i in ADVANCED_CASES])
def test_getitem_tensor_index(shape, idx):
  check_getitem(shape, idx)


def test_getitem_int_tensor_source():
  x = Tensor([[1, 2, 3], [4, 5, 6]])
  compare_np("int getitem", x[1, ::-1], np.array([6, 5, 4], np.int32), dtypes.int32)
  compare_np("int tensor index", x[Tensor([1, 0]), 2], np.array([6, 3], np.int32), dtypes.int32)


def test_getitem_bool_source():
  x = Tensor([True, False, True])
  compare_np("bool getitem", x[1:], np.array([False, True]), dtypes.bool)


def test_getitem_of_view():
  data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  x = Tensor(data)
  compare_np("permuted view", x.permute(2, 0, 1)[1:, -1, ::2], data.transpose(2, 0, 1)[1:, -1, ::2], dtypes.float32)
  compare_np("chained getitem", x[1][::-1][:, 2], data[1][::-1][:, 2], dtypes.float32)


def test_getitem_list_index():
  # a Python list is an integer index tensor (tinygrad, numpy)
  data = np.arange(12, dtype=np.float32).reshape(3, 4)
  compare_np("list index", Tensor(data)[[2, 0]], data[[2, 0]], dtypes.float32)


def test_getitem_python_int_types():
  data = np.arange(6, dtype=np.float32)
  compare_np("numpy int", Tensor(data)[np.int64(2)], data[2], dtypes.float32)


# ---- __setitem__ ---------------------------------------------------------------------------------------

def _setitem_case(shape, idx, value):
  data = np.random.default_rng(1).uniform(-2, 2, size=shape).astype(np.float32)
  expected = data.copy()
  expected[idx] = value.numpy() if isinstance(value, Tensor) else value
  x = Tensor(data.copy())
  x[_to_bg(idx)] = value
  compare_np(f"x[{idx!r}] = ...", x, expected, dtypes.float32, atol=0, rtol=0)


@pytest.mark.parametrize("idx", [1, -1, S(1, 3), S(None, None, 2), (S(None), 0), (Ellipsis, S(1, None)), (0, S(None, None, -1))],
                         ids=repr)
def test_setitem_scalar(idx):
  _setitem_case((4, 3), idx, 7.5)


def test_setitem_tensor_value():
  _setitem_case((4, 3), S(1, 3), Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)))


def test_setitem_broadcast_value():
  _setitem_case((4, 3), S(None), Tensor(np.array([1.0, 2.0, 3.0], np.float32)))
  _setitem_case((4, 3), (S(None), 1), Tensor(np.array(9.0, np.float32)))


def test_setitem_tensor_index():
  _setitem_case((3, 4), (np.array([0, 2]), np.array([3, 1])), 9.0)
  _setitem_case((3, 4), np.array([2, 0]), -1.0)


# tensor indices beside whole dims (and ints): scattered per indexed dim, not into every flat position
_ADV = [
  ((10, 20, 30, 40, 50), (slice(None), np.array([5, 3, 7, 8]), slice(None), np.array([[[0], [1], [2]], [[3], [4], [5]]]),
                          slice(None))),  # tinygrad's test_setitem_advanced_indexing: 2**42 steps, a ValueError
  ((5, 6), (np.array([0, 2, 2, 4]),)),  # a duplicate: the last value wins
  ((5, 6), (np.array([0, 2, -1]), np.array([1, 5, 0]))),
  ((5, 6, 7), (slice(None), np.array([[0, 2], [1, 1]]), 3)),
  ((5, 6, 7), (2, slice(None), np.array([0, 6, -7]))),  # an int applies first (tinygrad's and torch's order)
  ((5, 6, 7), (Ellipsis, np.array([1, 2]))),
  ((5, 6, 7), (np.array([1, 2]), Ellipsis, np.array([0, 3]))),  # separated: the index dims go first
  ((5, 6, 7), (np.array([1, 2]), 0, np.array([0, 1]))),
  ((5, 6, 7), (0, np.array([[1], [2]]), np.array([0, 1, 5]))),
]


@pytest.mark.parametrize("shape,idx", _ADV, ids=[str(i) for i in range(len(_ADV))])
def test_setitem_tensor_indices_beside_whole_dims(shape, idx):
  import torch  # the oracle: numpy places the index dims differently when an int separates them
  rng = np.random.default_rng(5)
  ref = torch.zeros(shape, dtype=torch.int32)
  tidx = tuple(torch.tensor(i) if isinstance(i, np.ndarray) else i for i in idx)
  v = rng.integers(1, 2**20, tuple(ref[tidx].shape)).astype(np.int32)
  ref[tidx] = torch.tensor(v)
  t = Tensor.zeros(*shape, dtype=dtypes.int32).contiguous()
  t[_to_bg(idx)] = Tensor(v)
  np.testing.assert_equal(t.numpy(), ref.numpy())


def test_a_list_that_is_not_all_ints_is_a_tuple_of_indices():
  # tinygrad's and torch's reading, checked against torch (numpy >= 1.23 refuses the slices and
  # reads nested lists as one array); was an IndexError "not a rectangular array of ints"
  a = np.arange(20.0, dtype=np.float32).reshape(4, 5)
  t, ta = Tensor(a), torch.from_numpy(a)
  for idx in ([slice(None), [1, 3]], [[0, 2], slice(None)], [[0, 1], [1, 0]], [[0], [1, 2, 4]], [[3, 0]]):
    np.testing.assert_equal(t[idx].numpy(), ta[idx].numpy(), err_msg=str(idx))
  np.testing.assert_equal(t[[Tensor([3, 0]), Tensor([1, 1])]].numpy(), ta[[torch.tensor([3, 0]), torch.tensor([1, 1])]].numpy())
  np.testing.assert_equal(t[[Tensor([3, 0]), None]].numpy(), a[[3, 0], None])
  np.testing.assert_equal(t[[2, 0]].numpy(), a[[2, 0]])  # all ints: one array


def test_tensor_index_reads_one_row_per_index():
  # X[samples] was a one-hot sum over all 2048 rows for every output element (822M ops); it is
  # now one load per element at the sampled row
  from baregrad import GlobalCounters
  rng = np.random.default_rng(3)
  x = rng.integers(0, 256, size=(2048, 1, 28, 28), dtype=np.uint8)
  s = rng.integers(0, 2048, size=512).astype(np.int32)
  X, S = Tensor(x), Tensor(s)
  GlobalCounters.reset()
  got = X[S].numpy()
  assert GlobalCounters.global_ops < 512 * 784 * 13, GlobalCounters.global_ops
  np.testing.assert_equal(got, x[s])
  np.testing.assert_equal(X[S - 2048].numpy(), x[s])  # negative indices count from the end


def test_tensor_index_into_a_huge_broadcast():
  # made a host arange of 2**31 elements (16 GiB) and never finished
  big = Tensor([1]).expand(2**31 + 3)
  np.testing.assert_equal(big[Tensor([0, 2**31 + 2])].numpy(), [1, 1])


def test_setitem_2d_tensor_index_with_a_computed_value():
  # a scatter (a reduction) written through the view aborted the scheduler's write-view check
  t = Tensor.zeros(5, dtype=dtypes.int32).contiguous()
  v = Tensor.arange(4).reshape(2, 2).contiguous()
  t[Tensor([[0, 3], [4, 1]])] = v
  ref = np.zeros(5, np.int32)
  ref[np.array([[0, 3], [4, 1]])] = np.arange(4).reshape(2, 2)
  compare_np("setitem 2-d index", t, ref, dtypes.int32)
  t[1:4] = Tensor([1, 2, 3, 4, 5, 6]).reshape(3, 2).sum(1)  # a reduction into a slice
  ref[1:4] = [3, 7, 11]
  compare_np("setitem of a sum", t, ref, dtypes.int32)


def test_setitem_int_dtype():
  x = Tensor([1, 2, 3, 4])
  x[1:3] = 0
  compare_np("int setitem", x, np.array([1, 0, 0, 4], np.int32), dtypes.int32)


def test_setitem_visible_to_views_read_later():
  x = Tensor(np.zeros((2, 3), np.float32))
  x[0, 1] = 5.0
  x[1] = Tensor([1.0, 2.0, 3.0])
  compare_np("after setitem", x.sum(axis=0), np.array([1.0, 7.0, 3.0], np.float32), dtypes.float32)


def test_int_index_of_a_padded_tensor_reads_the_padding():
  # t[1, 0] of a padded tensor read the buffer's element 0 (a 0-d view lost the mask): 1.0, not 0
  x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
  t = Tensor(x).pad(((0, 0), (3, 0)))
  ref = np.pad(x, ((0, 0), (3, 0)))
  for i in range(2):
    for j in range(5): assert t[i, j].item() == ref[i, j], (i, j)
  assert t[1:2, 0:1].reshape(()).item() == 0.0
  assert (t[1, 0] + 5).item() == 5.0


def test_setitem_into_lazy_values_carries_gradients():
  # setitem into lazy work raised NotImplementedError with requires_grad=True and cut the graph
  # without it (x.grad stayed None); torch is the oracle (in-place ops on non-leaf tensors)
  import torch
  w = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
  for requires_grad in (True, None):
    x, tx = Tensor([1.0, 2.0, 3.0, 4.0], requires_grad=requires_grad), torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    z, tz = x * 2, tx * 2
    z[:2] = Tensor([10.0, 20.0])
    tz[:2] = torch.tensor([10.0, 20.0])
    (z * Tensor(w[:4])).sum().backward()
    (tz * torch.tensor(w[:4])).sum().backward()
    np.testing.assert_allclose(z.numpy(), tz.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
  a, b = Tensor(np.ones(4, np.float32)), Tensor(np.full(4, 2.0, np.float32))
  ta, tb = torch.ones(4, requires_grad=True), torch.full((4,), 2.0, requires_grad=True)
  z, tz = Tensor.zeros(6), torch.zeros(6)
  z[:4], tz[:4] = a, ta
  z[2:], tz[2:] = b, tb
  (z * Tensor(w)).sum().backward()
  (tz * torch.tensor(w)).sum().backward()
  np.testing.assert_allclose(z.numpy(), tz.detach().numpy())
  np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
  np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())


def test_setitem_tensor_indices_into_lazy_values_carries_gradients():
  import torch
  rng = np.random.default_rng(7)
  xv, vv, w = (rng.standard_normal(s).astype(np.float32) for s in [(4, 5, 3), (2, 4, 3), (4, 5, 3)])
  x, v = Tensor(xv, requires_grad=True), Tensor(vv, requires_grad=True)
  tx, tv = torch.tensor(xv, requires_grad=True), torch.tensor(vv, requires_grad=True)
  z, tz = x * 2, tx * 2
  z[:, Tensor([3, 0])] = v.permute(1, 0, 2)  # into dims 1 (a duplicate-free index)
  tz[:, torch.tensor([3, 0])] = tv.permute(1, 0, 2)
  (z * Tensor(w)).sum().backward()
  (tz * torch.tensor(w)).sum().backward()
  np.testing.assert_allclose(z.numpy(), tz.detach().numpy(), rtol=1e-6)
  np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
  np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-6)


def test_setitem_into_lazy_values_seen_by_their_views():
  # a view taken before the setitem shares the value: the write goes to storage, as torch's
  import torch
  x = Tensor([1.0, 2.0, 3.0, 4.0])
  z = x * 2
  tail = z[1:]
  z[1] = 100.0
  tz = torch.tensor([1.0, 2.0, 3.0, 4.0]) * 2
  ttail = tz[1:]
  tz[1] = 100.0
  np.testing.assert_allclose(tail.numpy(), ttail.numpy())
  np.testing.assert_allclose(z.numpy(), tz.numpy())


def test_ellipsis_alone_is_the_tensor_itself():
  t = Tensor([[1, 2], [3, 4]])
  assert t[...] is t  # tinygrad's identity (torch returns a view)


@pytest.mark.parametrize("op", ["gather", "scatter", "scatter_reduce"])
def test_a_non_integer_index_is_a_runtime_and_type_error(op):
  # torch and tinygrad raise RuntimeError; baregrad's dtype errors are TypeError too
  t, idx = Tensor([[1.0, 2.0], [3.0, 4.0]]), Tensor([[0, 1], [1, 0]]).cast(dtypes.bool)
  call = {"gather": lambda: t.gather(0, idx), "scatter": lambda: t.scatter(0, idx, t),
          "scatter_reduce": lambda: t.scatter_reduce(0, idx, t, "sum")}[op]
  for kind in (RuntimeError, TypeError):
    with pytest.raises(kind, match=f"\\[{op}\\] index must be an integer tensor"): call()
  with pytest.raises(RuntimeError): getattr(torch.ones(2, 2), op)(0, torch.zeros(2, 2, dtype=torch.bool), *(() if op == "gather" else (torch.ones(2, 2),) + (("sum",) if op == "scatter_reduce" else ())))
