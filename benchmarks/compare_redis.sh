#!/usr/bin/env bash
# Runs compare_redis three times at 2 and 4 clients (r=2) and plots the medians over the runs:
#   benchmarks/compare_redis.sh [out.jsonl] [out.png]
# compare_redis is built against the installed library (benchmarks/build_installed.sh, from the
# build tree in $RMASTORE_BUILD_DIR, default build/). Needs hiredis, redis-server and gnuplot
# (all installed by scripts/setup.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-compare_redis.jsonl}
png=${2:-compare_redis.png}
bench_build=$("$root/benchmarks/build_installed.sh" compare_redis)
# shellcheck source=/dev/null
source "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/mpi-env.sh"
flags=(--with-ft ulfm --mca async_mpi_finalize 1 --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
: >"$out"
for run in 1 2 3; do
  for np in 2 4; do
    echo "== run $run: $np clients, 2 copies" >&2
    mpirun "${flags[@]}" -n "$np" "$bench_build/compare_redis" --replicas 2 \
      --sizes 8,64,512,4K,16K,64K,256K,1M,4M,16M 2>&1 | grep -ao '{"op":.*}' | tee -a "$out"
  done
done
"$root/benchmarks/plot_redis.py" "$out" "$png"
echo "wrote $out and $png" >&2
