# KERNEL_LOG (one line per lowered kernel) and tools/op_slice.py (the slice of the op suites the
# secondary backends run), against hand-written expectations.
import os
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TOOL = os.path.join(_ROOT, "tools", "op_slice.py")


def test_kernel_log_names_target_kernel_and_op_dtype_pairs(tmp_path):
  log = tmp_path / "k.log"
  env = dict(os.environ, KERNEL_LOG=str(log), DEV="CPU", DISABLE_COMPILER_CACHE="1")
  code = ("from baregrad import Tensor\n"
          "(Tensor([1.0, 2.0]) + float('inf')).realize()\n"
          "Tensor([1, 2]).cast('float32').realize()\n")
  subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
  lines = [l.split(" ") for l in log.read_text().splitlines()]
  assert lines and all(len(l) >= 3 for l in lines)
  toks = {t for l in lines for t in l[2:]}
  assert any(t.startswith("ADD.float32") for t in toks), toks
  assert any(t.startswith("CONST.float32") and t.endswith("=inf") for t in toks), toks
  assert any(t.startswith("CAST.float32") and "<int32" in t for t in toks), toks
  assert {l[0] for l in lines} == {lines[0][0]}  # one target: the CPU's


def _make(tmp_path, log_text, *always):
  log, out = tmp_path / "k.log", tmp_path / "slice.txt"
  log.write_text(log_text)
  args = [sys.executable, _TOOL, "make", str(log), "-o", str(out)]
  for a in always: args += ["--always", a]
  subprocess.run(args, check=True, capture_output=True, timeout=60)
  return [l for l in out.read_text().splitlines() if not l.startswith("#")]


def test_slice_is_the_fewest_tests_that_cover_every_shape(tmp_path):
  log = ("# A.one\ncpu E_4 ADD.float32 LOAD.float32\n"
         "# A.two\ncpu E_8 ADD.float32\n"  # E_8 is E_4's loop structure: nothing new
         "# A.three\ncpu r_4_4 MUL.int32\ngpu E_4 ADD.float32\n"
         "# A.four\ncpu E_4 MUL.int32\n")
  assert _make(tmp_path, log) == ["A.one", "A.three"]
  assert _make(tmp_path, log, "^A\\.two$") == ["A.one", "A.three", "A.two"]


def test_slice_refuses_a_log_without_test_marks(tmp_path):
  log, out = tmp_path / "k.log", tmp_path / "s.txt"
  log.write_text("cpu E_4 ADD.float32\n")
  r = subprocess.run([sys.executable, _TOOL, "make", str(log), "-o", str(out)],
                     capture_output=True, text=True, timeout=60)
  assert r.returncode != 0 and "no '# <test>' marks" in r.stderr
