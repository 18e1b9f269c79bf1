#!/usr/bin/env python3
"""Loader benchmark: saturate's threaded loader vs torch.utils.data.DataLoader + torchvision.

Both decode the same folder of JPEGs (Fashion-MNIST upscaled to 128x128 RGB, written here with
PIL) and apply the same augmentation: RandomCrop(128, padding=4), RandomHorizontalFlip,
ToTensor, Normalize; batches of 64, shuffled. Measured: samples/s of the loader alone, after a
few warm-up batches, at 1 and 2 workers, alternating the two loaders, best of --repeats.

    python3 bench/data_loader.py --bench build/saturate_data_bench [--images 4000]

Needs: torch 2.11, torchvision 0.26 (pip install --no-deps torchvision==0.26.0), pillow.
Writes a Markdown table on stdout (and to --out).
"""
import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import time


def make_jpegs(root, count, size, source):
    from PIL import Image

    done = os.path.join(root, ".complete")
    if os.path.exists(done) and open(done).read().strip() == f"{count} {size}":
        return
    images = gzip.open(os.path.join(source, "train-images-idx3-ubyte.gz")).read()[16:]
    labels = gzip.open(os.path.join(source, "train-labels-idx1-ubyte.gz")).read()[8:]
    for c in range(10):
        os.makedirs(os.path.join(root, str(c)), exist_ok=True)
    for i in range(count):
        g = Image.frombytes("L", (28, 28), images[i * 784:(i + 1) * 784]).resize((size, size), Image.BILINEAR)
        # three different channels, so that colour decoding is real work
        rgb = Image.merge("RGB", (g, g.point(lambda v: 255 - v), g.transpose(Image.FLIP_TOP_BOTTOM)))
        rgb.save(os.path.join(root, str(labels[i]), f"{i:05d}.jpg"), quality=90)
    with open(done, "w") as f:
        f.write(f"{count} {size}")


def torch_loader(root, workers, batch, size, warmup, batches):
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    tf = transforms.Compose([
        transforms.RandomCrop(size, padding=4),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)),
    ])
    ds = datasets.ImageFolder(root, transform=tf)
    loader = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, prefetch_factor=2,
                        persistent_workers=False, drop_last=False)
    it = iter(loader)
    for _ in range(warmup):
        next(it)
    start = time.perf_counter()
    samples = 0
    for _ in range(batches):
        x, y = next(it)
        samples += x.shape[0]
    s = time.perf_counter() - start
    del it
    return {"loader": "torch", "workers": workers, "samples": samples, "seconds": s, "samples_per_s": samples / s}


def saturate_loader(bench, root, workers, batch, size, warmup, batches):
    out = subprocess.run([bench, "--data", "images:" + root, "--workers", str(workers), "--batch", str(batch),
                          "--shape", f"3x{size}x{size}", "--warmup", str(warmup), "--batches", str(batches)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", default="build/saturate_data_bench")
    p.add_argument("--root", default="bench/out/fmnist_jpeg")
    p.add_argument("--source", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--images", type=int, default=4000)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="")
    a = p.parse_args()
    import torch
    import torchvision

    t0 = time.time()
    make_jpegs(a.root, a.images, a.size, a.source)
    print(f"images ready in {time.time() - t0:.1f} s: {a.images} JPEGs of {a.size}x{a.size} in {a.root}", file=sys.stderr)
    rows = []
    for w in [int(x) for x in a.workers.split(",")]:
        best = {"saturate": None, "torch": None}
        for r in range(a.repeats):
            s = saturate_loader(a.bench, a.root, w, a.batch, a.size, a.warmup, a.batches)
            t = torch_loader(a.root, w, a.batch, a.size, a.warmup, a.batches)
            print(f"workers {w} repeat {r}: saturate {s['samples_per_s']:.0f}/s, torch {t['samples_per_s']:.0f}/s",
                  file=sys.stderr)
            for k, v in (("saturate", s), ("torch", t)):
                if best[k] is None or v["samples_per_s"] > best[k]["samples_per_s"]:
                    best[k] = v
        rows.append((w, best["saturate"]["samples_per_s"], best["torch"]["samples_per_s"]))
    load = os.getloadavg()
    lines = [
        f"Decode + RandomCrop(pad 4) + flip + normalize of {a.images} JPEGs ({a.size}x{a.size} RGB, Fashion-MNIST "
        f"upscaled), batch {a.batch}, {a.batches} timed batches after {a.warmup}, best of {a.repeats}.",
        f"Host: {platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.1f} during the run; "
        f"torch {torch.__version__}, torchvision {torchvision.__version__}.",
        "",
        "| workers | saturate (samples/s) | torch DataLoader + torchvision (samples/s) | ratio |",
        "|--------:|---------------------:|--------------------------------------------:|------:|",
    ]
    for w, s, t in rows:
        lines.append(f"| {w} | {s:.0f} | {t:.0f} | {s / t:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
