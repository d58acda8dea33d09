#!/usr/bin/env bash
# Open MPI's btl/uct (the InfiniBand code path) on this machine's UCX shared-memory transports:
# builds scripts/ucx/rma_loop.c against the UCX build and runs it on 2 processes in the
# configurations of docs/operations.md ("InfiniBand and UCX"), each under a 60 s timeout.
#   RMASTORE_CACHE=... RMASTORE_OMPI_VARIANT=ucx scripts/setup.sh   # first: Open MPI with UCX
#   scripts/ucx/run.sh [idle|busy]
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
env_file=${RMASTORE_CACHE:-$HOME/.cache/rmastore}/mpi-env-ucx.sh
[ -r "$env_file" ] || { echo "run.sh: no $env_file: run RMASTORE_OMPI_VARIANT=ucx scripts/setup.sh"; exit 1; }
# shellcheck source=/dev/null
source "$env_file"
mode=${1:-idle}
work=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-ucx.XXXXXX")
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/rma_loop" "$HERE/rma_loop.c" || exit 1
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
run() { # a name, then mpirun flags
  local name=$1 rc
  shift
  echo "== $name: mpirun -n 2 $*"
  timeout 60 mpirun "${root[@]}" --oversubscribe --bind-to none -n 2 "$@" "$work/rma_loop" "$mode" 1000 3 2>&1 |
    tail -n 12
  rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc$([ "$rc" = 124 ] && echo ' (timeout: hung)')"
}
ob1=(--mca pml ob1 --mca osc rdma)
run sm "${ob1[@]}" --mca btl self,sm
run uct-posix "${ob1[@]}" --mca btl self,uct --mca btl_uct_memory_domains posix
run uct-cma "${ob1[@]}" --mca btl self,uct --mca btl_uct_memory_domains cma
run uct-all "${ob1[@]}" --mca btl self,uct --mca btl_uct_memory_domains all
run sm-uct-cma "${ob1[@]}" --mca btl self,sm,uct --mca btl_uct_memory_domains cma
run ucx --mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
  --mca osc_ucx_tls any --mca osc_ucx_devices any
