#!/usr/bin/env bash
# Runs lammps_resilient with deaths, then a failure-free reference that restarts from the same
# checkpoint files through LAMMPS's own read_restart, on as many processes as survived, and
# compares their THERMO lines after the last recovery, digit for digit.
#
#   compare_thermo.sh <mpirun> <np> <lammps_resilient> [driver options] -in INPUT [-var ...]
#
# The driver options must make the run recover at least once (--kill ...). Prints
# "THERMO MATCH: ..." or "THERMO MISMATCH: ..." and exits 0 only on a match. With
# RMASTORE_TEST_HOSTS=N the resilient run spans N simulated hosts (the reference runs on one).
set -u
mpirun=$1 np=$2 exe=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/launch.sh
source "$here/../../scripts/launch.sh"
work=$(mktemp -d /dev/shm/rmastore-lammps-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

rmastore_launch "$mpirun"
# A limit, so that a hang fails the test instead of CTest's backstop.
limit=$(awk -v s="${RMASTORE_TEST_TIME_SCALE:-1}" 'BEGIN { printf "%d", 120 * s + 0.5 }')
timeout --kill-after=10 "$limit" "${RMASTORE_LAUNCH[@]}" -n "$np" "$exe" --keep --workdir "$work/run" "$@" 2>&1 |
  rmastore_filter_noise >"$work/run.out"
rc=${PIPESTATUS[0]}
cat "$work/run.out"
if [ "$rc" != 0 ] || ! grep -a -q '^DONE ' "$work/run.out"; then
  echo "THERMO MISMATCH: the resilient run did not finish (exit $rc)"
  exit 1
fi
last=$(grep -a '^RECOVERY ' "$work/run.out" | tail -n 1)
if [ -z "$last" ]; then
  echo "THERMO MISMATCH: the run recovered from no failure, so there is nothing to compare"
  exit 1
fi
recoveries=$(grep -a -c '^RECOVERY ' "$work/run.out")
survivors=$(sed -E 's/^RECOVERY [0-9]+: ([0-9]+) survivors.*/\1/' <<<"$last")
ckpt=$(sed -E 's/.*restored checkpoint ([0-9]+) .*/\1/' <<<"$last")
if [ "$ckpt" = 0 ]; then
  echo "THERMO MISMATCH: the last recovery restarted from the input, not from a checkpoint"
  exit 1
fi

# The reference: the same input, from LAMMPS's own files of that checkpoint, no failure.
unset RMASTORE_TEST_HOSTS
rmastore_launch "$mpirun"
# Only the options that change the physics or the chunks carry over: --every and the input.
ref_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --every) ref_args+=("$1" "$2"); shift 2 ;;
    --kill | --replicas | --workdir | --stale-piece | --baseline) shift 2 ;;
    --localized | --kill-host | --keep) shift ;;
    *) ref_args+=("$1"); shift ;;
  esac
done
timeout --kill-after=10 "$limit" "${RMASTORE_LAUNCH[@]}" -n "$survivors" "$exe" \
  --reference "$work/run/ckpt-$ckpt/restart.%" "${ref_args[@]}" 2>&1 | rmastore_filter_noise >"$work/ref.out"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
  cat "$work/ref.out"
  echo "THERMO MISMATCH: the reference run failed (exit $rc)"
  exit 1
fi
# The recovered run's lines after its last recovery, against all of the reference's.
awk '/^RECOVERY /{n=NR} {line[NR]=$0} END {for (i = n + 1; i <= NR; i++) print line[i]}' "$work/run.out" |
  grep -a '^THERMO ' >"$work/run.thermo"
grep -a '^THERMO ' "$work/ref.out" >"$work/ref.thermo"
lines=$(wc -l <"$work/ref.thermo")
first=$(head -n 1 "$work/ref.thermo" | cut -d' ' -f2)
if [ "$lines" -gt 0 ] && cmp -s "$work/run.thermo" "$work/ref.thermo"; then
  echo "THERMO MATCH: $lines lines from step $first, $recoveries recoveries, $survivors survivors, checkpoint $ckpt"
  exit 0
fi
echo "THERMO MISMATCH: after recovery / reference:"
diff "$work/run.thermo" "$work/ref.thermo" | head -n 20
exit 1
