"""Runs a program written for tinygrad on baregrad, unchanged: `import tinygrad` and
`from tinygrad.x.y import z` resolve to baregrad and baregrad.x.y.

  python3 -m baregrad.as_tinygrad script.py [args...]      # run a script
  python3 -m baregrad.as_tinygrad -m pytest test_ops.py    # run a module (pytest, say)
  import baregrad.as_tinygrad                               # in-process: installs the alias

A tinygrad module baregrad does not have (tinygrad.codegen, say) raises ModuleNotFoundError naming
it and saying it is tinygrad's internals, so a script fails at its import line, not later. A real
tinygrad installed on the path is shadowed while the alias is installed.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import runpy
import sys

_PREFIX = "tinygrad"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds tinygrad[.x] as the module baregrad[.x], one module object under both names."""

  def find_spec(self, fullname, path=None, target=None):
    if fullname != _PREFIX and not fullname.startswith(_PREFIX + "."): return None
    real = "baregrad" + fullname[len(_PREFIX):]
    try:
      found = importlib.util.find_spec(real)
    except ModuleNotFoundError:
      found = None
    if found is None:
      raise ModuleNotFoundError(f"[as_tinygrad] no module named {fullname!r}: baregrad has no {real!r} (tinygrad's "
                                "internals are not part of the API baregrad provides; python/README.md lists what is)",
                                name=fullname)
    return importlib.util.spec_from_loader(fullname, self, is_package=found.submodule_search_locations is not None)

  def create_module(self, spec):
    return importlib.import_module("baregrad" + spec.name[len(_PREFIX):])

  def exec_module(self, module):
    pass  # baregrad's module is already executed; importing it again under this name changes nothing


_finder = _Alias()


def install() -> None:
  """Makes `import tinygrad...` give baregrad's modules in this process (idempotent)."""
  if _finder not in sys.meta_path: sys.meta_path.insert(0, _finder)
  for name in [n for n in sys.modules if n == _PREFIX or n.startswith(_PREFIX + ".")]:
    del sys.modules[name]  # a real tinygrad imported before would otherwise stay


def _main(argv: list[str]) -> int:
  usage = "usage: python3 -m baregrad.as_tinygrad (script.py | -m module) [args...]"
  if not argv or argv[0] in ("-h", "--help"):
    print(usage + "\nRuns a tinygrad program with `tinygrad` imported as baregrad.", file=sys.stderr if not argv else sys.stdout)
    return 0 if argv else 2
  install()
  if argv[0] == "-m":
    if len(argv) < 2:
      print(usage, file=sys.stderr)
      return 2
    sys.argv = argv[1:]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
  else:
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))  # as `python3 script.py` does
    runpy.run_path(argv[0], run_name="__main__")
  return 0


if __name__ == "__main__":
  sys.exit(_main(sys.argv[1:]))
else:
  install()
