# DISK tensors (baregrad/disk.py): a memory-mapped file as tinygrad's DISK device gives it. Oracles:
# the file's bytes read back with open() and decoded by numpy / struct.
import pathlib
import pickle
import struct

import numpy as np
import pytest

from baregrad import Tensor, dtypes
from baregrad.nn.state import safe_load, safe_save


@pytest.fixture
def tmp(tmp_path):
  return lambda name: str(tmp_path / name)


def test_path_is_the_files_bytes(tmp):
  p = pathlib.Path(tmp("a.bin"))
  p.write_bytes(bytes(range(256)))
  t = Tensor(p)
  assert t.shape == (256,) and t.dtype == dtypes.uint8 and t.device == f"DISK:{p}"
  assert t[16:19].tolist() == [16, 17, 18]
  np.testing.assert_equal(t.numpy(), np.arange(256, dtype=np.uint8))
  on_cpu = Tensor(p, device="CPU")
  assert on_cpu.device == "CPU" and (on_cpu + 1).numpy()[255] == 0  # uint8 wraps on the compute device
  with pytest.raises(FileNotFoundError, match="no file"): Tensor(pathlib.Path(tmp("missing")))
  pathlib.Path(tmp("empty")).touch()
  assert Tensor(pathlib.Path(tmp("empty"))).shape == (0,)


def test_empty_maps_creates_and_extends(tmp):
  t = Tensor.empty(4, 8, device=f"disk:{tmp('e.bin')}", dtype=dtypes.int16)
  assert t.shape == (4, 8) and pathlib.Path(tmp("e.bin")).stat().st_size == 64
  pathlib.Path(tmp("r.bin")).write_bytes(bytes(range(256)) * 2)
  u = Tensor.empty(16, 32, device=f"disk:{tmp('r.bin')}", dtype=dtypes.uint8)
  want = np.frombuffer(bytes(range(256)) * 2, np.uint8).reshape(16, 32)
  np.testing.assert_equal(u[1].to("CPU").numpy(), want[1])
  # bitcast before or after indexing reads the same little-endian uint16s
  np.testing.assert_equal(u[1].bitcast(dtypes.uint16).numpy(), want[1].view(np.uint16))
  np.testing.assert_equal(u.bitcast(dtypes.uint16)[1].to("CPU").numpy(), want[1].view(np.uint16))
  np.testing.assert_equal(u.reshape(8, 64)[3, 5:9].numpy(), want.reshape(8, 64)[3, 5:9])


def test_to_disk_writes_the_bytes(tmp):
  Tensor.ones(10, 10).contiguous().to(f"disk:{tmp('ones')}").realize()
  assert pathlib.Path(tmp("ones")).read_bytes() == struct.pack("<f", 1.0) * 100
  x = np.random.default_rng(0).standard_normal(30).astype(np.float32)
  d = Tensor(x).to(f"disk:{tmp('x')}")
  np.testing.assert_equal(d[10:20].to("CPU").numpy(), x[10:20])
  np.testing.assert_equal(np.frombuffer(pathlib.Path(tmp("x")).read_bytes(), np.float32), x)
  b = Tensor([1.5, -2.25, 384.0], dtype=dtypes.bfloat16).to(f"disk:{tmp('bf')}")  # exact in bfloat16
  assert pathlib.Path(tmp("bf")).read_bytes() == b"".join(struct.pack("<f", v)[2:] for v in (1.5, -2.25, 384.0))
  np.testing.assert_equal(b.numpy(), [1.5, -2.25, 384.0])


def test_writes_go_to_the_file(tmp):
  d = Tensor([[1], [2]]).to(f"disk:{tmp('s')}")
  d[1] = [3]
  assert d.tolist() == [[1], [3]]
  assert np.frombuffer(pathlib.Path(tmp("s")).read_bytes(), np.int32).tolist() == [1, 3]
  t = Tensor.empty(16, device=f"disk:{tmp('h')}", dtype=dtypes.uint8)
  t[0:8].bitcast(dtypes.int64).assign([12345])
  assert int.from_bytes(t[0:8].data(), "little") == 12345
  t[8:16].bitcast(dtypes.float32).assign(Tensor([1.0, 2.5], device="CPU"))
  assert struct.unpack("<2f", pathlib.Path(tmp("h")).read_bytes()[8:]) == (1.0, 2.5)
  i = Tensor.empty(10, device=f"disk:{tmp('i')}", dtype=dtypes.int64)
  for k in range(5): i[2 * k:2 * k + 2].assign(np.array([3, 3]))
  np.testing.assert_equal(i.numpy(), [3] * 10)
  c = Tensor.empty(4, device=f"disk:{tmp('c')}", dtype=dtypes.int32)
  c.assign(Tensor.full((4,), 42, dtype=dtypes.int32))
  np.testing.assert_equal(c.numpy(), [42] * 4)
  c[1:3].assign(7)  # a scalar broadcasts
  np.testing.assert_equal(c.numpy(), [42, 7, 7, 42])
  with pytest.raises(RuntimeError, match=r"\[assign\] a dtypes.float value into a dtypes.int tensor"): c.assign(Tensor([1.5, 2, 3, 4]))


def test_non_contiguous_and_advanced_access_are_errors(tmp):
  d = Tensor([0, 1, 2, 3, 4, 5]).to(f"disk:{tmp('n')}")
  with pytest.raises(RuntimeError, match="non-contiguous view is not supported"): d[::2].tolist()
  with pytest.raises(RuntimeError, match="non-contiguous view is not supported"): d.reshape(2, 3).T.numpy()
  with pytest.raises(RuntimeError, match="non-contiguous view is not supported"): d[::2] = Tensor([10, 20, 30])
  with pytest.raises(RuntimeError, match="advanced indexing"): d[Tensor([0, 2])] = 9
  with pytest.raises(RuntimeError, match=r"\[bitcast\] cannot bitcast \(3,\)"): Tensor([1, 2, 3], dtype=dtypes.uint8).to(f"disk:{tmp('b3')}").bitcast(dtypes.float16)


@pytest.mark.parametrize("op", [lambda t: t + 1, lambda t: t.cast(dtypes.float16), lambda t: Tensor.cat(t[0:2], t[2:4]), lambda t: t.sum()], ids=["add", "cast", "cat", "sum"])
def test_compute_on_disk_is_a_clear_error(tmp, op):
  d = Tensor([1, 2, 3, 4], dtype=dtypes.int16).to(f"disk:{tmp('k')}")
  with pytest.raises(RuntimeError, match=r"DISK:.* do not compute: move one to a compute device first") as e: op(d)
  assert isinstance(e.value, (NotImplementedError, AssertionError))  # what tinygrad raises for these
  np.testing.assert_equal((d.to("CPU") + 1).numpy(), [2, 3, 4, 5])
  with pytest.raises(TypeError, match="pickle"): pickle.dumps(d)


def test_safe_load_of_a_disk_tensor(tmp):
  safe_save({"w": Tensor([[1.0, 2.0], [3.0, 4.0]])}, tmp("m.safetensors"))
  got = safe_load(Tensor(pathlib.Path(tmp("m.safetensors"))))
  np.testing.assert_equal(got["w"].numpy(), [[1.0, 2.0], [3.0, 4.0]])

def test_safe_load_of_bytes_in_a_tensor(tmp):
  """A file's bytes in a 1-D uint8 tensor load as the file does: a view of a DISK tensor (the
  file at an offset inside another one), and bytes on a compute device. Oracle: the values saved."""
  w = np.arange(6, dtype=np.float32).reshape(2, 3)
  safe_save({"w": Tensor(w), "b": Tensor([7, 8], dtype=dtypes.int16)}, tmp("m.safetensors"))
  raw = pathlib.Path(tmp("m.safetensors")).read_bytes()
  pathlib.Path(tmp("packed")).write_bytes(b"0123456789abcdef" + raw + b"tail")
  for t in (Tensor(pathlib.Path(tmp("packed")))[16:16 + len(raw)], Tensor(raw, dtype=dtypes.uint8)):
    got = safe_load(t)
    np.testing.assert_equal(got["w"].numpy(), w)
    np.testing.assert_equal(got["b"].numpy(), [7, 8])
  with pytest.raises(TypeError, match=r"\[safe_load\] a Tensor given to safe_load must hold a file's bytes \(1-D uint8\), got \(2, 3\) dtypes\.float"):
    safe_load(Tensor(w))
  with pytest.raises(RuntimeError, match=r"\[safe_load\] <\S+ tensor of 20 bytes>: header length \d+ exceeds the 12 bytes"):
    safe_load(Tensor(raw[:20], dtype=dtypes.uint8))
