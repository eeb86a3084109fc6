#!/usr/bin/env bash
# Instructions the CPU executes per run of a Python statement through baregrad's API, counted by
# valgrind's callgrind: exact and repeatable where wall-clock times on a shared 2-vCPU VM vary by
# 2x from run to run, so a host-overhead change can be judged before it is timed by bare_bench.
#
#   bench/ref/instructions_per_op.sh [STATEMENT]
#
# STATEMENT (default: the `python tiny op` row's body) may use `a` and `b` (16 random floats,
# realized), `Tensor` and `dev` (the default device). It runs 3,000 times to warm the caches,
# then N times, for N = 2,000 and 12,000 in two processes; the difference of the two totals over
# 10,000 is the count per statement (startup and warm-up cancel). Needs valgrind (apt-get install
# valgrind) and a built tree (./bare build). Takes about a minute.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
stmt="${1:-(a + 1).realize(); dev.synchronize()}"
command -v valgrind >/dev/null || { echo "instructions_per_op: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[[ -d build/python ]] || { echo "instructions_per_op: no build/python: run ./bare build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {
  cat >"$tmp/body.py" <<EOF
import sys
sys.path[:0] = ["python", "build/python"]
from baregrad import Device, Tensor
a, b = Tensor.rand(16).realize(), Tensor.rand(16).realize()
dev = Device[Device.DEFAULT]
for _ in range(3000): $stmt
for _ in range($1): $stmt
EOF
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1" /usr/bin/python3 "$tmp/body.py" 2>&1 |
    awk '/Collected/ { gsub(",", "", $4); print $4 }'
}
lo=$(count 2000)
hi=$(count 12000)
[[ -n "$lo" && -n "$hi" ]] || { echo "instructions_per_op: the statement failed under valgrind" >&2; exit 1; }
echo "$stmt: $(((hi - lo) / 10000)) instructions per run"
