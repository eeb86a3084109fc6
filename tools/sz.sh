#!/usr/bin/env bash
# Line budget: lines of *.cc, *.h and *.def per top-level folder, and files over the soft cap.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
readonly SOFT_CAP=800

list_sources() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' '*.def'
  else
    find . -path './build*' -prune -o -path './.*' -prune -o -type f \
      \( -name '*.cc' -o -name '*.h' -o -name '*.def' \) -print | sed 's|^\./||'
  fi
}

mapfile -t files < <(list_sources | sort)
if ((${#files[@]} == 0)); then
  echo "line budget: no sources"
  exit 0
fi

echo "line budget (*.cc *.h *.def):"
wc -l -- "${files[@]}" | awk -v cap="$SOFT_CAP" '
  $2 == "total" && NF == 2 { next }
  {
    dir = $2; sub(/\/.*/, "", dir); if (dir == $2) dir = ".";
    lines[dir] += $1; count[dir]++; total += $1; nfiles++
    if ($1 > cap) big = big sprintf("  %-40s %6d\n", $2, $1)
  }
  END {
    for (d in lines) printf "  %-12s %7d lines %4d files\n", d, lines[d], count[d] | "sort"
    close("sort")
    printf "  %-12s %7d lines %4d files\n", "total", total, nfiles
    if (big != "") printf "files over %d lines:\n%s", cap, big
  }'
