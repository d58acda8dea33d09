#!/usr/bin/env bash
# One restart scenario of the durable tier (tests/test_snapshot.cpp), in a fresh directory: a
# job of <write np> processes writes two snapshots (with RMASTORE_FAULT, a process dies in the
# second), the newest is damaged if <damage> says how, and a new job of <read np> processes must
# restore snapshot <expect>, having skipped <skipped> newer ones. Each job is judged by
# tests/mpirun_test.sh (every rank's verdict, the fault's marker).
#   snapshot_restart.sh <runner> <mpirun> <exe> <write np> <read np> <expect> <skipped> [damage]
#   snapshot_restart.sh <runner> <mpirun> <exe> errors <np>
set -u
runner=$1 mpirun=$2 exe=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-snapshot.XXXXXX")
trap 'rm -rf "$dir"' EXIT
if [ "$4" = errors ]; then
  exec "$runner" "$mpirun" "$5" "$5" 60 "$exe" --phase errors --dir "$dir"
fi
wnp=$4 rnp=$5 expect=$6 skipped=$7 damage=${8:-}
killed=0
[ -n "${RMASTORE_FAULT:-}" ] && killed=1
echo "== a job of $wnp processes writes two snapshots"
"$runner" "$mpirun" "$wnp" $((wnp - killed)) 60 "$exe" --phase write --dir "$dir" || exit 1
if [ -n "$damage" ]; then
  echo "== the newest snapshot is damaged: $damage"
  env -u RMASTORE_FAULT "$runner" "$mpirun" 1 1 30 "$exe" --phase corrupt --what "$damage" --dir "$dir" || exit 1
fi
echo "== a job of $rnp processes restores snapshot $expect"
env -u RMASTORE_FAULT "$runner" "$mpirun" "$rnp" "$rnp" 60 "$exe" --phase read --dir "$dir" --expect "$expect" \
  --skipped "$skipped"
