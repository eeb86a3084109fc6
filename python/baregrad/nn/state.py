"""Model state: state dicts found by walking Python objects, and safetensors files."""
from __future__ import annotations

import pathlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import _baregrad as _C
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
