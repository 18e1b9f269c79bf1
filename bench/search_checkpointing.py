#!/usr/bin/env python3
"""`saturate search --checkpointing auto` on models under a CPU budget: max batch, recommended
batch and samples/s without and with activation checkpointing (blocks), the choice and its
reason. The max batches are then checked afresh in new processes: the max found with
checkpointing runs with it and runs out of memory without it; the max found without it fits.

usage: bench/search_checkpointing.py --saturate build/saturate [--out bench/results/search_checkpointing_cpu.md]
"""
import argparse, json, subprocess, sys

WORKLOADS = [
    ("gpt-small", ["--model", "gpt", "--layers", "4", "--width", "64", "--heads", "2", "--seq-len", "64",
                   "--vocab", "512", "--memory-budget", "96MiB"]),
    ("gpt", ["--model", "gpt", "--layers", "2", "--width", "128", "--heads", "4", "--seq-len", "64",
             "--vocab", "2048", "--memory-budget", "512MiB"]),
    ("convnet", ["--model", "convnet", "--memory-budget", "512MiB"]),
    ("resnet18", ["--model", "resnet18", "--input", "3x64x64", "--classes", "10", "--memory-budget", "1GiB"]),
]


def run(saturate, args):
    quiet = ["-q"] if args[0] == "search" else []
    out = subprocess.run([saturate] + args + ["--device", "cpu", "--json", "-"] + quiet, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"saturate {' '.join(args)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def probe_status(saturate, args, batch, checkpointing):
    j = run(saturate, ["probe"] + args + ["--batch", str(batch), "--warmup", "1", "--timed-steps", "1",
                                          "--checkpointing", checkpointing])
    return j["status"]


def fmt_sps(x):
    return "-" if x is None else f"{x:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", default="build/saturate")
    ap.add_argument("--out", default="bench/results/search_checkpointing_cpu.md")
    ap.add_argument("--only", default="")
    ap.add_argument("--threads", default="1")
    a = ap.parse_args()
    rows, reasons = [], []
    for name, args in WORKLOADS:
        if a.only and name not in a.only.split(","):
            continue
        args = args + ["--threads", a.threads]
        j = run(a.saturate, ["search"] + args + ["--timed-steps", "2", "--checkpointing", "auto"])
        c = j["checkpointing"]
        none, blocks = c["curves"]["none"], c["curves"]["blocks"]
        checks = {
            "max with, blocks": probe_status(a.saturate, args, blocks["max_batch"], "blocks"),
            "max with, none": probe_status(a.saturate, args, blocks["max_batch"], "none"),
            "max without, none": probe_status(a.saturate, args, none["max_batch"], "none"),
        }
        verified = (checks["max with, blocks"] == "ok" and checks["max with, none"] == "oom"
                    and checks["max without, none"] == "ok")
        for policy, curve in (("none", none), ("blocks", blocks)):
            law = curve["memory_model"]
            rows.append(f"| {name} | {policy} | {curve['max_batch']} | {curve['recommended_batch']} | "
                        f"{fmt_sps(curve['recommended_samples_per_s'])} | {curve['best']['samples_per_s']:.1f} at "
                        f"{curve['best']['batch']} | {law['per_sample_bytes'] / 1024:.0f} KiB | "
                        f"{len(curve['trials'])} | {c['choice'] if policy == 'none' else ''} | "
                        f"{'yes' if verified else 'NO ' + str(checks)} |")
        reasons.append(f"- {name}: chose **{c['choice']}**: {c['reason']}")
        print(rows[-2] + "\n" + rows[-1] + "\n" + reasons[-1], flush=True)
    text = ("| model | checkpointing | max_batch | recommended | its samples/s | best samples/s | per sample | "
            "trials | choice | fresh check (max with: ok with, oom without; max without: ok) |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n" + "\n".join(reasons) + "\n")
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
