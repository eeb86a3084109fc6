"""Devices by tinygrad's names: Device.DEFAULT, Device["CPU"], Device.canonicalize("cpu")."""
from __future__ import annotations

import re

import _baregrad as _C


class _Renderer:
  """What a device's code generator renders (tinygrad's Renderer, reduced to what baregrad can answer)."""
  def __init__(self, device: str): self.device = device

  def supported_dtypes(self) -> set:
    """The dtypes kernels on this device compute. Every baregrad target renders them all (LLVM for CPU and
    NULL, C for CPU:C, NVPTX for NV and CUDA; bfloat16 arithmetic in float32); NULL compiles but runs nothing."""
    from baregrad.dtype import dtypes
    return set(dtypes.all)

  @property
  def code_for_op(self) -> dict:
    """The ALU ops this device's code generator emits as themselves (tinygrad's code_for_op, keyed by Ops; the
    values are None): without native transcendentals (CPU), EXP2, LOG2, SIN and POW are expanded into polynomials
    before rendering and are absent."""
    from baregrad.uop.ops import Ops
    return {Ops[name]: None for name in _C.native_ops(self.device)}

  def __repr__(self): return f"<Renderer {self.device}>"


class _Compiler:
  """The device's compiler. It compiles kernel ASTs inside the C++ runtime; source strings can't be compiled from
  Python (the extension binds no such call)."""
  def __init__(self, device: str): self.device = device

  def compile(self, src: str) -> bytes:
    """Not available in baregrad: NotImplementedError."""
    raise NotImplementedError(f"[compile] {self.device} compiles kernels inside baregrad's C++ runtime; "
                              "compiling source text from Python is not supported")

  def compile_cached(self, src: str) -> bytes:
    """As compile()."""
    return self.compile(src)


class _Buffer:
  """An allocation of _Allocator: a uint8 Tensor of `size` bytes on the device."""
  def __init__(self, t, size: int): self.tensor, self.size = t, size


class _Allocator:
  """Raw device memory as tinygrad's Allocator: alloc/free and the byte copies _copyin/_copyout, over uint8
  tensors (so the C++ allocator owns and caches the memory)."""
  def __init__(self, device: str): self.device = device

  def alloc(self, size: int, options=None) -> _Buffer:
    """`size` bytes on the device (contents undefined); AssertionError for size <= 0, as tinygrad's."""
    assert isinstance(size, int) and size > 0, f"[alloc] size must be a positive int, got {size!r}"
    from baregrad.dtype import dtypes
    from baregrad.tensor import Tensor
    return _Buffer(Tensor.empty(size, dtype=dtypes.uint8, device=self.device).contiguous().realize(), size)

  def free(self, opaque: _Buffer, size: int, options=None):
    """Releases the buffer (its memory returns to the C++ allocator's cache)."""
    opaque.tensor = None

  def _copyin(self, dest: _Buffer, src: memoryview):
    """Writes the bytes of src into dest (len(src) == dest's size)."""
    mv = memoryview(src).cast("B")
    if dest.tensor is None: raise RuntimeError("[copyin] the buffer was freed")
    if mv.nbytes != dest.size: raise ValueError(f"[copyin] {mv.nbytes} bytes into a buffer of {dest.size}")
    from baregrad.tensor import Tensor
    dest.tensor.assign(Tensor(bytes(mv), device=self.device)).realize()

  def _copyout(self, dest: memoryview, src: _Buffer):
    """Reads src's bytes into dest (len(dest) == src's size), after the device has finished writing them."""
    mv = memoryview(dest).cast("B")
    if src.tensor is None: raise RuntimeError("[copyout] the buffer was freed")
    if mv.nbytes != src.size: raise ValueError(f"[copyout] a buffer of {src.size} bytes into {mv.nbytes}")
    mv[:] = src.tensor.numpy().tobytes()


class Buffer:
  """A raw allocation of `size` elements of `dtype` on a device (tinygrad's Buffer), for programs that move bytes by
  hand; tensors do not read or write these. Memory is taken at allocate() (or ensure_allocated(); `initial_value`
  bytes allocate at once) from the device's allocator. `view(size, dtype, offset)` is a window of `offset` bytes
  into a base buffer: it owns no memory and reads and writes the base's, while the base is allocated.

  Device "PYTHON" is host memory (a bytearray, or the `opaque` memoryview given): baregrad has no Python emulator
  device, and tinygrad's programs use such buffers to stage bytes (`dest.copy_from(Buffer("PYTHON", n, dt,
  opaque=mv))`). Misuse is an AssertionError, as tinygrad's: freeing twice, reading a freed buffer or a view of one.
  """

  def __init__(self, device: str, size: int, dtype, opaque=None, options=None, initial_value: bytes | None = None,
               base: Buffer | None = None, offset: int = 0, preallocate: bool = False):
    from baregrad.dtype import to_dtype
    if not isinstance(size, int) or size < 0: raise ValueError(f"[Buffer] size must be a non-negative int, got {size!r}")
    self.device = device if device == "PYTHON" else Device.canonicalize(device)
    self.size, self.dtype, self.options, self.offset = size, to_dtype(dtype), options, offset
    if base is not None:
      assert base._base is None, "[Buffer] a view's base must be a base buffer"
      assert offset + self.nbytes <= base.nbytes, f"[Buffer.view] bytes {offset}..{offset + self.nbytes} exceed the base's {base.nbytes}"
    self._base = base
    if opaque is not None: self.allocate(opaque)
    if initial_value is not None:
      self.allocate()
      self.copyin(memoryview(initial_value))
    elif preallocate: self.allocate()

  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  @property
  def base(self) -> Buffer: return self if self._base is None else self._base

  def view(self, size: int, dtype, offset: int) -> Buffer:
    """A window of `size` `dtype` elements at byte `offset` into this buffer (a view of a view is one of the base)."""
    assert offset < self.nbytes, f"[Buffer.view] offset {offset} must be less than the buffer's {self.nbytes} bytes"
    return Buffer(self.device, size, dtype, base=self.base, offset=self.offset + offset)

  def is_initialized(self) -> bool:
    """Whether allocate() ran on this buffer (and deallocate() has not since)."""
    return hasattr(self, "_buf")

  def is_allocated(self) -> bool:
    """Whether its memory exists: its own, or for a view, the base's."""
    return self.is_initialized() if self._base is None else self._base.is_allocated()

  def allocate(self, opaque=None) -> Buffer:
    assert not self.is_initialized(), "[Buffer.allocate] the buffer is already allocated"
    if self._base is not None:
      self._base.ensure_allocated()
      self._buf = None  # a view reads the base's memory
    elif opaque is not None:
      if self.device != "PYTHON": raise ValueError(f"[Buffer] opaque memory is only for host (PYTHON) buffers, not {self.device}")
      mv = memoryview(opaque).cast("B")
      if mv.nbytes != self.nbytes: raise ValueError(f"[Buffer] opaque memory of {mv.nbytes} bytes for a buffer of {self.nbytes}")
      self._buf = mv
    elif self.device == "PYTHON": self._buf = memoryview(bytearray(self.nbytes))
    else: self._buf = Device[self.device].allocator.alloc(max(self.nbytes, 1), self.options)
    return self

  def ensure_allocated(self) -> Buffer: return self if self.is_initialized() else self.allocate()

  def deallocate(self):
    assert self.is_initialized(), "[Buffer.deallocate] the buffer must be allocated to deallocate"
    if self._base is None and self.device != "PYTHON": Device[self.device].allocator.free(self._buf, max(self.nbytes, 1), self.options)
    del self._buf

  def _check_live(self, op: str):
    assert self.is_initialized(), f"[Buffer.{op}] the buffer is not allocated"
    assert self._base is None or self._base.is_initialized(), f"[Buffer.{op}] the view's base buffer was deallocated"

  def _read(self) -> bytes:
    """This buffer's bytes (a view's: its window of the base's)."""
    base = self.base
    data = base._buf if base.device == "PYTHON" else bytearray(base.nbytes)
    if base.device != "PYTHON" and base.nbytes: Device[base.device].allocator._copyout(memoryview(data), base._buf)
    return bytes(data[self.offset:self.offset + self.nbytes])

  def copyout(self, mv: memoryview) -> memoryview:
    """Copies the buffer's bytes into `mv` (of nbytes bytes) and returns it."""
    self._check_live("copyout")
    out = memoryview(mv).cast("B")
    assert out.nbytes == self.nbytes, f"[Buffer.copyout] {self.nbytes} bytes into {out.nbytes}"
    out[:] = self._read()
    return mv

  def copyin(self, mv: memoryview) -> Buffer:
    """Writes the `nbytes` bytes of `mv` into the buffer."""
    self._check_live("copyin")
    src = memoryview(mv).cast("B")
    assert src.nbytes == self.nbytes, f"[Buffer.copyin] {src.nbytes} bytes into a buffer of {self.nbytes}"
    base = self.base
    if base.device == "PYTHON":
      base._buf[self.offset:self.offset + self.nbytes] = src
      return self
    data = src
    if self._base is not None:  # write the base whole, with this window replaced
      whole = bytearray(self._base._read())
      whole[self.offset:self.offset + self.nbytes] = src
      data = memoryview(whole)
    if base.nbytes: Device[base.device].allocator._copyin(base._buf, data)
    return self

  def as_memoryview(self, allow_zero_copy: bool = False, force_zero_copy: bool = False) -> memoryview:
    """The buffer's bytes (a copy; format "B")."""
    return self.copyout(memoryview(bytearray(self.nbytes)))

  def copy_from(self, src: Buffer) -> Buffer:
    """This buffer's bytes become `src`'s (same nbytes)."""
    assert src.nbytes == self.nbytes, f"[Buffer.copy_from] {src.nbytes} bytes into a buffer of {self.nbytes}"
    return self.copyin(src.as_memoryview())

  def numpy(self):
    import numpy as np
    from baregrad.dtype import _np_storage
    return np.frombuffer(self.as_memoryview(), dtype=_np_storage(self.dtype) or np.uint8)

  def __repr__(self):
    return f"<buf real:{self.is_allocated()} device:{self.device} size:{self.size} dtype:{self.dtype}" + \
           (f" offset:{self.offset}>" if self._base is not None else ">")


class BufferSpec:
  """tinygrad's allocation options (image, uncached, cpu_access, host, nolru, external_ptr); baregrad's allocator
  takes none of them and ignores what Buffer is given."""
  def __init__(self, image=None, uncached=False, cpu_access=False, host=False, nolru=False, external_ptr=None):
    self.image, self.uncached, self.cpu_access, self.host, self.nolru, self.external_ptr = image, uncached, cpu_access, host, nolru, external_ptr


class HCQGraph:
  """Device[d].graph of the HCQ devices (CPU, NV, MOCK+NV): a TinyJit replay is one graph submission of the captured
  kernels (tensor/jit.h; kernels with Variables launch one by one). tinygrad's graph is its runner class; this one
  only names the kind: replays are TinyJit's."""

  def __init__(self, *args, **kwargs):
    raise TypeError(f"[{type(self).__name__}] graphs are made by TinyJit, not from Python")


class CUDAGraph(HCQGraph):
  """Device[d].graph of the CUDA devices (libcuda's graphs, runtime/cuda)."""


class _Compiled:
  """One open device, as Device[name] returns it (tinygrad's Compiled): device, renderer, compiler, allocator, graph."""
  def __init__(self, name: str):
    self.device = self.dname = name
    self.renderer, self.compiler, self.allocator = _Renderer(name), _Compiler(name), _Allocator(name)

  @property
  def graph(self) -> type:
    """How TinyJit replays on this device: CUDAGraph on CUDA, else HCQGraph (every device here makes graphs)."""
    return CUDAGraph if self.dname.startswith("CUDA") else HCQGraph

  def synchronize(self):
    """Waits until every launch and copy queued on the device has finished."""
    _C.synchronize(self.dname)

  def finalize(self):
    """Nothing to do: the C++ registry closes devices at exit."""

  def __repr__(self): return f"<Device {self.dname}>"


def _known(name: str) -> bool:
  """Whether `name` is one of the device names this build has ("NV:<n>" patterns match any index)."""
  for p in _C.device_names():
    if name == p or (p.endswith(":<n>") and re.fullmatch(re.escape(p[:-4]) + r":\d{1,3}", name)): return True
  return False


class _Device:
  """The device registry. DEFAULT is DEV= (or CPU); setting it changes where new tensors go."""
  _devices = tuple(_C.device_names())

  @staticmethod
  def canonicalize(device: str | None) -> str:
    """"cpu" -> "CPU", "cpu:0" -> "CPU", "cpu:c" -> "CPU:C"; None is the default device."""
    if device is None: return Device.DEFAULT
    if isinstance(device, (tuple, list)):  # several devices: a sharded tensor's (baregrad/multi.py)
      out = tuple(Device.canonicalize(d) for d in device)
      return out[0] if len(out) == 1 else out
    if not isinstance(device, str): raise TypeError(f"[canonicalize] a device is a string, not {type(device).__name__}")
    if device[:5].upper() == "DISK:": return "DISK:" + device[5:]  # the path keeps its case
    name = device.upper()
    if name.endswith(":0"): name = name[:-2]
    return name

  _opened: dict[str, _Compiled] = {}

  def __getitem__(self, name: str) -> _Compiled:
    """The open device of that name, one object per device. A name this build does not have is a
    ModuleNotFoundError (tinygrad's: it has no runtime module for it); a device that fails to open a RuntimeError."""
    name = self.canonicalize(name)
    if name not in self._opened:
      if not _known(name):
        raise ModuleNotFoundError(f"[device] no device named {name!r} (this build has: {', '.join(_C.device_names())})")
      self._opened[name] = _Compiled(_C.device_name(name))
    return self._opened[name]

  @property
  def default(self) -> _Compiled:
    """The default device (Device[Device.DEFAULT])."""
    return self[self.DEFAULT]

  def get_available_devices(self):
    for d in self._devices:
      try:
        yield _C.device_name(d)
      except RuntimeError: pass

  @property
  def DEFAULT(self) -> str:  # noqa: N802 (tinygrad's name)
    return _C.option_value("DEV") or "CPU"

  @DEFAULT.setter
  def DEFAULT(self, name: str):  # noqa: N802
    name = self.canonicalize(name)
    _C.device_name(name)  # RuntimeError naming the devices that exist when there is none
    _C.set_option("DEV", name)


Device = _Device()


def canonicalize_device(device: str | None) -> str: return Device.canonicalize(device)
