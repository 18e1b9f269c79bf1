#!/usr/bin/env python3
"""The answer holds for the whole run, on the command line (issue #26). One case per run:

    whole_epoch.py SATURATE_BIN WORK_DIR CASE

`text` cases write a corpus with a long tail of document lengths (one document per line) and
run the real binary on it with a GPT under a CPU budget; `eval` cases run an evaluation that
cannot fit as asked."""
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys

BIN, WORK, CASE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
DIR = os.path.join(WORK, "whole_epoch_" + CASE)
shutil.rmtree(DIR, ignore_errors=True)
os.makedirs(DIR)
os.chdir(DIR)

GPT = ["--model", "gpt", "--layers", "2", "--width", "64", "--heads", "4", "--seq-len", "256", "--vocab", "256",
       "--device", "cpu",
       "--threads", "1", "--memory-budget", "64MiB"]


def fail(why, out=""):
    print(f"FAIL ({CASE}): {why}\n--- output ---\n{out}")
    sys.exit(1)


def run(args, status, pattern=None):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    if p.returncode != status:
        fail(f"exit status {p.returncode}, expected {status}: saturate {' '.join(args)}", out)
    if pattern and not re.search(pattern, out, re.S):
        fail(f"no /{pattern}/ in the output of saturate {' '.join(args)}", out)
    return out


def run_json(args, status=0):
    out = run(args + ["--json", "-", "-q"], status)
    start = out.find("{")
    try:
        return json.loads(out[start:out.rfind("}") + 1])
    except ValueError:
        fail("no JSON", out)


def write_corpus(path, docs=1200, seed=0):
    """Zipf words, log-normal word counts: most lines short, a few several times the median."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 7))) for _ in range(300)]
    weights = [1.0 / (k + 1) for k in range(len(words))]
    lengths = []
    with open(path, "w") as f:
        for _ in range(docs):
            n = max(2, int(math.exp(rng.gauss(math.log(9), 0.55))))
            line = " ".join(rng.choices(words, weights, k=n)) + "."
            f.write(line + "\n")
            lengths.append(min(len(line), 257))
    return lengths


def case_text_search_sizes_for_the_longest_documents_and_its_max_trains_the_epoch():
    lengths = write_corpus("corpus.txt")
    train_docs = len(lengths) - int(len(lengths) * 0.1)  # the last 10 % are held out
    j = run_json(["search"] + GPT + ["--data", "text:corpus.txt"])
    w = j["worst_case"]
    longest = max(lengths[:train_docs])
    if w["documents"] != train_docs or w["longest_tokens"] != longest - 1:
        fail(f"worst case {w}, expected {train_docs} documents, longest {longest - 1} tokens", json.dumps(w))
    if not j["max_batch_exact"] or w["max_tokens"] != j["max_batch"] * (longest - 1):
        fail("max not exact or max_tokens not max x longest", json.dumps(j)[:2000])
    m = j["max_batch"]
    # beside it, the answer on median-length documents: what a search that never meets the tail sees
    if not w.get("median_max_batch_exact") or w["median_max_batch"] < 2 * m or not w["median_trials"]:
        fail(f"median answer {w.get('median_max_batch')} against the worst case's {m}", json.dumps(w))
    # the whole epoch at the worst case's max: no out-of-memory, even with the back-off off
    t = run_json(["train"] + GPT + ["--data", "text:corpus.txt", "--batch", str(m), "--epochs", "1",
                                    "--no-oom-backoff", "--eval-batch", str(m)])
    if t["oom_backoffs"] or t["samples_seen"] != (train_docs // m) * m:
        fail(f"epoch at {m}: backoffs {t['oom_backoffs']}, samples {t['samples_seen']}", json.dumps(t)[:2000])
    # a batch above it fits the first batches but not the epoch's longest: it fails after some steps
    # (the first larger size, from 1.5x down, whose first step fits; too large fails at once)
    failed_later = None
    for b in sorted({int(1.5 * m), int(1.25 * m), m + 1}, reverse=True):
        p = subprocess.run([BIN, "train"] + GPT + ["--data", "text:corpus.txt", "--batch", str(b), "--epochs", "1",
                                                   "--no-oom-backoff", "-q"], capture_output=True, text=True,
                           timeout=900)
        at = re.search(r"out of memory at step (\d+)", p.stdout + p.stderr)
        if p.returncode == 1 and at and int(at.group(1)) >= 1:
            failed_later = b
            break
    if failed_later is None:
        fail(f"no batch above the max {m} ran its first step and then ran out of memory")
    # and with the back-off (the default) the same run trains the epoch, halving for the long batches
    b = failed_later
    t2 = run_json(["train"] + GPT + ["--data", "text:corpus.txt", "--batch", str(b), "--epochs", "1"])
    if not t2["oom_backoffs"] or t2["samples_seen"] != (train_docs // b) * b:
        fail("the back-off did not carry the epoch", json.dumps(t2)[:2000])


def case_text_train_batch_auto_sizes_for_the_longest_document_not_seq_len():
    write_corpus("corpus.txt")
    lengths = [len(line.rstrip("\n")) for line in open("corpus.txt")]  # uncut: seq_len 512 cuts at 513
    train_docs = len(lengths) - int(len(lengths) * 0.1)
    longest = max(lengths[:train_docs])
    # a model whose seq_len the documents never reach: sized at seq_len, the batch would be smaller
    # than every batch of the data allows
    gpt = list(GPT)
    gpt[gpt.index("--seq-len") + 1] = "512"
    if longest >= 512:
        fail(f"the corpus reaches seq_len ({longest} bytes): the case shows nothing")
    synthetic = run_json(["search"] + gpt)["max_batch"]
    t = run_json(["train"] + gpt + ["--data", "text:corpus.txt", "--batch", "auto", "--epochs", "1",
                                    "--no-oom-backoff"])
    m = t["micro_batch"]
    if t["oom_backoffs"] or t["samples_seen"] != (train_docs // m) * m:
        fail(f"the epoch at the auto micro-batch {m}: backoffs {t['oom_backoffs']}, samples {t['samples_seen']}",
             json.dumps(t)[:2000])
    if m <= synthetic:
        fail(f"auto micro-batch {m} is no larger than the full seq_len's max {synthetic}")
    bs = t["batch_search"]
    if bs["sized_at_tokens"] != longest - 1 or not bs["max_batch_exact"] or bs["max_batch"] != m:
        fail(f"batch_search {bs}: expected sized at {longest - 1} tokens, exact, max {m}")
    # exact over the epoch: one more runs out of memory at the batch that holds the longest document
    run(["train"] + gpt + ["--data", "text:corpus.txt", "--batch", str(m + 1), "--epochs", "1", "--no-oom-backoff",
                           "-q"], 1, r"out of memory at step")
    # the token budget auto is what the step was sized for: the micro-batch x the longest document
    auto = run_json(["train"] + gpt + ["--data", "text:corpus.txt", "--batch", "auto", "--max-tokens", "auto",
                                       "--epochs", "1", "--no-oom-backoff"])
    if auto["oom_backoffs"] or auto["samples_seen"] != train_docs or auto["steps"] * 2 > t["steps"]:
        fail(f"max-tokens auto: backoffs {auto['oom_backoffs']}, samples {auto['samples_seen']} of {train_docs}, "
             f"steps {auto['steps']} against {t['steps']}", json.dumps(auto)[:2000])


def case_text_token_budget_trains_the_epoch_in_fewer_fuller_steps():
    lengths = write_corpus("corpus.txt")
    train_docs = len(lengths) - int(len(lengths) * 0.1)
    j = run_json(["search"] + GPT + ["--data", "text:corpus.txt"])
    m = j["max_batch"]
    fixed = run_json(["train"] + GPT + ["--data", "text:corpus.txt", "--batch", str(m), "--epochs", "1",
                                        "--no-oom-backoff"])
    budget = run_json(["train"] + GPT + ["--data", "text:corpus.txt", "--batch", str(m), "--max-tokens",
                                         str(j["worst_case"]["max_tokens"]), "--epochs", "1", "--no-oom-backoff"])
    if budget["oom_backoffs"] or budget["samples_seen"] != train_docs:
        fail(f"token budget: backoffs {budget['oom_backoffs']}, samples {budget['samples_seen']} of {train_docs}",
             json.dumps(budget)[:2000])
    if budget["steps"] * 2 > fixed["steps"]:
        fail(f"token budget took {budget['steps']} steps, fixed batches {fixed['steps']}: not fewer, fuller batches")
    # auto with a given batch: the micro-batch x seq_len, what the user sized the step for
    auto = run_json(["train"] + GPT + ["--data", "text:corpus.txt", "--batch", str(m), "--max-tokens", "auto",
                                       "--steps", "3", "--no-oom-backoff"])
    if auto["oom_backoffs"] or auto["steps"] != 3:
        fail("max-tokens auto", json.dumps(auto)[:2000])


def case_text_bad_input_is_a_usage_error():
    write_corpus("corpus.txt", docs=50)
    run(["search"] + GPT + ["--data", "text:missing.txt"], 2, r"text:missing.txt: cannot open the file")
    run(["search", "--model", "mlp", "--device", "cpu", "--data", "text:corpus.txt"], 2,
        r"text feeds token models.*mlp takes images")
    with open("empty.txt", "w") as f:
        f.write("\n\nx\n")
    run(["train"] + GPT + ["--data", "text:empty.txt", "--steps", "1"], 2, r"nothing to train on")
    run(["train"] + GPT + ["--data", "synthetic", "--max-tokens", "4096", "--steps", "1"], 2,
        r"--max-tokens: 4096: token budgets batch the documents of --data text:FILE")
    run(["train"] + GPT + ["--data", "text:corpus.txt", "--max-tokens", "lots", "--steps", "1"], 2,
        r"--max-tokens: 'lots' is not a count of tokens")
    run(["train"] + GPT + ["--data", "text:corpus.txt", "--max-tokens", "100", "--steps", "1"], 2,
        r"--max-tokens: 100 is below item \d+'s length")


def case_eval_oom_keeps_the_run_and_the_training_batch():
    # an evaluation batch of 10000 images cannot run its forward within 128 MiB beside training: the
    # evaluation goes on in chunks, the training batch stays, the summary is written
    j = run_json(["train", "--model", "mlp", "--data", "fashion-mnist", "--device", "cpu", "--memory-budget", "128MiB",
                  "--batch", "64", "--eval-batch", "10000", "--eval-every-samples", "1024", "--steps", "40",
                  "--workers", "0", "--threads", "1"])
    if not j["eval_oom_backoffs"]:
        fail("no evaluation back-off: the test shows nothing", json.dumps(j)[:2000])
    if j["micro_batch"] != 64 or j["oom_backoffs"] or j["final_test_loss"] is None:
        fail(f"micro {j['micro_batch']}, backoffs {j['oom_backoffs']}, test loss {j['final_test_loss']}",
             json.dumps(j)[:2000])


MLP = ["--model", "mlp", "--data", "fashion-mnist", "--device", "cpu", "--threads", "1"]


def case_eval_batch_auto_is_exact_in_fresh_runs_and_training_keeps_its_batch():
    # the evaluation's own search beside training's state at micro-batch 64: its max evaluates
    # without a back-off in a fresh run, max + 1 does not (the back-off then chunks it)
    base = MLP + ["--memory-budget", "128MiB", "--batch", "64", "--eval-every-samples", "128", "--steps", "2",
                  "--workers", "0"]
    j = run_json(["train"] + base + ["--eval-batch", "auto"])
    s = j["eval_batch_search"]
    if not s or not s["max_batch_exact"] or j["eval_batch"] != s["max_batch"]:
        fail(f"eval search {s}, eval batch {j['eval_batch']}", json.dumps(j)[:2000])
    if j["eval_oom_backoffs"] or j["micro_batch"] != 64 or j["oom_backoffs"]:
        fail("the searched evaluation backed off, or training's batch changed", json.dumps(j)[:2000])
    m = s["max_batch"]
    at_max = run_json(["train"] + base + ["--eval-batch", str(m)])
    over = run_json(["train"] + base + ["--eval-batch", str(m + 1)])
    if at_max["eval_oom_backoffs"] or not over["eval_oom_backoffs"]:
        fail(f"eval max {m}: backoffs at it {at_max['eval_oom_backoffs']}, at +1 {over['eval_oom_backoffs']}")
    if over["micro_batch"] != 64 or over["oom_backoffs"] or over["final_test_loss"] is None:
        fail("an evaluation OOM changed the training batch or lost the run", json.dumps(over)[:2000])
    # --batch auto searches the evaluation too, unless an evaluation batch is given
    a = run_json(["train"] + MLP + ["--memory-budget", "128MiB", "--batch", "auto", "--steps", "1", "--workers", "0"])
    if not a["eval_batch_search"] or a["eval_batch"] != a["eval_batch_search"]["max_batch"]:
        fail("--batch auto did not search the evaluation batch", json.dumps(a)[:2000])
    run(["train"] + base + ["--eval-batch", "lots"], 2, r"--eval-batch: 'lots' is not an evaluation batch")


def case_the_loaders_window_holds_micro_batches_not_global_batches():
    # 2 workers x 2 prefetched global batches of 4096 images and the one in use took 61.4 MiB,
    # beside the mlp's 52.5 MiB of weights, gradients and Adam state: no micro-batch fitted 96 MiB
    # and the run was refused. The loader now works in micro-batch pieces: the window holds
    # micro-batches, the run trains, and the real loader stays within what the search counted
    # (no back-off)
    j = run_json(["train"] + MLP + ["--memory-budget", "96MiB", "--global-batch", "4096", "--batch", "auto",
                                    "--steps", "3", "--eval-batch", "256"])
    if j["global_batch"] != 4096 or j["oom_backoffs"] or j["eval_oom_backoffs"] or j["steps"] != 3:
        fail(f"global {j['global_batch']}, backoffs {j['oom_backoffs']} / {j['eval_oom_backoffs']}",
             json.dumps(j)[:2000])
    if j["micro_batch"] >= 4096 or j["micro_batch"] < 64:
        fail(f"micro-batch {j['micro_batch']}: expected a split of the global batch", json.dumps(j)[:2000])


CASES = {k[len("case_"):]: v for k, v in globals().items() if k.startswith("case_")}
if CASE not in CASES:
    fail(f"no case {CASE}; cases: {', '.join(CASES)}")
CASES[CASE]()
print(f"ok ({CASE})")
