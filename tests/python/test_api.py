# The package surface tinygrad users import: top-level names, Device, Context, GlobalCounters,
# helpers.getenv, and the module layout (baregrad.nn, .nn.optim, .nn.state).
import importlib
import os

import numpy as np
import pytest

import baregrad
from baregrad import Context, Device, GlobalCounters, Tensor, TinyJit, dtypes


@pytest.mark.parametrize("name", ["Tensor", "dtypes", "Device", "TinyJit", "Context", "GlobalCounters"])
def test_top_level_names(name):
  assert hasattr(baregrad, name)


@pytest.mark.parametrize("module,names", [
    ("baregrad.nn", ["Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "GroupNorm", "Embedding"]),
    ("baregrad.nn.optim", ["SGD", "Adam", "AdamW"]),
    ("baregrad.nn.state", ["safe_load", "safe_save", "get_parameters", "get_state_dict", "load_state_dict"]),
    ("baregrad.helpers", ["getenv"]),
])
def test_module_layout(module, names):
  m = importlib.import_module(module)
  for n in names: assert hasattr(m, n), f"{module}.{n}"


def test_device_default():
  assert isinstance(Device.DEFAULT, str) and Device.DEFAULT
  assert Tensor([1.0]).device.upper().startswith(Device.DEFAULT.upper())


def test_getenv(monkeypatch):
  from baregrad.helpers import getenv
  monkeypatch.setenv("BAREGRAD_TEST_GETENV", "7")
  assert getenv("BAREGRAD_TEST_GETENV") == 7
  assert getenv("BAREGRAD_TEST_GETENV_UNSET", 3) == 3
  assert getenv("BAREGRAD_TEST_GETENV_UNSET", "x") == "x"
  assert os.environ["BAREGRAD_TEST_GETENV"] == "7"


def test_context_restores():
  from baregrad.helpers import getenv
  with Context(DEBUG=0):
    np.testing.assert_equal((Tensor([1.0, 2.0]) * 2).numpy(), [2.0, 4.0])
  assert getenv("DEBUG", 0) == int(os.environ.get("DEBUG", 0))


def test_global_counters_count_kernels():
  GlobalCounters.reset()
  before = GlobalCounters.kernel_count
  (Tensor(np.arange(8, dtype=np.float32)) * 3 + 1).realize()
  assert GlobalCounters.kernel_count > before


def test_training_flag_context():
  assert Tensor.training is False
  with Tensor.train():
    assert Tensor.training is True
    with Tensor.train(False):
      assert Tensor.training is False
    assert Tensor.training is True
  assert Tensor.training is False


def test_dtype_properties():
  assert dtypes.float32.itemsize == 4 and dtypes.int8.itemsize == 1 and dtypes.float64.itemsize == 8
  assert dtypes.is_float(dtypes.float32) and dtypes.is_int(dtypes.int32) and not dtypes.is_float(dtypes.int32)
  assert Tensor([1]).dtype is dtypes.int32


def test_jit_is_a_decorator():
  @TinyJit
  def f(x): return (x + 1).realize()
  for _ in range(3): np.testing.assert_equal(f(Tensor([1.0])).numpy(), [2.0])


def test_the_installed_package_gets_every_module():
  # python/meson.build listed 15 of the 24 modules, so `./bare install` installed a package whose
  # `import baregrad` failed (tensor.py imports baregrad.disk)
  import pathlib, re
  root = pathlib.Path(__file__).resolve().parents[2] / "python"
  listed = set(re.findall(r"'(baregrad/[\w/]+\.py)'", (root / "meson.build").read_text()))
  present = {str(p.relative_to(root)) for p in (root / "baregrad").rglob("*.py")}
  assert present and present == listed, f"not installed: {sorted(present - listed)}; listed but absent: {sorted(listed - present)}"
