#!/usr/bin/env python3
"""The knee and the MFU on a quiet and on a loaded machine, side by side (issue 27).

For each condition (quiet; two CPU hogs, busy Python loops, running throughout), --runs runs of
`saturate search --objective throughput` on the mlp (fresh processes, default threads: chosen from
the load, all cores on a quiet machine),
and from each: the knee, the curve's points, the largest MFU any trial reports, the GEMM peak and
the other processes' busy CPUs while it was measured, and whether it was measured again.

usage: bench/under_load.py --saturate build/saturate [--runs 3] [--out bench/results/under_load_cpu.md]
"""
import argparse, json, os, subprocess, sys, tempfile, time

HOG = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    pass\n"


def search(args, out):
    cmd = [args.saturate, "search", "--model", "mlp", "--width", "256", "--device", "cpu", "--memory-budget", "48MiB",
           "--objective", "throughput", "--json", out, "-q"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    j = json.load(open(out))
    c = j["compute"]
    curve = j["objective"]["throughput_curve"]
    mfus = [t["compute"]["mfu"] for t in j["trials"] if "mfu" in t.get("compute", {})]
    points = [pt["batch"] for pt in curve["points"] if pt["ok"]]
    return {"knee": curve["knee_batch"], "points": points, "settled": sum(pt["settled"] for pt in curve["points"]),
            "n_points": len(curve["points"]), "max_mfu": max(mfus) if mfus else None, "mfu": c.get("mfu"),
            "peak": c["peak_flops_per_s"], "others": c.get("peak_others_busy_cpus"),
            "again": c.get("peak_first_flops_per_s"), "seconds": time.monotonic() - t0,
            "threads": j.get("device_info", "?")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="bench/results/under_load_cpu.md")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    rows = []
    for condition in ("quiet", "two hogs"):
        hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(2 if condition == "two hogs" else 0)]
        try:
            for i in range(args.runs):
                r = search(args, os.path.join(tmp, f"{condition.replace(' ', '_')}_{i}.json"))
                r["condition"] = condition
                rows.append(r)
                print(condition, r, flush=True)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    lines = ["# The knee and the MFU, quiet and loaded (issue 27)", "",
             f"`bench/under_load.py`, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs; `saturate search --model mlp "
             "--width 256 --memory-budget 48MiB --objective throughput` (default threads: from the load), fresh "
             "processes; loaded: "
             "two busy Python loops beside it.", "",
             "| condition | run | device (threads) | knee | knee's point | points settled | largest trial MFU | "
             "answer's MFU | GEMM peak | other CPUs busy while measured | measured again | seconds |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    def pct(v):
        return "-" if v is None else f"{100 * v:.1f} %"

    for i, r in enumerate(rows):
        at = r["points"].index(r["knee"]) if r["knee"] in r["points"] else -1
        others = "-" if r["others"] is None else f"{r['others']:.2f}"
        again = "no" if not r["again"] else f"yes (first {r['again'] / 1e9:.1f} GFLOP/s)"
        lines.append(f"| {r['condition']} | {i % args.runs + 1} | {r['threads']} | {r['knee']} | {at} of {len(r['points'])} | "
                     f"{r['settled']}/{r['n_points']} | {pct(r['max_mfu'])} | {pct(r['mfu'])} | "
                     f"{r['peak'] / 1e9:.1f} GFLOP/s | {others} | {again} | {r['seconds']:.0f} |")
    for condition in ("quiet", "two hogs"):
        at = [r["points"].index(r["knee"]) for r in rows if r["condition"] == condition and r["knee"] in r["points"]]
        spread = max(at) - min(at) if at else None
        lines.append("")
        knees = [r["knee"] for r in rows if r["condition"] == condition]
        agree = "within one point of each other" if spread is not None and spread <= 1 else f"{spread} points apart"
        lines.append(f"{condition}: knees {knees}, {agree}.")
    open(args.out, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
