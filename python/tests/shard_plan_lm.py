"""saturate.shard_plan on a Hugging Face GPT-2 (transformers, from a config, random weights) whose
replicated training does not fit a rank's budget (issue 42), run by test_shard_plan.py on ranks
with torchrun's environment (fresh.ranks; `torchrun` runs it the same way); each rank a CPU
device of its own budget.

    shard_plan_lm.py plan OUT_DIR BUDGET_RANK0 BUDGET_RANK1 TIMEOUT_S GLOBAL_BATCH [STRATEGIES [CHECKPOINTING]]
        the plan on every rank (GLOBAL_BATCH 0: none; STRATEGIES a,b; CHECKPOINTING auto, 0 or 1) (OUT_DIR/plan<R>.json), then 10 optimizer steps under the plan on
        fixed global batches, each rank its rows; rank 0 runs the same 10 steps in one process
        without sharding or budget and writes the largest weight difference (OUT_DIR/train.json)
    shard_plan_lm.py measure OUT_DIR BUDGET_RANK0 BUDGET_REST TIMEOUT_S STRATEGIES CHECKPOINTING PREDICT_WORLD
        the plan (no global batch) and its prediction for PREDICT_WORLD ranks: OUT_DIR/measure<WORLD>.json
    shard_plan_lm.py fresh OUT_DIR BUDGET_RANK0 BUDGET_RANK1 TIMEOUT_S STRATEGY CHECKPOINTING BATCH
        3 plain steps at BATCH of a fresh model wrapped as STRATEGY (no saturate in the step): each
        rank writes "ok", "oom" or "peer-gone" to OUT_DIR/fresh<R>.txt
SHARD_PLAN_MP=bf16 in the environment: plan and fresh runs with FSDP2's bf16 MixedPrecisionPolicy."""
import datetime
import json
import os
import sys

import saturate
import torch
import torch.distributed as dist
from ranks_util import run_fresh
from transformers import GPT2Config, GPT2LMHeadModel

# weights 30.2 MiB, AdamW's model states 120.8 MiB: more than a rank's budget replicated
VOCAB, WIDTH, LAYERS, HEADS, SEQ = 2048, 384, 4, 6, 32
MIXED_PRECISION = os.environ.get("SHARD_PLAN_MP") or None
CONFIG = dict(vocab_size=VOCAB, n_positions=SEQ, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, resid_pdrop=0.0,
              embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)


def make_model():
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(**CONFIG))


def lm_loss(model, ids):
    return model(input_ids=ids, labels=ids).loss


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)


_gen = {}


def step(model, opt, batch_size):
    gen = _gen.setdefault("g", torch.Generator().manual_seed(1 + dist.get_rank()))
    ids = torch.randint(0, VOCAB, (batch_size, SEQ), generator=gen)
    lm_loss(model, ids).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def train(model, opt, batches, micro, accumulation, rows):
    """Optimizer steps on the given global batches; this process's rows of each, in micro-batches."""
    for ids in batches:
        mine = ids[rows]
        for a in range(accumulation):
            part = mine[a * micro:(a + 1) * micro]
            (lm_loss(model, part) / accumulation).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def whole(model):
    return [p.full_tensor() if hasattr(p, "full_tensor") else p.detach() for p in model.parameters()]


def write_plan_and_leave(out_dir, rank, plan, **extra):
    """This rank's plan (OUT_DIR/plan<R>.json, with `extra`), then every rank leaves together."""
    with open(os.path.join(out_dir, f"plan{rank}.json"), "w") as f:
        json.dump({"plan": json.loads(plan.to_json()), "text": str(plan), **extra}, f)
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    mode, out_dir, b0, b1, timeout_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    budget = b0 if rank == 0 else b1  # rank 0 its own, every other rank the second
    torch.set_num_threads(1)
    if mode == "measure":
        # the plan's measurements and its prediction for PREDICT_WORLD ranks (bench/shard_predict.py)
        strategies, checkpointing, predict_world = sys.argv[6].split(","), sys.argv[7] == "1", int(sys.argv[8])
        plan = saturate.shard_plan(make_model, make_optimizer, step, memory_budget=budget, strategies=strategies,
                                   checkpointing=checkpointing, device="cpu")
        prediction = plan.predict(predict_world)
        if rank == 0:
            with open(os.path.join(out_dir, f"measure{world}.json"), "w") as f:
                json.dump({"plan": json.loads(plan.to_json()), "text": str(plan),
                           "prediction": [p.__dict__ for p in prediction.candidates],
                           "prediction_text": str(prediction)}, f)
        dist.barrier()
        dist.destroy_process_group()
        # the results are written: leave without the interpreter's teardown, where a rank aborted
        # now and then with "terminate called without an active exception" (a C++ thread object
        # destroyed unjoined at exit; not understood, seen in a fresh-clone CI run)
        os._exit(0)
    elif mode == "shrink":
        # rank 1 loses memory right after the first candidate's search, until the next search starts
        # (another process on a shared device, come and gone): enough that the candidate's
        # micro-batch no longer fits there. The plan's steps after the search must not leave rank 0
        # waiting in FSDP's collectives for it
        import saturate._search as searching

        real_search, blocker, lost = searching.search, [], []

        def search_then_lose_memory(*args, **kwargs):
            blocker.clear()
            r = real_search(*args, **kwargs)
            if rank == 1 and not lost:
                lost.append(1)
                peak = max(t.peak_bytes for t in r.trials if t.status == "ok" and t.batch == r.recommended_batch)
                blocker.append(torch.empty(budget - peak + (2 << 20), dtype=torch.uint8))
            return r

        searching.search = search_then_lose_memory
        plan = saturate.shard_plan(make_model, make_optimizer, step, memory_budget=budget,
                                   strategies=["fsdp", "fsdp_no_reshard"], checkpointing=False, device="cpu")
        write_plan_and_leave(out_dir, rank, plan, lost=len(lost))
    elif mode == "fail_in_ddp_backward":
        # rank 1 runs out of memory inside the backward of the replicated candidate's first timed
        # step, in its first block, after the last blocks' gradient buckets were all-reduced: rank 0
        # is then on its way to the next bucket's all-reduce, which rank 1 never enters
        import saturate._search as searching

        real_search, searched, failed = searching.search, [], []

        def search_and_count(*args, **kwargs):
            r = real_search(*args, **kwargs)
            searched.append(1)
            return r

        after = []  # rank 1's steps since ddp's search (the first) ended

        def step_then_fail(model, opt, batch_size):
            if rank == 1 and len(searched) == 1 and not failed:
                after.append(batch_size)
            if len(after) == 2 and not failed:  # the first timed step (the warm-up was the one before)
                failed.append(1)
                block = model.module.transformer.h[0]
                handle = []

                def run_out(module, grad_output):
                    handle[0].remove()
                    torch.empty(budget, dtype=torch.uint8)  # more than this rank's whole budget

                handle.append(block.register_full_backward_pre_hook(run_out))
            step(model, opt, batch_size)

        searching.search = search_and_count
        plan = saturate.shard_plan(make_model, make_optimizer, step_then_fail, memory_budget=budget,
                                   strategies=["ddp", "fsdp_no_reshard"], checkpointing=False, device="cpu")
        write_plan_and_leave(out_dir, rank, plan, failed=len(failed))
    elif mode == "plan":
        global_batch = int(sys.argv[6]) or None
        strategies = sys.argv[7].split(",") if len(sys.argv) > 7 else None
        checkpointing = {"auto": "auto", "0": False, "1": True}[sys.argv[8] if len(sys.argv) > 8 else "auto"]
        plan = saturate.shard_plan(make_model, make_optimizer, step, memory_budget=budget, global_batch=global_batch,
                                   strategies=strategies, checkpointing=checkpointing, device="cpu",
                                   mixed_precision=MIXED_PRECISION)
        with open(os.path.join(out_dir, f"plan{rank}.json"), "w") as f:
            one, h200, here = plan.predict(1), plan.predict(2, "h200"), plan.predict(2)
            json.dump({"plan": json.loads(plan.to_json()), "text": str(plan),
                       "predict1": [p.__dict__ for p in one.candidates],
                       "predict_here": [p.__dict__ | {"peak_at_micro": p.peak_bytes(c.micro_batch)}
                                        for p, c in zip(here.candidates, plan.candidates)],
                       "predict_h200": [p.__dict__ for p in h200.candidates], "predict_text": str(h200)}, f)
        # 10 steps under the plan on the same global batches as one process without sharding: in
        # float32 under the budget, and in float64 (the same arithmetic: equal to rounding)
        gen = torch.Generator().manual_seed(7)
        batches = [torch.randint(0, VOCAB, (plan.global_batch, SEQ), generator=gen) for _ in range(10)]
        per_rank = plan.micro_batch * plan.accumulation
        rows = slice(rank * per_rank, (rank + 1) * per_rank)
        diffs = {}
        for dtype in (torch.float32, torch.float64):
            with saturate.cpu_memory_budget(budget if dtype == torch.float32 else 1 << 40):
                model = plan.apply(make_model().to(dtype))
                opt = make_optimizer(model.parameters())
                train(model, opt, batches, plan.micro_batch, plan.accumulation, rows)
            got = whole(model)
            stepped = sum(1 for g in opt.param_groups for p in g["params"] if p in opt.state)
            del model, opt
            if rank == 0:
                # one process, two ways: one backward over each whole global batch, and the same
                # micro-batches accumulated (the ranks' matmul shapes: only the sum's order differs)
                ref = make_model().to(dtype)
                ref_opt = make_optimizer(ref.parameters())
                train(ref, ref_opt, batches, plan.global_batch, 1, slice(0, plan.global_batch))
                acc = make_model().to(dtype)
                acc_opt = make_optimizer(acc.parameters())
                train(acc, acc_opt, batches, plan.micro_batch, world * plan.accumulation, slice(0, plan.global_batch))
                start = make_model().to(dtype)
                diffs[str(dtype)] = {
                    "max_abs_diff": max((a - b).abs().max().item() for a, b in zip(got, ref.parameters())),
                    "max_abs_diff_accumulated": max((a - b).abs().max().item()
                                                    for a, b in zip(got, acc.parameters())),
                    # one process against itself: the same batches, one backward each or the
                    # micro-batches accumulated (only the sums' order differs): the dtype's own floor
                    "reference_rounding": max((a - b).abs().max().item()
                                              for a, b in zip(ref.parameters(), acc.parameters())),
                    "moved": max((a - b).abs().max().item() for a, b in zip(ref.parameters(), start.parameters())),
                    "stepped": stepped, "weights": len(list(ref.parameters()))}
        if rank == 0:
            with open(os.path.join(out_dir, "train.json"), "w") as f:
                json.dump(diffs, f)
        dist.barrier()
        dist.destroy_process_group()
        # the results are written: leave without the interpreter's teardown, where a rank aborted
        # now and then with "terminate called without an active exception" (a C++ thread object
        # destroyed unjoined at exit; not understood, seen in a fresh-clone CI run)
        os._exit(0)
    else:
        strategy, ckpt, batch = sys.argv[6], sys.argv[7] == "1", int(sys.argv[8])
        from saturate._shard_plan import _wrap, find_units

        def steps():
            with saturate.cpu_memory_budget(budget):
                model = _wrap(make_model(), strategy, ckpt, find_units(make_model()), MIXED_PRECISION, "cpu")
                opt = make_optimizer(model.parameters())
                for _ in range(3):
                    step(model, opt, batch)

        run_fresh(os.path.join(out_dir, f"fresh{rank}.txt"), steps)
