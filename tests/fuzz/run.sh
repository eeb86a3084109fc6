#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of tests/fuzz/ with clang-19 (ASan + UBSan), straight
# from the sources each one needs, into build/fuzz/ (the main build uses gcc). README.md here.
#
#   tests/fuzz/run.sh build              build every target
#   tests/fuzz/run.sh ci                 build, then each target once over its corpus and a
#                                        fixed-seed pass (-seed=1 -runs=N): what `./bare test` runs
#   tests/fuzz/run.sh long [TARGET] [S]  open-ended: S seconds per target (default: until
#                                        stopped), new inputs into build/fuzz/work/TARGET,
#                                        crashes into build/fuzz/crashes/
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."

readonly CXX=${FUZZ_CXX:-clang++-19}
CCACHE=$(command -v ccache || true)
readonly OUT=build/fuzz
readonly FLAGS=(-std=c++20 -O1 -g -I. -fno-omit-frame-pointer -fsanitize=address,undefined
  -fno-sanitize-recover=undefined -Wall -Wextra -Werror)
readonly TARGETS=(safetensors cubin amdhsa qmd fake_gpu)
# Runs per target of the CI pass: about 20 s of CPU in all (under a minute on a loaded 2-core
# machine), after the build (cached by ccache and in build/fuzz/obj).
declare -A RUNS=([safetensors]=50000 [cubin]=200000 [amdhsa]=200000 [qmd]=400000 [fake_gpu]=40000)

readonly BASE=(base/error.cc base/format.cc base/check.cc base/status.cc)
sources() {
  case $1 in
    safetensors) echo tensor/safetensors_header.cc compiler/dtype.cc "${BASE[@]}" ;;
    cubin) echo drivers/nv/cubin.cc base/elf.cc "${BASE[@]}" ;;
    amdhsa) echo drivers/amd/code_object.cc base/elf.cc "${BASE[@]}" ;;
    qmd) echo drivers/mock/nvgpu/qmd_decode.cc drivers/nv/classes.cc "${BASE[@]}" ;;
    fake_gpu) echo drivers/mock/nvgpu/*.cc drivers/nv/classes.cc drivers/nv/gpfifo.cc \
      base/log.cc base/options.cc "${BASE[@]}" ;;
  esac
}

# obj SRC: the object of SRC under $OUT/obj, compiled when missing or older than SRC or a header.
obj() {
  local o="$OUT/obj/${1%.cc}.o"
  if [[ ! -f "$o" || "$1" -nt "$o" || -n "$(find base compiler drivers hcq tensor -name '*.h' -newer "$o" -print -quit)" ]]; then
    mkdir -p "$(dirname "$o")"
    $CCACHE "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$1" -o "$o" >&2 || return 1
  fi
  echo "$o"
}

build() {
  command -v "$CXX" >/dev/null || { echo "fuzz: $CXX not found (Debian: clang-19)" >&2; return 1; }
  local t objs src
  for t in "${TARGETS[@]}"; do
    objs=()
    for src in tests/fuzz/fuzz_$t.cc $(sources "$t"); do objs+=("$(obj "$src")") || return 1; done
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "${objs[@]}" -o "$OUT/fuzz_$t" -lpthread || {
      echo "fuzz: linking fuzz_$t failed (libFuzzer is in Debian's libclang-rt-19-dev)" >&2
      return 1
    }
  done
}

# The CI pass: every corpus input (seeds and crash regressions), then N fixed-seed mutations.
# New inputs go to a scratch folder, never into the checked-in corpus.
ci() {
  build || return 1
  local t rc=0 scratch
  scratch=$(mktemp -d)
  for t in "${TARGETS[@]}"; do
    mkdir -p "$scratch/$t"
    local start=$SECONDS
    if "$OUT/fuzz_$t" -seed=1 -runs="${RUNS[$t]}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$OUT/crash-$t-" "$scratch/$t" "tests/fuzz/corpus/$t" >"$OUT/$t.log" 2>&1; then
      echo "fuzz: $t: ${RUNS[$t]} runs, $(grep -c . <(ls "tests/fuzz/corpus/$t")) corpus inputs, $((SECONDS - start)) s: ok"
    else
      tail -40 "$OUT/$t.log"
      echo "fuzz: $t FAILED (log $OUT/$t.log; the input is $OUT/crash-$t-*)"
      rc=1
    fi
  done
  rm -rf "$scratch"
  return "$rc"
}

long() {
  build || return 1
  local targets=("${TARGETS[@]}") seconds=${2:-0} t
  [[ -n "${1:-}" ]] && targets=("$1")
  mkdir -p "$OUT/crashes"
  for t in "${targets[@]}"; do
    mkdir -p "$OUT/work/$t"
    echo "fuzz: $t for $seconds s (0: until stopped); new inputs in $OUT/work/$t"
    "$OUT/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$OUT/crashes/$t-" "$OUT/work/$t" "tests/fuzz/corpus/$t" || return 1
  done
}

mkdir -p "$OUT"
case "${1:-ci}" in
  build) build ;;
  ci) ci ;;
  long) long "${2:-}" "${3:-0}" ;;
  *) sed -n '2,11p' "$0" >&2; exit 2 ;;
esac
