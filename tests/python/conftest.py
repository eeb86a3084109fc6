# pytest setup for the baregrad Python conformance suite: finds the package in the source tree
# (python/ and the extension in build/python/, after whatever PYTHONPATH names), and
# restores global state (Tensor.training, the random seed) around every test.
import os
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _p in (os.path.join(_ROOT, "build", "python"), os.path.join(_ROOT, "python")):
  if os.path.isdir(_p) and _p not in sys.path: sys.path.append(_p)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
  """On a DEV that cannot open for want of ptxas (MOCK+NV without the CUDA toolkit), ld.lld
  (MOCK+AMD without lld-19) or an OpenCL platform (CL), every test skips, naming the reason,
  instead of failing."""
  dev = os.environ.get("DEV", "")
  if not dev: return
  import _baregrad
  try:
    _baregrad.device_name(dev)
  except RuntimeError as e:
    if "ptxas not found" in str(e): need = "ptxas"
    elif "ld.lld not found" in str(e): need = "ld.lld (Debian: lld-19)"
    elif "cannot load the OpenCL ICD loader" in str(e) or "(this machine has 0" in str(e):
      need = "an OpenCL platform (Debian: pocl-opencl-icd)"
    else: return
    skip = pytest.mark.skip(reason=f"DEV={dev} needs {need}: {e}")
    for item in items: item.add_marker(skip)


@pytest.fixture(autouse=True)
def _restore_globals():
  from baregrad import Tensor
  training = getattr(Tensor, "training", False)
  yield
  Tensor.training = training
