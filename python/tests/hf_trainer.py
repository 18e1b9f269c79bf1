"""Hugging Face Trainers on models built from configs (random weights, no downloads) for the
drop-in's tests (test_transformers.py). Every sample has the same length, so every batch is the
worst one and a fresh process's `trainer.train()` at a batch checks the search's answer for it.

    python3 hf_trainer.py fresh MODEL BATCH BUDGET_BYTES   # prints "ok" or "oom"
    torchrun --nproc-per-node 2 hf_trainer.py ranks OUT_DIR BUDGET0 BUDGET1
    torchrun --nproc-per-node 2 hf_trainer.py fresh_ranks OUT_DIR BUDGET0 BUDGET1 BATCH
"""
import sys

import torch

SEQ, VOCAB = 64, 1000


def model_of(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=VOCAB, n_positions=SEQ,
                                          bos_token_id=0, eos_token_id=0))
    if name == "bert":
        from transformers import BertConfig, BertForSequenceClassification
        return BertForSequenceClassification(BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                                        intermediate_size=128, vocab_size=VOCAB,
                                                        max_position_embeddings=SEQ, num_labels=3))
    raise ValueError(name)


def data_of(name: str, n: int, seed: int = 0) -> list:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)
    if name == "gpt2":
        return [{"input_ids": row.tolist()} for row in ids]
    labels = torch.randint(0, 3, (n,), generator=g)
    return [{"input_ids": row.tolist(), "label": int(y)} for row, y in zip(ids, labels)]


def collate(items: list) -> dict:
    ids = torch.tensor([it["input_ids"] for it in items])
    if "label" in items[0]:
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "labels": torch.tensor([it["label"] for it in items])}
    return {"input_ids": ids, "labels": ids.clone()}


def count_predictions(prediction) -> dict:
    """A compute_metrics: evaluate() then keeps every batch's logits and labels for it."""
    return {"predictions": len(prediction.predictions)}


def trainer_of(name: str, out_dir: str, batch: int, accumulation: int = 1, eval_batch: int = 8, evaluate=False,
               auto_find: bool = False, max_steps: int = 1, eval_samples: int = 1024, metrics: bool = False,
               eval_accumulation_steps=None):
    from transformers import Trainer, TrainingArguments
    args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=batch,
                             gradient_accumulation_steps=accumulation, per_device_eval_batch_size=eval_batch,
                             use_cpu=True, report_to=[], max_steps=max_steps, save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, auto_find_batch_size=auto_find,
                             eval_accumulation_steps=eval_accumulation_steps)
    return Trainer(model=model_of(name), args=args, train_dataset=data_of(name, 512),
                   eval_dataset=data_of(name, eval_samples, seed=1) if evaluate else None, data_collator=collate,
                   compute_metrics=count_predictions if metrics else None)


def fresh(name: str, batch: int, budget: int) -> str:
    """trainer.train() for 2 steps at `batch` under `budget` bytes: "ok" or "oom"."""
    import saturate
    trainer = trainer_of(name, "/tmp/saturate_hf_fresh", batch, max_steps=2)
    try:
        with saturate.cpu_memory_budget(budget):
            trainer.train()
        return "ok"
    except torch.OutOfMemoryError:
        return "oom"




def fresh_eval(name: str, eval_batch: int, budget: int, samples: int, accumulation=None) -> str:
    """trainer.evaluate() with compute_metrics over `samples` at `eval_batch` under `budget` bytes."""
    import saturate
    trainer = trainer_of(name, "/tmp/saturate_hf_fresh", 4, eval_batch=eval_batch, evaluate=True,
                         eval_samples=samples, metrics=True, eval_accumulation_steps=accumulation)
    try:
        with saturate.cpu_memory_budget(budget):
            assert trainer.evaluate()["eval_predictions"] == samples
        return "ok"
    except torch.OutOfMemoryError:
        return "oom"


def ranks(out_dir: str, budget0: int, budget1: int) -> None:
    """Under torchrun (2 Gloo ranks, unequal CPU budgets): find_batch_size on every rank, each in its
    own budget; writes this rank's answer and its own max to out_dir/rank{R}.txt, then trains one
    step at the answer (DDP over Gloo) under the same budget."""
    import os
    import json
    import saturate
    from saturate.transformers import find_batch_size
    rank = int(os.environ["RANK"])
    trainer = trainer_of("gpt2", os.path.join(out_dir, "out"), batch=4, accumulation=16)
    budget = budget0 if rank == 0 else budget1
    with saturate.cpu_memory_budget(budget):
        divisor = find_batch_size(trainer)  # the default: the divisors of 64 only
        found = find_batch_size(trainer, use="max")
        trainer.train()
    own = found.train.data.get("ranks") or []
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"micro": found.per_device_train_batch_size, "accumulation": found.gradient_accumulation_steps,
                   "max": found.train.max_batch, "ranks": own, "steps": trainer.state.global_step,
                   "divisor": [divisor.per_device_train_batch_size, divisor.gradient_accumulation_steps,
                               divisor.seen_not_to_fit]}, f)
    os._exit(0)  # past Gloo's teardown (the other rank scripts do the same)


def fresh_ranks(out_dir: str, budget0: int, budget1: int, batch: int) -> None:
    """Under torchrun: the Trainer's own train() (DDP over Gloo) for 2 steps at `batch` a device,
    each rank in its own budget, in new processes: out_dir/fresh{R}.txt is "ok", "oom" or
    "peer-gone"."""
    import os
    import saturate
    from ranks_util import run_fresh
    rank = int(os.environ["RANK"])
    trainer = trainer_of("gpt2", os.path.join(out_dir, "out"), batch=batch, max_steps=2)

    def steps():
        with saturate.cpu_memory_budget(budget0 if rank == 0 else budget1):
            trainer.train()

    run_fresh(os.path.join(out_dir, f"fresh{rank}.txt"), steps)


if __name__ == "__main__":
    if sys.argv[1] == "fresh":
        print(fresh(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    elif sys.argv[1] == "fresh_eval":
        print(fresh_eval(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                         int(sys.argv[6]) if len(sys.argv) > 6 else None))
    elif sys.argv[1] == "ranks":
        ranks(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "fresh_ranks":
        fresh_ranks(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
