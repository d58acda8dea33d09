#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds with warnings as errors, checks formatting and
# runs the whole test suite. Extra arguments go to ctest (e.g. -L unit, -R put_get).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rmastore_build

echo "== clang-format check"
cd "$RMASTORE_ROOT"
mapfile -t sources < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null || find include src tests benchmarks examples -name '*.[ch]*')
clang-format --dry-run -Werror "${sources[@]}"

echo "== tests"
ctest --test-dir "$RMASTORE_BUILD_DIR" --output-on-failure "$@"
