"""Model state: state dicts found by walking Python objects, and safetensors files."""
from __future__ import annotations

import pathlib
from collections import OrderedDict
from typing import Any

import _baregrad as _C
from baregrad.tensor import Tensor


def get_state_dict(obj, prefix: str = "", tensor_type=Tensor) -> dict[str, Tensor]:
  """Every tensor reachable from `obj` through attributes, lists, tuples and dicts, named by
  its dotted path ("l1.weight", "layers.0.bias")."""
  if isinstance(obj, tensor_type): return {prefix.strip("."): obj}
  if hasattr(obj, "_asdict"): return get_state_dict(obj._asdict(), prefix, tensor_type)  # namedtuple
  if isinstance(obj, OrderedDict): return get_state_dict(dict(obj), prefix, tensor_type)
  if hasattr(obj, "__dict__"): return get_state_dict(obj.__dict__, prefix, tensor_type)
  state_dict: dict[str, Tensor] = {}
  if isinstance(obj, (list, tuple)):
    for i, x in enumerate(obj): state_dict.update(get_state_dict(x, f"{prefix}{i}.", tensor_type))
  elif isinstance(obj, dict):
    for k, v in obj.items(): state_dict.update(get_state_dict(v, f"{prefix}{k}.", tensor_type))
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
  entries, loaded, ret = [], {}, []
  for k, v in get_state_dict(model).items():
    if k not in state_dict:
      if strict: raise KeyError(f"[load_state_dict] missing key {k!r} in state_dict")
      continue
    src = state_dict[k]
    if not isinstance(src, Tensor): src = Tensor(src)
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
