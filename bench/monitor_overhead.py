#!/usr/bin/env python3
"""Overhead of saturate's monitor (phase timers, op counting on warm-up, device sampler) per step.

Runs `saturate probe` alternately with and without the monitor (--no-monitor), several rounds
(interleaved, so that drifting load on the machine hits both alike), and compares the median
step times; also reports the monitor's own accounting (time inside its hooks per step, CPU time
of the sampling thread). Usage:
  bench/monitor_overhead.py BUILD/saturate [--rounds 7] [--steps 40] [--sample-hz 10]
"""
import argparse
import json
import statistics
import subprocess
import sys

WORKLOADS = [
    ("mlp w8 batch 1 (launch-bound)", ["--model", "mlp", "--width", "8", "--layers", "1", "--input", "1x4x4", "--batch", "1"]),
    ("mlp w256 batch 64", ["--model", "mlp", "--width", "256", "--batch", "64"]),
    ("mlp w1024 batch 256 (compute-bound)", ["--model", "mlp", "--width", "1024", "--batch", "256"]),
]


def probe(binary, args, steps, extra):
    cmd = [binary, "probe", "--device", "cpu", "--threads", "1", "--warmup", "2", "--steps", str(steps),
           "--json", "-", *args, *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--sample-hz", default="10")
    a = ap.parse_args()
    print("| workload | step ms without | step ms with | difference | hooks µs/step | hooks % | sampler CPU % |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, args in WORKLOADS:
        off, on, hooks, sampler = [], [], [], []
        for _ in range(a.rounds):
            off.append(probe(a.binary, args, a.steps, ["--no-monitor"])["step_time_ms"])
            j = probe(a.binary, args, a.steps, ["--sample-hz", a.sample_hz])
            on.append(j["step_time_ms"])
            hooks.append(j["monitor_overhead"]["hooks_us_per_step"])
            sampler.append(j["monitor_overhead"]["sampler_cpu_share"])
        m_off, m_on = statistics.median(off), statistics.median(on)
        h = statistics.median(hooks)
        print(f"| {name} | {m_off:.3f} | {m_on:.3f} | {100 * (m_on - m_off) / m_off:+.2f} % | {h:.2f} "
              f"| {100 * h / 1000 / m_on:.3f} % | {100 * statistics.median(sampler):.3f} % |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
