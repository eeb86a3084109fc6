#!/usr/bin/env python3
"""Counts test cases for `./bare test`: passed, failed and skipped, from every runner.

Each run is a GoogleTest binary (its --gtest_output XML report) or pytest (its --junitxml
report). Runs come from meson's test log (the report path is in each test's command line) and
from --run NAME=EXIT_CODE:REPORT for runs outside meson (the sanitizer passes). A case that
GoogleTest skipped (GTEST_SKIP) or did not run (DISABLED_) is skipped, and so is a pytest skip.
A run that failed without a report of its failure counts as one failed case (it crashed or
timed out), a run meson skipped (exit 77) without a report as one skipped case.

Prints one line per run, then `N passed, N failed, N skipped` as the last line.
"""
import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET


def count_report(path):
  """(passed, failed, skipped) of a GoogleTest or JUnit XML report; None when unreadable."""
  try:
    root = ET.parse(path).getroot()
  except (OSError, ET.ParseError):
    return None
  passed = failed = skipped = 0
  for case in root.iter("testcase"):
    if case.find("failure") is not None or case.find("error") is not None:
      failed += 1
    elif (case.find("skipped") is not None or case.get("status") == "notrun" or
          case.get("result") in ("skipped", "suppressed")):
      skipped += 1
    else:
      passed += 1
  return passed, failed, skipped


def report_of(command):
  """The report path a test command writes, if it names one."""
  for arg in command:
    for flag in ("--gtest_output=xml:", "--junitxml="):
      if arg.startswith(flag): return arg[len(flag):]
  return None


def count_run(name, outcome, report):
  """(passed, failed, skipped) of one run; outcome is "ok", "fail" or "skip"."""
  counts = count_report(report) if report and os.path.exists(report) else None
  if counts is None:
    return {"ok": (1, 0, 0), "fail": (0, 1, 0), "skip": (0, 0, 1)}[outcome]
  passed, failed, skipped = counts
  if outcome == "fail" and failed == 0: failed = 1  # died after (or without) its report
  return passed, failed, skipped


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--meson", help="meson's testlog.json")
  p.add_argument("--run", action="append", default=[], metavar="NAME=EXIT_CODE:REPORT",
                 help="a run outside meson: its exit code and report")
  args = p.parse_args()
  runs = []
  if args.meson and os.path.exists(args.meson):
    with open(args.meson) as f:
      for line in f:
        t = json.loads(line)
        result = t.get("result", "")
        outcome = ("ok" if result in ("OK", "EXPECTEDFAIL") else
                   "skip" if result == "SKIP" else "fail")
        runs.append((t["name"], outcome, report_of(t.get("command", []))))
  for r in args.run:
    name, _, rest = r.partition("=")
    code, _, report = rest.partition(":")
    outcome = "ok" if code == "0" else "skip" if code == "77" else "fail"
    runs.append((name, outcome, report))
  total = [0, 0, 0]
  for name, outcome, report in runs:
    c = count_run(name, outcome, report)
    for i in range(3): total[i] += c[i]
    print(f"  {name}: {c[0]} passed, {c[1]} failed, {c[2]} skipped")
  print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
  return 0


if __name__ == "__main__":
  sys.exit(main())
