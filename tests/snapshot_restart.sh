#!/usr/bin/env bash
# One restart scenario of the durable tier (tests/test_snapshot.cpp), in a fresh directory: a
# job of <write np> processes writes two snapshots (with RMASTORE_FAULT, a process dies in the
# second), the newest is damaged if <damage> says how, and a new job of <read np> processes must
# restore snapshot <expect>, having skipped <skipped> newer ones. Each job is judged by
# tests/mpirun_test.sh (every rank's verdict, the fault's marker).
#   snapshot_restart.sh <runner> <mpirun> <exe> <write np> <read np> <expect> <skipped> [damage]
#   snapshot_restart.sh <runner> <mpirun> <exe> errors <np>
#   snapshot_restart.sh <runner> <mpirun> <exe> full <write np> <read np>
# `full` runs both jobs on a 4 MiB tmpfs of their own (a private mount namespace: needs root),
# which the write job fills up between two snapshots.
set -u
runner=$1 mpirun=$2 exe=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-snapshot.XXXXXX")
trap 'rm -rf "$dir" "$dir.log"' EXIT
if [ "$4" = errors ]; then
  exec "$runner" "$mpirun" "$5" "$5" 60 "$exe" --phase errors --dir "$dir"
fi
if [ "$4" = full ]; then
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --propagation private bash -c '
    dir=$1 runner=$2 mpirun=$3 exe=$4 wnp=$5 rnp=$6
    mount -t tmpfs -o size=4m rmastore-full "$dir" ||
      { echo "snapshot_restart: cannot mount a tmpfs at $dir (needs root)"; exit 1; }
    echo "== a job of $wnp processes snapshots, fills the disk, snapshots again"
    "$runner" "$mpirun" "$wnp" "$wnp" 60 "$exe" --phase full --dir "$dir" 2>&1 | tee "$dir.log"
    [ "${PIPESTATUS[0]}" = 0 ] || exit 1
    grep -q "^rmastore: .*No space left on device" "$dir.log" ||
      { echo "snapshot_restart: no process printed why the snapshot failed"; exit 1; }
    echo "== a job of $rnp processes restores snapshot 3 (generation 2)"
    "$runner" "$mpirun" "$rnp" "$rnp" 60 "$exe" --phase read --dir "$dir" --expect 3 --generation 2 --skipped 0
  ' full "$dir" "$runner" "$mpirun" "$exe" "$5" "$6"
  exit $?
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
