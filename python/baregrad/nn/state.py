"""Model state: state dicts found by walking Python objects, safetensors files, tar and zip
archives, PyTorch checkpoints and GGUF files."""
from __future__ import annotations

import functools
import io
import os
import pathlib
import pickle
import re
import struct
import tarfile
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, BinaryIO, Callable, TypeVar

import numpy as np

import _baregrad as _C
from baregrad.dtype import dtypes
from baregrad.tensor import Tensor

T = TypeVar("T")


def get_state_dict(obj, prefix: str = "", tensor_type=Tensor, _path: frozenset = frozenset()) -> dict[str, Tensor]:
  """Every tensor reachable from `obj` through attributes, lists, tuples and dicts, named by
  its dotted path ("l1.weight", "layers.0.bias"). An object that contains itself is walked once
  on each path (a cycle ends there)."""
  if isinstance(obj, tensor_type): return {prefix.strip("."): obj}
  if id(obj) in _path: return {}
  _path = _path | {id(obj)}
  if hasattr(obj, "_asdict"): return get_state_dict(obj._asdict(), prefix, tensor_type, _path)  # namedtuple
  if isinstance(obj, OrderedDict): return get_state_dict(dict(obj), prefix, tensor_type, _path)
  if hasattr(obj, "__dict__"): return get_state_dict(obj.__dict__, prefix, tensor_type, _path)
  state_dict: dict[str, Tensor] = {}
  if isinstance(obj, (list, tuple)):
    for i, x in enumerate(obj): state_dict.update(get_state_dict(x, f"{prefix}{i}.", tensor_type, _path))
  elif isinstance(obj, dict):
    for k, v in obj.items(): state_dict.update(get_state_dict(v, f"{prefix}{k}.", tensor_type, _path))
  return state_dict


def get_parameters(obj) -> list[Tensor]:
  """The tensors of get_state_dict(obj), running statistics included (optimizers skip those
  that do not require grad)."""
  return list(get_state_dict(obj).values())


def load_state_dict(model, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = True, consume: bool = False,
                    realize: bool = True) -> list[Tensor]:
  """Assigns state_dict[name] into each tensor of get_state_dict(model), in place (optimizers
  holding them see the new values). KeyError for a missing key when strict, ValueError for a
  shape mismatch; values are moved to the tensor's device and cast to its dtype."""
  if not isinstance(state_dict, Mapping):
    raise TypeError(f"[load_state_dict] state_dict must be a dict of Tensors, got {type(state_dict).__name__}")
  entries, loaded, ret, sharded = [], {}, [], []
  for k, v in get_state_dict(model).items():
    if k not in state_dict:
      if strict: raise KeyError(f"[load_state_dict] missing key {k!r} in state_dict")
      continue
    src = state_dict[k]
    if not isinstance(src, Tensor):
      try: src = Tensor(src)
      except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"[load_state_dict] '{k}' must be a Tensor (or array-like), got {type(src).__name__}") from e
    if v.shape != src.shape:
      if {(), (1,)} == {src.shape, v.shape}: src = src.reshape(v.shape)
      else: raise ValueError(f"[load_state_dict] Shape mismatch in layer `{k}`: Expected shape {v.shape}, but found {src.shape} in state dict.")
    if isinstance(v.device, tuple):  # a sharded model: the value sharded as the tensor (gathered first when on other shards)
      if isinstance(src.device, tuple) and (src.device, src._c.axis) != (v.device, v._c.axis): src = src.to(v.device[0])
      sharded.append((v, src.cast(v.dtype).shard_like(v)))
    else:
      src = src.to(v.device).cast(v.dtype)
      if not any(v._c.same(c) for _, c in entries):  # a tied tensor is loaded once
        entries.append((k, v._c))
        loaded[k] = src._c
    if consume: del state_dict[k]
    ret.append(v)
  _C.load_state_dict(entries, loaded, False)
  for v, src in sharded: v.assign(src)
  return ret


def safe_save(tensors: dict[str, Tensor], fn: str | pathlib.Path, metadata: dict[str, Any] | None = None):
  """Writes `tensors` to a .safetensors file (atomically); metadata values become strings."""
  if not isinstance(tensors, Mapping): raise TypeError(f"[safe_save] tensors must be a dict of Tensors, got {type(tensors).__name__}")
  for k, v in tensors.items():
    if not isinstance(k, str): raise TypeError(f"[safe_save] tensor names must be str, got {type(k).__name__} {k!r}")
    if not isinstance(v, Tensor): raise TypeError(f"[safe_save] {k!r} must be a Tensor, got {type(v).__name__}")
  if metadata is not None and not isinstance(metadata, Mapping):
    raise TypeError(f"[safe_save] metadata must be a dict, got {type(metadata).__name__}")
  meta = {str(k): str(v) for k, v in (metadata or {}).items()}
  _C.safe_save({k: v._c for k, v in tensors.items()}, str(fn), meta)


def safe_load(fn: str | pathlib.Path | Tensor, device: str | None = None) -> dict[str, Tensor]:
  """Every tensor of a .safetensors file, on `device` (the default device when None). `fn` is a
  path, or a 1-D uint8 Tensor holding a file's bytes on any device (a DISK tensor or a view of
  one, or bytes fetched into memory); the tensors are copies (tinygrad's are views of it)."""
  from baregrad.device import canonicalize_device
  from baregrad.tensor import DiskTensor
  if isinstance(fn, DiskTensor) and fn.dtype == dtypes.uint8 and fn.shape == (pathlib.Path(fn._path).stat().st_size,): fn = fn._path
  if isinstance(fn, Tensor):
    if fn.ndim != 1 or fn.dtype != dtypes.uint8:
      raise TypeError(f"[safe_load] a Tensor given to safe_load must hold a file's bytes (1-D uint8), got {fn.shape} {fn.dtype}")
    raw = fn.numpy().tobytes()
    return {k: Tensor._wrap(c) for k, c in _C.safe_load_bytes(f"<{fn.device} tensor of {len(raw)} bytes>", raw, canonicalize_device(device)).items()}
  return {k: Tensor._wrap(c) for k, c in _C.safe_load(str(fn), canonicalize_device(device)).items()}


def safe_load_metadata(fn: str | pathlib.Path) -> dict[str, str]:
  """The "__metadata__" strings of a .safetensors file (baregrad's; tinygrad returns the header)."""
  return _C.safe_load_metadata(str(fn))


# safetensors dtype names
safe_dtypes = {"F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2, "BOOL": dtypes.bool, "I8": dtypes.int8, "U8": dtypes.uint8, "I16": dtypes.int16, "U16": dtypes.uint16, "I32": dtypes.int32,
               "U32": dtypes.uint32, "I64": dtypes.int64, "U64": dtypes.uint64, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
               "F32": dtypes.float32, "F64": dtypes.float64}
inverse_safe_dtypes = {v: k for k, v in safe_dtypes.items()}


class TensorIO(io.RawIOBase, BinaryIO):
  """A read-only, seekable file over a 1-D uint8 Tensor (its bytes as they are when opened)."""
  def __init__(self, t: Tensor):
    if not isinstance(t, Tensor) or t.ndim != 1 or t.dtype != dtypes.uint8:
      raise ValueError(f"[TensorIO] the Tensor must be 1-D uint8, got {getattr(t, 'shape', type(t).__name__)} {getattr(t, 'dtype', '')}")
    super().__init__()
    self._data, self._position = t.numpy().tobytes(), 0

  def readable(self) -> bool: return True
  def seekable(self) -> bool: return True
  def readinto(self, buffer: Any) -> int:
    """Copies the next bytes into `buffer`; the count (0 at the end)."""
    data = self._data[self._position:self._position + len(buffer)]
    buffer[:len(data)] = data
    self._position += len(data)
    return len(data)

  def seek(self, offset: int, whence: int = 0) -> int:
    """Moves to `offset` (from the start, the current position or the end), clamped to the data."""
    self._position = min(len(self._data), max(0, [offset, self._position + offset, len(self._data) + offset][whence]))
    return self._position

  def tell(self) -> int: return self._position
  def write(self, s: Any): raise io.UnsupportedOperation("[TensorIO] write is not supported")
  def writelines(self, lines: Any): raise io.UnsupportedOperation("[TensorIO] writelines is not supported")
  def __enter__(self): return self


def accept_filename(func: Callable[[Tensor], T]) -> Callable[[Tensor | str | pathlib.Path], T]:
  """`func` of a Tensor, taking a path too: the file's bytes as a uint8 Tensor (tinygrad gives a DISK tensor)."""
  @functools.wraps(func)
  def wrapper(fn: Tensor | str | pathlib.Path) -> T: return func(fn if isinstance(fn, Tensor) else Tensor(pathlib.Path(fn).read_bytes()))
  return wrapper


# ---- archives and PyTorch checkpoints, read without torch ----------------------------------------------------

def _source(op: str, fn) -> tuple[bytes, str]:
  """The bytes of `fn` (a path, or a 1-D uint8 Tensor as tinygrad's accept_filename takes) and a
  name for errors."""
  if isinstance(fn, Tensor):
    if fn.ndim != 1 or fn.dtype != dtypes.uint8:
      raise ValueError(f"[{op}] a Tensor source must be 1-D uint8, got shape {fn.shape} {fn.dtype}")
    return fn.numpy().tobytes(), f"<Tensor of {fn.shape[0]} bytes>"
  if not isinstance(fn, (str, os.PathLike)): raise TypeError(f"[{op}] expected a path or a uint8 Tensor, got {type(fn).__name__}")
  return pathlib.Path(fn).read_bytes(), str(fn)


class TarArchiveError(ValueError, tarfile.ReadError):
  """An unreadable tar archive: a ValueError naming the file, and the tarfile.ReadError tinygrad's tar_extract raises."""


def tar_extract(t: Tensor | str | pathlib.Path) -> dict[str, Tensor]:
  """The regular files of a tar archive (a path or uint8 Tensor), name -> uint8 Tensor of its bytes."""
  raw, name = _source("tar_extract", t)
  try:
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r") as tar:
      members = [m for m in tar if m.isreg()]
  except (tarfile.TarError, EOFError, OSError, zlib.error, ValueError) as e:
    raise TarArchiveError(f"[tar_extract] {name}: not a readable tar archive ({type(e).__name__}: {e})") from e
  out: dict[str, Tensor] = {}
  for m in members:
    if m.offset_data + m.size > len(raw):
      raise TarArchiveError(f"[tar_extract] {name}: {m.name!r} needs bytes {m.offset_data}..{m.offset_data + m.size} of {len(raw)} (truncated)")
    out[m.name] = Tensor(raw[m.offset_data:m.offset_data + m.size])
  return out


def zip_extract(t: Tensor | str | pathlib.Path) -> dict[str, Tensor]:
  """Every file of a zip archive (a path or uint8 Tensor), name -> uint8 Tensor of its
  uncompressed bytes (CRC checked)."""
  raw, name = _source("zip_extract", t)
  try:
    with zipfile.ZipFile(io.BytesIO(raw), "r") as z: return {zi.filename: Tensor(z.read(zi)) for zi in z.infolist()}
  except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, zlib.error, NotImplementedError, ValueError) as e:
    raise ValueError(f"[zip_extract] {name}: not a readable zip archive ({type(e).__name__}: {e})") from e


# torch storage classes -> numpy dtypes (bfloat16 read as uint16 and bitcast)
_TORCH_STORAGES = {"FloatStorage": "f4", "DoubleStorage": "f8", "HalfStorage": "f2", "BFloat16Storage": "u2", "LongStorage": "i8",
                   "IntStorage": "i4", "ShortStorage": "i2", "CharStorage": "i1", "ByteStorage": "u1", "BoolStorage": "?",
                   "UntypedStorage": "u1"}
_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


class _StorageType:
  """What the unpickler gives for torch.<Name>Storage."""
  def __init__(self, name: str): self.name, self.itemsize = name, np.dtype(_TORCH_STORAGES[name]).itemsize


class _Storage:
  """One storage of a checkpoint: its element type and, once read, its flat numpy array."""
  def __init__(self, stype: _StorageType, numel: int): self.stype, self.numel, self.arr = stype, numel, None


class _Lazy:
  """A tensor to build from a storage once every storage is read (the legacy format stores them after the pickle)."""
  def __init__(self, storage, offset, size, stride): self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


class _Dummy:
  """Any object of a class the checkpoint names and torch_load does not know: inert, its arguments and state kept."""
  def __new__(cls, *args, **kwargs): return super().__new__(cls)
  def __init__(self, *args, **kwargs): self.args = args
  def __setstate__(self, state): self.state = state
  def __call__(self, *args, **kwargs): return _Dummy(*args)


class _OldParameter:
  """torch < 0.4's pickled nn.Parameter: its state's first item is the tensor (unwrapped by _build)."""
  def __setstate__(self, state): self.data = state[0]


def _rebuild_tensor(storage, storage_offset, size, stride, *_args, **_kwargs): return _Lazy(storage, storage_offset, size, stride)
def _rebuild_parameter(data, *_args): return data
def _rebuild_from_type(func, _new_type, args, _state): return func(*args)
def _codecs_encode(s, encoding="latin1"): return s.encode("latin1" if encoding in ("latin1", "latin-1") else "utf-8")


_TORCH_GLOBALS = {"_rebuild_tensor": _rebuild_tensor, "_rebuild_tensor_v2": _rebuild_tensor, "_rebuild_parameter": _rebuild_parameter,
                  "_rebuild_parameter_with_state": _rebuild_parameter, "_rebuild_from_type_v2": _rebuild_from_type, "Size": tuple,
                  "Parameter": _OldParameter}
_NUMPY_GLOBALS = {"_reconstruct", "scalar", "dtype", "ndarray"}


class _TorchUnpickler(pickle.Unpickler):
  """Maps torch's rebuild functions and storage classes to the ones above; nothing of torch is
  imported, and any other class becomes an inert _Dummy (as tinygrad's), so loading runs no code."""
  def __init__(self, f, persistent_load):
    super().__init__(f)
    self._persistent = persistent_load

  def find_class(self, module: str, name: str):
    root = module.split(".")[0]
    if module == "collections" and name == "OrderedDict": return OrderedDict
    if root == "torch" and name in _TORCH_STORAGES: return _StorageType(name)
    if root == "torch" and name in _TORCH_GLOBALS: return _TORCH_GLOBALS[name]
    if module == "_codecs" and name == "encode": return _codecs_encode
    if root == "numpy" and module.endswith("multiarray") and name in _NUMPY_GLOBALS or module == "numpy" and name in _NUMPY_GLOBALS:
      return super().find_class(module, name)
    return _Dummy

  def persistent_load(self, pid): return self._persistent(pid)


def _storage_of(pid, storages: dict, name: str) -> _Storage:
  if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage" or not isinstance(pid[1], _StorageType):
    raise ValueError(f"[torch_load] {name}: unsupported persistent id {pid!r:.100} (storage type not one of {', '.join(_TORCH_STORAGES)})")
  key, numel = str(pid[2]), int(pid[4])
  if key not in storages: storages[key] = _Storage(pid[1], numel)
  return storages[key]


def _build(obj, name: str):
  """obj with every _Lazy in its dicts, lists and tuples replaced by a Tensor of its view."""
  if isinstance(obj, _Lazy):
    st = obj.storage
    if not isinstance(st, _Storage) or st.arr is None:
      raise ValueError(f"[torch_load] {name}: a tensor refers to a storage the file does not hold")
    size, stride, offset = tuple(int(s) for s in obj.size), tuple(int(s) for s in obj.stride), int(obj.offset)
    if len(size) != len(stride) or offset < 0 or any(s < 0 for s in size + stride):
      raise ValueError(f"[torch_load] {name}: bad tensor view size={size} stride={stride} offset={offset}")
    n, arr = 1, st.arr
    for s in size: n *= s
    if n == 0: view = np.empty(size, arr.dtype)
    else:
      last = offset + sum((s - 1) * d for s, d in zip(size, stride))
      if last >= arr.size: raise ValueError(f"[torch_load] {name}: a tensor view size={size} stride={stride} offset={offset} "
                                            f"reaches element {last} of a storage of {arr.size}")
      view = np.lib.stride_tricks.as_strided(arr[offset:], size, tuple(d * arr.itemsize for d in stride), writeable=False)
    view = view.astype(arr.dtype.newbyteorder("="), order="C")  # a copy (ascontiguousarray would make 0-d 1-d)
    return Tensor(view).bitcast(dtypes.bfloat16) if st.stype.name == "BFloat16Storage" else Tensor(view)
  if isinstance(obj, _OldParameter): return _build(getattr(obj, "data", None), name)
  if isinstance(obj, dict):
    out = type(obj)() if isinstance(obj, OrderedDict) else {}
    for k, v in obj.items(): out[k] = _build(v, name)
    return out
  if isinstance(obj, list): return [_build(v, name) for v in obj]
  if isinstance(obj, tuple) and not hasattr(obj, "_fields"): return tuple(_build(v, name) for v in obj)
  return obj


def _fill(st: _Storage, data: bytes, key: str, name: str, big: bool):
  need = st.numel * st.stype.itemsize
  if len(data) < need:
    raise ValueError(f"[torch_load] {name}: storage {key!r} holds {len(data)} bytes, {st.numel} elements of {st.stype.name} need {need}")
  st.arr = np.frombuffer(data, np.dtype(_TORCH_STORAGES[st.stype.name]).newbyteorder(">" if big else "<"), count=st.numel)


def _torch_load_tar(raw: bytes, name: str):
  """torch < 0.4's tar format: "storages" (each pickled (key, location, type), int64 numel, data), "tensors"
  (each pickled (key, storage key, type), int32 ndim, 4 bytes, int64 sizes, strides, offset) and "pickle"."""
  with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
    files = {m.name: tar.extractfile(m).read() for m in tar if m.isreg() and m.name in ("storages", "tensors", "pickle")}
  if len(files) != 3: raise ValueError(f"[torch_load] {name}: a tar file without storages, tensors and pickle is not a torch checkpoint")
  def no_pid(pid): raise pickle.UnpicklingError(f"persistent id {pid!r:.60} in the storage list")
  def read(f, n: int) -> bytes:
    if len(b := f.read(n)) < n: raise ValueError(f"[torch_load] {name}: truncated storages or tensors record")
    return b
  storages: dict[str, _Storage] = {}
  f = io.BytesIO(files["storages"])
  for _ in range(int(_TorchUnpickler(f, no_pid).load())):
    key, _location, stype = _TorchUnpickler(f, no_pid).load()
    if not isinstance(stype, _StorageType): raise ValueError(f"[torch_load] {name}: storage {key!r} has an unsupported type")
    st = storages[str(key)] = _Storage(stype, struct.unpack("<q", read(f, 8))[0])
    _fill(st, read(f, st.numel * stype.itemsize), str(key), name, False)
  tensors: dict[str, _Lazy] = {}
  f = io.BytesIO(files["tensors"])
  for _ in range(int(_TorchUnpickler(f, no_pid).load())):
    key, storage_id, _ttype = _TorchUnpickler(f, no_pid).load()
    ndim = struct.unpack("<i", read(f, 4))[0]
    read(f, 4)
    size, stride = struct.unpack(f"<{ndim}q", read(f, 8 * ndim)), struct.unpack(f"<{ndim}q", read(f, 8 * ndim))
    tensors[str(key)] = _Lazy(storages[str(storage_id)], struct.unpack("<q", read(f, 8))[0], size, stride)
  return _build(_TorchUnpickler(io.BytesIO(files["pickle"]), lambda pid: _Dummy(pid) if isinstance(pid, tuple) else tensors[str(pid)]).load(), name)


def _torch_load(raw: bytes, name: str):
  storages: dict[str, _Storage] = {}
  if zipfile.is_zipfile(io.BytesIO(raw)):
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
      names = z.namelist()
      if (pkl := next((n for n in names if n.endswith("/data.pkl")), None)) is None:
        raise ValueError(f"[torch_load] {name}: a zip file without <archive>/data.pkl is not a torch checkpoint")
      base = pkl[:-len("/data.pkl")]
      big = f"{base}/byteorder" in names and z.read(f"{base}/byteorder").strip() == b"big"
      obj = _TorchUnpickler(io.BytesIO(z.read(pkl)), lambda pid: _storage_of(pid, storages, name)).load()
      for key, st in storages.items():
        if f"{base}/data/{key}" not in names: raise ValueError(f"[torch_load] {name}: storage {base}/data/{key} is missing")
        _fill(st, z.read(f"{base}/data/{key}"), key, name, big)
    return _build(obj, name)
  f = io.BytesIO(raw)
  def no_pid(pid): raise pickle.UnpicklingError(f"persistent id {pid!r:.60} before the checkpoint's data")
  try: magic = _TorchUnpickler(f, no_pid).load()
  except (pickle.UnpicklingError, EOFError, ValueError, IndexError, KeyError, TypeError) as e:
    if tarfile.is_tarfile(io.BytesIO(raw)): return _torch_load_tar(raw, name)
    raise ValueError(f"[torch_load] {name}: neither a zip nor a legacy torch checkpoint ({type(e).__name__}: {e})") from e
  if magic != _LEGACY_MAGIC:
    raise ValueError(f"[torch_load] {name}: neither a zip nor a legacy torch checkpoint (magic number {magic!r:.40})")
  if (version := _TorchUnpickler(f, no_pid).load()) != 1001:
    raise ValueError(f"[torch_load] {name}: legacy protocol version {version!r:.40}, expected 1001")
  sys_info = _TorchUnpickler(f, no_pid).load()
  big = isinstance(sys_info, dict) and sys_info.get("little_endian") is False
  def legacy_pid(pid):
    st = _storage_of(pid, storages, name)
    if len(pid) > 5 and pid[5] is not None: raise ValueError(f"[torch_load] {name}: legacy storage views are not supported")
    return st
  obj = _TorchUnpickler(f, legacy_pid).load()
  keys = _TorchUnpickler(f, no_pid).load()
  if not isinstance(keys, list):
    raise ValueError(f"[torch_load] {name}: expected the list of storage keys after the pickle, got {type(keys).__name__}")
  for key in keys:
    if (st := storages.get(str(key))) is None: raise ValueError(f"[torch_load] {name}: storage {key!r} is not used by the pickle")
    hdr = f.read(8)
    if len(hdr) < 8: raise ValueError(f"[torch_load] {name}: truncated before storage {key!r}")
    numel, pos = struct.unpack("<q", hdr)[0], f.tell()
    if numel != st.numel: raise ValueError(f"[torch_load] {name}: storage {key!r} holds {numel} elements, the pickle says {st.numel}")
    _fill(st, raw[pos:pos + numel * st.stype.itemsize], str(key), name, big)
    f.seek(pos + numel * st.stype.itemsize)
  return _build(obj, name)


def torch_load(t: Tensor | str | pathlib.Path):
  """A PyTorch checkpoint (torch.save's zip format, the legacy pickle one or torch < 0.4's tar) as saved: state dicts
  (nested dicts, OrderedDicts, lists) with each tensor a Tensor on the default device, views
  (transposes, slices) materialised. torch is not imported; unknown classes load as inert objects."""
  raw, name = _source("torch_load", t)
  try: return _torch_load(raw, name)
  except (ValueError, NotImplementedError, pickle.UnpicklingError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error, struct.error, LookupError,
          TypeError, AttributeError, UnicodeError, OverflowError, RecursionError, MemoryError) as e:
    if str(e).startswith("[torch_load]"): raise
    # NOTE: zipfile raises NotImplementedError for a corrupt compression method or version field
    raise ValueError(f"[torch_load] {name}: corrupt or truncated checkpoint ({type(e).__name__}: {e})") from e


# ---- GGUF (llama.cpp) files: metadata, and tensors dequantised on the device with Tensor ops ----------------

_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGML_NATIVE = {0: "f4", 1: "f2", 24: "i1", 25: "i2", 26: "i4", 27: "i8", 28: "f8", 30: "u2"}  # 30: bfloat16, bitcast from uint16
_GGML_QUANT = {2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 12: (256, 144), 13: (256, 176), 14: (256, 210)}
_GGML_NAMES = {2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K"}


class _GGUFReader:
  """Little-endian GGUF header fields from bytes; running off the end is a ValueError naming the file."""
  def __init__(self, raw: bytes, name: str): self.raw, self.name, self.pos = raw, name, 0

  def take(self, n: int) -> bytes:
    if n < 0 or self.pos + n > len(self.raw):
      raise ValueError(f"[gguf_load] {self.name}: truncated header (needs {n} bytes at {self.pos} of {len(self.raw)})")
    self.pos += n
    return self.raw[self.pos - n:self.pos]

  def scalar(self, fmt: str): return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
  def string(self) -> str:
    b = self.take(self.scalar("<Q"))
    try: return b.decode("utf-8")
    except UnicodeDecodeError as e: raise ValueError(f"[gguf_load] {self.name}: a string at {self.pos - len(b)} is not UTF-8") from e

  def value(self, typ: int, depth: int = 0):
    if typ in _GGUF_SCALARS: return self.scalar(_GGUF_SCALARS[typ])
    if typ == 8: return self.string()
    if typ == 9 and depth < 8:
      item, n = self.scalar("<I"), self.scalar("<Q")
      if n > len(self.raw) - self.pos: raise ValueError(f"[gguf_load] {self.name}: an array of {n} items overruns the file")
      return [self.value(item, depth + 1) for _ in range(n)]
    raise ValueError(f"[gguf_load] {self.name}: unknown metadata value type {typ} at {self.pos}")


def _gguf_f16(b: Tensor) -> Tensor: return b.contiguous().bitcast(dtypes.float16).cast(dtypes.float32)
def _gguf_split(b: Tensor, bits: int) -> Tensor:
  """(..., k) uint8 -> (..., 8/bits * k): the `bits`-bit fields of every byte, lowest field of all bytes first (ggml's order)."""
  return Tensor.cat(*[b.rshift(i).bitwise_and((1 << bits) - 1) for i in range(0, 8, bits)], dim=-1)
def _gguf_bits(b: Tensor) -> Tensor:
  """(nb, k) uint8 -> (nb, 8k): bit j%8 of byte j//8 at j (a little-endian bit field)."""
  return Tensor.stack(*[b.rshift(i).bitwise_and(1) for i in range(8)], dim=-1).flatten(-2)


def _ggml_dequant(blk: Tensor, typ: int) -> Tensor:
  """float32 (nblocks, block elements) from the (nblocks, block bytes) uint8 blocks of a ggml quant type."""
  f = lambda x: x.cast(dtypes.float32)  # noqa: E731
  if typ in (2, 3):  # Q4_0: d, 16 bytes of nibbles (x - 8) * d; Q4_1: d, m, nibbles: x * d + m
    d, q = _gguf_f16(blk[:, 0:2]), f(_gguf_split(blk[:, 2 if typ == 2 else 4:], 4))
    return (q - 8) * d if typ == 2 else q * d + _gguf_f16(blk[:, 2:4])
  if typ in (6, 7):  # Q5_0: d, qh (32 high bits), nibbles: (x - 16) * d; Q5_1: d, m, qh, nibbles: x * d + m
    o = 2 if typ == 6 else 4
    d, q = _gguf_f16(blk[:, 0:2]), f(_gguf_split(blk[:, o + 4:], 4).bitwise_or(_gguf_bits(blk[:, o:o + 4]).lshift(4)))
    return (q - 16) * d if typ == 6 else q * d + _gguf_f16(blk[:, 2:4])
  if typ == 8: return _gguf_f16(blk[:, 0:2]) * f(blk[:, 2:].contiguous().bitcast(dtypes.int8))  # Q8_0: d, 32 int8
  if typ in (12, 13):  # Q4_K / Q5_K: d, dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, (qh,) 128 bytes of nibbles
    d, dmin, s = _gguf_f16(blk[:, 0:2]), _gguf_f16(blk[:, 2:4]), blk[:, 4:16]
    sc = s[:, 0:4].bitwise_and(63).cat(s[:, 8:12].bitwise_and(15).bitwise_or(s[:, 0:4].rshift(6).lshift(4)), dim=-1)
    mn = s[:, 4:8].bitwise_and(63).cat(s[:, 8:12].rshift(4).bitwise_or(s[:, 4:8].rshift(6).lshift(4)), dim=-1)
    qs = blk[:, 16 if typ == 12 else 48:].reshape(-1, 4, 32)
    q = Tensor.stack(qs.bitwise_and(15), qs.rshift(4), dim=2).reshape(-1, 8, 32)  # sub-block 2j: low nibbles of 32j.., 2j+1: high
    if typ == 13:  # bit s of qh[l] is the fifth bit of element l of sub-block s
      qh = blk[:, 16:48]
      q = q.bitwise_or(Tensor.stack(*[qh.rshift(i).bitwise_and(1) for i in range(8)], dim=1).lshift(4))
    return (d.unsqueeze(-1) * f(sc).unsqueeze(-1) * f(q) - dmin.unsqueeze(-1) * f(mn).unsqueeze(-1)).flatten(-2)
  if typ == 14:  # Q6_K: 128 bytes low nibbles, 64 bytes 2-bit highs, 16 int8 scales (one per 16 elements), d
    lo, hi = _gguf_split(blk[:, 0:128].reshape(-1, 2, 64), 4), _gguf_split(blk[:, 128:192].reshape(-1, 2, 32), 2)
    q = f(lo.bitwise_or(hi.lshift(4)).flatten(-2)) - 32
    sc = f(blk[:, 192:208].contiguous().bitcast(dtypes.int8)).unsqueeze(-1).expand(-1, 16, 16).reshape(-1, 256)
    return _gguf_f16(blk[:, 208:210]) * sc * q
  raise ValueError(f"[gguf_load] GGML type {typ} is not supported")


def _gguf_parse(raw: bytes, name: str, device) -> tuple[dict, dict[str, Tensor]]:
  r = _GGUFReader(raw, name)
  if r.take(4) != b"GGUF": raise ValueError(f"[gguf_load] {name}: not a GGUF file (magic {raw[:4]!r})")
  if (version := r.scalar("<I")) not in (2, 3): raise ValueError(f"[gguf_load] {name}: GGUF version {version}, supported are 2 and 3")
  n_tensors, n_kv = r.scalar("<Q"), r.scalar("<Q")
  kv: dict[str, Any] = {}
  for _ in range(n_kv):
    k = r.string()
    kv[k] = r.value(r.scalar("<I"))
  infos = []
  for _ in range(n_tensors):
    tname, ndim = r.string(), r.scalar("<I")
    if ndim > 8: raise ValueError(f"[gguf_load] {name}: tensor {tname!r} has {ndim} dimensions")
    infos.append((tname, tuple(r.scalar("<Q") for _ in range(ndim)), r.scalar("<I"), r.scalar("<Q")))
  align = kv.get("general.alignment", 32)
  if not isinstance(align, int) or align <= 0: raise ValueError(f"[gguf_load] {name}: general.alignment={align!r}")
  data_start = -(-r.pos // align) * align
  sd: dict[str, Tensor] = {}
  for tname, dims, typ, off in infos:
    n = 1
    for x in dims: n *= x
    shape = tuple(reversed(dims))
    if typ in _GGML_NATIVE: nbytes = n * np.dtype(_GGML_NATIVE[typ]).itemsize
    elif typ in _GGML_QUANT:
      el, bb = _GGML_QUANT[typ]
      if n % el: raise ValueError(f"[gguf_load] {name}: tensor {tname!r} of {n} elements is not whole {_GGML_NAMES[typ]} blocks of {el}")
      nbytes = n // el * bb
    else:
      raise ValueError(f"[gguf_load] {name}: tensor {tname!r} has GGML type {typ}, supported are {sorted(_GGML_NATIVE) + sorted(_GGML_QUANT)}")
    if data_start + off + nbytes > len(raw):
      raise ValueError(f"[gguf_load] {name}: tensor {tname!r} needs bytes {data_start + off}..{data_start + off + nbytes} of {len(raw)} (truncated)")
    buf = np.frombuffer(raw, np.uint8, nbytes, data_start + off)
    if typ in _GGML_NATIVE:
      dt = np.dtype(_GGML_NATIVE[typ])
      t = Tensor(buf.view(dt.newbyteorder("<")).astype(dt.newbyteorder("=")), device=device)
      if typ == 30: t = t.bitcast(dtypes.bfloat16)
    else: t = _ggml_dequant(Tensor(buf.reshape(-1, _GGML_QUANT[typ][1]), device=device), typ)
    sd[tname] = t.reshape(shape)
  return kv, sd


def gguf_load(fn: Tensor | str | pathlib.Path) -> tuple[dict, dict[str, Tensor]]:
  """(kv_data, state_dict) of a GGUF file (a path or uint8 Tensor): metadata values as Python
  objects, tensors in ggml's reversed dimension order, quantised ones (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
  Q4_K Q5_K Q6_K) dequantised to float32 on the device. A split model loads from its first part's path."""
  raw, name = _source("gguf_load", fn)
  device = fn.device if isinstance(fn, Tensor) else None
  kv, sd = _gguf_parse(raw, name, device)
  if (total := kv.get("split.count", 1)) in (0, 1): return kv, sd
  if isinstance(fn, Tensor): raise ValueError(f"[gguf_load] a split GGUF ({total} parts) must be loaded from a path, got a Tensor")
  if kv.get("split.no", 0) != 0: raise ValueError(f"[gguf_load] {name}: split.no={kv['split.no']}: load a split model from its first part")
  if not (m := re.match(r"^(.*)-00001-of-\d{5}\.gguf$", name)):
    raise ValueError(f"[gguf_load] {name}: a first part's name ends in -00001-of-NNNNN.gguf")
  for i in range(2, total + 1):
    part = f"{m.group(1)}-{i:05d}-of-{total:05d}.gguf"
    sd.update(_gguf_parse(pathlib.Path(part).read_bytes(), part, None)[1])
  return kv, sd
