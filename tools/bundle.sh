#!/usr/bin/env bash
# tools/bundle.sh BUILD_DIR OUT_DIR: packs what a GPU machine without Debian packages needs to
# run baregrad's GPU checks. The machine lent for hardware runs has the CUDA toolkit (ptxas) but
# no LLVM, so the binaries are relinked from BUILD_DIR's objects with LLVM, libstdc++, OpenBLAS
# and zlib/zstd static: they need only glibc 2.35 or newer (the newest symbol version they use
# is printed).
#
# OUT_DIR gets bin/ (bare_info, bare_bench, bare_gpu_tests: the unit, kernel, tensor and
# conformance tests in one GoogleTest binary), run-gpu-checks.sh (what to run on the machine)
# and baregrad-bundle.tar.xz holding both, for carrying (see README.md, "On a GPU machine").
set -euo pipefail

build=$(readlink -f "${1:?usage: tools/bundle.sh BUILD_DIR OUT_DIR}")
out=$(readlink -f -m "${2:?usage: tools/bundle.sh BUILD_DIR OUT_DIR}")
here=$(dirname "$(readlink -f "$0")")
llvm_config=${LLVM_CONFIG:-llvm-config-19}

log() { echo "bundle: $*" >&2; }

# The LLVM components meson.build asks for (its `modules: [...]` list), linked from the static
# component libraries.
mapfile -t components < <(sed -n "/^  modules: \[/,/^  \],/s/^ *'\([a-z0-9]*\)',\$/\1/p" \
  "$here/../meson.build")
((${#components[@]})) || { log "no LLVM modules list in meson.build"; exit 1; }
llvm_libs=$("$llvm_config" --link-static --libdir)
llvm_static=$("$llvm_config" --link-static --libs "${components[@]}")
gcc_dir=$(dirname "$(g++ -print-libgcc-file-name)")
static_tail=(
  "-L$llvm_libs" $llvm_static
  -static-libstdc++ -static-libgcc -Wl,--gc-sections
  -Wl,-Bstatic -lz -lzstd -Wl,-Bdynamic
  -pthread -lrt -ldl -lm
)
# OpenBLAS (bench's CPU reference) as a static archive, with the Fortran runtime it needs.
blas_static=(/usr/lib/x86_64-linux-gnu/libopenblas.a "$gcc_dir/libgfortran.a" "$gcc_dir/libquadmath.a")

# link_line TARGET: ninja's link command of TARGET, as words.
link_line() { ninja -C "$build" -t commands "$1" | tail -1; }

# relink OUTPUT TARGET...: one binary from the objects of TARGETs (an object file that two
# targets share, by name, once) and every archive they link, with the static tail.
relink() {
  local output=$1
  shift
  local -A seen=()
  local objs=() archives=() w t base
  for t in "$@"; do
    for w in $(link_line "$t"); do
      case "$w" in
        *.o)
          base=${w##*/}
          [[ -n "${seen[$base]:-}" ]] && continue
          seen[$base]=1
          objs+=("$w")
          ;;
        *libopenblas.so) archives+=("${blas_static[@]}") ;;
        *.a)
          [[ -n "${seen[$w]:-}" ]] && continue
          seen[$w]=1
          archives+=("$w")
          ;;
      esac
    done
  done
  log "linking $(basename "$output") from ${#objs[@]} objects and ${#archives[@]} archives"
  (cd "$build" && c++ -o "$output" "${objs[@]}" "$compat" -Wl,--start-group "${archives[@]}" \
    -Wl,--end-group "${static_tail[@]}")
  strip "$output"
}

mkdir -p "$out/bin"
# arc4random for glibc 2.35 (tools/bundle_compat.c).
compat="$out/bundle_compat.o"
cc -O2 -Wall -Wextra -Werror -c "$here/bundle_compat.c" -o "$compat"
ninja -C "$build" tools/bare_info bench/bare_bench tests/unit_tests tests/kernel_tests \
  tests/tensor_tests tests/cts_tests >&2
relink "$out/bin/bare_info" tools/bare_info
relink "$out/bin/bare_bench" bench/bare_bench
relink "$out/bin/bare_gpu_tests" tests/unit_tests tests/kernel_tests tests/tensor_tests \
  tests/cts_tests
cp "$here/run-gpu-checks.sh" "$out/run-gpu-checks.sh"

for f in "$out"/bin/*; do
  if ldd "$f" | grep -v -E 'linux-vdso|libc\.so|libm\.so|ld-linux|libgcc_s' | grep -q '=>'; then
    log "$(basename "$f") still links a shared library besides glibc:"
    ldd "$f" >&2
    exit 1
  fi
done
glibc=$(objdump -T "$out"/bin/* | grep -o 'GLIBC_[0-9.]*' | sort -u -V | tail -1)
rm -f "$compat"
(cd "$out" && tar -cJf baregrad-bundle.tar.xz bin run-gpu-checks.sh)
log "$(du -h "$out/baregrad-bundle.tar.xz" | cut -f1) in $out/baregrad-bundle.tar.xz;" \
  "the binaries need glibc with $glibc"
echo "$out/baregrad-bundle.tar.xz"
