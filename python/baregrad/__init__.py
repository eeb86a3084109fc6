"""baregrad: tinygrad's Python API over baregrad's C++ tensor layer.

  from baregrad import Tensor, dtypes, nn
  import baregrad as tinygrad  # code written for tinygrad runs as is
"""
try:
  import _baregrad  # noqa: F401
except ImportError as e:
  raise ImportError(f"[import] the _baregrad extension is missing: build it with `./bare build` and put build/python on "
                    "PYTHONPATH (`./bare python` does both), or install with `./bare install`") from e
# Reads the options (DEBUG, THREADS, ...) now: a bad value is a ValueError naming the variable at
# import ("[options] THREADS=-3: must be an integer in [0, 1024]"), not a failure at first use.
_baregrad.option_value("DEBUG")

from baregrad.tensor import Tensor  # noqa: F401
from baregrad.engine.jit import TinyJit  # noqa: F401
from baregrad.function import function  # noqa: F401
from baregrad.dtype import dtypes  # noqa: F401
from baregrad.helpers import GlobalCounters, fetch, Context, getenv  # noqa: F401
from baregrad.device import Device  # noqa: F401
from baregrad.variable import Variable  # noqa: F401
from baregrad.uop import UOp  # noqa: F401  (only UOp.variable and isinstance checks: baregrad/uop/ops.py)
from baregrad import nn  # noqa: F401

__all__ = ["Tensor", "TinyJit", "function", "dtypes", "GlobalCounters", "fetch", "Context", "getenv", "Device", "Variable", "UOp", "nn"]
