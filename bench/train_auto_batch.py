#!/usr/bin/env python3
"""`saturate train --batch auto` against the largest micro-batch that really trains (issue 10).

For each workload (a tight CPU budget, a global batch far above the micro-batch, a whole epoch so
that the evaluation pass runs too):
  1. `train --batch auto` once: the micro-batch it picks, its OOM back-offs (want: none);
  2. the largest micro-batch that trains the same run with `--no-oom-backoff`, bisected with
     fresh processes between the pick and a batch that fails;
  3. the pick as a share of that largest (want: >= 98 %), and what the old search would have
     picked (`search` with the same model and budget: a plain fp32 step, nothing held beside it).

usage: bench/train_auto_batch.py --saturate build/saturate [--out bench/results/train_auto_batch_cpu.md]
       [--only NAME]
"""
import argparse, json, os, subprocess, sys, tempfile, time

WORKLOADS = [
    # name, model flags, train flags (data, budget, global batch, ...)
    ("mlp", ["--model", "mlp", "--memory-budget", "160MiB"],
     ["--data", "fashion-mnist", "--global-batch", "4096", "--epochs", "1"]),
    ("convnet", ["--model", "convnet", "--memory-budget", "256MiB"],
     ["--data", "fashion-mnist", "--global-batch", "6000", "--epochs", "1"]),
    ("gpt-small", ["--model", "gpt", "--layers", "2", "--width", "128", "--heads", "4", "--seq-len", "64",
                   "--vocab", "512", "--memory-budget", "96MiB"],
     ["--data", "tokens:CORPUS", "--global-batch", "1024", "--epochs", "1"]),
]
CORPUS = "/tmp/saturate_bench_corpus.txt"


def make_corpus(size_bytes=600_000):
    """Real text: Python's own standard library sources, concatenated (byte-level tokens)."""
    import glob, sysconfig
    out = bytearray()
    for path in sorted(glob.glob(sysconfig.get_paths()["stdlib"] + "/*.py")):
        with open(path, "rb") as f:
            out += f.read()
        if len(out) >= size_bytes:
            break
    with open(CORPUS, "wb") as f:
        f.write(bytes(out[:size_bytes]))
COMMON = ["--device", "cpu", "--threads", "2", "--optimizer", "adam", "-q"]


def train(saturate, model, flags, batch, extra=()):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [saturate, "train"] + model + flags + COMMON + ["--batch", str(batch), "--json", path] + list(extra)
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.time() - start
    j = None
    if out.returncode == 0:
        with open(path) as f:
            j = json.load(f)
    os.unlink(path)
    return out.returncode, j, out.stderr, seconds, " ".join(cmd[1:])


def trains(saturate, model, flags, micro):
    rc, j, err, _, _ = train(saturate, model, flags, micro, ["--no-oom-backoff"])
    if rc not in (0, 1):
        sys.exit(f"train --batch {micro}: exit {rc}: {err}")
    if rc == 1 and "out of memory" not in err and "budget exceeded" not in err:
        sys.exit(f"train --batch {micro}: failed but not for memory: {err}")
    return rc == 0


def largest_that_trains(saturate, model, flags, start):
    lo = start if trains(saturate, model, flags, start) else None
    if lo is None:  # the pick itself fails: bisect below it
        lo, hi = 0, start
    else:
        hi = max(lo + 1, int(lo * 1.05))
        while trains(saturate, model, flags, hi):
            lo, hi = hi, int(hi * 1.2) + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if trains(saturate, model, flags, mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def old_pick(saturate, model):
    out = subprocess.run([saturate, "search"] + model + ["--device", "cpu", "--threads", "2", "--optimizer", "adam",
                                                        "-q", "--json", "-"], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout).get("recommended_batch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", required=True)
    ap.add_argument("--out", default="bench/results/train_auto_batch_cpu.md")
    ap.add_argument("--only")
    a = ap.parse_args()
    rows = []
    make_corpus()
    for name, model, flags in WORKLOADS:
        flags = [f.replace("CORPUS", CORPUS) for f in flags]
        if a.only and name != a.only:
            continue
        rc, j, err, seconds, cmd = train(a.saturate, model, flags, "auto")
        if rc != 0:
            sys.exit(f"{name}: train --batch auto failed ({rc}): {err}")
        pick = j["micro_batch"]
        backoffs = len(j["oom_backoffs"])
        lo, hi = largest_that_trains(a.saturate, model, flags, pick)
        plain = old_pick(a.saturate, model)
        rows.append((name, cmd, pick, backoffs, lo, hi, 100.0 * pick / lo if lo else 0, plain, seconds,
                     j.get("accumulation")))
        print(rows[-1], flush=True)
    with open(a.out, "w") as f:
        f.write("# `train --batch auto` vs the largest micro-batch that trains (CPU budgets)\n\n")
        f.write("Generated by `bench/train_auto_batch.py`. Each run is one whole epoch (the evaluation pass\n"
                "included) in a fresh process; \"largest that trains\" is bisected with `--no-oom-backoff`\n"
                "(it trains, one more OOMs). \"old pick\" is what a plain `search` of the same model and\n"
                "budget recommends (fp32 step, nothing held beside it), which the old `--batch auto` used.\n\n")
        f.write("| workload | auto pick | accumulation | OOM back-offs | largest that trains | fails at | pick / largest | old pick | auto run s |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for name, cmd, pick, backoffs, lo, hi, share, plain, seconds, acc in rows:
            f.write(f"| {name} | {pick} | {acc} | {backoffs} | {lo} | {hi} | {share:.1f} % | {plain} | {seconds:.0f} |\n")
        f.write("\nCommands (`--batch auto`):\n\n")
        for row in rows:
            f.write(f"- `saturate {row[1]}`\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
