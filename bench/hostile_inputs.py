#!/usr/bin/env python3
"""Peak memory of saturate on hostile inputs (issue 25): each input of the issue's class 7 under an
address-space limit (ulimit -v) of 4 GiB and a --memory-budget of 512 MiB, with the exit status and
the first words of the error. The bar: no case above the budget + 256 MiB of resident memory.

    python3 bench/hostile_inputs.py build/saturate [bench/results/hostile_inputs.md]
"""
import gzip
import io
import os
import resource
import struct
import subprocess
import sys
import tarfile
import tempfile
import zlib

BIN = os.path.abspath(sys.argv[1])
OUT = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None
LIMIT = 4 << 30
BUDGET = "512MiB"
BAR_MIB = 512 + 256


def png(path, side):
    row = b"\0" * (side + 1)
    chunk = lambda kind, body: struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(row * side, 9)) + chunk(b"IEND", b""))


def measure(args):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
    p = subprocess.Popen([BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=limit)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    error = next((l for l in out.splitlines() if "error" in l), out.strip().splitlines()[-1] if out.strip() else "")
    return p.returncode, usage.ru_maxrss / 1024, error  # ru_maxrss: KiB on Linux


def main():
    work = tempfile.mkdtemp(prefix="saturate_hostile_")
    os.chdir(work)
    os.makedirs("wds")
    # streamed: this process stays small, since a child's peak RSS counts what it forked from
    class Zeros(io.RawIOBase):
        def __init__(self, n):
            self.left = n
        def readable(self):
            return True
        def readinto(self, b):
            n = min(len(b), self.left)
            b[:n] = bytes(n)
            self.left -= n
            return n
    with gzip.open("wds/shard-000.tar.gz", "wb", 9) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, size in (("s0.cls", 1), ("s0.bin", 1 << 30)):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BufferedReader(Zeros(size)))
    os.makedirs("imgs/a")
    os.makedirs("imgs/b")
    for i in range(8):
        png(f"imgs/{'ab'[i % 2]}/{i}.png", 16384)
    os.makedirs("ck_zero")
    os.symlink("/dev/zero", "ck_zero/checkpoint.pt")
    os.makedirs("ck_sparse")
    with open("ck_sparse/checkpoint.pt", "wb") as f:
        f.truncate(8 << 30)
    train = ["train", "--device", "cpu", "--steps", "1", "-q", "--memory-budget", BUDGET, "--threads", "1"]
    cases = [
        ("a 1 GiB member in a 1 MiB .tar.gz shard", train + ["--model", "mlp", "--data", "wds:wds", "--input", "1x8x8"]),
        ("tokens:/dev/zero", train + ["--model", "gpt", "--data", "tokens:/dev/zero"]),
        ("--resume on a checkpoint linked to /dev/zero", train + ["--model", "mlp", "--data", "synthetic", "--resume", "ck_zero"]),
        ("--resume on an 8 GiB (sparse) checkpoint", train + ["--model", "mlp", "--data", "synthetic", "--resume", "ck_sparse"]),
        ("saturate report /dev/zero", ["report", "/dev/zero", "-o", "r.html"]),
        ("8 PNGs of 16384x16384 (32 KB each), 2 workers",
         train + ["--model", "convnet", "--data", "images:imgs", "--input", "1x32x32", "--batch", "2", "--workers", "2"]),
    ]
    baseline = measure(train + ["--model", "mlp", "--data", "synthetic", "--batch", "8"])
    lines = ["# Hostile inputs: peak resident memory (issue 25)", "",
             f"Each run under `ulimit -v` {LIMIT >> 30} GiB and `--memory-budget {BUDGET}`; the bar is the budget + "
             f"256 MiB = {BAR_MIB} MiB of peak RSS (`ru_maxrss`). Baseline: a 1-step mlp train on synthetic data "
             f"peaks at {baseline[1]:.0f} MiB.", "",
             "| input | exit | peak RSS | within the bar | error |", "|---|---|---|---|---|"]
    worst = 0
    for name, args in cases:
        code, rss, error = measure(args)
        worst = max(worst, rss)
        lines.append(f"| {name} | {code} | {rss:.0f} MiB | {'yes' if rss <= BAR_MIB else 'NO'} | "
                     f"{error.replace('|', '/')[:150]} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if OUT:
        with open(OUT, "w") as f:
            f.write(text)
    sys.exit(0 if worst <= BAR_MIB else 1)


main()
