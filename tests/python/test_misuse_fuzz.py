# The misuse fuzzer (misuse_fuzz.py) with a fixed seed: random op chains must agree with numpy and
# random bad calls must end in a result or a documented exception, never a crash, an abort, a
# hang or a wrong answer. Long runs: ./bare python tests/python/misuse_fuzz.py --forever
import os

import misuse_fuzz

CASES = int(os.environ.get("MISUSE_FUZZ_CASES", "400"))

# What the fuzzer found, kept as programs (a changed generator must not lose them).
FOUND = [
  "bad('X.pad(((2, 0), (1099511627776, 0))).sum().numpy()')",  # hung: a sum over 2**41 elements
  "bad('X.matmul(Tensor.ones(4611686018427387904, 0)).numpy()')",  # hung
  "bad('X.pad(((1099511627776, 0), (True, 0))).sum().numpy()')",  # hung
  "twin('X[[0, 3]]', 'XN[[0, 3]]')",  # out of range, read row 0
  "twin('X[(2, 3), -2]', 'XN[(2, 3), -2]')",
  "twin('X[[0, 2147483648]]', 'XN[[0, 2147483648]]')",
  "twin('X[[0, [1, 2]]]', 'XN[0, [1, 2]]')",  # a list not all ints is a tuple (tinygrad's, torch's)
  "twin('X[[0, None]]', 'XN[0, None]')",
  "twin('X[[]]', 'XN[[]]')",  # was all of X
  "twin('X.triu(18446744073709551616)', 'np.triu(XN, 18446744073709551616)')",
  "twin('X.triu(4611686018427387904)', 'np.triu(XN, 4611686018427387904)')",  # kept everything
  "twin('X.triu(2147483648)', 'np.triu(XN, 2147483648)')",
  "twin(\"X.triu(float('nan'))\", \"np.triu(XN, float('nan'))\")",
  "twin(\"Tensor([1.0, float('nan'), 3]).argmax()\", \"np.argmax(np.array([1.0, float('nan'), 3]))\")",  # gave 3
  "twin(\"Tensor.arange(float('nan'), 7, float('inf'))\", \"np.arange(float('nan'), 7, float('inf'))\")",
  "twin(\"Tensor.arange(float('inf'), -0.5, float('-inf'))\", \"np.arange(float('inf'), -0.5, float('-inf'))\")",
  "twin(\"Tensor.arange(2147483648, float('nan'), -0.5)\", \"np.arange(2147483648, float('nan'), -0.5)\")",
]
HEAD = "XN = _data(1, (3, 4))\nIN = _data(2, (3, 4), 'i')\nX = Tensor(XN)\nI = Tensor(IN)\nB = Tensor(_data(3, (3, 4), 'b'))\n"


def _explain(findings, programs=None):
  return "\n".join(f"case {i}: {res}\n{programs[i] if programs else misuse_fuzz.make_case(s, i)}\n" for s, i, res in findings)


def test_fixed_seed_has_no_findings():
  findings = misuse_fuzz.run_cases(seed=1, cases=CASES, timeout=60, progress=False)
  assert not findings, _explain(findings)


def test_what_the_fuzzer_found_stays_fixed():
  programs = [HEAD + p for p in FOUND]
  findings = misuse_fuzz.run_programs(programs, timeout=60)
  assert not findings, _explain(findings, programs)


def test_the_fuzzer_sees_crashes_hangs_wrong_answers_and_odd_exceptions():
  # The fuzzer itself must be able to fail: each of these is a finding, except the clear error.
  programs = ["import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", "x = Tensor([1.0]) + 1\ncheck(x, np.array([3.0]), 'f')",
              "bad('Tensor.ones(2, 3).reshape(7)')", "bad('Tensor.ones(2).xyz()')", "import time\ntime.sleep(30)",
              HEAD + "twin('X[0:2]', 'XN[7]')", HEAD + "twin('X[1]', 'XN[2]')"]
  found = {i: res for _, i, res in misuse_fuzz.run_programs(programs, timeout=5)}
  assert found[0].startswith("crash"), found
  assert found[1].startswith("wrong"), found
  assert 2 not in found, found  # a ValueError naming reshape is a documented outcome
  assert found[3].startswith("kind: AttributeError"), found
  assert found[4].startswith("hang"), found
  assert found[5].startswith("accepted"), found
  assert found[6].startswith("wrong"), found
