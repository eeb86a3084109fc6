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


def pytest_addoption(parser):
  parser.addoption("--slice", metavar="FILE",
                   help="run only the tests FILE lists (tools/op_slice.py: the slice of the op "
                   "files that the fake GPUs run)")


def _slice_name(item):
  """file.py::test[params], the name KERNEL_LOG marks and --slice files use."""
  return os.path.basename(str(item.fspath)) + "::" + item.nodeid.split("::", 1)[1]


def pytest_runtest_setup(item):
  log = os.environ.get("KERNEL_LOG")
  if log:
    with open(log, "a") as f: f.write(f"# {_slice_name(item)}\n")


def _apply_slice(config, items):
  path = config.getoption("--slice")
  if not path: return
  with open(path) as f:
    keep = {l.strip() for l in f if l.strip() and not l.startswith("#")}
  names = {_slice_name(i) for i in items}
  files = {n.split("::", 1)[0] for n in names}
  stale = sorted(k for k in keep - names if k.split("::", 1)[0] in files)
  if stale:
    raise pytest.UsageError(f"--slice {path}: {len(stale)} tests it lists do not exist (first: "
                            f"{stale[0]}); make it again with tools/op_slice.py")
  config.hook.pytest_deselected(items=[i for i in items if _slice_name(i) not in keep])
  items[:] = [i for i in items if _slice_name(i) in keep]


def pytest_collection_modifyitems(config, items):
  _apply_slice(config, items)
  _skip_without_tools(items)


def _skip_without_tools(items):
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
