#!/usr/bin/env python3
"""What a command writes to a file is read back and checked against what the run measured (issue
46: five cases matched a console label and never opened the file they named). One case per run:

    file_outputs.py SATURATE_BIN WORK_DIR CASE
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

BIN, WORK, CASE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
DIR = os.path.join(WORK, "file_outputs_" + CASE)
shutil.rmtree(DIR, ignore_errors=True)
os.makedirs(DIR)
os.chdir(DIR)
SVG = "{http://www.w3.org/2000/svg}"


def fail(why, out=""):
    print(f"FAIL ({CASE}): {why}\n--- output ---\n{out}")
    sys.exit(1)


def run(args, status=0):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=600)
    if p.returncode != status:
        fail(f"exit status {p.returncode}, expected {status}: saturate {' '.join(args)}", p.stdout + p.stderr)
    return p.stdout + p.stderr


def memory_timeline_svg():
    out = run(["memory", "--model", "mlp", "--device", "cpu", "--batch", "4", "--timeline", "step.svg", "--threads",
               "1", "--json", "memory.json"])
    root = ET.parse("step.svg").getroot()  # well-formed SVG
    if root.tag != SVG + "svg":
        fail(f"the root element is {root.tag}, not svg")
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    if not any(t.startswith("mlp batch 4 on cpu") for t in texts):
        fail(f"no title naming the model and batch among {texts[:5]}")
    for phase in ("forward", "backward", "optimizer"):
        if phase not in texts:
            fail(f"the {phase} phase is not drawn: {texts}")
    # the memory curve, and a y axis that reaches the peak the run printed (MiB ticks)
    lines = [e for e in root.iter() if e.tag in (SVG + "polyline", SVG + "path")]
    points = sum(len((e.get("points") or e.get("d") or "").split()) for e in lines)
    if points < 10:
        fail(f"no memory curve: {len(lines)} polyline/path elements, {points} points")
    peak_mib = float(re.search(r"peak +([0-9.]+) MiB allocated", out).group(1))
    ticks = [float(t) for t in texts if re.fullmatch(r"[0-9]+\.[0-9]", t)]
    if not ticks or not peak_mib <= max(ticks) * 1.0001 <= 2 * peak_mib:
        fail(f"the y axis ticks {ticks} do not reach the printed peak {peak_mib} MiB (or reach far past it)", out)
    print(f"step.svg: {points} points, ticks up to {max(ticks)} MiB, peak {peak_mib} MiB")


def probe_trace():
    run(["probe", "--model", "mlp", "--device", "cpu", "--batch", "8", "--warmup-steps", "1", "--timed-steps", "2",
         "--trace", "probe_trace.json", "--json", "probe.json"])
    events = json.load(open("probe_trace.json"))["traceEvents"]  # Chrome's trace format
    spans = [e for e in events if e.get("ph") == "X"]
    steps = {e["name"]: e for e in spans if e["name"].startswith("step ")}
    if sorted(steps) != ["step 0", "step 1", "step 2"]:
        fail(f"steps in the trace: {sorted(steps)} (1 warm-up + 2 timed)")
    for name, step in steps.items():
        i = int(name.split()[1])
        phases = {e["name"]: e for e in spans if e.get("cat") == "phase" and e.get("args", {}).get("step") == i}
        if sorted(phases) != ["backward", "forward", "optimizer"]:
            fail(f"{name}'s phases: {sorted(phases)}")
        for p in phases.values():  # inside their step, in order, each with a duration
            if not (p["dur"] > 0 and step["ts"] <= p["ts"] and p["ts"] + p["dur"] <= step["ts"] + step["dur"] + 1):
                fail(f"{name}'s {p['name']} [{p['ts']}, +{p['dur']}] is not inside [{step['ts']}, +{step['dur']}]")
        if not phases["forward"]["ts"] < phases["backward"]["ts"] < phases["optimizer"]["ts"]:
            fail(f"{name}'s phases are out of order")
    counters = [e for e in events if e.get("ph") == "C"]
    if not counters:
        fail("no counter events (cpu_percent, rss_bytes) from the sampler")
    print(f"probe_trace.json: {len(steps)} steps with their 3 phases, {len(counters)} counter samples")


def monitor_log():
    out = run(["monitor", "--interval", "0.1", "--log", "monitor.csv", "--", "sleep", "0.3"])
    rows = list(csv.DictReader(open("monitor.csv")))
    said = int(re.search(r"(\d+) samples at", out).group(1))
    if len(rows) != said:
        fail(f"{len(rows)} rows in the log, the summary says {said} samples", out)
    times = [float(r["time_s"]) for r in rows]
    if times != sorted(times) or len(set(times)) != len(times):
        fail(f"time_s is not increasing: {times}")
    # every row from /proc; the memory read while the command lived (the last samples, at its exit,
    # may find it gone: empty, never a made-up number)
    rss = [r["rss_bytes"] for r in rows]
    alive = len(rss) - next((i for i, v in enumerate(reversed(rss)) if v), len(rss))
    if any(r["source"] != "proc" for r in rows) or alive < 2 or any(int(v) <= 0 for v in rss[:alive]) or \
            any(rss[alive:]):
        fail(f"rows without a /proc reading: {rows}")
    print(f"monitor.csv: {len(rows)} rows over {times[-1]:.2f} s, as the summary says")


def plan_holds_with_several_threads():
    # the plan for a 256 MiB device, made with 4 threads: its predicted max runs under a 256 MiB
    # budget with those 4 threads
    model = ["--model", "gpt", "--layers", "2", "--width", "128", "--seq-len", "64", "--vocab", "2048", "--device",
             "cpu", "--threads", "4"]
    run(["search"] + model + ["--plan-for", "256MiB", "--plan-allocator", "exact", "--plan-only", "--json", "plan.json"])
    plan = json.load(open("plan.json"))["plan"]
    m = plan["max_batch"]
    if not m > 0:
        fail(f"the plan's max batch is {m}")
    out = run(["probe"] + model + ["--batch", str(m), "--memory-budget", "256MiB", "--timed-steps", "1", "--json",
                                   "probe.json"])
    probe = json.load(open("probe.json"))
    status = probe.get("status") or probe["trial"]["status"]
    if status != "ok":
        fail(f"the planned max {m} does not run under 256 MiB with 4 threads: {status}", out)
    print(f"planned max {m} runs under 256 MiB with 4 threads")


def train_goodput_objective_scales_the_learning_rate():
    # goodput picks a batch and a learning-rate gain; training at that batch with the learning rate
    # given as lr x gain runs the same steps bit for bit, and with the unscaled rate it does not
    common = ["train", "--model", "mlp", "--width", "64", "--data", "fashion-mnist", "--workers", "1", "--device",
              "cpu", "--threads", "1", "--steps", "5", "-q"]
    run(common + ["--memory-budget", "64MiB", "--batch", "auto", "--objective", "goodput", "--lr", "0.001", "--json",
                  "goodput.json"])
    j = json.load(open("goodput.json"))
    g = j["objective"]["goodput"]
    if not (g["lr_gain"] > 1 and g["lr_rule"] == "adascale-sqrt" and j["micro_batch"] == g["batch"]):
        fail(f"goodput's choice: {g}, trained at micro-batch {j['micro_batch']}")
    for lr, same in ((0.001 * g["lr_gain"], True), (0.001, False)):
        run(common + ["--batch", str(g["batch"]), "--lr", repr(lr), "--json", "given.json"])
        given = json.load(open("given.json"))
        if (given["losses"] == j["losses"]) != same:
            fail(f"with --lr {lr!r} given the losses {given['losses']} {'differ from' if same else 'equal'} goodput's "
                 f"{j['losses']}")
    print(f"goodput: batch {g['batch']}, learning rate x{g['lr_gain']:.4f}: the same steps as --lr 0.001 x gain")


CASES = {f.__name__: f for f in (memory_timeline_svg, probe_trace, monitor_log, plan_holds_with_several_threads,
                                 train_goodput_objective_scales_the_learning_rate)}
if CASE not in CASES:
    fail(f"unknown case; one of {', '.join(CASES)}")
CASES[CASE]()
print(f"ok ({CASE})")
