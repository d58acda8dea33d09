#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds, and runs the demo on 4 processes.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rmastore_build
echo "== demo: 4 processes, 2 copies of every value"
"$RMASTORE_ROOT/examples/run_example.sh" "$(command -v mpirun)" 4 "$RMASTORE_BUILD_DIR/examples/quickstart"
