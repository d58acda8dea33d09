#!/usr/bin/env bash
# Simulated hosts on one machine, for running rmastore across hosts over TCP (docs/operations.md).
#
#   multihost.sh up [N]          N hosts (default 3): network namespaces rmh1..rmhN, each with a
#                                veth into the bridge rmhbr (10.77.1.1; host I is 10.77.1.(10+I))
#                                and its own hostname hostI (scripts/multihost-agent)
#   multihost.sh down            kills whatever runs on the hosts, removes them and the bridge
#   multihost.sh clean           kills whatever runs on the hosts (after a killed run)
#   multihost.sh run N MPIRUN [mpirun arguments...]
#                                runs MPIRUN across N hosts (brought up if needed): a hostfile
#                                with as many slots per host as -n needs, PRRTE's daemons started
#                                through the agent, every byte between hosts over TCP on the
#                                hosts' own subnet, and the Open MPI settings ULFM needs across
#                                nodes (below). Cleans the hosts up when MPIRUN ends.
#   multihost.sh check           exits 0 if this machine can make hosts (root, ip, unshare)
#   multihost.sh net-flags       prints the Open MPI flags of the hosts' network (as run adds them)
#
# Needs root. Only the hosts' own addresses (10.77.1.0/24) are used. Runs share the hosts, so
# one run at a time (CTest: RESOURCE_LOCK multihost).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NET=10.77.1
BRIDGE=rmhbr
LOCK=/run/lock/rmastore-multihost.lock

die() { echo "multihost: $*" >&2; exit 1; }

check() {
  [ "$(id -u)" = 0 ] || { echo "multihost: simulated hosts need root (network namespaces)"; return 1; }
  for tool in ip unshare; do
    command -v "$tool" >/dev/null || { echo "multihost: '$tool' is missing (apt-get install iproute2 util-linux)"; return 1; }
  done
  # A kernel or container that refuses namespaces fails here, loudly, not in a test.
  if ! unshare --net --uts true 2>/dev/null; then
    echo "multihost: this kernel or container refuses network/UTS namespaces (unshare --net --uts failed)"
    return 1
  fi
}

hosts_now() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rmh[0-9]+$' || true; }

# One CPU cgroup for the processes of every host (scripts/multihost-agent says why). Without
# autogroups there is nothing to undo.
# (RMASTORE_MULTIHOST_CPU_GROUP=0 makes the agent leave the hosts in their autogroups, to
# measure.) On cgroup v2 the group is made only where the root already hands the cpu controller
# down: enabling it would change how the whole machine is scheduled.
cpu_group() {
  [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ] || return 0
  if [ -e /sys/fs/cgroup/cpu/cpu.shares ]; then
    mkdir -p /sys/fs/cgroup/cpu/rmastore-hosts && return 0
  elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    mkdir -p /sys/fs/cgroup/rmastore-hosts && return 0
  fi
  echo "multihost: warning: autogroups are on and no CPU cgroup could be made for the hosts, so" \
    "they are scheduled as rival groups and runs may stall for seconds (docs/operations.md);" \
    "enable the cpu controller in the cgroup root, or set kernel.sched_autogroup_enabled=0" >&2
}

up() { # $1 = number of hosts
  local n=$1 i ns
  check || exit 1
  exec 9>"$LOCK"; flock 9
  cpu_group
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
  ip addr show dev "$BRIDGE" | grep -q "$NET.1/24" || ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in $(seq 1 "$n"); do
    ns=rmh$i
    ip netns list | grep -qw "$ns" || ip netns add "$ns" || die "cannot create namespace $ns"
    if ! ip link show "rmhv$i" >/dev/null 2>&1; then
      ip link add "rmhv$i" type veth peer name eth0 netns "$ns" || die "cannot create veth rmhv$i"
    fi
    ip link set "rmhv$i" master "$BRIDGE" up
    ip netns exec "$ns" ip addr show dev eth0 | grep -q "$NET.$((10 + i))/24" ||
      ip netns exec "$ns" ip addr add "$NET.$((10 + i))/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
  done
}

clean() {
  local ns pids
  for ns in $(hosts_now); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  done
  return 0
}

down() {
  local ns
  clean
  for ns in $(hosts_now); do ip netns del "$ns"; done
  ip link del "$BRIDGE" 2>/dev/null
  # The processes killed by clean may take a moment to leave the group.
  local g
  for g in /sys/fs/cgroup/cpu/rmastore-hosts /sys/fs/cgroup/rmastore-hosts; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -d "$g" ] || break
      rmdir "$g" 2>/dev/null || sleep 0.2
    done
  done
  return 0
}

run() { # $1 = hosts, $2 = mpirun, rest = its arguments
  local n=$1 mpirun=$2 np=0 prev=
  shift 2
  for a in "$@"; do
    case $prev in -n | -np | --np | -c) np=$a ;; esac
    prev=$a
  done
  [ "$np" -gt 0 ] || die "run: give the process count as -n N"
  up "$n"
  # global: the EXIT trap needs it
  dir=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-multihost.XXXXXX")
  # As even as it gets, earlier hosts taking the remainder; ranks fill host 1 first, then host 2
  # (6 ranks on 3 hosts: 0-1, 2-3, 4-5).
  local i slots
  for i in $(seq 1 "$n"); do
    slots=$((np / n + (i <= np % n ? 1 : 0)))
    [ "$slots" -gt 0 ] && echo "$NET.$((10 + i)) slots=$slots"
  done >"$dir/hostfile"
  trap 'clean; rm -rf "$dir"' EXIT
  # RMASTORE_MULTIHOST_LAZY=1 keeps Open MPI's lazy connections (only for the reproducer).
  local cutoff=(--mca mpi_add_procs_cutoff 1000000)
  [ "${RMASTORE_MULTIHOST_LAZY:-0}" = 1 ] && cutoff=()
  # mpi_add_procs_cutoff: connect to every process at start-up. With lazy connections (the
  #   default), a failure event names the job with rank WILDCARD besides the dead process, and
  #   that matches any not-yet-connected peer: a live process is marked failed (patched in
  #   scripts/openmpi-patches/0002), and MPIX_Comm_shrink's agreement never completes
  #   (tests/ompi_ulfm_across_hosts.c).
  # coll ^han: HAN, chosen for communicators that span nodes, is not fault tolerant.
  # mpi_yield_when_idle: the simulated hosts share this machine's cores, so every run is
  #   oversubscribed. An RMA operation between hosts completes only when its target's process
  #   runs (TCP has no remote memory access), and processes waiting in MPI spin and starve it
  #   (docs/benchmarks.md, "Across hosts"). RMASTORE_MULTIHOST_YIELD=0 turns it off, to measure.
  local net
  read -ra net <<<"$(net_flags)"
  "$mpirun" --hostfile "$dir/hostfile" --prtemca plm_ssh_agent "$HERE/multihost-agent" \
    --prtemca plm_ssh_no_tree_spawn 1 "${net[@]}" "${cutoff[@]}" --mca coll ^han "$@"
}

# The hosts' network for Open MPI: every byte between hosts over TCP on their own subnet, and
# mpi_yield_when_idle (above). Also the network of scripts/slurm.sh's jobs.
net_flags() {
  echo "--mca mpi_yield_when_idle ${RMASTORE_MULTIHOST_YIELD:-1} --prtemca oob_tcp_if_include $NET.0/24" \
    "--mca btl tcp,sm,self --mca btl_tcp_if_include $NET.0/24"
}

case ${1:-} in
  up) up "${2:-3}" ;;
  down) down ;;
  clean) clean ;;
  check) check ;;
  net-flags) net_flags ;;
  run)
    [ $# -ge 3 ] || die "usage: multihost.sh run N MPIRUN [args...]"
    shift
    run "$@"
    ;;
  *) sed -n '2,19p' "$0"; exit 2 ;;
esac
