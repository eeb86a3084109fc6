"""Model state: state dicts found by walking Python objects, safetensors files, tar and zip
archives and PyTorch checkpoints."""
from __future__ import annotations

import io
import os
import pathlib
import pickle
import struct
import tarfile
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

import _baregrad as _C
from baregrad.dtype import dtypes
from baregrad.tensor import Tensor


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
  entries, loaded, ret = [], {}, []
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
      else: raise ValueError(f"[load_state_dict] '{k}' is {v.shape} in the model but {src.shape} in the state dict")
    src = src.to(v.device).cast(v.dtype)
    if not any(v._c.same(c) for _, c in entries):  # a tied tensor is loaded once
      entries.append((k, v._c))
      loaded[k] = src._c
    if consume: del state_dict[k]
    ret.append(v)
  _C.load_state_dict(entries, loaded, False)
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


def safe_load(fn: str | pathlib.Path, device: str | None = None) -> dict[str, Tensor]:
  """Every tensor of a .safetensors file, on `device` (the default device when None)."""
  if isinstance(fn, Tensor): raise TypeError(f"[safe_load] safe_load reads a file path; loading from a Tensor of bytes is not supported")
  from baregrad.device import canonicalize_device
  return {k: Tensor._wrap(c) for k, c in _C.safe_load(str(fn), canonicalize_device(device)).items()}


def safe_load_metadata(fn: str | pathlib.Path) -> dict[str, str]:
  """The "__metadata__" strings of a .safetensors file (baregrad's; tinygrad returns the header)."""
  return _C.safe_load_metadata(str(fn))


# ---- archives and PyTorch checkpoints, read without torch ----------------------------------------------------

def _source(op: str, fn) -> tuple[bytes, str]:
  """The bytes of `fn` (a path, or a 1-D uint8 Tensor as tinygrad's accept_filename takes) and a
  name for errors."""
  if isinstance(fn, Tensor):
    if fn.ndim != 1 or fn.dtype != dtypes.uint8: raise ValueError(f"[{op}] a Tensor source must be 1-D uint8, got shape {fn.shape} {fn.dtype}")
    return fn.numpy().tobytes(), f"<Tensor of {fn.shape[0]} bytes>"
  if not isinstance(fn, (str, os.PathLike)): raise TypeError(f"[{op}] expected a path or a uint8 Tensor, got {type(fn).__name__}")
  return pathlib.Path(fn).read_bytes(), str(fn)


def tar_extract(t: Tensor | str | pathlib.Path) -> dict[str, Tensor]:
  """The regular files of a tar archive (a path or uint8 Tensor), name -> uint8 Tensor of its bytes."""
  raw, name = _source("tar_extract", t)
  try:
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r") as tar:
      members = [m for m in tar if m.isreg()]
  except (tarfile.TarError, EOFError, OSError, zlib.error, ValueError) as e:
    raise ValueError(f"[tar_extract] {name}: not a readable tar archive ({type(e).__name__}: {e})") from e
  out: dict[str, Tensor] = {}
  for m in members:
    if m.offset_data + m.size > len(raw):
      raise ValueError(f"[tar_extract] {name}: {m.name!r} needs bytes {m.offset_data}..{m.offset_data + m.size} of {len(raw)} (truncated)")
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


def _rebuild_tensor(storage, storage_offset, size, stride, *_args, **_kwargs): return _Lazy(storage, storage_offset, size, stride)
def _rebuild_parameter(data, *_args): return data
def _rebuild_from_type(func, _new_type, args, _state): return func(*args)
def _codecs_encode(s, encoding="latin1"): return s.encode("latin1" if encoding in ("latin1", "latin-1") else "utf-8")


_TORCH_GLOBALS = {"_rebuild_tensor": _rebuild_tensor, "_rebuild_tensor_v2": _rebuild_tensor, "_rebuild_parameter": _rebuild_parameter,
                  "_rebuild_parameter_with_state": _rebuild_parameter, "_rebuild_from_type_v2": _rebuild_from_type, "Size": tuple}
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
    if not isinstance(st, _Storage) or st.arr is None: raise ValueError(f"[torch_load] {name}: a tensor refers to a storage the file does not hold")
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
  if isinstance(obj, dict):
    out = type(obj)() if isinstance(obj, OrderedDict) else {}
    for k, v in obj.items(): out[k] = _build(v, name)
    return out
  if isinstance(obj, list): return [_build(v, name) for v in obj]
  if isinstance(obj, tuple) and not hasattr(obj, "_fields"): return tuple(_build(v, name) for v in obj)
  return obj


def _fill(st: _Storage, data: bytes, key: str, name: str, big: bool):
  need = st.numel * st.stype.itemsize
  if len(data) < need: raise ValueError(f"[torch_load] {name}: storage {key!r} holds {len(data)} bytes, {st.numel} elements of {st.stype.name} need {need}")
  st.arr = np.frombuffer(data, np.dtype(_TORCH_STORAGES[st.stype.name]).newbyteorder(">" if big else "<"), count=st.numel)


def _torch_load(raw: bytes, name: str):
  storages: dict[str, _Storage] = {}
  if zipfile.is_zipfile(io.BytesIO(raw)):
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
      names = z.namelist()
      base = names[0].split("/", 1)[0] if names else ""
      if f"{base}/data.pkl" not in names: raise ValueError(f"[torch_load] {name}: a zip file without {base}/data.pkl is not a torch checkpoint")
      big = f"{base}/byteorder" in names and z.read(f"{base}/byteorder").strip() == b"big"
      obj = _TorchUnpickler(io.BytesIO(z.read(f"{base}/data.pkl")), lambda pid: _storage_of(pid, storages, name)).load()
      for key, st in storages.items():
        if f"{base}/data/{key}" not in names: raise ValueError(f"[torch_load] {name}: storage {base}/data/{key} is missing")
        _fill(st, z.read(f"{base}/data/{key}"), key, name, big)
    return _build(obj, name)
  f = io.BytesIO(raw)
  def no_pid(pid): raise pickle.UnpicklingError(f"persistent id {pid!r:.60} before the checkpoint's data")
  try: magic = _TorchUnpickler(f, no_pid).load()
  except (pickle.UnpicklingError, EOFError, ValueError, IndexError, KeyError, TypeError) as e:
    if tarfile.is_tarfile(io.BytesIO(raw)): raise NotImplementedError(f"[torch_load] {name}: the tar format of torch < 0.4 is not supported") from e
    raise ValueError(f"[torch_load] {name}: neither a zip nor a legacy torch checkpoint ({type(e).__name__}: {e})") from e
  if magic != _LEGACY_MAGIC: raise ValueError(f"[torch_load] {name}: neither a zip nor a legacy torch checkpoint (magic number {magic!r:.40})")
  if (version := _TorchUnpickler(f, no_pid).load()) != 1001: raise ValueError(f"[torch_load] {name}: legacy protocol version {version!r:.40}, expected 1001")
  sys_info = _TorchUnpickler(f, no_pid).load()
  big = isinstance(sys_info, dict) and sys_info.get("little_endian") is False
  def legacy_pid(pid):
    st = _storage_of(pid, storages, name)
    if len(pid) > 5 and pid[5] is not None: raise ValueError(f"[torch_load] {name}: legacy storage views are not supported")
    return st
  obj = _TorchUnpickler(f, legacy_pid).load()
  keys = _TorchUnpickler(f, no_pid).load()
  if not isinstance(keys, list): raise ValueError(f"[torch_load] {name}: expected the list of storage keys after the pickle, got {type(keys).__name__}")
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
  """A PyTorch checkpoint (torch.save's zip format or the legacy pickle one) as saved: state dicts
  (nested dicts, OrderedDicts, lists) with each tensor a Tensor on the default device, views
  (transposes, slices) materialised. torch is not imported; unknown classes load as inert objects."""
  raw, name = _source("torch_load", t)
  try: return _torch_load(raw, name)
  except (ValueError, NotImplementedError, pickle.UnpicklingError, EOFError, zipfile.BadZipFile, zlib.error, struct.error, LookupError,
          TypeError, AttributeError, UnicodeError, OverflowError, RecursionError, MemoryError) as e:
    if str(e).startswith("[torch_load]"): raise
    # NOTE: zipfile raises NotImplementedError for a corrupt compression method or version field
    raise ValueError(f"[torch_load] {name}: corrupt or truncated checkpoint ({type(e).__name__}: {e})") from e
