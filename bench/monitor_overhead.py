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
    ("mlp w1024 batch 64 (compute-bound)", ["--model", "mlp", "--width", "1024", "--batch", "64"]),
]


def probe(binary, args, steps, extra):
    cmd = [binary, "probe", "--device", "cpu", "--threads", "1", "--warmup", "2", "--timed-steps", str(steps),
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
    print("| workload | step ms without | step ms with | paired difference (median, IQR) | hooks µs/step | hooks % of step | sampler CPU % of trial |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, args in WORKLOADS:
        off, on, diffs, hooks, sampler = [], [], [], [], []
        for r in range(a.rounds):
            # ABBA order: a drift in the machine's load hits both sides alike
            first_off = r % 2 == 0
            runs = {}
            for side in (["off", "on"] if first_off else ["on", "off"]):
                extra = ["--no-monitor"] if side == "off" else ["--sample-hz", a.sample_hz]
                runs[side] = probe(a.binary, args, a.steps, extra)
            off.append(runs["off"]["step_time_ms"])
            on.append(runs["on"]["step_time_ms"])
            diffs.append(100 * (on[-1] - off[-1]) / off[-1])
            hooks.append(runs["on"]["monitor_overhead"]["hooks_us_per_step"])
            sampler.append(runs["on"]["monitor_overhead"]["sampler_cpu_share"])
        m_off, m_on = statistics.median(off), statistics.median(on)
        q = statistics.quantiles(diffs, n=4) if len(diffs) >= 2 else [diffs[0]] * 3
        h = statistics.median(hooks)
        print(f"| {name} | {m_off:.3f} | {m_on:.3f} | {statistics.median(diffs):+.2f} % ({q[0]:+.1f} .. {q[2]:+.1f}) "
              f"| {h:.2f} | {100 * h / 1000 / m_on:.3f} % | {100 * statistics.median(sampler):.3f} % |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
