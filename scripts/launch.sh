# shellcheck shell=bash
# How this repository launches its MPI programs: the one source of the mpirun flags and of the
# filter for Open MPI's expected noise. Sourced (not run) by tests/mpirun_test.sh,
# examples/run_example.sh (and so scripts/demo.sh) and benchmarks/run_matrix.sh. Safe under
# `set -euo pipefail`. The flags are explained for users in docs/operations.md ("Launching").
#
#   RMASTORE_MPIRUN_FLAGS      the flags every run needs (not the process count)
#   rmastore_launch MPIRUN     sets RMASTORE_LAUNCH to MPIRUN and those flags, or, with
#                              RMASTORE_TEST_HOSTS=N, to the same across N simulated hosts
#                              (scripts/multihost.sh), or with RMASTORE_TEST_SLURM=N, in a
#                              batch job of N such hosts (scripts/slurm.sh); add -n NP and the
#                              program
#   rmastore_filter_noise      stdin to stdout without Open MPI's expected noise

RMASTORE_MPIRUN_FLAGS=(
  # ULFM: without it Open MPI ends the whole job at the first process failure.
  --with-ft ulfm
  # async_mpi_finalize: after a process failure, Open MPI 5.0.7's MPI_Finalize sometimes waits
  # forever in a PMIx fence that includes the dead process (seen about 1 run in 10).
  --mca async_mpi_finalize 1
  # More processes than cores (the tests and benchmarks run up to 8 on 2 cores). Each process
  # runs two or three threads (the application's, the helper, the localized variant's repair
  # thread): bound to one core each, they would compete.
  --oversubscribe --bind-to none
)
# Open MPI refuses to run as root unless told.
if [ "$(id -u)" = 0 ]; then RMASTORE_MPIRUN_FLAGS+=(--allow-run-as-root); fi
# The library's and the tests' own settings (RMASTORE_*, as exported when this file is sourced)
# go to every rank, on every host.
for rmastore_var in $(compgen -e | grep '^RMASTORE_' || true); do
  RMASTORE_MPIRUN_FLAGS+=(-x "$rmastore_var")
done
unset rmastore_var
# The sanitizers' settings too (a build with RMASTORE_SANITIZE or RMASTORE_TSAN).
for rmastore_var in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
  if [ -n "${!rmastore_var:-}" ]; then RMASTORE_MPIRUN_FLAGS+=(-x "$rmastore_var"); fi
done
unset rmastore_var

RMASTORE_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

rmastore_launch() { # MPIRUN
  RMASTORE_LAUNCH=("$1")
  if [ -n "${RMASTORE_TEST_SLURM:-}" ]; then
    # A batch job of N nodes on a Slurm cluster of simulated hosts (scripts/slurm.sh).
    RMASTORE_LAUNCH=("$RMASTORE_SCRIPTS/slurm.sh" run "$RMASTORE_TEST_SLURM" "$1")
  elif [ -n "${RMASTORE_TEST_HOSTS:-}" ]; then
    # N simulated hosts, TCP between them, plus the settings ULFM needs across nodes.
    RMASTORE_LAUNCH=("$RMASTORE_SCRIPTS/multihost.sh" run "$RMASTORE_TEST_HOSTS" "$1")
  fi
  RMASTORE_LAUNCH+=("${RMASTORE_MPIRUN_FLAGS[@]}")
}

# --with-ft ulfm makes every rank warn, in a framed help message, that the osc component rdma
# "is not tested for post-failure operation": expected, rmastore never relies on RMA to report
# failures (docs/operations.md). Then Open MPI may say how many more ranks sent that message.
# Blank lines go too. Everything else passes, and the function succeeds even if nothing does.
rmastore_filter_noise() {
  grep -a -v -e "is not tested for post-failure" -e "operation, yet you have requested" \
    -e "When using this component" -e "However, failures may cause" -e "In this framework, the following" \
    -e "^failure scenarios: {}" -e "^ *osc module" -e "help-mpi-ft.txt" -e "Set the MCA parameter" \
    -e "^ *(default: yes)" -e "^-----*$" -e "^ *$" || true
}
