#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds with warnings as errors, checks formatting and
# runs the whole test suite; then builds again with AddressSanitizer and UBSan and runs the
# suite there, but for the tests across simulated hosts (skip that with RMASTORE_SANITIZE=0).
# Extra arguments go to ctest (e.g. -L unit). The suite includes tests across 3 simulated hosts
# (label multihost, scripts/multihost.sh): they need root and network namespaces.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rmastore_build

echo "== clang-format check"
cd "$RMASTORE_ROOT"
mapfile -t sources < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null ||
  find include src tests benchmarks examples scripts -name '*.[ch]' -o -name '*.[ch]pp')
clang-format --dry-run -Werror "${sources[@]}"

echo "== tests"
ctest --test-dir "$RMASTORE_BUILD_DIR" --output-on-failure "$@"

if [ "${RMASTORE_SANITIZE:-1}" != 0 ]; then
  echo "== tests under AddressSanitizer and UndefinedBehaviorSanitizer"
  RMASTORE_BUILD_DIR="$RMASTORE_BUILD_DIR-sanitize"
  rmastore_build -DRMASTORE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
  # The multi-host runs exercise the same library code over another transport; under the
  # sanitizers the single-host suite covers it (and CI's time budget stays).
  args=("$@")
  [ ${#args[@]} -eq 0 ] && args=(-LE multihost)
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir "$RMASTORE_BUILD_DIR" --output-on-failure "${args[@]}"
fi
