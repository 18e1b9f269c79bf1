"""saturate.shard_plan (issue 42): a Hugging Face GPT-2 from a config whose replicated training
does not fit a rank (weights 30.1 MiB, 120.5 MiB of model states with AdamW) on 2 Gloo ranks of
unequal budgets (160 and 116 MiB). The plan rules replication out by its model states (and it does run out of
memory at batch 1, checked), searches the sharded strategies, trains as one process would on the
same global batches, and its micro-batch is exact in fresh processes."""
import json

import pytest
import ranks_util

MiB = 1 << 20
B0, B1 = 160 * MiB, 116 * MiB
TIMEOUT_S = 240  # a hang lasts this long and fails the test; far above the plan's own time


def run_ranks(*args, timeout=900):
    return ranks_util.ranks("shard_plan_lm.py", *args, timeout=timeout)


def fresh(tmp_path, strategy, checkpointing, batch):
    """Each rank's result of 3 plain steps at `batch` in new processes: "ok", "oom" or "peer-gone"."""
    return ranks_util.fresh_results(tmp_path, "shard_plan_lm.py", B0, B1, 30, strategy, int(checkpointing), batch)


def plans(tmp_path, *args):
    out = run_ranks("plan", tmp_path, B0, B1, TIMEOUT_S, *args)
    assert out.returncode == 0, out.stderr[-4000:]
    return [json.loads((tmp_path / f"plan{r}.json").read_text()) for r in (0, 1)]


@pytest.fixture(scope="module")
def fsdp_float32(tmp_path_factory):
    """Both ranks' fsdp plan in float32, searched once for the tests that read it (a 2-rank plan is
    the longest part of this file)."""
    return plans(tmp_path_factory.mktemp("fsdp_float32"), 0, "fsdp", 0)


def test_a_model_whose_replicated_training_does_not_fit_trains_sharded_as_one_process_would(tmp_path):
    p0, p1 = plans(tmp_path, 16)
    plan = p0["plan"]
    for key in ("strategy", "checkpointing", "micro_batch", "accumulation", "global_batch", "max_batch"):
        assert plan[key] == p1["plan"][key], key
    assert plan["strategy"] in ("fsdp", "fsdp_no_reshard") and plan["global_batch"] == 16
    assert plan["micro_batch"] * 2 * plan["accumulation"] == 16
    by_name = {(c["strategy"], c["checkpointing"]): c for c in plan["candidates"]}
    assert len(by_name) == 6
    # replication is ruled out by its model states, without a trial; and it does run out at batch 1
    for ckpt in (False, True):
        ddp = by_name[("ddp", ckpt)]
        assert not ddp["fits"] and not ddp["searched"] and "model states" in ddp["reason"]
    assert "oom" in fresh(tmp_path, "ddp", False, 1)
    searched = [c for c in plan["candidates"] if c["searched"]]
    assert searched and all(c["fits"] and c["samples_per_s"] > 0 and c["trials"] > 0 for c in searched)
    chosen = by_name[(plan["strategy"], plan["checkpointing"])]
    assert chosen["samples_per_s"] >= 0.97 * max(c["samples_per_s"] for c in searched)
    # each rank: its peak within its budget, a half of the weights and of Adam's state (its shards)
    for r, budget in zip(plan["ranks"], (B0, B1)):
        assert r["budget_bytes"] == budget and 0 < r["peak_bytes"] <= budget
        assert abs(r["parameters_bytes"] - plan["parameter_bytes"] / 2) <= 0.01 * plan["parameter_bytes"]
        assert abs(r["optimizer_bytes"] - plan["parameter_bytes"]) <= 0.02 * plan["parameter_bytes"]
        # the breakdown of one step's peak (phases from hooks, this rank's shards) agrees with what
        # was measured apart: the timed steps' peak within 1 %, the shards of weights and of Adam's
        # state, and its parts add up to its peak
        # (the timed steps and the breakdown's step are different steps: Gloo frees its copy of a
        # gathered unit on its own thread, now and then after the next allocation, which moves a
        # step's peak by up to the largest unit's bytes: 98.8 vs 105.6 MiB measured on one rank)
        b = r["breakdown"]
        unit = plan["largest_unit_bytes"]
        assert abs(b["peak_allocated_bytes"] - r["peak_bytes"]) <= 0.01 * r["peak_bytes"] + unit, (b, r["peak_bytes"])
        assert abs(b["parameters_bytes"] - r["parameters_bytes"]) <= 0.01 * r["parameters_bytes"]
        assert abs(b["optimizer_state_bytes"] - r["optimizer_bytes"]) <= 0.02 * r["optimizer_bytes"]
        assert b["activations_bytes"] > 0
        # the collectives' buffers and the units' weights gathered whole are parts of their own
        # (before: one workspace of 28.6 MiB; now 3.2 MiB of workspace is left on the fsdp plan)
        assert b["communication_bytes"] > 0 and 0 < b["gathered_parameters_bytes"] <= plan["parameter_bytes"], b
        assert b["workspace_bytes"] < b["communication_bytes"] + b["gathered_parameters_bytes"], b
        assert sum(v for k, v in b.items() if k != "peak_allocated_bytes") == b["peak_allocated_bytes"]
    assert "shard plan" in p0["text"] and "ddp" in p0["text"]
    # the prediction: on one rank of this budget nothing fits by its model states alone; on two
    # H200s every searched candidate fits, with a far larger micro-batch than here
    assert all(not p["fits"] and "model states" in p["reason"] for p in p0["predict1"])
    for p, c in zip(p0["predict_h200"], plan["candidates"]):
        if c["searched"]:
            assert p["fits"] and p["max_batch"] > 100 * c["max_batch"], (p, c)
    assert "h200" in p0["predict_text"]
    # the segment laws (each part of the step its own line, measured at the micro-batch and a third
    # of it, the smallest of three steps) give back this world size's measured peaks at the
    # micro-batch, every rank within 5 %; the timed steps' peak may be a unit's bytes above it more:
    # Gloo's late free of its copy of a gathered unit, which the laws leave out (seen in a fresh-clone
    # CI under load: 103.0 MiB by the laws, 109.8 MiB timed, the largest unit 6.8 MiB)
    unit = plan["largest_unit_bytes"]
    for p, c in zip(p0["predict_here"], plan["candidates"]):
        if c["searched"] and c["fits"] and c["micro_batch"] >= 2:
            assert p["segment_laws"], p
            for measured in c["peak_bytes"]:
                above = measured - p["peak_at_micro"]
                assert -0.05 * measured <= above <= 0.05 * measured + unit, (p["peak_at_micro"], c["peak_bytes"], unit)
    # 10 steps under the plan on the same global batches as one unsharded process: every weight
    # stepped; against one backward a global batch, equal to rounding in float64 (float32: 2-3e-5,
    # other matmul shapes), and against one process accumulating the same micro-batches (the
    # ranks' shapes, only the gradients' sum in another order) within the 1e-5 in both
    # (measured: 0, bit for bit: Gloo sums two ranks' gradients, then halves, which is exact)
    trained = json.loads((tmp_path / "train.json").read_text())
    for dtype in ("torch.float64", "torch.float32"):
        assert trained[dtype]["stepped"] == trained[dtype]["weights"] > 0
        assert trained[dtype]["moved"] > 1e-3  # the weights did move
        assert trained[dtype]["max_abs_diff_accumulated"] < 1e-5, trained
    assert trained["torch.float64"]["max_abs_diff"] < 1e-9, trained


def test_the_planned_micro_batch_is_exact_on_unequal_ranks(tmp_path, fsdp_float32):
    p0, p1 = fsdp_float32
    plan = p0["plan"]
    m = plan["max_batch"]
    assert plan["strategy"] == "fsdp" and m > 1 and m == p1["plan"]["max_batch"] and plan["max_batch_exact"]
    assert 0 < plan["micro_batch"] <= m
    # the bound: at most 6 trials to the exact max (before: 6-9 on this model, the first two
    # probes peaking where the gathered units do, at a slope a third of the real one; 7 once under
    # a loaded CI while Gloo's worker threads' buffers were counted and moved the boundary between
    # trials, as below; 4-5 since)
    (searched,) = [c for c in plan["candidates"] if c["searched"]]
    assert 0 < searched["trials_to_max"] <= min(6, searched["trials"]), searched
    print(f"fsdp on {B0 >> 20}/{B1 >> 20} MiB: max {m} in {searched['trials_to_max']} trials ({searched['trials']} in all)")
    # fresh processes running the plain step, wrapped as planned: the planned micro-batch fits on
    # both ranks, and one more than the search's max runs out of memory. (Until the CPU budget left
    # Gloo's worker threads' staging buffers out, the boundary moved from run to run: the search
    # answered 7 in 9 of 10 plans and 6 in 1, and a fresh run at 7 ran out 1 time in 3 to 8; now
    # 7 fit in 16 fresh runs of 16 and 8 ran out in 10 of 10, idle and under load)
    assert fresh(tmp_path, "fsdp", False, plan["micro_batch"]) == ["ok", "ok"]
    assert "oom" in fresh(tmp_path, "fsdp", False, m + 1)


def test_a_rank_that_loses_memory_after_a_candidates_search_stops_it_on_every_rank_without_a_hang(tmp_path):
    # rank 1's free memory shrinks right after fsdp's search (a blocker of its micro-batch's headroom
    # + 2 MiB, held until the next search starts): fsdp's warm-up step before timing runs out of memory there, every
    # rank learns of it at the agreement points and drops the candidate, and fsdp_no_reshard is then
    # searched with the memory back. Without the agreement, rank 1 raised out of memory out of
    # shard_plan in its first timed step (the warm-up had fit) and rank 0, inside FSDP's all-gather,
    # lost its peer: had rank 1's process lived on, rank 0 would have waited out the collective
    # timeout
    out = run_ranks("shrink", tmp_path, B0, B1, TIMEOUT_S)
    assert out.returncode == 0, out.stderr[-4000:]
    p0, p1 = [json.loads((tmp_path / f"plan{r}.json").read_text()) for r in (0, 1)]
    assert p1["lost"] == 1 and p0["lost"] == 0
    for key in ("strategy", "micro_batch", "max_batch", "global_batch"):
        assert p0["plan"][key] == p1["plan"][key], key
    same = ("strategy", "fits", "reason", "max_batch", "micro_batch")
    assert [[c[k] for k in same] for c in p0["plan"]["candidates"]] == \
        [[c[k] for k in same] for c in p1["plan"]["candidates"]]
    fsdp, no_reshard = p0["plan"]["candidates"]
    assert fsdp["strategy"] == "fsdp" and fsdp["searched"] and not fsdp["fits"], fsdp
    assert "rank 1 could not run it afterwards" in fsdp["reason"], fsdp["reason"]
    assert no_reshard["fits"] and p0["plan"]["strategy"] == "fsdp_no_reshard", no_reshard
    assert "rank 1 could not run it afterwards" in p0["text"]


def test_bf16_mixed_precision_is_planned_exactly_and_fits_more_than_float32(tmp_path, monkeypatch, fsdp_float32):
    # FSDP2's MixedPrecisionPolicy (bf16 weights gathered and computed, float32 gradients reduced)
    # when the step asks for bf16: the plan wraps with it, its search is exact in fresh processes
    # wrapped the same way, and bf16 activations fit a larger micro-batch than float32's
    float32 = fsdp_float32[0]["plan"]
    monkeypatch.setenv("SHARD_PLAN_MP", "bf16")
    p0, p1 = plans(tmp_path, 0, "fsdp", 0)
    plan = p0["plan"]
    m = plan["max_batch"]
    assert plan["mixed_precision"] == "bf16" and plan["max_batch_exact"] and m == p1["plan"]["max_batch"]
    assert m > float32["max_batch"], (m, float32["max_batch"])
    assert fresh(tmp_path, "fsdp", False, plan["micro_batch"]) == ["ok", "ok"]
    # exact: m + 1 runs out. (Until the agreement points passed None on for an output no gradient
    # reaches, the trials held a zero gradient of the model's bf16 logits at the backward's peak,
    # 2.1 MiB at the max: the search answered 17 where a fresh 18 fits and 19 runs out)
    assert "oom" in fresh(tmp_path, "fsdp", False, m + 1)



def test_a_rank_out_of_memory_in_a_replicated_candidates_backward_stops_it_on_every_rank_without_a_hang(tmp_path):
    # budgets where replication fits (its model states 120.8 MiB): rank 1 runs out of memory in
    # the backward of ddp's first timed step, after some gradient buckets were all-reduced. A point
    # before each bucket's all-reduce (DdpSync) tells rank 0 there: ddp is dropped on both ranks,
    # naming rank 1, and fsdp_no_reshard is planned. Before, the timed steps ran plain: rank 1 raised
    # out of shard_plan and rank 0 was left in the next bucket's all-reduce (the collective timeout,
    # or its peer's exit)
    out = ranks_util.ranks("shard_plan_lm.py", "fail_in_ddp_backward", tmp_path, 240 * MiB, 240 * MiB, TIMEOUT_S,
                              timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    p0, p1 = [json.loads((tmp_path / f"plan{r}.json").read_text()) for r in (0, 1)]
    assert p1["failed"] == 1 and p0["failed"] == 0
    same = ("strategy", "fits", "reason", "max_batch", "micro_batch")
    assert [[c[k] for k in same] for c in p0["plan"]["candidates"]] == \
        [[c[k] for k in same] for c in p1["plan"]["candidates"]]
    ddp, no_reshard = p0["plan"]["candidates"]
    assert ddp["strategy"] == "ddp" and ddp["searched"] and not ddp["fits"], ddp
    assert "rank 1 could not run it afterwards" in ddp["reason"], ddp["reason"]
    assert no_reshard["fits"] and p0["plan"]["strategy"] == "fsdp_no_reshard", no_reshard
