#!/usr/bin/env bash
# The whole job killed, and a job of another size finishing its work from the newest snapshot:
# task_checkpoint runs in rounds with a snapshot after each; once snapshot <after> is complete,
# every process of the job gets SIGKILL; then a job of <np2> processes restores and finishes the
# count, which must be CORRECT.
#   kill_and_restart.sh <mpirun> <np1> <np2> <after> <task_checkpoint> [args...]
set -u
mpirun=$1 np1=$2 np2=$3 after=$4 exe=$5
shift 5
# shellcheck source=scripts/launch.sh
source "$(dirname "$0")/../../scripts/launch.sh"
rmastore_launch "$mpirun"
dir=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-task-checkpoint.XXXXXX")
trap 'rm -rf "$dir" "$dir.log"' EXIT
fail() {
  echo "kill_and_restart: premise failed: $*"
  exit 1
}
scale=${RMASTORE_TEST_TIME_SCALE:-1}
limit=$(awk -v s="$scale" 'BEGIN { printf "%d", 120 * s + 0.5 }')

echo "== job 1: $np1 processes, a snapshot after each round"
timeout --kill-after=10 "$limit" "${RMASTORE_LAUNCH[@]}" -n "$np1" "$exe" --snapshot-dir "$dir" "$@" >"$dir.log" 2>&1 &
job=$!
manifest=$(printf '%s/snap-%010d/MANIFEST' "$dir" "$after")
until [ -e "$manifest" ]; do
  kill -0 "$job" 2>/dev/null || { rmastore_filter_noise <"$dir.log"; fail "job 1 ended before snapshot $after"; }
  sleep 0.01
done
# The job's processes, not mpirun: their command line starts with the program.
victims=$(pgrep -f "^$exe .*--snapshot-dir $dir" | tr '\n' ' ')
[ "$(wc -w <<<"$victims")" = "$np1" ] || fail "found the processes '$victims', not $np1"
# shellcheck disable=SC2086 # one pid a word
kill -KILL $victims
wait "$job"
rmastore_filter_noise <"$dir.log"
echo "== job 1: every process got SIGKILL after snapshot $after: $victims"
! grep -q "result:" "$dir.log" || fail "job 1 finished before the kill"

echo "== job 2: $np2 processes restore the newest snapshot and finish"
"${RMASTORE_LAUNCH[@]}" -n "$np2" "$exe" --snapshot-dir "$dir" --restore "$@" 2>&1 | rmastore_filter_noise |
  tee "$dir.log"
rc=${PIPESTATUS[0]}
grep -q "restored snapshot [1-9][0-9]*.*: [1-9][0-9]* of [0-9]* rounds done" "$dir.log" ||
  fail "job 2 did not go on from a snapshot"
exit "$rc"
