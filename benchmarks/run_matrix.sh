#!/usr/bin/env bash
# Runs the store_bench points reported in docs/benchmarks.md and writes their JSON lines to
# the file given as $1 (default: store_bench.jsonl). The second argument picks a part: all
# (default), global, or localized (the two variants); hosts runs the points across 3 simulated
# hosts (scripts/multihost.sh, needs root), which all leaves out, and hosts-yield the launcher's
# mpi_yield_when_idle on and off there.
#   benchmarks/run_matrix.sh [out.jsonl] [all|global|localized|hosts|hosts-yield]
# store_bench is built against the installed library (benchmarks/build_installed.sh: the build
# tree in $RMASTORE_BUILD_DIR, default build/, is installed into a prefix and the benchmarks
# are built on their own against it), so the figures are those of the library applications link.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-store_bench.jsonl}
part=${2:-all}
case $part in all | global | localized | hosts | hosts-yield) ;; *) echo "run_matrix: unknown part '$part'" >&2; exit 2 ;; esac
bench_build=$("$root/benchmarks/build_installed.sh" store_bench)
# shellcheck source=/dev/null
source "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/mpi-env.sh"
source "$root/scripts/launch.sh"; flags=("${RMASTORE_MPIRUN_FLAGS[@]}")
# Across hosts (part hosts): the same flags through the simulated hosts' launcher.
launch=(mpirun)
[[ $part == hosts* ]] && launch=("$root/scripts/multihost.sh" run 3 mpirun)
# tag: JSON fields added to each line of the next results (e.g. ,"run":2), to tell runs apart.
tag=
bench() { # np, then store_bench arguments
  local np=$1
  shift
  echo "== np=$np $* $tag" >&2
  local log
  log=$(mktemp)
  "${launch[@]}" "${flags[@]}" -n "$np" "$bench_build/store_bench" "$@" >"$log" 2>&1 || true
  if grep -aq '{"op":' "$log"; then
    grep -ao '{"op":.*}' "$log" | sed "s/}\$/$tag}/" | tee -a "$out"
  else
    echo "no result; the run printed:" >&2
    tail -n 20 "$log" >&2
  fi
  rm -f "$log"
}
: >"$out"
if [ "$part" = hosts ]; then
  # 3 processes, one per host (every copy crosses TCP), with the hosts in one CPU cgroup (the
  # launcher's default) and in one autogroup each (RMASTORE_MULTIHOST_CPU_GROUP=0), alternated.
  for run in 1 2 3; do
    for cg in 1 0; do
      tag=",\"cpu_group\":$cg,\"run\":$run"
      RMASTORE_MULTIHOST_CPU_GROUP=$cg bench 3 --op put,get --sizes 8,65536,1M --replicas 1,2 \
        --scenario idle --reps 50
    done
  done
  # A computing target on another host is served by its helper, which sleeps up to
  # --max-sleep-us when idle (shared-memory doorbells do not cross hosts).
  for run in 1 2 3; do
    for s in 1000 100 10; do
      for cg in 1 0; do
        tag=",\"max_sleep_us\":$s,\"cpu_group\":$cg,\"run\":$run"
        RMASTORE_MULTIHOST_CPU_GROUP=$cg bench 3 --op put --sizes 8,65536 --replicas 1 --scenario idle,busy \
          --reps 50 --max-sleep-us "$s"
      done
    done
  done
  # Recovery: 6 processes, 2 per host; the last process dies, or its whole host, daemon first.
  for run in 1 2 3; do
    for hl in 0 1; do
      tag=",\"run\":$run"
      bench 6 --op failure --mib 16 --replicas 2 --host-loss "$hl"
    done
  done
fi
if [ "$part" = hosts-yield ]; then
  # What the launcher's mpi_yield_when_idle is for, in one CPU group: without it
  # (RMASTORE_MULTIHOST_YIELD=0) waiting processes spin instead of giving up their core.
  for run in 1 2 3; do
    for y in 1 0; do
      tag=",\"yield\":$y,\"run\":$run"
      RMASTORE_MULTIHOST_YIELD=$y bench 3 --op put --sizes 8,65536 --replicas 1,2 --scenario idle --reps 50
      RMASTORE_MULTIHOST_YIELD=$y bench 6 --op failure --mib 16 --replicas 2
    done
  done
fi
if [ "$part" = all ] || [ "$part" = global ]; then
all=8,64,512,4K,64K,1M,16M,64M
bench 2 --op put,get,cpu --sizes $all --replicas 1 --scenario idle,busy
bench 3 --op put,get,cpu --sizes $all --replicas 2 --scenario idle,busy
bench 4 --op put --sizes 8,4K,1M,64M --replicas 2,3 --scenario idle
bench 8 --op put,cpu --sizes 8,4K,1M,16M --replicas 2,6 --scenario idle
# Failure detection: the cost of each detector on put latency against detection off, all
# interleaved in one loop; and the helper's idle CPU with each.
bench 3 --op detectors --sizes 8,64,4K,64K,1M --replicas 2
bench 8 --op detectors --sizes 8,4K --replicas 2
bench 3 --op cpu --detector off,notify,ping
# Detection latency and recovery: one process dies per run.
for np in 4 6 8; do
  for mib in 1 16 64; do
    bench "$np" --op failure --mib "$mib" --replicas 2
  done
done
bench 8 --op failure --mib 16 --replicas 2 --detector ping
# Memory per new key: the writer's, a holder's per copy, a bystander's (both variants).
bench 3 --op key-memory --sizes 8 --recovery global,localized
fi
if [ "$part" = all ] || [ "$part" = localized ]; then
  # The localized variant: what its slot locks cost a failure-free put, and the pause each
  # survivor sees when a process dies, against the global variant (five deaths per point).
  for np in 3 4 8; do
    bench "$np" --op variants --sizes 8,512,4K,64K,1M --replicas 2
  done
  for np in 4 6 8; do
    for recovery in global localized; do
      for run in 1 2 3 4 5; do
        bench "$np" --op pause --recovery "$recovery" --sizes 4K --replicas 2 --mib 16
      done
    done
  done
fi
echo "wrote $out" >&2
