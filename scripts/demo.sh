#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds, and runs the demo: a task-parallel N-queens
# count on 4 processes that checkpoints every task in rmastore; one worker is killed midway,
# the survivors recover and take over its tasks, and the count is checked against the known
# failure-free result.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rmastore_build
echo "== demo: 4 workers, 2 copies of every checkpoint, worker 1 killed after 100 tasks"
"$RMASTORE_ROOT/examples/run_example.sh" "$(command -v mpirun)" 4 "$RMASTORE_BUILD_DIR/examples/task_checkpoint" \
  --kill-rank 1 --kill-after 100
