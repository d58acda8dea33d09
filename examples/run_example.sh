#!/usr/bin/env bash
# Runs an example under mpirun with the flags rmastore needs, without Open MPI's expected noise
# (both from scripts/launch.sh; RMASTORE_TEST_HOSTS=N: across N simulated hosts):
#   run_example.sh <mpirun> <np> <exe> [args]
set -u
mpirun=$1 np=$2
shift 2
# shellcheck source=scripts/launch.sh
source "$(dirname "$0")/../scripts/launch.sh"
rmastore_launch "$mpirun"
"${RMASTORE_LAUNCH[@]}" -n "$np" "$@" 2>&1 | rmastore_filter_noise
exit "${PIPESTATUS[0]}"
