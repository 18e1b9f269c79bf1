"""A user's own model sharded with FSDP2 over Gloo ranks (issue 42), run by test_shard_search.py
on ranks with torchrun's environment (fresh.ranks; `torchrun` runs it the same way). A small
transformer language model (PyTorch's own TransformerEncoderLayer blocks, causal), `fully_shard`
on each block and the root, AdamW; each rank a CPU device of its own byte budget.

    shard_lm.py search OUT_DIR BUDGET_RANK0 BUDGET_RANK1 TIMEOUT_S
        saturate.search(step, ranks="auto") on every rank: OUT_DIR/rank<R>.json
    shard_lm.py fresh OUT_DIR BUDGET_RANK0 BUDGET_RANK1 TIMEOUT_S BATCH STEPS [STRATEGY CHECKPOINTING]
        STEPS plain steps at BATCH under each rank's budget, no saturate in the step (the model
        wrapped as the user does, or as shard_plan's STRATEGY wraps it): each rank
        writes "ok", "oom" or "peer-gone" (another rank left: it ran out of memory) to
        OUT_DIR/fresh<R>.txt. A rank that runs out of memory writes it and exits at once, so
        that its peers' collectives fail at once instead of waiting for the timeout.
    shard_lm.py accelerate OUT_DIR BUDGET_RANK0 BUDGET_RANK1 TIMEOUT_S START_BATCH
        Accelerate's find_executable_batch_size on the same step: OUT_DIR/accelerate<R>.json
    shard_lm.py plan OUT_DIR BUDGET_RANK0 BUDGET_RANK1 TIMEOUT_S STRATEGIES CHECKPOINTING
        saturate.shard_plan on the same model made unwrapped (STRATEGIES a,b or all; CHECKPOINTING
        auto, 0 or 1): OUT_DIR/plan<R>.json
    shard_lm.py guard OUT_DIR BUDGET_RANK0 BUDGET_RANK1 TIMEOUT_S ROWS STEPS
        saturate.OomGuard(model=) steps on ROWS items a rank (SGD): OUT_DIR/guard<R>.json, with
        rank 0's largest weight difference from one process on the same global batches"""
import datetime
import json
import os
import sys

import saturate
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

from ranks_util import run_fresh

VOCAB, WIDTH, HEADS, LAYERS, SEQ = 512, 128, 4, 4, 64


class TinyLM(nn.Module):
    def __init__(self, width=WIDTH, layers=LAYERS, seq=SEQ):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.pos = nn.Parameter(torch.zeros(seq, width))
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(width, HEADS, 4 * width, dropout=0.0,
                                                               batch_first=True, norm_first=True)
                                    for _ in range(layers))
        self.head = nn.Linear(width, VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, ids):
        x = self.embed(ids) + self.pos
        for b in self.blocks:
            x = b(x, src_mask=self.mask, is_causal=True)
        return self.head(x)


def make(optimizer="adamw", shard=True):
    torch.manual_seed(0)
    model = TinyLM()
    if shard:
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
    if optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:  # plain SGD: the guard's test compares weights with one process's, Adam's normalisation apart
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1 + dist.get_rank())

    def step(batch_size):
        ids = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=gen)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, opt, step


if __name__ == "__main__":
    mode, out_dir, b0, b1, timeout_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    rank = dist.get_rank()
    budget = b0 if rank == 0 else b1
    torch.set_num_threads(1)
    if mode == "accelerate":
        # Accelerate's find_executable_batch_size on the same sharded model and budgets, for the
        # side-by-side in docs/sharding.md (bench/shard_vs_accelerate.py): its answer, or its failure
        import time

        from accelerate.utils import find_executable_batch_size

        model, opt, step = make()
        started = time.perf_counter()
        tried = []

        @find_executable_batch_size(starting_batch_size=int(sys.argv[6]))
        def run(batch_size):
            tried.append(batch_size)
            for _ in range(3):
                step(batch_size)
            return batch_size

        try:
            with saturate.cpu_memory_budget(budget):
                answer, error = run(), ""
        except Exception as e:  # noqa: BLE001 - its failure is the measurement
            answer, error = 0, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        with open(os.path.join(out_dir, f"accelerate{rank}.json"), "w") as f:
            json.dump({"answer": answer, "error": error, "tried": tried,
                       "seconds": time.perf_counter() - started}, f)
        os._exit(0)  # a rank left in a broken group: no barrier
    elif mode == "guard":
        # OomGuard on every rank, each rank its rows of a global batch too large for the smaller
        # rank: the ranks back off together; the weights are then one process's on the same batches
        rows, steps = int(sys.argv[6]), int(sys.argv[7])
        model, opt, _ = make("sgd")

        def loss_fn(ids):
            return F.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1))

        guard = saturate.OomGuard(loss_fn, opt, model=model)
        gen = torch.Generator().manual_seed(11)
        batches = [torch.randint(0, VOCAB, (2 * rows, SEQ + 1), generator=gen) for _ in range(steps)]
        losses, micro = [], []
        with saturate.cpu_memory_budget(budget):
            for ids in batches:
                losses.append(guard.step(ids[rank * rows:(rank + 1) * rows]))
                micro.append(guard.micro_batch)
        got = [p.full_tensor() for p in model.parameters()]
        out = {"micro": micro, "losses": losses, "backoffs": [b.__dict__ for b in guard.backoffs],
               "points": guard._sync.points if guard._sync else 0}
        if rank == 0:
            ref, ref_opt, _ = make("sgd", shard=False)
            for ids in batches:
                F.cross_entropy(ref(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1)).backward()
                ref_opt.step()
                ref_opt.zero_grad(set_to_none=True)
            out["max_abs_diff"] = max((a - b).abs().max().item() for a, b in zip(got, ref.parameters()))
            out["moved"] = max((a - b).abs().max().item() for a, b in zip(ref.parameters(), make("sgd", False)[0].parameters()))
        with open(os.path.join(out_dir, f"guard{rank}.json"), "w") as f:
            json.dump(out, f)
        dist.barrier()
        dist.destroy_process_group()
        # the results are written: leave without the interpreter's teardown, where a rank aborted
        # now and then with "terminate called without an active exception" (a C++ thread object
        # destroyed unjoined at exit; not understood, seen in a fresh-clone CI run)
        os._exit(0)
    elif mode == "plan":
        # saturate chooses the wrapping itself (bench/shard_vs_accelerate.py): the same model and
        # step, made unwrapped
        import time

        def make_model():
            torch.manual_seed(0)
            return TinyLM()

        gen = torch.Generator().manual_seed(1 + rank)

        def plan_step(model, opt, batch_size):
            ids = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=gen)
            F.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        strategies = None if sys.argv[6] == "all" else sys.argv[6].split(",")
        checkpointing = {"auto": "auto", "0": False, "1": True}[sys.argv[7]]
        started = time.perf_counter()
        plan = saturate.shard_plan(make_model, lambda params: torch.optim.AdamW(params, lr=1e-3), plan_step,
                                   memory_budget=budget, strategies=strategies, checkpointing=checkpointing,
                                   device="cpu")
        with open(os.path.join(out_dir, f"plan{rank}.json"), "w") as f:
            json.dump({"plan": json.loads(plan.to_json()), "text": str(plan),
                       "seconds": time.perf_counter() - started}, f)
        dist.barrier()
        dist.destroy_process_group()
        os._exit(0)  # as below: no interpreter teardown
    elif mode == "search":
        model, opt, step = make()
        r = saturate.search(step, device="cpu", memory_budget=budget, ranks="auto")
        # the process group and the model train on afterwards: a few steps at the answer, the
        # weights the same on every rank (FSDP's shards gathered whole)
        trained = ""
        if r.batch > 0:
            with saturate.cpu_memory_budget(budget):
                for _ in range(3):
                    step(r.batch)
            whole = [p.full_tensor().sum().item() for p in model.parameters()]
            trained = f"{sum(whole):.6f}"
        # every weight the optimizer holds was stepped (has state): a step after a failed trial once
        # left FSDP's units in a backward state, and their gradients never reached the optimizer
        params = [p for g in opt.param_groups for p in g["params"]]
        stepped = sum(1 for p in params if p in opt.state)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump({"data": r.data, "text": str(r), "error": r.error, "trained": trained, "stepped": stepped,
                       "weights": len(params)}, f)
        dist.barrier()
        dist.destroy_process_group()
        # the results are written: leave without the interpreter's teardown, where a rank aborted
        # now and then with "terminate called without an active exception" (a C++ thread object
        # destroyed unjoined at exit; not understood, seen in a fresh-clone CI run)
        os._exit(0)
    else:
        batch, steps = int(sys.argv[6]), int(sys.argv[7])

        def fresh_steps():
            with saturate.cpu_memory_budget(budget):
                model, opt, step = make(shard=len(sys.argv) <= 8)
                if len(sys.argv) > 8:
                    from saturate._shard_plan import _wrap, find_units

                    model = _wrap(model, sys.argv[8], sys.argv[9] == "1", find_units(model), None, "cpu")
                    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
                    gen = torch.Generator().manual_seed(1 + rank)

                    def step(batch_size):
                        ids = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=gen)
                        F.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1)).backward()
                        opt.step()
                        opt.zero_grad(set_to_none=True)
                for _ in range(steps):
                    step(batch)

        run_fresh(os.path.join(out_dir, f"fresh{rank}.txt"), fresh_steps)
