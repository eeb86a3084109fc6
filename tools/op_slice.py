#!/usr/bin/python3
"""Picks the slice of an op suite that the secondary backends run (ARCHITECTURE.md, "Tests": the
full op suites run on the CPU and on CL; each other backend runs a representative slice, chosen
so that every kernel shape appears once).

Input: KERNEL_LOG files of full runs of one suite, one per backend (./bare help, KERNEL_LOG). Each
has "# <test>" before the kernels that test lowered, then one line per kernel: the target, the
kernel name and the op.dtype pairs of its uops. A kernel shape is each of those pairs, and the
kernel name with its sizes taken out (r_16_4 -> r_n_n: the loop structure), on each target. A
kernel that the program caches already held is credited to the test that lowered it first.

Output: the fewest tests (greedy set cover) whose kernels have every shape the whole suite has,
one per line, plus the tests that --always matches, after a comment that says how it was made.

  KERNEL_LOG=/tmp/nv.log DEV=MOCK+NV build/tests/tensor_tests   (and the other backends)
  tools/op_slice.py make /tmp/c.log /tmp/nv.log /tmp/amd.log --always '^Jit' -o tests/tensor/slice.txt
  tools/op_slice.py check tests/tensor/slice.txt --gtest build/tests/tensor_tests

`check` fails when the slice names a test the GoogleTest binary does not have (renamed or gone:
make the slice again). pytest's --slice (tests/python/conftest.py) checks its file itself.
"""
import argparse
import re
import subprocess
import sys


def read_log(path, coverage):
  """Adds {test: {(target, shape)}} from one KERNEL_LOG file to `coverage`."""
  test = None
  with open(path) as f:
    for n, line in enumerate(f, 1):
      line = line.rstrip("\n")
      if not line: continue
      if line.startswith("# "):
        test = line[2:]
        coverage.setdefault(test, set())
        continue
      parts = line.split(" ")
      if len(parts) < 2:
        sys.exit(f"op_slice: {path}:{n}: want '<target> <kernel> <op.dtype>...', got {line!r}")
      if test is None: continue  # lowered before the first test (a fixture's warm-up)
      target, kernel = parts[0], parts[1]
      shapes = coverage[test]
      shapes.add((target, "kernel " + re.sub(r"\d+", "n", kernel)))
      for tok in parts[2:]: shapes.add((target, tok))


def cover(coverage, always):
  """Greedy set cover: the test that adds the most shapes not yet covered, until none is left."""
  chosen = [t for t in coverage if any(a.search(t) for a in always)]
  covered = set().union(*(coverage[t] for t in chosen)) if chosen else set()
  every = set().union(*coverage.values()) if coverage else set()
  left = {t: s - covered for t, s in coverage.items() if t not in chosen}
  while covered != every:
    best = max(left, key=lambda t: (len(left[t] - covered), -len(t)))
    gain = left.pop(best) - covered
    if not gain: break
    chosen.append(best)
    covered |= gain
  return chosen, every


def gtest_names(binary):
  """Suite.Test of every test of a GoogleTest binary (--gtest_list_tests)."""
  out = subprocess.run([binary, "--gtest_list_tests"], capture_output=True, text=True, timeout=60)
  if out.returncode != 0:
    sys.exit(f"op_slice: {binary} --gtest_list_tests failed ({out.returncode}): {out.stderr}")
  names, suite = set(), ""
  for line in out.stdout.splitlines():
    if not line.strip(): continue
    if not line.startswith(" "): suite = line.split("#")[0].strip()
    else: names.add(suite + line.split("#")[0].strip())
  return names


def read_slice(path):
  with open(path) as f:
    return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def make(a):
  coverage = {}
  for path in a.logs: read_log(path, coverage)
  if not coverage: sys.exit("op_slice: no '# <test>' marks in the logs: were they full runs?")
  chosen, every = cover(coverage, [re.compile(r) for r in a.always])
  with open(a.out, "w") as f:
    f.write(f"# The slice of the suite the secondary backends run: {len(chosen)} of {len(coverage)}\n"
            f"# tests, covering all {len(every)} kernel shapes (target, op.dtype or loop structure)\n"
            f"# of a full run. Made by tools/op_slice.py make"
            f"{''.join(' --always ' + repr(r) for r in a.always)} from KERNEL_LOG runs; see there.\n")
    for t in sorted(chosen): f.write(t + "\n")
  print(f"op_slice: {len(chosen)} of {len(coverage)} tests cover all {len(every)} shapes -> {a.out}")


def check(a):
  have = gtest_names(a.gtest)
  listed = read_slice(a.slice)
  missing = [t for t in listed if t not in have]
  if missing:
    sys.exit(f"op_slice: {a.slice} names {len(missing)} tests {a.gtest} does not have (first: "
             f"{missing[0]}); make the slice again (tools/op_slice.py make)")
  if not listed: sys.exit(f"op_slice: {a.slice} lists no tests")
  print(f"op_slice: all {len(listed)} tests of {a.slice} exist in {a.gtest}")


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  sub = ap.add_subparsers(dest="cmd", required=True)
  m = sub.add_parser("make", help="pick the slice from KERNEL_LOG files of full runs")
  m.add_argument("logs", nargs="+", help="KERNEL_LOG files of full runs, one per backend")
  m.add_argument("--always", action="append", default=[],
                 help="regex of tests kept whatever they lower (device behaviour beyond kernels)")
  m.add_argument("-o", "--out", required=True, help="the slice file to write")
  c = sub.add_parser("check", help="fail if the slice names a test the binary does not have")
  c.add_argument("slice")
  c.add_argument("--gtest", required=True, help="the GoogleTest binary the slice is for")
  a = ap.parse_args()
  make(a) if a.cmd == "make" else check(a)


if __name__ == "__main__":
  main()
