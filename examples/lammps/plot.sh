#!/usr/bin/env bash
# Plots what examples/lammps/bench.sh measured: per point (atoms, processes), the time of a
# checkpoint three ways, and the time from a failure to the first new timestep two ways.
#   examples/lammps/plot.sh RESULTS.jsonl OUTDIR    -> OUTDIR/lammps-checkpoint.png, lammps-failure.png
set -euo pipefail
in=$1 outdir=$2
mkdir -p "$outdir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$in" "$tmp" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def label(r):
    a = r["atoms"]
    return f'"{a // 1000}k np{r["np"]}"' if a < 1_000_000 else f'"{a / 1e6:.1f}M np{r["np"]}"'
with open(sys.argv[2] + "/ckpt.dat", "w") as f:
    for r in rows:
        if r["bench"] == "lammps_checkpoint":
            f.write(f'{label(r)} {r["store_ms"]} {r["shm_ms"]} {r["disk_fsync_ms"]}\n')
with open(sys.argv[2] + "/fail.dat", "w") as f:
    for r in rows:
        if r["bench"] == "lammps_failure":
            f.write(f'{label(r)} {r["kill_to_resumed_s"]} {r["job_restart_to_resumed_s"]}\n')
PY
gnuplot <<GP
set terminal pngcairo size 900,480 font ",11"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set key top left
set logscale y
set output "$outdir/lammps-checkpoint.png"
set title "One checkpoint of LAMMPS in.lj (median of checkpoints 5-19)"
set ylabel "ms per checkpoint (log scale)"
plot "$tmp/ckpt.dat" using 2:xtic(1) title "rmastore, 2 copies", "" using 3 title "write\\\_restart to /dev/shm alone", \
     "" using 4 title "write\\\_restart to disk, fsync"
set output "$outdir/lammps-failure.png"
set title "One death at step 55: from the kill to the first new timestep"
set ylabel "seconds (log scale)"
plot "$tmp/fail.dat" using 2:xtic(1) title "rmastore: survivors recover in the same job", \
     "" using 3 title "a new mpirun from the same restart files (launch to first step)"
GP
echo "plot.sh: $outdir/lammps-checkpoint.png $outdir/lammps-failure.png"
