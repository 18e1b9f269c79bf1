"""Real architectures (timm and transformers, built from configs with random weights, no downloads)
searched by saturate.search and checked in fresh processes (test_architectures.py). Each call is a
process of its own, so that the search and the checks hold the same bytes besides the step: the
model, its optimizer and the imports.

    python3 archs.py search MODEL PRECISION   # prints "BUDGET MAX EXACT" (budget: weights + HEADROOM_MIB)
    python3 archs.py step MODEL PRECISION BUDGET BATCH       # prints "ok" or "oom"
"""
import sys

import torch
import torch.nn.functional as F

import saturate

IMAGE = 32  # a small image size: every model here takes 32x32 (ViT with 4x4 patches)
# CPU budget beyond the model's weights: its gradients and AdamW state and a few dozen samples
HEADROOM_MIB = {"vit_tiny_patch16_224": 112, "convnext_atto": 72, "efficientnet_b0": 104, "gpt2": 48, "bert": 48}


def build(name: str):
    """(model, optimizer, make_batch(batch) -> (inputs, targets), loss(out, targets))."""
    torch.manual_seed(0)
    if name in ("vit_tiny_patch16_224", "convnext_atto", "efficientnet_b0"):
        import timm
        kwargs = dict(img_size=IMAGE, patch_size=4) if name.startswith("vit") else {}
        model = timm.create_model(name, pretrained=False, num_classes=10, **kwargs)
        g = torch.Generator().manual_seed(1)

        def batch(n):
            return torch.randn(n, 3, IMAGE, IMAGE, generator=g), torch.randint(0, 10, (n,), generator=g)

        def loss(out, y):
            return F.cross_entropy(out, y)
    elif name in ("gpt2", "bert"):
        import hf_trainer
        model = hf_trainer.model_of(name)
        g = torch.Generator().manual_seed(1)

        def batch(n):
            ids = torch.randint(0, hf_trainer.VOCAB, (n, hf_trainer.SEQ), generator=g)
            return ids, (ids if name == "gpt2" else torch.randint(0, 3, (n,), generator=g))

        def loss(out, y):
            return out.loss
    else:
        raise ValueError(name)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, optimizer, batch, loss


def step_of(name: str, precision: str):
    model, optimizer, batch, loss = build(name)
    hf = name in ("gpt2", "bert")

    def step(n: int) -> None:
        x, y = batch(n)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = model(input_ids=x, labels=y) if hf else model(x)
            value = loss(out, y)
        value.float().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return model, optimizer, step


def search(name: str, precision: str) -> str:
    model, optimizer, step = step_of(name, precision)
    budget = saturate._memory.cpu_allocated_bytes() + (HEADROOM_MIB[name] << 20)
    r = saturate.search(step, device="cpu", memory_budget=budget, model=model, optimizer=optimizer)
    if r.error:
        raise SystemExit(f"search failed: {r.error}\n{r}")
    return f"{budget} {r.max_batch} {int(r.max_batch_exact)}"


def check(name: str, precision: str, budget: int, batch: int) -> str:
    """Three steps at `batch` (the search's warm-up and timed steps) under `budget`."""
    model, optimizer, step = step_of(name, precision)
    try:
        with saturate.cpu_memory_budget(budget):
            for _ in range(3):
                step(batch)
        return "ok"
    except torch.OutOfMemoryError:
        return "oom"


if __name__ == "__main__":
    what, name, precision = sys.argv[1:4]
    if what == "search":
        print(search(name, precision))
    else:
        print(check(name, precision, int(sys.argv[4]), int(sys.argv[5])))
