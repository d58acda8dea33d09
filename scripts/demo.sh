#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds, and runs the demo: a task-parallel N-queens
# count on 4 processes that checkpoints every task in rmastore; one worker is killed midway,
# the survivors recover and take over its tasks, and the count is checked against the known
# failure-free result. Then the whole job is killed after a snapshot, and a job of 3 processes
# restores it and finishes the count.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rmastore_build
echo "== demo: 4 workers, 2 copies of every checkpoint, worker 1 killed after 100 tasks"
"$RMASTORE_ROOT/examples/run_example.sh" "$(command -v mpirun)" 4 "$RMASTORE_BUILD_DIR/examples/task_checkpoint" \
  --kill-rank 1 --kill-after 100
echo "== demo 2: the whole job killed after snapshot 2 of 10; a job of 3 processes finishes the count"
"$RMASTORE_ROOT/examples/task_checkpoint/kill_and_restart.sh" "$(command -v mpirun)" 4 3 2 \
  "$RMASTORE_BUILD_DIR/examples/task_checkpoint" --n 14 --rounds 10 --kill-rank -1
