#!/usr/bin/env python3
"""Training samples/s of `saturate train` against the equivalent PyTorch Python loop: the same
model (mlp / convnet), batch, optimizer (Adam), threads and number of steps, each side in a
fresh process, Fashion-MNIST in memory on both sides (Python: one float tensor, indexed per step;
saturate: the IDX file's bytes, normalised per batch by its loader's one worker thread). Both figures are timed the same
way: from the first training step to the last (the first step included), without start-up
(process, model construction, data decoding) or evaluation.

The machine may be shared: the runs alternate (Python first in odd rounds, saturate first in
even ones) so that both sides see the same load, and the ratio of each round is reported.

usage: bench/train_vs_python.py --saturate build/saturate [--steps 200] [--rounds 3]
                                [--out bench/results/train_cpu.md]
"""
import argparse, gzip, json, os, statistics, subprocess, sys, time

import numpy as np


def fashion_mnist():
    d = "/usr/share/datasets/fashion-mnist"
    import torch
    with gzip.open(f"{d}/train-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read()[16:], dtype=np.uint8).reshape(-1, 1, 28, 28)
    with gzip.open(f"{d}/train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read()[8:], dtype=np.uint8)
    x = (torch.from_numpy(x.copy()).float() / 255.0 - 0.5) / 0.5  # saturate's default normalisation
    return x, torch.from_numpy(y.copy()).long()


def convnet(nn):
    def block(i, o, pool):
        layers = [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
        return layers + ([nn.MaxPool2d(2)] if pool else [])
    return nn.Sequential(*block(1, 32, False), *block(32, 64, True), *block(64, 128, True),
                         nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128 * 16, 10))


def mlp(nn):
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def python_child(model_name, batch, steps, threads):
    """The Python loop, in its own process (as saturate runs in its own)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    x, y = fashion_mnist()
    torch.manual_seed(0)
    m = convnet(nn) if model_name == "convnet" else mlp(nn)
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    perm = torch.randperm(x.shape[0])
    t0 = time.perf_counter()
    for i in range(steps):
        idx = perm[(i * batch) % (x.shape[0] - batch):][:batch]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x[idx]), y[idx]).backward()
        opt.step()
    return {"samples_per_s": steps * batch / (time.perf_counter() - t0), "threads": torch.get_num_threads()}


def python_loop(model_name, batch, steps, threads):
    out = subprocess.run([sys.executable, __file__, "--child", model_name, "--batch", str(batch), "--steps",
                          str(steps), "--threads", str(threads)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    return json.loads(out.stdout)["samples_per_s"]


def saturate_loop(exe, model_name, batch, steps, threads):
    out = subprocess.run([exe, "train", "--model", model_name, "--data", "fashion-mnist", "--device", "cpu",
                          "--batch", str(batch), "--steps", str(steps), "--optimizer", "adam", "--lr", "0.001",
                          "--workers", "1", "--no-augment", "--threads", str(threads),
                          "--json", "-", "-q"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    return json.loads(out.stdout)["samples_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", default="build/saturate")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--models", default="mlp,convnet")
    ap.add_argument("--child", default="")
    ap.add_argument("--out", default="bench/results/train_cpu.md")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(python_child(a.child, a.batch, a.steps, a.threads)))
        return
    batches = {"mlp": 128, "convnet": 64}
    rows = []
    for model_name in a.models.split(","):
        batch = a.batch or batches[model_name]
        for r in range(a.rounds):
            load_before = os.getloadavg()[0]
            if r % 2 == 0:
                py = python_loop(model_name, batch, a.steps, a.threads)
                cpp = saturate_loop(a.saturate, model_name, batch, a.steps, a.threads)
            else:
                cpp = saturate_loop(a.saturate, model_name, batch, a.steps, a.threads)
                py = python_loop(model_name, batch, a.steps, a.threads)
            rows.append((model_name, batch, a.threads, r + 1, py, cpp, cpp / py, load_before))
            print(f"{model_name} round {r + 1}: python {py:.0f} samples/s, saturate {cpp:.0f} samples/s, "
                  f"ratio {cpp / py:.2f} (load {load_before:.1f})", file=sys.stderr, flush=True)
    lines = ["| model | batch | threads | round | PyTorch Python samples/s | saturate train samples/s | ratio "
             "| load average (1 min) |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {m} | {b} | {t} | {r} | {p:.0f} | {c:.0f} | {q:.2f} | {l:.1f} |" for m, b, t, r, p, c, q, l in rows]
    lines.append("")
    for model_name in a.models.split(","):
        ratios = [q for m, *_, q, _l in rows if m == model_name]
        lines.append(f"{model_name}: median ratio {statistics.median(ratios):.2f} "
                     f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {len(ratios)} rounds, {a.steps} steps each)")
    text = "\n".join(lines) + "\n"
    if a.out != "-":
        open(a.out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
