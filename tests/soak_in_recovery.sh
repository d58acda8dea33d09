#!/usr/bin/env bash
# Soak of deaths inside store_recover: test_failure's --in-recovery driver over many seeds, both
# variants, across simulated hosts (docs/soak.md).
#
#   tests/soak_in_recovery.sh <build dir> <first seed> <count> <log> [hosts]
#
# Seed S runs at 5 + S % 2 processes on `hosts` simulated hosts (default 3; 0 runs on one node),
# global variant then localized; 3 of them survive. One line per run goes to <log>: seed, variant, processes, PASS or
# FAIL, seconds, and the scenario the seed drew. A failed run's whole output is kept as
# <log>.seed<S>.<variant>. The exit status is the number of failed runs (at most 255).
set -u -o pipefail
build=$1 first=$2 count=$3 log=$4 hosts=${5:-3}
here=$(cd "$(dirname "$0")" && pwd)
exe=$build/tests/test_failure
[ -x "$exe" ] || { echo "soak: no $exe (build the tests first)" >&2; exit 2; }
# shellcheck source=/dev/null
[ -f "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/mpi-env.sh" ] && source "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/mpi-env.sh"
mpirun=$(command -v mpiexec) || { echo "soak: no mpiexec on PATH" >&2; exit 2; }
if [ "$hosts" -gt 0 ]; then export RMASTORE_TEST_HOSTS=$hosts; else unset RMASTORE_TEST_HOSTS; fi
failed=0
for seed in $(seq "$first" $((first + count - 1))); do
  np=$((5 + seed % 2))
  for variant in global localized; do
    args=(--seed "$seed" --in-recovery 1)
    [ "$variant" = localized ] && args+=(--localized 1)
    start=$SECONDS
    # 2 deaths at 5 processes, 3 at 6: 3 survivors (tests/failure/schedule.cpp, draw_in_recovery).
    out=$("$here/mpirun_test.sh" "$mpirun" "$np" 3 120 "$exe" "${args[@]}" 2>&1 | tr -d '\000')
    rc=$?
    verdict=PASS
    if [ $rc -ne 0 ]; then
      verdict=FAIL
      failed=$((failed + 1))
      printf '%s\n' "$out" >"$log.seed$seed.$variant"
    fi
    scenario=$(grep -a -m1 '^seed ' <<<"$out" | cut -c1-200)
    printf '%s %s np%d %s %ds | %s\n' "$seed" "$variant" "$np" "$verdict" $((SECONDS - start)) "$scenario" >>"$log"
  done
done
runs=$((count * 2))
echo "soak: $((runs - failed)) of $runs runs passed (seeds $first-$((first + count - 1)), log $log)"
[ "$hosts" -gt 0 ] && "$here/../scripts/multihost.sh" down >/dev/null 2>&1
exit $((failed > 255 ? 255 : failed))
