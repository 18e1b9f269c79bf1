#!/usr/bin/env python3
"""Exactness on real scripted torchvision models (issue 10): exports mobilenet_v2 and
efficientnet_b0 with torch.jit.script (num_classes 10), runs `saturate search` on them (3x64x64,
Adam, CPU budgets of 512 MiB and 1 GiB) and checks the answer in fresh processes: `saturate probe`
at max must fit and at max+1 must run out of memory.

Needs torchvision (not part of the project's set-up): pip install torchvision==0.26.0 (torch 2.11).
usage: bench/torchscript_exact.py --saturate build/saturate [--out bench/results/torchscript_exact.md]
"""
import argparse, json, os, subprocess, sys, time

MODELS = ["mobilenet_v2", "efficientnet_b0"]
BUDGETS = ["512MiB", "1GiB"]


def export(name, path):
    code = ("import sys, torch, torchvision\ntorch.manual_seed(0)\n"
            f"m = torchvision.models.{name}(num_classes=10).train()\n"
            "torch.jit.script(m).save(sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", code, path], check=True)


def run(saturate, args):
    out = subprocess.run([saturate] + args + ["--json", "-"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"saturate {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", default="build/saturate")
    ap.add_argument("--out", default="bench/results/torchscript_exact.md")
    ap.add_argument("--dir", default="/tmp/saturate_torchscript_exact")
    ap.add_argument("--threads", default="")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rows, commands = [], []
    for name in MODELS:
        path = os.path.join(a.dir, name + ".pt")
        if not os.path.exists(path):
            export(name, path)
        for budget in BUDGETS:
            common = ["--model", path, "--input", "3x64x64", "--classes", "10", "--optimizer", "adam",
                      "--device", "cpu", "--memory-budget", budget]
            if a.threads:
                common += ["--threads", a.threads]
            start = time.time()
            s = run(a.saturate, ["search"] + common + ["-q"])
            seconds = time.time() - start
            m = s["max_batch"]
            commands.append(" ".join([a.saturate, "search"] + common))
            fits = run(a.saturate, ["probe"] + common + ["--batch", str(m)])
            over = run(a.saturate, ["probe"] + common + ["--batch", str(m + 1)])
            commands.append(" ".join([a.saturate, "probe"] + common + ["--batch", str(m)]) + "   # and m+1")
            ok_steps = [t for t in s["trials"] if t["status"] == "ok"]
            ms = max((t["batch"], t["step_time_ms"]) for t in ok_steps)[1] if ok_steps else 0
            rows.append((name, budget, m, s["max_batch_exact"], fits["status"], over["status"], len(s["trials"]),
                         s.get("trial_steps", ""), seconds, ms, s.get("error", "")))
            print(rows[-1], flush=True)
    with open(a.out, "w") as f:
        f.write("# TorchScript exactness: scripted torchvision models under CPU budgets\n\n")
        f.write("`python3 bench/torchscript_exact.py --saturate build/saturate` (torch 2.11.0, torchvision 0.26.0, "
                "3x64x64, 10 classes, Adam, CPU budget allocator; 2-core machine). Each answer re-checked in fresh "
                "processes: `probe --batch max` must fit, `probe --batch max+1` must run out of memory.\n\n")
        f.write("| model | budget | max | exact | max fits? | max+1 OOM? | trials | trial steps | search s | "
                "ms/step at the largest fitting trial |\n|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {'yes' if r[4] == 'ok' else r[4]} | "
                    f"{'yes' if r[5] == 'oom' else r[5]} | {r[6]} | {r[7]} | {r[8]:.0f} | {r[9]:.0f} |\n")
        f.write("\nCommands:\n\n```sh\n" + "\n".join(commands) + "\n```\n")
    bad = [r for r in rows if r[4] != "ok" or r[5] != "oom" or r[2] < 1]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
