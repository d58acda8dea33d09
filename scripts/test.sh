#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds with warnings as errors, checks formatting and
# runs the whole test suite; then builds again with AddressSanitizer and UBSan and runs the
# single-host suite there, each test at its smallest process count (skip that with
# RMASTORE_SANITIZE=0).
# RMASTORE_TSAN=1 (opt-in: under TSan test_put_get.np2 alone takes 2 minutes) adds a ThreadSanitizer
# build and runs the data-path and localized tests there at 2 processes, and every single-node
# failure scenario (RMASTORE_TSAN_TESTS, a ctest -R regex, chooses others).
# Extra arguments go to ctest (e.g. -L unit). The suite includes tests across 3 simulated hosts
# (label multihost, scripts/multihost.sh) and batch jobs on a Slurm cluster of them (label slurm,
# scripts/slurm.sh): they need root and network namespaces; and LAMMPS
# under kills (label lammps, examples/lammps; RMASTORE_LAMMPS=0 builds neither LAMMPS nor them).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# LAMMPS for the tests of examples/lammps (label lammps): built once into the cache, about 13
# minutes on 2 cores (scripts/setup-lammps.sh). RMASTORE_LAMMPS=0 leaves them out.
lammps_args=()
if [ "${RMASTORE_LAMMPS:-1}" != 0 ]; then
  bash "$RMASTORE_ROOT/scripts/setup-lammps.sh"
  # shellcheck source=/dev/null
  source "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/lammps-env.sh"
  lammps_args=(-DCMAKE_PREFIX_PATH="$LAMMPS_PREFIX")
fi
# The Fortran module and its tests are required here (RMASTORE_FORTRAN=ON), not left out quietly.
rmastore_build "${lammps_args[@]}" -DRMASTORE_FORTRAN=ON
base_build_dir=$RMASTORE_BUILD_DIR

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
  # LAMMPS's driver is not built here: LAMMPS itself is not instrumented.
  rmastore_build -DRMASTORE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_PREFIX_PATH= -DRMASTORE_FORTRAN=ON
  # The multi-host and Slurm runs exercise the same library code over another transport, 6 or
  # more processes run the code paths of 5 at a larger scale, and a test's other process counts
  # run the same code paths in other interleavings: under the sanitizers each single-host test
  # up to 5 processes runs once, at its smallest process count (192 of 296 tests; CI's time
  # budget stays under an hour).
  args=("$@")
  if [ ${#args[@]} -eq 0 ]; then
    smallest=$(ctest --test-dir "$RMASTORE_BUILD_DIR" -N -LE 'multihost|slurm' | awk '/Test +#/ { print $3 }' |
      grep -vE '\.np([6-9]|[1-9][0-9])$' | awk '{ base = $0; np = 0
             if (match($0, /\.np[0-9]+$/)) { base = substr($0, 1, RSTART - 1); np = substr($0, RSTART + 3) + 0 }
             if (!(base in best) || np < best[base]) best[base] = np }
           END { for (b in best) print (best[b] ? b ".np" best[b] : b) }' |
      sed 's/[.[\*^$+?(){}|]/\\&/g' | paste -sd'|')
    args=(-R "^($smallest)\$")
  fi
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir "$RMASTORE_BUILD_DIR" --output-on-failure "${args[@]}"
fi

if [ "${RMASTORE_TSAN:-0}" = 1 ]; then
  echo "== data-path, localized and failure tests under ThreadSanitizer"
  RMASTORE_BUILD_DIR="$base_build_dir-tsan"
  rmastore_build -DRMASTORE_TSAN=ON -DCMAKE_BUILD_TYPE=Debug
  # TSAN_OPTIONS (tests/tsan.supp) comes with each test's environment; mpirun_test.sh fails a
  # test whose output holds a ThreadSanitizer report.
  ctest --test-dir "$RMASTORE_BUILD_DIR" --output-on-failure -j2 -LE multihost \
    -R "${RMASTORE_TSAN_TESTS:-^test_(put_get|torn|remote_completion|localized)(_localized)?\.np2\$|^failure_}"
fi
