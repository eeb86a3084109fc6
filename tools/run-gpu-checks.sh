#!/usr/bin/env bash
# run-gpu-checks.sh [STEP...] : the hardware checks of the NVIDIA driver, run from an unpacked
# bundle (tools/bundle.sh) on a machine with an NVIDIA GPU. Steps (default: all, in order):
#   info   the machine (date, kernel, glibc, driver, nvidia-smi) and `bare_info` of every device
#   tests  the GoogleTest suites with DEV=NV (tensor ops and kernels on the GPU; the conformance
#          suite on every backend, `nv` being the GPU), then again with DEV=CUDA as a cross-check
#   bench  `bare_bench --filter ^gpu` (NV against CUDA and cuBLAS), with a JSON copy
# Each step writes RESULTS/<step>.txt (RESULTS: $OUT when set, else ./results), has its own
# time limit (STEP_TIMEOUT seconds, default 540) and does not stop the steps after it.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")"
results=${OUT:-$PWD/results}
limit=${STEP_TIMEOUT:-540}
mkdir -p "$results"

# The CUDA fake-library tests need libraries built on the bundling machine: left out here.
readonly NO_FAKES='-Cuda*:CudaGraph*:CudaCublas*'

step_info() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel: $(uname -srm)"
  echo "glibc: $(ldd --version 2>&1 | head -1)"
  echo "driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo 'no /proc/driver/nvidia/version')"
  ls -l /dev/nvidia* 2>&1
  command -v nvidia-smi >/dev/null && nvidia-smi
  echo "ptxas: $(command -v ptxas || ls /usr/local/cuda/bin/ptxas 2>&1)"
  echo "---- bare_info"
  ./bin/bare_info
  echo "---- bare_info NV CUDA"
  ./bin/bare_info NV CUDA
}

step_tests() {
  echo "---- DEV=NV bare_gpu_tests"
  DEV=NV ./bin/bare_gpu_tests --gtest_filter="$NO_FAKES" --gtest_output="xml:$results/tests-nv.xml"
  echo "---- DEV=CUDA bare_gpu_tests but the conformance suite (which does not read DEV)"
  DEV=CUDA ./bin/bare_gpu_tests --gtest_filter="$NO_FAKES:Backend/*:CtsPtx.*" \
    --gtest_output="xml:$results/tests-cuda.xml"
}

step_bench() {
  ./bin/bare_bench --filter '^gpu' --json "$results/bench-gpu.json"
}

export -f step_info step_tests step_bench
export NO_FAKES results
steps=("$@")
((${#steps[@]})) || steps=(info tests bench)
for s in "${steps[@]}"; do
  if ! declare -F "step_$s" >/dev/null; then
    echo "run-gpu-checks: unknown step '$s' (steps: info tests bench)" >&2
    exit 2
  fi
  echo "run-gpu-checks: $s -> $results/$s.txt" >&2
  timeout "$limit" bash -c "step_$s" >"$results/$s.txt" 2>&1
  echo "run-gpu-checks: $s exit $?" | tee -a "$results/$s.txt" >&2
done
