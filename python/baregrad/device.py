"""Devices by tinygrad's names: Device.DEFAULT, Device["CPU"], Device.canonicalize("cpu")."""
from __future__ import annotations

import _baregrad as _C


class _Compiled:
  """One open device, as Device[name] returns it."""
  def __init__(self, name: str): self.device = self.dname = name
  def synchronize(self): _C.synchronize(self.dname)
  def __repr__(self): return f"<Device {self.dname}>"


class _Device:
  """The device registry. DEFAULT is DEV= (or CPU); setting it changes where new tensors go."""
  _devices = tuple(_C.device_names())

  @staticmethod
  def canonicalize(device: str | None) -> str:
    """"cpu" -> "CPU", "cpu:0" -> "CPU", "cpu:c" -> "CPU:C"; None is the default device."""
    if device is None: return Device.DEFAULT
    if not isinstance(device, str): raise TypeError(f"[canonicalize] a device is a string, not {type(device).__name__}")
    name = device.upper()
    if name.endswith(":0"): name = name[:-2]
    return name

  def __getitem__(self, name: str) -> _Compiled:
    return _Compiled(_C.device_name(self.canonicalize(name)))

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
