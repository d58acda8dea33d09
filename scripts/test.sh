#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds with warnings as errors, checks formatting and
# runs the whole test suite; then builds again with AddressSanitizer and UBSan and runs the
# suite there (skip that with RMASTORE_SANITIZE=0). Extra arguments go to ctest (e.g. -L unit).
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
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir "$RMASTORE_BUILD_DIR" --output-on-failure "$@"
fi
