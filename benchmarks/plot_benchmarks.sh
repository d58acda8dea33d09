#!/usr/bin/env bash
# Plots the main curves of docs/benchmarks.md from the JSON lines of benchmarks/run_matrix.sh:
#   benchmarks/plot_benchmarks.sh [MATRIX.jsonl] [LOCALIZED.jsonl] [OUTDIR]
# MATRIX is the output of `run_matrix.sh OUT global` (or all), LOCALIZED that of
# `run_matrix.sh OUT localized` (or all: the same file twice); OUTDIR receives
#   bench-putget-latency.png  store_put / store_get against raw MPI, by value size
#   bench-put-ratio.png       store / raw median of idle puts, every np and copy count, the goal
#   bench-busy-idle.png       a put to a computing target against one to a waiting target
#   bench-recovery.png        from the kill to recovered against MiB per rank, and its parts
#   bench-localized.png       the localized variant against the global one: puts and pauses
# Defaults: the files of the latest matrix run cited in docs/benchmarks.md, and docs/figures.
# Where there are several runs of one point, lines go through their median. Needs python3 and
# gnuplot (scripts/setup.sh installs both).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
matrix=${1:-$root/benchmarks/results/store_bench-2026-11-28-holder.jsonl}
localized=${2:-$matrix}
outdir=${3:-$root/docs/figures}
for f in "$matrix" "$localized"; do
  [ -r "$f" ] || { echo "plot_benchmarks: cannot read $f" >&2; exit 2; }
done
mkdir -p "$outdir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# JSON lines -> one whitespace-separated data file per curve, and series.gp, which names the
# files and their legends in gnuplot arrays, so that the plots follow whatever points were run.
python3 - "$matrix" "$localized" "$tmp" <<'PY'
import json, os, statistics, sys

matrix_path, localized_path, tmp = sys.argv[1:4]

def rows_of(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{")]

def variant_rows(rows):
    # As benchmarks/tables.py: localized puts of --op variants carry vs_global; the global
    # puts interleaved with them have the median that those rows name.
    var = [r for r in rows if "vs_global" in r]
    for r in list(var):
        var += [g for g in rows if g.get("recovery") == "global" and g["op"] == "put"
                and "vs_global" not in g and g["np"] == r["np"] and g["size"] == r["size"]
                and g["replicas"] == r["replicas"] and g["median_us"] == r["global_median_us"]]
    return var

def plain_ops(rows):
    # put and get rows of the matrix proper: not the detector comparison, not the variants.
    det = [r for r in rows if "vs_off" in r or (r.get("detector") == "off" and r["op"] == "put")]
    var = variant_rows(rows)
    return [r for r in rows if r["op"] in ("put", "get") and r not in det and r not in var]

def med(xs):
    return statistics.median(xs)

def write(name, lines):
    with open(os.path.join(tmp, name), "w") as f:
        f.write("\n".join(lines) + "\n")
    return os.path.join(tmp, name)

series = {}  # gnuplot array name -> list of (file, title)

def add(array, path, title):
    series.setdefault(array, []).append((path, title))

def copies(r):
    return "1 copy" if r == 1 else f"{r} copies"

rows = rows_of(matrix_path)
ops = plain_ops(rows)

def grouped(sel, key, val):
    out = {}
    for r in sel:
        out.setdefault(key(r), {}).setdefault(r["size"], []).append(val(r))
    return out

# Latency against raw, idle targets: the (np, r) points run over the whole range of sizes.
idle = [r for r in ops if r["scenario"] == "idle"]
for op in ("put", "get"):
    g = grouped([r for r in idle if r["op"] == op], lambda r: (r["np"], r["replicas"]),
                lambda r: (r["median_us"], r["raw_median_us"]))
    for (np, rep), pts in sorted(g.items()):
        if len(pts) < 6:
            continue
        lines = [f"{s} {med([p[0] for p in v])} {med([p[1] for p in v])}" for s, v in sorted(pts.items())]
        add(f"L{op}", write(f"lat-{op}-{np}-{rep}.dat", lines), f"np {np}, {copies(rep)}")

# Ratio store / raw of idle puts, and busy / idle puts.
g = grouped([r for r in idle if r["op"] == "put"], lambda r: (r["np"], r["replicas"]), lambda r: r["ratio"])
for (np, rep), pts in sorted(g.items()):
    add("R", write(f"ratio-{np}-{rep}.dat", [f"{s} {med(v)}" for s, v in sorted(pts.items())]),
        f"np {np}, {copies(rep)}")
g = grouped([r for r in ops if r["scenario"] == "busy" and "busy_vs_idle" in r],
            lambda r: (r["op"], r["np"], r["replicas"]), lambda r: r["busy_vs_idle"])
for (op, np, rep), pts in sorted(g.items()):
    add("B" if op == "put" else "G", write(f"busy-{op}-{np}-{rep}.dat", [f"{s} {med(v)}" for s, v in sorted(pts.items())]),
        f"{op}, np {np}, {copies(rep)}")

# Recovery: one process killed, kill to recovered and the goal, by MiB per rank.
fail = [r for r in rows if r["op"] == "failure" and not r.get("host_loss")]
rec = {}
for r in fail:
    rec.setdefault((r["detector"], r["np"]), {}).setdefault(r["mib_per_rank"], []).append(r)
for (det, np), pts in sorted(rec.items(), key=lambda kv: (kv[0][0] != "notify", kv[0][1])):
    lines = [f"{m} {med([r['kill_to_recovered_ms'] for r in v])} {med([r['goal_ms'] for r in v])}"
             for m, v in sorted(pts.items())]
    add("K", write(f"rec-{det}-{np}.dat", lines), f"np {np}" + ("" if det == "notify" else f", {det.upper()}"))
# Its parts, one bar per run: detection (slowest survivor), shrink, window, re-replication.
parts = []
for r in sorted(fail, key=lambda r: (r["detector"] != "notify", r["np"], r["mib_per_rank"])):
    label = f"np{r['np']} {r['mib_per_rank']}M" + ("" if r["detector"] == "notify" else " " + r["detector"])
    parts.append(f"\"{label}\" {r['detect_ms_max']} {r['shrink_ms']} {r['window_ms']} {r['rereplicate_ms']}")
if parts:
    write("rec-parts.dat", parts)

# The localized variant: its put against the global one's, and the pause of survivors.
lrows = rows_of(localized_path)
g = grouped([r for r in lrows if "vs_global" in r], lambda r: (r["np"], r["replicas"]), lambda r: r["vs_global"])
for (np, rep), pts in sorted(g.items()):
    add("V", write(f"var-{np}-{rep}.dat", [f"{s} {med(v)}" for s, v in sorted(pts.items())]),
        f"np {np}, {copies(rep)}")
pause = [r for r in lrows if r["op"] == "pause"]
nps = sorted({r["np"] for r in pause})
# Each series is shifted a little along x so that the runs of one np do not hide each other.
shift = {("global", "bystander"): -0.3, ("global", "affected"): -0.1,
         ("localized", "bystander"): 0.1, ("localized", "affected"): 0.3}
for (rec_, who), dx in shift.items():
    lines = [f"{r['np'] + dx} {r[who]['pause_ms_max']}" for r in pause
             if r["recovery"] == rec_ and r.get(who, {}).get("ranks")]
    if lines:
        add("P", write(f"pause-{rec_}-{who}.dat", lines),
            f"{rec_}: {'bystanders' if who == 'bystander' else 'affected ranks'}")
if pause:
    add("P", write("pause-before.dat", [f"{r['np']} {r['pause_before_kill_ms_max']}" for r in pause]),
        "longest gap before the death (noise)")

with open(os.path.join(tmp, "series.gp"), "w") as f:
    for name in ("Lput", "Lget", "R", "B", "G", "K", "V", "P"):
        items = series.get(name, [])
        f.write(f"array {name}f[{max(len(items), 1)}]\narray {name}t[{max(len(items), 1)}]\n")
        f.write(f"{name}n = {len(items)}\n")
        for i, (path, title) in enumerate(items, 1):
            f.write(f'{name}f[{i}] = "{path}"\n{name}t[{i}] = "{title}"\n')
    f.write(f'npmin = {min(nps) if nps else 0}\nnpmax = {max(nps) if nps else 0}\n')
PY

mname=$(basename "$matrix") lname=$(basename "$localized")
gnuplot <<GP
load "$tmp/series.gp"
set terminal pngcairo noenhanced size 1000,560 font ",11"
set grid
set key top left box opaque
set logscale x 2
set xlabel "value size, bytes (K = KiB, M = MiB)"
set xrange [5:1.1e8]

# Latency: median of the store and of raw MPI_Put / MPI_Get + flush, same run, idle targets.
set output "$outdir/bench-putget-latency.png"
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "64K" 65536, "1M" 1048576, "" 16777216, "64M" 67108864)
set multiplot layout 1,2 title "Median latency against raw MPI, idle targets ($mname)"
set logscale y
set ylabel "median latency, µs (log scale)"
set format y "%g"
set title "store_put (solid) and raw MPI_Put + flush (dashed)"
plot for [i=1:Lputn] Lputf[i] using 1:2 with linespoints lc i pt 7 dt 1 title Lputt[i], \
     for [i=1:Lputn] Lputf[i] using 1:3 with linespoints lc i pt 6 dt 2 notitle
set title "store_get (solid) and raw MPI_Get + flush (dashed)"
plot for [i=1:Lgetn] Lgetf[i] using 1:2 with linespoints lc i pt 7 dt 1 title Lgett[i], \
     for [i=1:Lgetn] Lgetf[i] using 1:3 with linespoints lc i pt 6 dt 2 notitle
unset multiplot

# Ratio to raw, idle puts, against the goals (1.25x up to 4 KiB with 2 copies; 0.8x the raw
# bandwidth from 1 MiB, which is the same ratio).
set output "$outdir/bench-put-ratio.png"
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "64K" 65536, "1M" 1048576, "16M" 16777216, \
           "64M" 67108864)
set title "Repeat store_put, idle targets: median / raw MPI median ($mname)"
unset logscale y
set yrange [0.5:*]
set ylabel "store median / raw median"
set key outside right top
plot for [i=1:Rn] Rf[i] using 1:2 with linespoints lc i pt 7 title Rt[i], \
     1.25 with lines lc rgb "black" dt 2 lw 2 title "goal: 1.25 (0.8x bandwidth)"

set output "$outdir/bench-busy-idle.png"
set title "A computing (busy) target against a waiting (idle) one ($mname)"
set logscale y
set yrange [*:*]
set ylabel "busy median / idle median (log scale)"
set key outside right top
plot for [i=1:Bn] Bf[i] using 1:2 with linespoints lc i pt 7 dt 1 title Bt[i], \
     for [i=1:Gn] Gf[i] using 1:2 with linespoints lc i pt 6 dt 2 title Gt[i], \
     2 with lines lc rgb "black" dt 2 lw 2 title "goal for puts: 2"

# Recovery.
set output "$outdir/bench-recovery.png"
set multiplot layout 1,2 title "One process killed, 2 copies, store_recover ($mname)"
set title "From the kill to recovered (solid) and its goal (dashed)"
set xtics (1, 4, 16, 64)
set xrange [0.8:80]
set xlabel "MiB stored per rank"
set ylabel "ms (log scale)"
set yrange [*:*]
set key inside top left box opaque
plot for [i=1:Kn] Kf[i] using 1:2 with linespoints lc i pt 7 dt 1 title Kt[i], \
     for [i=1:Kn] Kf[i] using 1:3 with linespoints lc i pt 6 dt 2 notitle
unset logscale
unset xrange
set title "Where the time goes, one bar per run (processes, MiB per rank)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics autofreq rotate by -45 autojustify
unset xlabel
set ylabel "ms"
set grid noxtics ytics
set key below horizontal maxrows 2 box
plot "$tmp/rec-parts.dat" using 2:xtic(1) title "detection (slowest survivor)", \
     "" using 3 title "shrink", "" using 4 title "window", "" using 5 title "re-replication"
unset multiplot

# The localized variant.
reset
set terminal pngcairo noenhanced size 1000,560 font ",11"
set output "$outdir/bench-localized.png"
set multiplot layout 1,2 title "Localized variant against the global one ($lname)"
set grid
set title "Failure-free put: localized median / global median"
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "64K" 65536, "1M" 1048576)
set xlabel "value size, bytes (K = KiB, M = MiB)"
set ylabel "localized / global (interleaved)"
set key top right box opaque
plot for [i=1:Vn] Vf[i] using 1:2 with linespoints lc i pt 7 title Vt[i], \
     1 with lines lc rgb "black" dt 2 notitle
unset logscale
set title "Longest pause of survivors' puts after a death (per run)"
set xrange [npmin-0.8:npmax+0.8]
set xtics 2
set xlabel "processes (4 KiB puts, 16 MiB per rank)"
set logscale y
set ylabel "ms (log scale)"
set key top left box opaque
plot for [i=1:Pn] Pf[i] using 1:2 with points lc (i == Pn ? 8 : i) pt (i == Pn ? 1 : 7) ps 1.2 title Pt[i]
unset multiplot
GP
echo "plot_benchmarks: wrote $outdir/bench-{putget-latency,put-ratio,busy-idle,recovery,localized}.png" >&2
