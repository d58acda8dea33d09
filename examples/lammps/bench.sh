#!/usr/bin/env bash
# What a checkpoint and a failure cost lammps_resilient, built the way an application builds it:
# against the installed library. LAMMPS's bench/in.lj, scaled by its variables x = y = z.
#
#   examples/lammps/bench.sh OUT.jsonl "SCALES" "NPS" [REPEATS]
#     SCALES  x = y = z of in.lj: 1 is 32,000 atoms, 2 is 256,000, 4 is 2,048,000
#     NPS     process counts
#
# For each point, one JSON line per measurement:
#   checkpoint: ms per checkpoint (--every 5: the median of checkpoints 5-19; the first 4 of the
#     store, which are slower, apart), three ways in the same run of the script: rmastore (2 copies), write_restart to /dev/shm alone (no copy anywhere
#     else: a lower bound, not a peer), write_restart to disk (/var/tmp) with each file fsynced.
#   failure: the last process dies at step 55; seconds from its death to the survivors' first new
#     timestep, against a new mpirun that reads LAMMPS's restart files of the same checkpoint
#     (launch to first timestep); time to solution against the failure-free run.
# Needs scripts/setup.sh and scripts/setup-lammps.sh to have run.
set -euo pipefail
out=$(realpath -m "$1") scales=$2 nps=$3 repeats=${4:-1}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=/dev/null
source "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/mpi-env.sh"
# shellcheck source=/dev/null
source "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/lammps-env.sh"
# shellcheck source=scripts/launch.sh
source "$root/scripts/launch.sh"
rmastore_launch "$(command -v mpirun)"

build=${RMASTORE_BUILD_DIR:-$root/build}
prefix=$build/lammps-bench-install
work=$(mktemp -d /tmp/rmastore-lammps-bench.XXXXXX)
trap 'rm -rf "$work" /dev/shm/rmastore-lammps-bench-* /var/tmp/rmastore-lammps-bench-*' EXIT
{
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build"
  cmake --build "$build" --target rmastore -j 2
  cmake --install "$build" --prefix "$prefix"
} >/dev/null
exe=$work/lammps_resilient
mpicxx -std=c++20 -O2 -o "$exe" "$root/examples/lammps/lammps_resilient.cpp" -I"$prefix/include" \
  -I"$LAMMPS_PREFIX/include/lammps" -L"$prefix/lib" -L"$LAMMPS_PREFIX/lib" -lrmastore -llammps \
  -Wl,-rpath,"$prefix/lib" -Wl,-rpath,"$LAMMPS_PREFIX/lib"
ldd "$exe" | grep -q "$prefix/lib/librmastore.so" || { echo "bench.sh: $exe does not load $prefix's library" >&2; exit 1; }
cd "$LAMMPS_PREFIX/share/lammps-bench"

run() { # np, then the driver's arguments; output in $work/out
  "${RMASTORE_LAUNCH[@]}" -n "$1" "$exe" "${@:2}" 2>&1 | rmastore_filter_noise >"$work/out"
  grep -a -q '^DONE \|^THERMO ' "$work/out" || { cat "$work/out" >&2; echo "bench.sh: the run failed" >&2; exit 1; }
}
median_ckpt() { # first, last: the median ms of those checkpoints
  grep -a '^CKPT ' "$work/out" | awk -v a="$1" -v b="$2" '$2 >= a && $2 <= b {print $5}' | sort -g |
    awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
div() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
done_seconds() { grep -a '^DONE ' "$work/out" | awk '{print $(NF-1)}'; }

for scale in $scales; do
  atoms=$((32000 * scale * scale * scale))
  vars=(-var x "$scale" -var y "$scale" -var z "$scale")
  for np in $nps; do
    for rep in $(seq "$repeats"); do
      run "$np" --every 5 -in in.lj "${vars[@]}"
      store=$(median_ckpt 5 19) first=$(median_ckpt 1 4)
      bytes=$(grep -a '^CKPT 2 ' "$work/out" | awk '{print $(NF-4)}')
      run "$np" --every 10 -in in.lj "${vars[@]}"
      free_s=$(done_seconds)
      run "$np" --every 5 --baseline shm --workdir "/dev/shm/rmastore-lammps-bench-$np" -in in.lj "${vars[@]}"
      shm=$(median_ckpt 5 19)
      run "$np" --every 5 --baseline disk --workdir "/var/tmp/rmastore-lammps-bench-$np" -in in.lj "${vars[@]}"
      disk=$(median_ckpt 5 19)
      printf '{"bench":"lammps_checkpoint","atoms":%d,"np":%d,"rep":%d,"rank0_bytes":%s,"store_ms":%s,"store_first4_ms":%s,"shm_ms":%s,"disk_fsync_ms":%s,"store_over_shm":%.3f,"disk_over_store":%.3f}\n' \
        "$atoms" "$np" "$rep" "$bytes" "$store" "$first" "$shm" "$disk" "$(div "$store" "$shm")" \
        "$(div "$disk" "$store")" | tee -a "$out"

      # One death at step 55: the checkpoint at step 50 is restored.
      victim=$((np - 1))
      run "$np" --every 10 --keep --workdir "/dev/shm/rmastore-lammps-bench-keep" --kill "$victim@55" -in in.lj \
        "${vars[@]}"
      killed=$(cat "/dev/shm/rmastore-lammps-bench-keep/killed-at.$victim" 2>/dev/null || true)
      resumed=$(grep -a '^RECOVERY ' "$work/out" | grep -a -o 'RESUMED at [0-9.]*' | awk '{print $3}' || true)
      ckpt=$(grep -a '^RECOVERY ' "$work/out" | sed -E 's/.*restored checkpoint ([0-9]+) .*/\1/' || true)
      if [ -z "$killed" ] || [ -z "$resumed" ] || [ -z "$ckpt" ]; then
        cat "$work/out" >&2
        echo "bench.sh: the run with a death did not report its kill ('$killed'), recovery ('$resumed') or checkpoint ('$ckpt')" >&2
        exit 1
      fi
      fail_s=$(done_seconds)
      t0=$(date +%s.%N)
      run "$victim" --every 10 --reference "/dev/shm/rmastore-lammps-bench-keep/ckpt-$ckpt/restart.%" -in in.lj \
        "${vars[@]}"
      restart_resumed=$(grep -a '^REFERENCE ' "$work/out" | grep -a -o 'RESUMED at [0-9.]*' | awk '{print $3}')
      rm -rf /dev/shm/rmastore-lammps-bench-keep
      lost=$(awk -v a="$resumed" -v b="$killed" 'BEGIN {print a - b}')
      restart=$(awk -v a="$restart_resumed" -v b="$t0" 'BEGIN {print a - b}')
      printf '{"bench":"lammps_failure","atoms":%d,"np":%d,"rep":%d,"kill_to_resumed_s":%.3f,"job_restart_to_resumed_s":%.3f,"restart_over_store":%.3f,"failure_free_s":%s,"one_death_s":%s,"time_to_solution_ratio":%.3f}\n' \
        "$atoms" "$np" "$rep" "$lost" "$restart" "$(div "$restart" "$lost")" "$free_s" "$fail_s" \
        "$(div "$fail_s" "$free_s")" | tee -a "$out"
    done
  done
done
