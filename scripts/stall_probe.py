#!/usr/bin/env python3
"""Samples a running MPI job without stopping it, for the stalls across hosts (docs/log/2026-11-26-multihost-stalls.md).

  chrt -f 50 scripts/stall_probe.py <comm prefix> <log> [period s, default 0.01]
                                    [stacks after s] [stacks file]

Every period, one line: the time, then for each process whose /proc/<pid>/comm starts with the
prefix, pid[state+ticks of each thread]q<tx>/<rx>: each thread's state letter and the CPU ticks
it used since the last sample, and the bytes in the send and receive queues of the TCP sockets
of the process's network namespace (/proc/<pid>/net/tcp; on the simulated hosts that is its
host); after "|", each socket with bytes queued: ports, send/receive bytes, and the sampled
process that holds it. Each thread is shown as <state><ticks>@<last CPU>; its policy, nice,
real-time priority and allowed CPUs are logged ("sched") whenever they change. With "stacks
after", once no socket of the job's hosts has held a byte for that long, or a socket's unread
bytes have not moved for that long, the stacks of all their threads are taken, once per probe,
with gdb (in the background, one process after another) into the stacks file, and the
log marks it. gdb, which the test's stall dumps use, stops the processes it looks at and lengthens the
stalls; reading /proc does not. Stop it with a signal.
"""
import glob
import os
import subprocess
import sys
import time


def read(path):
    with open(path) as f:
        return f.read()


def threads(pid, prev):
    out = []
    for task in sorted(glob.glob('/proc/%d/task/*' % pid)):  # the order of the "sched" lines
        stat = read(task + '/stat')
        fields = stat[stat.rindex(')') + 2:].split()
        tid = int(task.rsplit('/', 1)[1])
        ticks = int(fields[11]) + int(fields[12])  # utime + stime
        out.append('%s%d@%s' % (fields[0], ticks - prev.get(tid, ticks), fields[36]))  # last CPU
        prev[tid] = ticks
    return out


def sched_of(pid):
    """Each thread's policy, nice, real-time priority and allowed CPUs: what can keep a runnable
    thread from running."""
    out = []
    for task in sorted(glob.glob('/proc/%d/task/*' % pid)):
        stat = read(task + '/stat')
        fields = stat[stat.rindex(')') + 2:].split()
        cpus = [l.split()[1] for l in read(task + '/status').splitlines() if l.startswith('Cpus_allowed_list')]
        out.append('%s:pol%s,nice%s,rt%s,cpus%s' % (task.rsplit('/', 1)[1], fields[38], fields[16], fields[37],
                                                   cpus[0] if cpus else '?'))
    return ' '.join(out)


def sockets_of(pid):
    inodes = set()
    for fd in glob.glob('/proc/%d/fd/*' % pid):
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith('socket:['):
            inodes.add(int(link[8:-1]))
    return inodes


def queues(pid, netns, owner, busy, unread):
    """Sums the queues of the namespace's sockets; names each non-empty one in `busy`, with
    its ports and the sampled process that holds it ('?' for another, such as a daemon), and
    each one with unread bytes in `unread`, under its namespace and ports."""
    tx = rx = 0
    for line in read('/proc/%d/net/tcp' % pid).splitlines()[1:]:
        f = line.split()
        q = f[4].split(':')
        t, r = int(q[0], 16), int(q[1], 16)
        tx += t
        rx += r
        if t or r:
            ports = '%d>%d' % (int(f[1].split(':')[1], 16), int(f[2].split(':')[1], 16))
            busy.add('%s:%d/%d@%s' % (ports, t, r, owner.get(int(f[9]), '?')))
            if r:
                unread[(netns, ports)] = r
    return tx, rx


def main():
    prefix, log = sys.argv[1], open(sys.argv[2], 'w', buffering=1)
    period = float(sys.argv[3]) if len(sys.argv) > 3 else 0.01
    stacks_after = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    stacks_file = sys.argv[5] if len(sys.argv) > 5 else sys.argv[2] + '.stacks'
    silent_since, dumped = None, False
    stuck = {}  # (namespace, ports) -> (unread bytes, since): unread bytes that do not move
    sched = {}
    prev, pids, listed, owner, netns_of = {}, [], 0.0, {}, {}
    while True:
        t = time.time()
        if t - listed > 0.5:  # scanning /proc every sample would cost more than the samples
            listed, pids, owner = t, [], {}
            for d in glob.glob('/proc/[0-9]*'):
                try:
                    if read(d + '/comm').startswith(prefix):
                        pids.append(int(d[6:]))
                except OSError:
                    pass
            for pid in pids:
                try:
                    for inode in sockets_of(pid):
                        owner[inode] = pid
                    now = sched_of(pid)
                except (OSError, IndexError):
                    continue
                if sched.get(pid) != now:
                    sched[pid] = now
                    log.write('%.4f sched %d %s\n' % (t, pid, now))
        parts, busy, unread, of_netns = [], set(), {}, {}
        for pid in sorted(pids):
            try:
                # The processes of a host share its namespace and so its TCP table: read once.
                netns = netns_of.get(pid) or os.readlink('/proc/%d/ns/net' % pid)
                netns_of[pid] = netns
                if netns not in of_netns:
                    of_netns[netns] = queues(pid, netns, owner, busy, unread)
                tx, rx = of_netns[netns]
                parts.append('%d[%s]q%d/%d' % (pid, ','.join(threads(pid, prev)), tx, rx))
            except (OSError, ValueError, IndexError):
                pass  # the process ended
        if parts:
            log.write('%.4f %s | %s\n' % (t, ' '.join(parts), ' '.join(sorted(busy))))
            stuck = {k: (r, stuck[k][1] if k in stuck and stuck[k][0] == r else t) for k, r in unread.items()}
            longest = max((t - since for _, since in stuck.values()), default=0.0)
            if busy:
                silent_since = None
            elif silent_since is None:
                silent_since = t
            quiet = t - silent_since if silent_since is not None else 0.0
            # Once per probe: gdb stops each process for about a second, and every dump would
            # lengthen the stall it records (a loop that dumped at every unmoved socket made a
            # 9 s run last 120 s).
            if stacks_after > 0 and not dumped and max(quiet, longest) >= stacks_after:
                dumped = True
                log.write('%.4f stacks taken: %.2f s of silence, unread bytes unmoved for %.2f s\n' %
                          (t, quiet, longest))
                script = ' '.join('echo "== %d $(date +%%s.%%N)"; chrt -o 0 gdb -p %d -batch -ex \"thread apply all bt\";'
                                  % (pid, pid) for pid in sorted(pids))
                subprocess.Popen(['bash', '-c', '{ %s } >> %s 2>&1' % (script, stacks_file)])
        time.sleep(max(0.0, period - (time.time() - t)))


if __name__ == '__main__':
    main()
