#!/usr/bin/env python3
"""Which batch is best, measured (issue 14): the throughput curve's knee run to run, and the time
to a test accuracy on Fashion-MNIST for batches chosen four ways, side by side in one run.

Part 1, the knee: `saturate search --objective throughput` twice per model, fresh processes; the
knee of each run and whether the two agree (same timed point or a neighbour).

Part 2, time to accuracy: `saturate train --model convnet --data fashion-mnist` (or --model; CPU, Adam, its
default learning rate 1e-3) until the test accuracy reaches --target, for
  fixed 64       --batch 64
  max-fit        --batch auto: the largest micro-batch that trains in --budget (same learning rate)
  goodput        --batch auto --objective goodput --base-batch B (the learning rate follows the
                 square root of AdaScale's gain, the rule for Adam)
  adaptive       --batch auto --adaptive --base-batch B (re-chosen every 50 steps)
with every config run once per seed, configs interleaved within a seed (drifting load hits all
alike). Each run evaluates on the 10000 test images every --eval-every samples and stops at the
target; "time" is training time to the first evaluation at or above the target (evaluations left
out), "wall" the whole process (search, throughput curve, noise scale, evaluations included).

usage: bench/goodput.py --saturate build/saturate [--seeds 1,2,3] [--target 0.85]
                        [--out bench/results/goodput_cpu.md]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

CONFIGS = {
    "fixed 64": ["--batch", "64"],
    "max-fit": ["--batch", "auto"],
    "goodput": ["--batch", "auto", "--objective", "goodput"],
    "adaptive": ["--batch", "auto", "--adaptive"],
}


def run(cmd):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return p, wall


def knee_part(args):
    rows = []
    for model, extra in (("mlp", ["--memory-budget", "64MiB"]), ("convnet", ["--memory-budget", args.budget])):
        knees, curves = [], []
        for _ in range(2):
            p, wall = run([args.saturate, "search", "--model", model, "--data", "fashion-mnist", "--device", "cpu",
                           "--objective", "throughput", "-q", "--json", "-"] + extra)
            j = json.loads(p.stdout)
            c = j["objective"]["throughput_curve"]
            knees.append(c["knee_batch"])
            curves.append(c)
        batches = [pt["batch"] for pt in curves[0]["points"] if pt["ok"]]
        i, k = (batches.index(knees[0]) if knees[0] in batches else -9), (batches.index(knees[1]) if knees[1] in batches else 9)
        rows.append((model, knees, abs(i - k) <= 1, curves))
    return rows


def first_reach(evals, target):
    for e in evals:
        if e["accuracy"] >= target:
            return e
    return None


def accuracy_part(args):
    results = {name: [] for name in CONFIGS}
    for seed in args.seeds:
        for name, flags in CONFIGS.items():
            out = os.path.join(args.tmp, f"{name.replace(' ', '_')}_{seed}.json")
            cmd = [args.saturate, "train", "--model", args.model, "--data", "fashion-mnist", "--device", "cpu",
                   "--optimizer", "adam", "--epochs", str(args.epochs), "--eval-every-samples", str(args.eval_every),
                   "--stop-at-accuracy", str(args.target), "--seed", str(seed), "--memory-budget", args.budget,
                   "--json", out, "-q"] + flags
            if name in ("goodput", "adaptive"):
                cmd += ["--base-batch", str(args.base_batch)]
            _, wall = run(cmd)
            j = json.load(open(out))
            hit = first_reach(j["evals"], args.target)
            r = {"seed": seed, "wall": wall, "global_batch": j["global_batch"], "micro_batch": j["micro_batch"],
                 "final_acc": j["evals"][-1]["accuracy"] if j["evals"] else None,
                 "time": hit["train_seconds"] if hit else None, "samples": hit["samples"] if hit else None,
                 "steps": hit["step"] if hit else None,
                 "lr": None, "changes": j.get("adaptive", {}).get("changes", []),
                 "noise": (j.get("objective") or {}).get("noise_scale", {}).get("value")}
            if "objective" in j and j["objective"].get("goodput"):
                r["lr_gain"] = j["objective"]["goodput"]["lr_gain"]
            results[name].append(r)
            print(f"seed {seed} {name:9s}: batch {r['global_batch']:5d}  time {r['time']}  samples {r['samples']}  "
                  f"wall {wall:.0f} s  final {r['final_acc']}", file=sys.stderr, flush=True)
    return results


def fmt_time(v):
    return "not reached" if v is None else f"{v:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", required=True)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--eval-every", type=int, default=12000)
    ap.add_argument("--budget", default="512MiB")
    ap.add_argument("--base-batch", type=int, default=32)
    ap.add_argument("--skip-knee", action="store_true")
    ap.add_argument("--model", default="convnet", help="the model of part 2")
    ap.add_argument("--out", default="bench/results/goodput_cpu.md")
    args = ap.parse_args()
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.tmp = tempfile.mkdtemp(prefix="goodput_bench_")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    knees = [] if args.skip_knee else knee_part(args)
    acc = accuracy_part(args)

    lines = [f"# Which batch is best, measured (CPU, {started})", "",
             f"`{' '.join(sys.argv)}` on {os.cpu_count()} cores; each run a fresh process.", ""]
    if knees:
        lines += ["## The throughput curve's knee, two runs each", "",
                  "| model | knee, run 1 | knee, run 2 | same point or a neighbour | samples/s by batch (run 1) |",
                  "|---|---:|---:|---|---|"]
        for model, k, ok, curves in knees:
            pts = ", ".join(f"{p['batch']}: {p['samples_per_s']:.0f}" for p in curves[0]["points"] if p["ok"])
            lines.append(f"| {model} | {k[0]} | {k[1]} | {'yes' if ok else 'NO'} | {pts} |")
        lines.append("")
    lines += [f"## Time to {100 * args.target:.0f} % test accuracy: {args.model}, Fashion-MNIST, Adam lr 1e-3, "
              f"budget {args.budget}", "",
              f"Evaluated every {args.eval_every} samples; time = training seconds to the first evaluation at or "
              f"above the target (evaluations left out); wall = the whole process.", "",
              "| config | seed | global batch | time to target (s) | samples to target | wall (s) | note |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for name, rs in acc.items():
        for r in rs:
            note = []
            if r.get("lr_gain") is not None:
                note.append(f"lr x{r['lr_gain']:.2f}, noise scale {r['noise']:.0f}" if r["noise"] else f"lr x{r['lr_gain']:.2f}")
            if r["changes"]:
                note.append("batch " + " -> ".join([str(r["changes"][0]["old_global_batch"])] +
                                                    [f"{c['new_global_batch']} (step {c['step']})" for c in r["changes"]]))
            lines.append(f"| {name} | {r['seed']} | {r['global_batch']} | {fmt_time(r['time'])} | "
                         f"{r['samples'] if r['samples'] else '-'} | {r['wall']:.0f} | {'; '.join(note)} |")
    lines += ["", "| config | median time to target (s) | runs that reached it | median wall (s) |", "|---|---:|---:|---:|"]
    for name, rs in acc.items():
        times = [r["time"] for r in rs if r["time"] is not None]
        lines.append(f"| {name} | {statistics.median(times):.1f} | {len(times)}/{len(rs)} | "
                     f"{statistics.median(r['wall'] for r in rs):.0f} |" if times else
                     f"| {name} | not reached | 0/{len(rs)} | {statistics.median(r['wall'] for r in rs):.0f} |")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
