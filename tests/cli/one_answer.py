#!/usr/bin/env python3
"""One answer per run, on the command line (issue #27). One case per run:

    one_answer.py SATURATE_BIN WORK_DIR CASE

`lead_*` cases run a search with one objective and check that the console, the JSON and the
HTML report lead with the same batch, that the batch never exceeds the memory-safe (recommended)
batch, and that no alternative does; `fixed_cost` checks that a target below what every batch
holds is a usage error before any trial, naming that cost."""
import json
import os
import re
import shutil
import subprocess
import sys

BIN, WORK, CASE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
DIR = os.path.join(WORK, "one_answer_" + CASE)
shutil.rmtree(DIR, ignore_errors=True)
os.makedirs(DIR)
os.chdir(DIR)

MLP = ["--model", "mlp", "--width", "64", "--device", "cpu", "--threads", "1", "--memory-budget", "24MiB"]


def fail(why, out=""):
    print(f"FAIL ({CASE}): {why}\n--- output ---\n{out}")
    sys.exit(1)


def run(args, status):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=900)
    if p.returncode != status:
        fail(f"exit status {p.returncode}, expected {status}: saturate {' '.join(args)}", p.stdout + p.stderr)
    return p


def lead(objective, extra=()):
    p = run(["search"] + MLP + ["--objective", objective, "--json", "run.json", "--html", "run.html", "-q"] +
            list(extra), 0)
    j = json.load(open("run.json"))
    d = j["decision"]
    rec = j["recommended_batch"]
    console = re.search(r"^decision +train at batch (\d+) \(objective (\w+)", p.stdout, re.M)
    if not console:
        fail("the console has no decision line", p.stdout)
    page = open("run.html").read()
    lead_html = re.search(r'<p class="lead">Train at batch <b>(\d+)</b> \(objective (\w+)', page)
    if not lead_html:
        fail("the HTML report does not lead with the decision", page[:3000])
    batches = {"console": int(console.group(1)), "json": d["batch"], "html": int(lead_html.group(1))}
    objectives = {"console": console.group(2), "json": d["objective"], "html": lead_html.group(2)}
    if len(set(batches.values())) != 1 or len(set(objectives.values())) != 1:
        fail(f"the outputs lead with different answers: {batches} {objectives}", p.stdout)
    if not 0 < d["batch"] <= rec:
        fail(f"decision {d['batch']} is not within the memory-safe batch {rec}", p.stdout)
    for a in d["alternatives"]:
        if a["batch"] > rec:
            fail(f"alternative {a} is above the memory-safe batch {rec}", p.stdout)
    if j["throughput_batch"] > rec:
        fail(f"throughput_batch {j['throughput_batch']} is above the recommended {rec}", p.stdout)
    # the console's first answer line is the decision
    answer = p.stdout.split("\n\n")[-1] if "\n\n" in p.stdout else p.stdout
    first = next((line for line in p.stdout.splitlines() if re.match(r"^(decision|max_batch|recommended_batch)", line)), "")
    if not first.startswith("decision"):
        fail(f"the answer does not start with the decision: {first!r}", answer)
    return j, d, p.stdout


def lead_memory():
    j, d, out = lead("memory")
    if d["objective"] != "memory" or d["batch"] != j["recommended_batch"]:
        fail(f"memory decides the recommended batch: {d}", out)


def lead_throughput():
    j, d, out = lead("throughput")
    if d["objective"] != "throughput" or d["batch"] != j["objective"]["batch"]:
        fail(f"throughput decides its knee: {d} vs {j['objective']}", out)
    if [a["name"] for a in d["alternatives"]] != ["memory"]:
        fail(f"the recommended batch is the named alternative: {d['alternatives']}", out)


def lead_goodput():
    j, d, out = lead("goodput", ["--data", "fashion-mnist", "--workers", "1"])
    if d["requested"] != "goodput":
        fail(f"goodput was asked for: {d}", out)
    if d["objective"] == "goodput":
        if d["batch"] != j["objective"]["goodput"]["batch"]:
            fail(f"goodput decides its pick: {d}", out)
    elif "fallback" not in d or "goodput" in j["objective"]:
        fail(f"a fallback from goodput is named and gives no goodput pick: {d}", out)


def fixed_cost():
    # 2 % of 24 MiB is below the mlp's weights + gradients + Adam state: refused before any trial
    p = run(["search"] + MLP + ["--target-memory", "0.02"], 2)
    err = p.stderr
    if not re.search(r"--target-memory: 0\.02 of the budget 24\.0 MiB is [0-9.]+ [KM]iB, below the fixed cost every "
                     r"batch holds: .* of weights, as much in gradients and .* of adam state = [0-9.]+ [KM]iB", err):
        fail("no message naming the fixed cost", err)
    if re.search(r"batch +[0-9]+ +(ok|oom|over)", p.stdout + err) or "recommended_batch" in p.stdout:
        fail("a trial ran or an answer was printed before the usage error", p.stdout + err)


CASES = {"lead_memory": lead_memory, "lead_throughput": lead_throughput, "lead_goodput": lead_goodput,
         "fixed_cost": fixed_cost}
if CASE not in CASES:
    fail(f"unknown case; one of {', '.join(CASES)}")
CASES[CASE]()
print(f"ok ({CASE})")
