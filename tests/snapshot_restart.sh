#!/usr/bin/env bash
# One restart scenario of the durable tier (tests/test_snapshot.cpp), in a fresh directory: a
# job of <write np> processes writes two snapshots (with RMASTORE_FAULT, a process dies in the
# second), the newest is damaged if <damage> says how, and a new job of <read np> processes must
# restore snapshot <expect>, having skipped <skipped> newer ones. Each job is judged by
# tests/mpirun_test.sh (every rank's verdict, the fault's marker).
#   snapshot_restart.sh <runner> <mpirun> <exe> <write np> <read np> <expect> <skipped> [damage]
#   snapshot_restart.sh <runner> <mpirun> <exe> errors|keep <np>
#   snapshot_restart.sh <runner> <mpirun> <exe> full <write np> <read np>
#   snapshot_restart.sh <runner> <mpirun> <exe> kill <write np> <read np> any|inside|flush <seed>
# `full` runs both jobs on a 4 MiB tmpfs of their own (a private mount namespace: needs root),
# which the write job fills up between two snapshots.
# `kill` SIGKILLs every process of a job that writes snapshots without end, at a moment drawn
# from <seed> (RMASTORE_TEST_SEED overrides it) or while a snapshot is in flight (its parts on
# disk, its manifest not yet), and checks that a new job restores the newest complete snapshot
# exactly; `flush` (two levels) kills it while a snapshot complete in the local levels is being
# flushed to the shared one.
# RMASTORE_TEST_SNAPSHOT_LOCAL=1 adds a local level per host, in $dir.local (outside a tmpfs of
# `full`); RMASTORE_TEST_LOSE_HOST=<host> then removes that host's local level between the jobs,
# as a lost host would take it.
set -u
runner=$1 mpirun=$2 exe=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-snapshot.XXXXXX")
trap 'rm -rf "$dir" "$dir.log" "$dir.local"' EXIT
if [ -n "${RMASTORE_TEST_SNAPSHOT_LOCAL:-}" ]; then
  export RMASTORE_TEST_SNAPSHOT_LOCAL=$dir.local
  mkdir "$dir.local"
fi
if [ "$4" = errors ] || [ "$4" = keep ]; then
  "$runner" "$mpirun" "$5" "$5" 60 "$exe" --phase "$4" --dir "$dir"
  exit $?
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
if [ "$4" = kill ]; then
  wnp=$5 rnp=$6 where=$7 seed=${RMASTORE_TEST_SEED:-$8}
  scale=${RMASTORE_TEST_TIME_SCALE:-1}
  # shellcheck source=scripts/launch.sh
  source "$(dirname "$0")/../scripts/launch.sh"
  rmastore_launch "$mpirun"
  fail() {
    echo "snapshot_restart: FAILED: $*"
    sed 's/^/  writer: /' "$dir.log"
    exit 1
  }
  within() { awk -v s="$scale" -v t="$1" 'BEGIN { printf "%d", s * t + 0.5 }'; }
  echo "== a job of $wnp processes writes generation g and snapshot g, g = 1, 2, ..."
  timeout --kill-after=10 "$(within 120)" "${RMASTORE_LAUNCH[@]}" -n "$wnp" "$exe" --phase endless --dir "$dir" \
    >"$dir.log" 2>&1 &
  job=$!
  deadline=$((SECONDS + $(within 60)))
  pids() { cat "$dir"/pid.* 2>/dev/null; }
  until [ -e "$dir/snap-0000000001/MANIFEST" ] && [ "$(pids | wc -l)" = "$wnp" ]; do
    kill -0 "$job" 2>/dev/null || fail "the writer ended before its first snapshot"
    [ "$SECONDS" -lt "$deadline" ] || fail "no first snapshot within $(within 60) s"
    sleep 0.01
  done
  # A snapshot is in flight when its directory holds every part but no manifest yet.
  in_flight() {
    local d
    for d in "$dir"/snap-*; do
      [ -e "$d/MANIFEST" ] && continue
      [ "$(find "$d" -name 'part-*' | wc -l)" = "$wnp" ] && return 0
    done
    return 1
  }
  # A flush is in flight when a snapshot's directory in the shared level has no manifest, and
  # every part of it is in the local levels.
  flushing() {
    local d
    for d in "$dir"/snap-*; do
      [ -e "$d/MANIFEST" ] && continue
      [ "$(find "$RMASTORE_TEST_SNAPSHOT_LOCAL"/local-*/"${d##*/}" -name 'part-*' 2>/dev/null | wc -l)" = "$wnp" ] &&
        return 0
    done
    return 1
  }
  if [ "$where" = flush ]; then
    [ -n "${RMASTORE_TEST_SNAPSHOT_LOCAL:-}" ] || fail "kill in a flush needs RMASTORE_TEST_SNAPSHOT_LOCAL"
    until flushing; do
      kill -0 "$job" 2>/dev/null || fail "the writer ended before the kill"
      [ "$SECONDS" -lt "$deadline" ] || fail "no flush in flight within $(within 60) s"
      sleep 0.005
    done
  elif [ "$where" = inside ]; then
    until in_flight; do
      kill -0 "$job" 2>/dev/null || fail "the writer ended before the kill"
      [ "$SECONDS" -lt "$deadline" ] || fail "no snapshot in flight within $(within 60) s"
      sleep 0.005
    done
  else
    # A moment in the next 2 s, drawn from the seed.
    sleep "$(awk -v s="$seed" 'BEGIN { srand(s); printf "%.3f", 2 * rand() }')"
  fi
  victims=$(pids)
  for p in $victims; do kill -0 "$p" 2>/dev/null || fail "process $p had died before the kill"; done
  echo "== every process of the job is killed (seed $seed): $(echo "$victims" | tr '\n' ' ')"
  # shellcheck disable=SC2086 # one pid a word
  kill -KILL $victims
  wait "$job"
  for p in $victims; do ! kill -0 "$p" 2>/dev/null || fail "process $p survived SIGKILL"; done
  # What the new job must find: the newest snapshot with a manifest, and how many newer ones
  # (cut short by the kill) it skips.
  expect=0 skipped=0
  for d in "$dir"/snap-*; do
    n=$((10#${d##*snap-}))
    if [ -e "$d/MANIFEST" ]; then expect=$n skipped=0; else skipped=$((skipped + 1)); fi
  done
  echo "== the kill landed after snapshot $expect, with $skipped newer one(s) cut short"
  if [ "$where" != any ] && [ "$skipped" = 0 ]; then fail "the kill did not land inside a snapshot or its flush"; fi
  echo "== a job of $rnp processes restores snapshot $expect"
  env -u RMASTORE_DELAY "$runner" "$mpirun" "$rnp" "$rnp" 60 "$exe" --phase read --endless --dir "$dir" \
    --expect "$expect" --skipped "$skipped"
  exit $?
fi
wnp=$4 rnp=$5 expect=$6 skipped=$7 damage=${8:-}
killed=0
[ -n "${RMASTORE_FAULT:-}" ] && killed=1
echo "== a job of $wnp processes writes two snapshots"
"$runner" "$mpirun" "$wnp" $((wnp - killed)) 60 "$exe" --phase write --dir "$dir" || exit 1
if [ -n "${RMASTORE_TEST_LOSE_HOST:-}" ]; then
  lost=$RMASTORE_TEST_SNAPSHOT_LOCAL/local-$RMASTORE_TEST_LOSE_HOST
  [ -n "$(find "$lost" -name 'part-*' 2>/dev/null)" ] || { echo "snapshot_restart: $lost holds no part"; exit 1; }
  echo "== $RMASTORE_TEST_LOSE_HOST is lost, with its local level: $(find "$lost" -name 'part-*' | wc -l) part(s)"
  rm -rf "$lost"
fi
if [ -n "$damage" ]; then
  echo "== the newest snapshot is damaged: $damage"
  env -u RMASTORE_FAULT "$runner" "$mpirun" 1 1 30 "$exe" --phase corrupt --what "$damage" --dir "$dir" || exit 1
fi
echo "== a job of $rnp processes restores snapshot $expect"
env -u RMASTORE_FAULT "$runner" "$mpirun" "$rnp" "$rnp" 60 "$exe" --phase read --dir "$dir" --expect "$expect" \
  --skipped "$skipped"
