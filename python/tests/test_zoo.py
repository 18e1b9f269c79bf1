"""The same run through the command line and through Python gives the same JSON apart from
timings: saturate.zoo_search / zoo_memory call the sessions `saturate search` and `saturate
memory` run (one implementation), on a zoo model, for each objective and for the leak check."""
import json
import os
import re
import subprocess

import pytest

import saturate

BINARY = os.path.join(os.environ.get("SATURATE_BUILD_DIR", "build"), "saturate")
# what differs between two runs of the same command: wall-clock figures, the build, the load
TIMING = re.compile(r"(_ms$|_s$|per_s|seconds|utilization|phases|rss|mfu|^eta|wall|duration|bottleneck|elapsed|"
                    r"rounds|rel_std|stddev|samples_per|throughput|settled|verdict|achieved|peak_flops|gemm|"
                    r"git_commit|sampler_cpu_share|monitor|^points$|^curve$|load|"
                    # the GEMM peak's load while measured (and the words that name it), MFU's note, HFU
                    r"peak_method|peak_others|peak_first|mfu_note|hfu|others_busy)")


def strip(x, path=""):
    if isinstance(x, dict):
        return {k: strip(v, path + "/" + k) for k, v in x.items() if not TIMING.search(k)
                and not (path.endswith("/fast_paths") and k == "reason")  # the front-end's wording
                and not (path == "/compute" and k == "batch")  # the throughput batch's: timed
                and not (path == "/decision" and k == "alternatives")  # fastest_probe, the knee: timed
                and not (path == "/leak" and k == "host_growth_bytes")}  # the process's own resident memory
    if isinstance(x, list):
        return [strip(v, path) for v in x]
    if isinstance(x, str):  # the budget an OOM names: the flag (CLI) or the keyword (Python)
        return x.replace("saturate --memory-budget", "BUDGET").replace("saturate memory_budget", "BUDGET")
    return x


def cli_json(*args):
    if not os.path.exists(BINARY):
        pytest.skip(f"no saturate binary at {BINARY}")
    quiet = ["-q"] if args[0] == "search" else []
    out = subprocess.run([BINARY, *args, "--device", "cpu", "--threads", "1", *quiet, "--json", "-"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_same(cli, py):
    a, b = strip(cli), strip(py)
    assert sorted(cli) == sorted(py), set(cli) ^ set(py)
    differing = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    assert not differing, {k: (a.get(k), b.get(k)) for k in differing}


def test_a_memory_objective_search_is_the_clis():
    cli = cli_json("search", "--model", "mlp", "--width", "64", "--memory-budget", "24MiB")
    py = saturate.zoo_search("mlp", width=64, device="cpu", memory_budget="24MiB", threads=1)
    assert py.max_batch == cli["max_batch"] > 0
    assert_same(cli, py.data)


def test_a_throughput_search_answers_like_the_cli_apart_from_the_timed_knee():
    args = ["search", "--model", "mlp", "--width", "64", "--memory-budget", "24MiB", "--objective", "throughput"]
    cli = cli_json(*args)
    py = saturate.zoo_search("mlp", width=64, device="cpu", memory_budget="24MiB", threads=1, objective="throughput")
    assert py.objective is not None and py.objective.objective == cli["objective"]["objective"] == "throughput"
    # the knee is timed: which batch it lands on may move between runs; everything else may not
    cli.pop("objective"), py.data.pop("objective")
    cli.pop("decision"), py.data.pop("decision")  # the knee chose it
    assert_same(cli, py.data)


def test_goodputs_noise_scale_agrees_with_the_clis_within_15_percent():
    # a small GPT on synthetic tokens: its noise scale is measurable at init (an MLP on random
    # labels has none), measured at the weights as built in both (not as the trials left them)
    gpt = dict(layers=1, width=32, heads=2, seq_len=32, vocab=256)
    cli = cli_json("search", "--model", "gpt", *[a for k, v in gpt.items() for a in ("--" + k.replace("_", "-"), str(v))],
                   "--memory-budget", "64MiB", "--objective", "goodput", "--base-batch", "8")
    py = saturate.zoo_search("gpt", **gpt, device="cpu", memory_budget="64MiB", threads=1, objective="goodput",
                             base_batch=8)
    a = cli["objective"]["noise_scale"]["value"]
    b = py.data["objective"]["noise_scale"]["value"]
    assert a is not None and b is not None
    assert abs(a - b) <= 0.15 * abs(a), (a, b)


def test_a_memory_run_with_a_leak_check_is_the_clis():
    cli = cli_json("memory", "--model", "mlp", "--width", "128", "--batch", "32", "--leak-check-steps", "10", "--keep-loss")
    py = saturate.zoo_memory("mlp", batch_size=32, leak_check_steps=10, keep_loss=True, width=128, device="cpu",
                             threads=1)
    assert py.leak_detected and cli["leak"]["detected"]
    assert_same(cli, py.data)


def test_an_unknown_model_option_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown model option 'widht'"):
        saturate.zoo_search("mlp", widht=64, device="cpu")
