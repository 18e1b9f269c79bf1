#!/usr/bin/env python3
"""Training samples/s of `saturate train` against the equivalent PyTorch Python loop: the same
model (convnet / mlp), batch, optimizer, threads, Fashion-MNIST. The Python loop reads tensors
already in memory; saturate reads through its loader (decode, normalize, no augmentation) —
if anything that handicaps saturate.

usage: bench/train_vs_python.py --saturate build/saturate [--steps 200] [--out bench/results/train_cpu.md]
"""
import argparse, gzip, json, subprocess, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def fashion_mnist():
    d = "/usr/share/datasets/fashion-mnist"
    with gzip.open(f"{d}/train-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read()[16:], dtype=np.uint8).reshape(-1, 1, 28, 28)
    with gzip.open(f"{d}/train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read()[8:], dtype=np.uint8)
    x = (torch.from_numpy(x.copy()).float() / 255.0 - 0.5) / 0.5
    return x, torch.from_numpy(y.copy()).long()


def convnet():
    def block(i, o, pool):
        layers = [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
        return layers + ([nn.MaxPool2d(2)] if pool else [])
    return nn.Sequential(*block(1, 32, False), *block(32, 64, True), *block(64, 128, True),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def python_loop(model_name, batch, steps, x, y):
    torch.manual_seed(0)
    m = convnet() if model_name == "convnet" else mlp()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    perm = torch.randperm(x.shape[0])
    def step(i):
        idx = perm[(i * batch) % (x.shape[0] - batch):][:batch]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x[idx]), y[idx]).backward()
        opt.step()
    for i in range(5):
        step(i)
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    return steps * batch / (time.perf_counter() - t0)


def saturate_loop(exe, model_name, batch, steps, threads):
    out = subprocess.run([exe, "train", "--model", model_name, "--data", "fashion-mnist", "--device", "cpu",
                          "--batch", str(batch), "--steps", str(steps), "--optimizer", "adam", "--workers", "1",
                          "--no-augment", "--threads", str(threads), "--json", "-", "-q"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    return json.loads(out.stdout)["samples_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", default="build/saturate")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench/results/train_cpu.md")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    x, y = fashion_mnist()
    rows = []
    for model_name, batch in [("mlp", 128), ("convnet", 64)]:
        py = python_loop(model_name, batch, a.steps, x, y)
        cpp = saturate_loop(a.saturate, model_name, batch, a.steps, a.threads)
        rows.append((model_name, batch, a.threads, py, cpp, cpp / py))
        print(f"{model_name}: python {py:.0f} samples/s, saturate {cpp:.0f} samples/s", file=sys.stderr, flush=True)
    lines = ["| model | batch | threads | PyTorch Python samples/s | saturate train samples/s | ratio |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {m} | {b} | {t} | {p:.0f} | {c:.0f} | {r:.2f} |" for m, b, t, p, c, r in rows]
    text = "\n".join(lines) + "\n"
    open(a.out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
