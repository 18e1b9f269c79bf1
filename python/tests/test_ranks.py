"""saturate.search on the user's own step under torchrun (seed M8): ranks with different budgets
run the same trials and agree on one exact answer, the smallest rank's, each reporting its own."""
import json
import os
import subprocess
import sys

import ranks_util
from loops import run_fresh

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def torchrun(worker, out_dir, timeout=900):
    """`worker` (beside this file) on 2 Gloo ranks, one thread each, writing into `out_dir`."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           os.path.join(HERE, worker), str(out_dir)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_ranks_with_different_budgets_agree_on_the_smallest_ranks_exact_max(tmp_path):
    out = torchrun("ranks_search.py", tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    d0, d1 = results[0]["data"], results[1]["data"]
    assert d0["max_batch"] == d1["max_batch"] and d0["recommended_batch"] == d1["recommended_batch"]
    assert d0["world_size"] == 2
    ranks = {r["rank"]: r for r in d0["ranks"]}
    assert ranks[0]["budget_bytes"] == 64 * MiB and ranks[1]["budget_bytes"] == 40 * MiB
    assert ranks[1]["max_batch"] == d0["max_batch"] and ranks[1]["max_batch_exact"]
    assert ranks[0]["max_batch"] > d0["max_batch"] and ranks[0]["max_batch_exact"]  # refined alone
    assert d0["budget_bytes"] == 40 * MiB  # the smallest rank's
    # the typed ranks (saturate.RankLimit, from the library's RankMax) are what the JSON says
    typed = {k["rank"]: k for k in results[0]["ranks"]}
    assert typed == {r: dict(entry, own_oom_batch=None) for r, entry in ranks.items()}
    assert "ranks" in results[0]["text"] and "torch.distributed gloo" in results[0]["text"]
    common = d0["max_batch"]
    assert run_fresh("mlp", 40 * MiB, common, 3) == "ok"
    assert run_fresh("mlp", 40 * MiB, common + 1, 3) == "oom"
    assert run_fresh("mlp", 64 * MiB, ranks[0]["max_batch"] + 1, 3) == "oom"


def test_a_call_one_rank_refuses_or_the_ranks_give_differently_stops_every_rank_at_once(tmp_path):
    # saturate.search, shard_plan and OomGuard(model=) on 2 Gloo ranks (collective timeout 30 s): rank 1 gives an
    # argument it refuses, then settings that differ from rank 0's. Before, the refusing rank raised
    # alone and the other waited in the first collective; different max_batch ran different trials
    # (a hang until the timeout). Now every rank raises at the call's first collective, naming the
    # rank or the setting, and the barrier after passes (no rank was left inside a collective).
    out = torchrun("ranks_arguments.py", tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    r0, r1 = [json.loads((tmp_path / f"args{r}.json").read_text()) for r in (0, 1)]
    for call, own in (("search", "max_batch=-3"), ("plan", "global_batch=0"), ("guard", "max_grad_norm=-1.0")):
        refused0, refused1 = r0[f"{call}_refused"], r1[f"{call}_refused"]
        assert refused1["raised"] == "ValueError" and own in refused1["message"], refused1
        assert refused0["raised"] == "ValueError" and "rank 1 refused its arguments" in refused0["message"], refused0
        key = {"search": "max_batch", "plan": "global_batch", "guard": "max_grad_norm"}[call]
        for r in (r0, r1):
            differ = r[f"{call}_differ"]
            assert differ["raised"] == "ValueError" and f"different {key}" in differ["message"], differ
            assert differ["seconds"] < 20 and r[f"{call}_refused"]["seconds"] < 20  # at once, not the timeout
    # a refusal of another kind (no such device on rank 1) stops every rank too
    assert r1["plan_device"]["raised"] == "RuntimeError" and "cuda" in r1["plan_device"]["message"], r1["plan_device"]
    assert "rank 1 refused its arguments" in r0["plan_device"]["message"], r0["plan_device"]
    assert "which has 64 here" in r0["search_differ"]["message"] and "this rank has 32" in r1["search_differ"]["message"]


def test_a_users_ddp_model_searches_and_backs_off_on_unequal_ranks_without_a_hang(tmp_path):
    # the user's own DistributedDataParallel model, its step all-reducing the gradients inside the
    # backward; rank 1 (40 MiB) runs out of memory first, inside trials where rank 0 (64 MiB) goes
    # on to the buckets' all-reduces. A point before each bucket's all-reduce (DdpSync) tells rank
    # 0 there: both ranks agree on rank 1's exact max. Then OomGuard(model=) on batches rank 1
    # cannot hold whole: it backs off, rank 0 splits alike, and the replicas stay one model, equal
    # to one process on both ranks' batches. Before, rank 0 waited in a bucket's all-reduce that
    # rank 1 never entered (the collective timeout, 60 s here)
    out = ranks_util.ranks("ranks_ddp.py", "search", tmp_path, 60, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    r0, r1 = [json.loads((tmp_path / f"ddp{r}.json").read_text()) for r in (0, 1)]
    d0, d1 = r0["data"], r1["data"]
    assert d0["max_batch"] == d1["max_batch"] > 0 and d0["recommended_batch"] == d1["recommended_batch"]
    assert d0["agreement_points"] > 0
    ranks = {r["rank"]: r for r in d0["ranks"]}
    assert ranks[1]["max_batch_exact"] and ranks[1]["own_oom_batch"] == d0["max_batch"] + 1, ranks
    assert r0["search_s"] < 45 and r1["search_s"] < 45  # no collective timeout (60 s) waited out
    common = d0["max_batch"]
    assert ranks_util.fresh_results(tmp_path, "ranks_ddp.py", 60, common) == ["ok", "ok"]
    # exact: one more runs out on rank 1 (before Gloo's worker threads left the CPU budget, the
    # boundary moved by one from run to run and max + 2 was allowed; 5 of 5 fresh runs at max + 1
    # ran out on 2026-12-07)
    assert ranks_util.fresh_results(tmp_path, "ranks_ddp.py", 60, common + 1)[1] == "oom"
    # the guard: rank 1 backed off, rank 0 split as it did; one model on both ranks, as one process
    assert r1["backoffs"] and not r0["backoffs"], (r0["backoffs"], r1["backoffs"])
    assert r0["micro_batch"] == r1["micro_batch"] < r0["batch"]
    assert r0["replicas_differ"] == 0.0 and r1["replicas_differ"] == 0.0
    assert r0["max_abs_diff"] < 1e-5, r0["max_abs_diff"]
    # and when the user drops the model, its weights are freed on both ranks (the points' hook
    # held DDP's reducer, its weights and buckets, for good: a shard plan's ddp candidate took
    # 7.1 MiB from every candidate searched after it)
    assert r0["weights_freed"] and r1["weights_freed"]


def test_the_throughput_objective_on_a_users_ddp_model_times_every_ranks_step_together_and_agrees(tmp_path):
    # the step all-reduces the gradients inside its backward, so its curve is timed with the real
    # collectives: every rank runs each timed batch together and sees the same trial (the slowest
    # rank's time, its own speed too), so the curve's rounds, its points and its knee are the same
    # on both ranks; unequal budgets (64 and 40 MiB), no collective timeout (60 s) waited out
    out = ranks_util.ranks("ranks_ddp.py", "throughput", tmp_path, 60, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    r0, r1 = [json.loads((tmp_path / f"tp{r}.json").read_text()) for r in (0, 1)]
    o0, o1 = r0["data"]["objective"], r1["data"]["objective"]
    assert o0["objective"] == "throughput", o0
    c0, c1 = o0["throughput_curve"], o1["throughput_curve"]
    assert c0["world_size"] == 2 and c0["allreduce_ms_per_step"] == 0, c0
    p0 = [(p["batch"], p["ok"], p["samples_per_s"], p["rounds"]) for p in c0["points"]]
    p1 = [(p["batch"], p["ok"], p["samples_per_s"], p["rounds"]) for p in c1["points"]]
    assert p0 == p1 and len(p0) >= 3, (p0, p1)
    assert r0["batch"] == r1["batch"] == o0["batch"] == c0["knee_batch"], (r0["batch"], r1["batch"], c0["knee_batch"])
    assert 1 <= r0["batch"] <= r0["data"]["max_batch"]
    # the job's samples/s: both ranks' samples of each step
    assert all(abs(p["samples_per_s"] - 2 * p["compute_samples_per_s"]) <= 1e-6 * p["samples_per_s"]
               for p in c0["points"] if p["ok"])
    assert "every timed step run on all of them together" in o0["reason"], o0["reason"]
    assert r0["search_s"] < 45 and r1["search_s"] < 45
