#!/usr/bin/env bash
# Builds the benchmarks the way an application links rmastore: installs the library of a build
# tree into a prefix, then configures benchmarks/ on its own against that prefix
# (find_package(rmastore)) and builds it. Prints the benchmarks' build directory on stdout.
#   benchmarks/build_installed.sh [target...]          (default: store_bench)
# RMASTORE_BUILD_DIR        the library's build tree (default <repo>/build; configured if absent)
# RMASTORE_PREFIX           where the library is installed (default <build dir>/bench-install)
# RMASTORE_BENCH_BUILD_DIR  the benchmarks' build tree (default <build dir>/bench-standalone)
# RMASTORE_JOBS             parallel build jobs (default 2)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${RMASTORE_BUILD_DIR:-$root/build}
prefix=${RMASTORE_PREFIX:-$build/bench-install}
bench_build=${RMASTORE_BENCH_BUILD_DIR:-$build/bench-standalone}
jobs=${RMASTORE_JOBS:-2}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(store_bench)
# shellcheck source=/dev/null
source "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/mpi-env.sh"
{
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build"
  cmake --build "$build" --target rmastore -j "$jobs"
  cmake --install "$build" --prefix "$prefix"
  cmake -S "$root/benchmarks" -B "$bench_build" -DCMAKE_PREFIX_PATH="$prefix"
  cmake --build "$bench_build" --target "${targets[@]}" -j "$jobs"
} >&2
# The benchmarks must load the installed library, not another copy.
lib=$(cd "$prefix" && find "$PWD" -name 'librmastore.so.*' -type f | head -n1)
for t in "${targets[@]}"; do
  loads=$(ldd "$bench_build/$t" | grep rmastore || true)
  if [[ $loads != *"=> $(dirname "$lib")/librmastore.so"* ]]; then
    echo "build_installed: $bench_build/$t does not load $lib: ${loads:-no rmastore}" >&2
    exit 1
  fi
done
echo "build_installed: ${targets[*]} in $bench_build, linking $lib" >&2
echo "$bench_build"
