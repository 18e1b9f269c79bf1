#!/usr/bin/env python3
"""Headers and reports count what the run did (issue 44). One case per run:

    run_counts.py SATURATE_BIN WORK_DIR CASE

Each case runs the real binary and compares what a header or a report says with what the run's
JSON records it did (its trials, per curve)."""
import json
import os
import re
import shutil
import subprocess
import sys

BIN, WORK, CASE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
DIR = os.path.join(WORK, "run_counts_" + CASE)
shutil.rmtree(DIR, ignore_errors=True)
os.makedirs(DIR)
os.chdir(DIR)

GPT = ["--model", "gpt", "--layers", "4", "--width", "64", "--heads", "2", "--seq-len", "64", "--vocab", "512",
       "--device", "cpu", "--memory-budget", "96MiB", "--threads", "1", "--timed-steps", "1"]


def fail(why, out=""):
    print(f"FAIL ({CASE}): {why}\n--- output ---\n{out}")
    sys.exit(1)


def run(args, status=0):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=900)
    if p.returncode != status:
        fail(f"exit status {p.returncode}, expected {status}: saturate {' '.join(args)}", p.stdout + p.stderr)
    return p


def search_header_counts_both_checkpointing_curves():
    # `--checkpointing auto` searches without and with checkpointing; the header said the chosen
    # curve's "5 trials, 1.9 s" after 16 trials and 9.6 s
    p = run(["search"] + GPT + ["--checkpointing", "auto", "--json", "run.json", "-q"])
    curves = json.load(open("run.json"))["checkpointing"]["curves"]
    trials = sum(len(c["trials"]) for c in curves.values())
    steps = sum(c["trial_steps"] for c in curves.values())
    m = re.search(r"^strategy +\w+ \((\d+) trials over (\d+) curves, (\d+) training steps, [0-9.]+ s; the table: "
                  r"the chosen curve's (\d+) trials\)", p.stdout, re.M)
    if not m:
        fail("no header counting both curves", p.stdout)
    if (int(m.group(1)), int(m.group(2)), int(m.group(3))) != (trials, len(curves), steps):
        fail(f"the header says {m.group(0)!r}; the JSON's curves ran {trials} trials, {steps} steps", p.stdout)
    shown = len(re.findall(r"^ +\d+ +(ok|oom|over-target|error) ", p.stdout, re.M))
    if int(m.group(4)) != shown:
        fail(f"the header says the table has {m.group(4)} trials; it has {shown}", p.stdout)


def train_report_draws_its_micro_batch_search():
    # the HTML of `train --batch auto` said "saturate train runs one batch and records none" after
    # an 8-trial search of its micro-batch
    run(["train", "--model", "mlp", "--width", "64", "--device", "cpu", "--memory-budget", "64MiB", "--batch", "auto",
         "--steps", "2", "--threads", "1", "--workers", "0", "-q", "--json", "run.json", "--html", "run.html"])
    trials = json.load(open("run.json"))["batch_search"]["trials"]
    measured = [t for t in trials if t.get("peak_reserved_bytes")]
    html = open("run.html").read()
    chart = re.search(r'<svg id="chart-peak-memory".*?</svg>', html, re.S)
    if not chart:
        fail("no peak-memory chart in the train report", html[:3000])
    drawn = sorted(int(i) for i in re.findall(r'data-trial="(\d+)"', chart.group(0)))
    if len(measured) < 2 or drawn != [i for i, t in enumerate(trials) if t.get("peak_reserved_bytes")]:
        fail(f"the chart draws trials {drawn}; the search measured {len(measured)} of {len(trials)}", chart.group(0))
    if "records none" in html or "searched none" in html:
        fail("the report says no batch was searched", html)


def train_workers_auto_runs_what_it_timed_and_trains_as_a_given_count():
    # `train --workers auto` ran 2 loader threads, untimed: now it times the loader at the micro-batch
    # before training, runs the count it chose, and the timing trials leave the training untouched
    args = ["train", "--model", "mlp", "--width", "32", "--device", "cpu", "--batch", "16", "--steps", "5",
            "--threads", "1", "-q", "--json", "run.json"]
    run(args + ["--workers", "auto"])
    auto = json.load(open("run.json"))
    tuned = auto["workers_auto"]
    if not tuned or not tuned["curve"] or tuned["curve"][0]["workers"] != 1 or auto["workers"] != tuned["workers"]:
        fail(f"workers {auto['workers']}, tuning {tuned}")
    if tuned["workers"] not in [pt["workers"] for pt in tuned["curve"]]:
        fail(f"chose {tuned['workers']} workers, which it never timed: {tuned['curve']}")
    run(args + ["--workers", str(tuned["workers"])])
    given = json.load(open("run.json"))
    if given["workers_auto"] is not None or given["losses"] != auto["losses"]:
        fail(f"losses with auto {auto['losses']} and with {tuned['workers']} given {given['losses']}")


CASES = {f.__name__: f for f in [search_header_counts_both_checkpointing_curves,
                                  train_report_draws_its_micro_batch_search,
                                  train_workers_auto_runs_what_it_timed_and_trains_as_a_given_count]}
if CASE not in CASES:
    fail(f"unknown case; one of {', '.join(CASES)}")
CASES[CASE]()
print(f"ok ({CASE})")
