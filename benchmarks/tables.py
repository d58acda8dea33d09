#!/usr/bin/env python3
"""Prints Markdown tables (as in docs/benchmarks.md) from store_bench JSON lines.

    benchmarks/tables.py benchmarks/results/store_bench-YYYY-MM-DD.jsonl
"""
import json
import sys


def rows_of(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    print()


def fmt(x, digits=2):
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def main(path):
    rows = rows_of(path)
    # Rows of the interleaved detector comparison carry vs_off (or are its "off" baseline).
    det = [r for r in rows if "vs_off" in r or (r.get("detector") == "off" and r["op"] == "put")]
    # Rows of the interleaved variant comparison: the localized ones carry vs_global.
    var = []
    for r in rows:
        if "vs_global" in r:
            var += [g for g in rows if g.get("recovery") == "global" and g["op"] == "put" and g["np"] == r["np"]
                    and g["size"] == r["size"] and g["replicas"] == r["replicas"]
                    and g["median_us"] == r["global_median_us"]] + [r]
    ops = [r for r in rows if r["op"] in ("put", "get") and r not in det and r not in var]
    if ops:
        print("### Put and get against raw MPI\n")
        table(["op", "np", "r", "size (B)", "target", "median µs", "p99 µs", "raw median µs", "ratio",
               "MiB/s", "raw MiB/s", "busy/idle"],
              [[r["op"], r["np"], r["replicas"], r["size"], r["scenario"], fmt(r["median_us"]), fmt(r["p99_us"], 1),
                fmt(r["raw_median_us"]), fmt(r["ratio"]), fmt(r["bw_MiBps"], 0), fmt(r["raw_bw_MiBps"], 0),
                fmt(r["busy_vs_idle"], 1) if "busy_vs_idle" in r else ""] for r in ops])
    if det:
        print("### Put latency with each failure detector (interleaved)\n")
        table(["np", "r", "size (B)", "detector", "median µs", "raw median µs", "vs off"],
              [[r["np"], r["replicas"], r["size"], r["detector"], fmt(r["median_us"]), fmt(r["raw_median_us"]),
                fmt(r["vs_off"]) if "vs_off" in r else "1 (baseline)"] for r in det])
    if var:
        print("### Put latency of the two recovery variants (interleaved)\n")
        table(["np", "r", "size (B)", "variant", "median µs", "raw median µs", "ratio to raw", "vs global"],
              [[r["np"], r["replicas"], r["size"], r["recovery"], fmt(r["median_us"]), fmt(r["raw_median_us"]),
                fmt(r["ratio"]), fmt(r["vs_global"]) if "vs_global" in r else "1 (baseline)"] for r in var])
    pause = [r for r in rows if r["op"] == "pause"]
    if pause:
        print("### Pause seen by survivors when a process dies\n")
        table(["np", "variant", "MiB/rank", "longest gap before the death ms", "bystanders: pause ms (median/max)",
               "affected: pause ms (median/max)", "affected: first put ms (median/max)"],
              [[r["np"], r["recovery"], r["mib_per_rank"], fmt(r["pause_before_kill_ms_max"], 1),
                f'{fmt(r["bystander"]["pause_ms_median"], 1)} / {fmt(r["bystander"]["pause_ms_max"], 1)}',
                f'{fmt(r["affected"]["pause_ms_median"], 1)} / {fmt(r["affected"]["pause_ms_max"], 1)}',
                f'{fmt(r["affected"]["first_put_ms_median"], 1)} / {fmt(r["affected"]["first_put_ms_max"], 1)}']
               for r in pause])
    cpu = [r for r in rows if r["op"] == "helper_cpu"]
    if cpu:
        print("### Helper thread CPU while idle\n")
        table(["np", "detector", "helper_max_sleep_us", "mean % of a core", "max % of a core"],
              [[r["np"], r["detector"], r["max_sleep_us"], fmt(r["mean_pct_of_core"]), fmt(r["max_pct_of_core"])]
               for r in cpu])
    fail = [r for r in rows if r["op"] == "failure"]
    if fail:
        print("### Detection and recovery (one process killed)\n")
        table(["np", "r", "detector", "MiB/rank", "detect ms (median/max)", "shrink ms", "window ms",
               "re-replication ms", "recover ms", "kill to recovered ms", "MiB lost = moved", "goal ms",
               "within goal"],
              [[r["np"], r["replicas"], r["detector"], r["mib_per_rank"],
                f'{fmt(r["detect_ms_median"], 1)} / {fmt(r["detect_ms_max"], 1)}', fmt(r["shrink_ms"], 1),
                fmt(r["window_ms"], 1), fmt(r["rereplicate_ms"], 1), fmt(r["recover_ms"], 1),
                fmt(r["kill_to_recovered_ms"], 1),
                f'{r["bytes_lost"] / 2**20:.1f}' + ("" if r["bytes_lost"] == r["bytes_moved"] else
                                                    f' / {r["bytes_moved"] / 2**20:.1f}'),
                fmt(r["goal_ms"], 1), "yes" if r["within_goal"] else "**no**"] for r in fail])
    other = [r for r in rows if r["op"] not in ("put", "get", "helper_cpu", "failure", "pause")]
    for kind in sorted({r["op"] for r in other}):
        group = [r for r in other if r["op"] == kind]
        keys = [k for k in group[0] if k != "op"]
        print(f"### {kind}\n")
        table(keys, [[fmt(r.get(k, "")) for k in keys] for r in group])


if __name__ == "__main__":
    main(sys.argv[1])
