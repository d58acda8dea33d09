#!/usr/bin/env bash
# Runs one MPI test and judges it by what every rank reports, not by mpirun's exit code (which
# is 0 even after a rank was killed).
#   mpirun_test.sh <mpirun> <np> <expected passing ranks> <timeout s> <exe> [args...]
# RMASTORE_TEST_HOSTS=N: across N simulated hosts (scripts/multihost.sh).
set -u
mpirun=$1 np=$2 expect=$3 limit=$4
shift 4
# Like every time bound of the tests, the limit scales with RMASTORE_TEST_TIME_SCALE (see
# tests/test_util.hpp); CTest's backstop scales with it too (cmake/RmastoreTesting.cmake).
scale=${RMASTORE_TEST_TIME_SCALE:-1}
if ! limit=$(awk -v l="$limit" -v s="$scale" 'BEGIN { if (s + 0 <= 0) exit 1; printf "%d", l * s + 0.5 }'); then
  echo "mpirun_test: RMASTORE_TEST_TIME_SCALE must be a positive number, not '$scale'"
  exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-test.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# The mpirun flags, the launch across simulated hosts and the noise filter: scripts/launch.sh.
# shellcheck source=scripts/launch.sh
source "$(dirname "$0")/../scripts/launch.sh"
rmastore_launch "$mpirun"
# A test about to time out prints every thread's stack of each of its ranks first (gdb), so that
# a hang seen once, in CI say, shows where it hung. Its ranks: processes of the test's executable
# whose environment names this test's verdict directory.
exe=$(readlink -f "$1")
dump_at=$((limit - (limit / 8 > 10 ? limit / 8 : 10)))
dump_stacks() {
  echo "mpirun_test: ${dump_at}s of ${limit}s passed: the stacks of every rank still running"
  for proc in /proc/[0-9]*; do
    [ "$(readlink "$proc/exe" 2>/dev/null)" = "$exe" ] || continue
    tr '\0' '\n' <"$proc/environ" 2>/dev/null | grep -qx "RMASTORE_TEST_VERDICT_DIR=$dir" || continue
    echo "== pid ${proc#/proc/}"
    timeout 20 gdb -p "${proc#/proc/}" -batch -nx -ex 'thread apply all bt 25' 2>&1 | grep -E '^(Thread|#)'
  done
}
if [ "$dump_at" -gt 0 ] && command -v gdb >/dev/null; then
  (
    sleep "$dump_at" </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/watch.sleep"
    wait $! && dump_stacks
  ) &
  watch=$!
fi
RMASTORE_TEST_VERDICT_DIR=$dir timeout --kill-after=10 "$limit" "${RMASTORE_LAUNCH[@]}" -n "$np" "$@" 2>&1 |
  rmastore_filter_noise | tee "$dir/output"
rc=${PIPESTATUS[0]}
if [ -n "${watch:-}" ]; then
  kill "$watch" 2>/dev/null
  kill "$(cat "$dir/watch.sleep" 2>/dev/null)" 2>/dev/null
  wait "$watch" 2>/dev/null
fi
# A sanitizer's report fails the test even if every rank passed (ThreadSanitizer reports and
# goes on: its exit code is lost behind mpirun's).
if grep -q -a -e '^WARNING: ThreadSanitizer' -e '^==[0-9]*==ERROR: AddressSanitizer' "$dir/output"; then
  echo "mpirun_test: FAILED: a sanitizer reported errors (above)"
  exit 1
fi

# Deaths the scenario configured must have happened where it said: each spec of RMASTORE_FAULT
# (and each line a test wrote to faults-expected: specs it chose itself, own-hand@<rank> for a
# rank that kills itself, stopped@<rank> for one that stops itself) needs the marker its victim
# left right before dying or stopping (src/common/fault.cpp, tests/test_util.cpp). Without this, a
# victim whose fault point was never reached would die later anyway and the scenario would pass.
unfired=()
specs=$(printf '%s\n' "${RMASTORE_FAULT:-}" | tr ',' '\n'; cat "$dir/faults-expected" 2>/dev/null)
for spec in $specs; do
  point=${spec%%[@#]*} rank='*' nth=1
  [[ $spec == *@* ]] && { rank=${spec#*@}; rank=${rank%%#*}; }
  [[ $spec == *#* ]] && nth=${spec##*#}
  if [ "$point" = own-hand ]; then
    marker="$dir/killed.$rank"
  elif [ "$point" = stopped ]; then
    marker="$dir/stopped.$rank"
  elif [ "$point" = host-lost ]; then
    # A host lost under Slurm (tests/test_util.cpp): its processes, slurmd and slurmstepd among them.
    marker="$dir/host-lost.$rank"
    grep -q '^killed:' $marker 2>/dev/null || marker="$dir/host-lost-missed"
  else
    marker="$dir/fault-fired.$point@$rank#$nth"
  fi
  # $marker may hold a glob (any rank): it matches if some file exists.
  if ! compgen -G "$marker" >/dev/null; then unfired+=("$spec"); fi
done
# Every rank refuses an unknown point; name each once.
while read -r spec; do
  unfired+=("unknown point: $spec")
done < <(cat "$dir"/fault-unknown.* 2>/dev/null | sort -u)

pass=0 fail=0
for f in "$dir"/rank-*; do
  [ -e "$f" ] || continue
  if grep -q '^PASS' "$f"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "mpirun_test: TIMEOUT after ${limit}s ($pass of $expect ranks passed, $fail failed)"
  exit 1
fi
if [ ${#unfired[@]} -ne 0 ]; then
  echo "mpirun_test: FAILED: configured deaths that did not happen as configured: ${unfired[*]}"
  exit 1
fi
if [ "$fail" -ne 0 ] || [ "$pass" -ne "$expect" ]; then
  echo "mpirun_test: FAILED: $pass ranks passed, $fail failed, $expect expected to pass (mpirun exit $rc)"
  exit 1
fi
fired=$(cd "$dir" && ls fault-fired.* killed.* stopped.* 2>/dev/null | tr '\n' ' ')
for f in "$dir"/host-lost.*; do
  [ -e "$f" ] && fired+="($(basename "$f"): $(cat "$f")) "
done
echo "mpirun_test: all $expect surviving ranks passed${fired:+ (deaths: $fired)}"
