#!/usr/bin/env bash
# A real Slurm cluster on the simulated hosts of scripts/multihost.sh (Debian's slurmctld, slurmd
# and munge), for running rmastore as a batch job (docs/operations.md, "Under Slurm").
#
#   slurm.sh up [N]              N hosts (default 3) with a slurmd each (node hostI at 10.77.1.(10+I)),
#                                slurmctld on the bridge (10.77.1.1), munged; waits until every
#                                node is idle. Idempotent: a running cluster of N nodes is kept.
#   slurm.sh down                stops the daemons and takes the hosts down (multihost.sh down)
#   slurm.sh run N MPIRUN [mpirun arguments...]
#                                submits a batch job of N nodes (sbatch --wait) that runs
#                                MPIRUN with the flags ULFM needs across nodes, prints its output
#                                and exits with its exit code. Brings the cluster up if needed.
#   slurm.sh check               exits 0 if this machine can run it (multihost.sh check, the daemons)
#   slurm.sh env                 prints the SLURM_CONF=... line that points sinfo, sbatch... here
#
# Needs root. The configuration, state and logs live in $RMASTORE_SLURM_DIR (default
# /run/rmastore-slurm); the cluster's commands find it through SLURM_CONF, so a Slurm of this
# machine's own (/etc/slurm) is left alone.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${RMASTORE_SLURM_DIR:-/run/rmastore-slurm}
CONF=$DIR/slurm.conf
NET=10.77.1
export SLURM_CONF=$CONF

die() { echo "slurm: $*" >&2; exit 1; }

check() {
  "$HERE/multihost.sh" check || return 1
  for tool in slurmctld slurmd sbatch munged; do
    command -v "$tool" >/dev/null ||
      { echo "slurm: '$tool' is missing (apt-get install slurmctld slurmd slurm-client munge)"; return 1; }
  done
}

# Settings that matter to a job that must outlive one of its nodes (docs/operations.md):
# - SlurmdTimeout: how long a silent slurmd takes to be declared DOWN; short, so that the tests see
#   what Slurm does then within their run.
# - proctrack/linuxproc, task/none: no cgroups (the simulated hosts share one machine's).
# - SlurmdParameters=config_overrides: every simulated node reports the machine's own CPUs.
write_conf() { # $1 = nodes
  local n=$1 i
  mkdir -p "$DIR/state" "$DIR/log"
  {
    cat <<EOF
# Written by scripts/slurm.sh: $n simulated hosts of scripts/multihost.sh.
ClusterName=rmastore
SlurmctldHost=rmhctl($NET.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/linear
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=${RMASTORE_SLURMD_TIMEOUT:-10}
SlurmctldTimeout=30
MessageTimeout=5
InactiveLimit=0
KillWait=5
MinJobAge=30
EOF
    for i in $(seq 1 "$n"); do
      echo "NodeName=host$i NodeAddr=$NET.$((10 + i)) CPUs=2 State=UNKNOWN"
    done
    echo "PartitionName=rmh Nodes=host[1-$n] Default=YES MaxTime=INFINITE State=UP"
  } >"$CONF.new"
  mv "$CONF.new" "$CONF"
}

# The daemon of a pid file runs: a pid left by a killed daemon may belong to another process now.
pid_alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && grep -qx 'slurm\(ctl\)\?d' "/proc/$pid/comm" 2>/dev/null
}

nodes_now() { grep -c '^NodeName=' "$CONF" 2>/dev/null || echo 0; }

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  [ -r /etc/munge/munge.key ] || die "no /etc/munge/munge.key (reinstall munge)"
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- munged || die "munged did not start"
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "munged does not answer"
}

wait_idle() { # $1 = nodes
  local n=$1 idle
  for _ in $(seq 300); do
    idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)
    [ "$idle" -eq "$n" ] && return 0
    sleep 0.2
  done
  sinfo -N -l >&2
  die "the nodes did not become idle (logs: $DIR/log)"
}

# slurmd of host $1 as scripts/multihost-agent starts PRRTE's daemons there: the host's network
# namespace, hostname hostI, the hosts' CPU group; with the machine's sysfs, whose cgroup mounts
# slurmd needs even with no cgroup plugin configured.
start_slurmd() {
  RMASTORE_AGENT_MACHINE_SYSFS=1 "$HERE/multihost-agent" "$NET.$((10 + $1))" "exec slurmd -f '$CONF'"
}

up() { # $1 = nodes
  local n=$1 i
  check >&2 || exit 1
  "$HERE/multihost.sh" up "$n" || exit 1
  if [ "$(nodes_now)" != "$n" ]; then
    stop_daemons
    rm -rf "$DIR/state"
    write_conf "$n"
  fi
  start_munge
  if ! pid_alive "$DIR/slurmctld.pid"; then
    # slurmctld runs where SlurmctldHost says (rmhctl): its own UTS namespace, the machine's network.
    unshare --uts /bin/sh -c "hostname rmhctl; exec slurmctld -f '$CONF'" || die "slurmctld did not start (log: $DIR/log/slurmctld.log)"
  fi
  for i in $(seq 1 "$n"); do
    pid_alive "$DIR/slurmd-host$i.pid" && continue
    mkdir -p "$DIR/spool-host$i"
    start_slurmd "$i" || die "slurmd of host$i did not start (log: $DIR/log/slurmd-host$i.log)"
  done
  # A node that went down with its host comes back when its slurmd registers (ReturnToService=2);
  # one drained or down for another reason is resumed here, so each run starts on N idle nodes.
  scontrol update nodename="host[1-$n]" state=resume >/dev/null 2>&1 || true
  wait_idle "$n"
}

stop_daemons() {
  local f
  for f in "$DIR"/slurmd-*.pid "$DIR/slurmctld.pid"; do
    pid_alive "$f" && kill "$(cat "$f")" 2>/dev/null
  done
  for f in "$DIR"/slurmd-*.pid "$DIR/slurmctld.pid"; do
    for _ in $(seq 50); do pid_alive "$f" || break; sleep 0.1; done
    pid_alive "$f" && kill -9 "$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
}

down() {
  stop_daemons
  "$HERE/multihost.sh" down
  rm -rf "$DIR/state" "$DIR"/spool-*
}

run() { # $1 = nodes, $2 = mpirun, rest = its arguments
  local n=$1 mpirun=$2
  shift 2
  up "$n"
  # global: the EXIT trap needs it
  job_dir=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-slurm.XXXXXX")
  job=
  trap '[ -n "$job" ] && scancel "$job" 2>/dev/null; rm -rf "$job_dir"' EXIT
  trap 'exit 143' TERM INT
  # The batch script users copy (docs/operations.md), with the simulated hosts' network settings.
  export MPIRUN=$mpirun
  MPIRUN_FLAGS=$("$HERE/multihost.sh" net-flags)
  export MPIRUN_FLAGS
  # RMASTORE_SLURM_BATCH: another batch script, to measure what a setting of this one does.
  job=$(sbatch --parsable -N "$n" -o "$job_dir/out" \
    "${RMASTORE_SLURM_BATCH:-$HERE/../examples/slurm/rmastore.sbatch}" "$@") || die "sbatch failed"
  # Polled here rather than with sbatch --wait, whose polls grow to 10 s apart. A finished job
  # stays known to slurmctld for MinJobAge (30 s).
  local info state=PENDING code
  while :; do
    info=$(scontrol -o show job "$job" 2>/dev/null) || die "job $job is gone from slurmctld"
    state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
    case $state in PENDING | CONFIGURING | RUNNING | COMPLETING | SUSPENDED) sleep 0.2 ;; *) break ;; esac
  done
  job=
  cat "$job_dir/out" 2>/dev/null
  code=$(sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\1 \2/p' <<<"$info")
  echo "slurm: job ended $state, exit code ${code% *}, signal ${code#* }" >&2
  [ "$state" = COMPLETED ]
}

case ${1:-} in
  up) up "${2:-3}" ;;
  down) down ;;
  check) check ;;
  env) echo "SLURM_CONF=$CONF" ;;
  run)
    [ $# -ge 3 ] || die "usage: slurm.sh run N MPIRUN [args...]"
    shift
    run "$@"
    ;;
  *) sed -n '2,18p' "$0"; exit 2 ;;
esac
