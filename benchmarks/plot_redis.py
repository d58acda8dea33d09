#!/usr/bin/env python3
"""Plots compare_redis JSON lines with gnuplot: median latency against value size, put and get,
rmastore and Redis, one line per client count; repeated runs of a point give their median.

    benchmarks/plot_redis.py compare_redis.jsonl compare_redis.png
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main(src, png):
    rows = [json.loads(line) for line in open(src) if line.startswith("{")]
    series = sorted({(r["op"], r["system"], r["clients"]) for r in rows})
    with tempfile.TemporaryDirectory() as tmp:
        plots = {"put": [], "get": []}
        for op, system, clients in series:
            path = os.path.join(tmp, f"{op}-{system}-{clients}.dat")
            points = {}
            for r in rows:
                if (r["op"], r["system"], r["clients"]) == (op, system, clients):
                    points.setdefault(r["size"], []).append(r["median_us"])
            with open(path, "w") as f:
                for size in sorted(points):
                    f.write(f"{size} {statistics.median(points[size])}\n")
            dash = 1 if system == "rmastore" else 2
            label = f"{system}, {clients} clients"
            plots[op].append(f"'{path}' using 1:2 with linespoints dt {dash} title '{label}'")
        title = {"put": "put: store\\_put (2 copies) vs Redis SET + WAIT 1",
                 "get": "get: store\\_get vs Redis GET (4 clients: remote reads)"}
        script = [f"set terminal pngcairo size 1200,500 font ',10'", f"set output '{png}'",
                  "set multiplot layout 1,2", "set logscale xy", "set grid",
                  "set xlabel 'value size (bytes)'", "set ylabel 'median latency (µs)'",
                  "set key top left"]
        for op in ("put", "get"):
            script += [f"set title '{title[op]}'", "plot " + ", ".join(plots[op])]
        script.append("unset multiplot")
        subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
