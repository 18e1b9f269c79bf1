"""A corpus with a long tail of lengths and a GPT-style model, as a user brings them (issue #26).

The corpus: documents of Zipf-distributed words (so there is something to learn), their word
counts log-normal, so most documents are short and a few are several times the median: what
real text looks like. Items are byte-level token ids; `pad_collate` pads a batch to its longest
(labels -100 on the padding), so a batch costs its size x its longest document."""
from __future__ import annotations

import math
import random
from typing import Dict, List

import saturate  # noqa: F401
import torch
import torch.nn as nn
import torch.nn.functional as F

MiB = 1 << 20


def make_corpus(n_docs: int = 1200, seed: int = 0, max_len: int = 256, outliers: int = 4) -> List[bytes]:
    """Most documents short (log-normal word counts, under 160 bytes), `outliers` of them long
    (230 bytes and more): the tail a loader meets a few times an epoch and the first batches miss."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 7))) for _ in range(300)]
    weights = [1.0 / (k + 1) for k in range(len(words))]
    long_ones = set(rng.sample(range(n_docs), outliers))
    docs = []
    for i in range(n_docs):
        if i in long_ones:
            text = ""
            while len(text) < 230:
                text += " ".join(rng.choices(words, weights, k=8)) + ". "
        else:
            n_words = max(2, int(math.exp(rng.gauss(math.log(9), 0.45))))
            text = (" ".join(rng.choices(words, weights, k=n_words)) + ".")[:160]
        docs.append(text.encode()[: max_len + 1])
    return docs


class TextDataset(torch.utils.data.Dataset):
    def __init__(self, docs: List[bytes]):
        self.docs = [torch.tensor(list(d), dtype=torch.long) for d in docs if len(d) >= 2]

    def __len__(self) -> int:
        return len(self.docs)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.docs[i]


def pad_collate(items: List[torch.Tensor]) -> Dict[str, torch.Tensor]:
    """ids [B, L-1] and next-token labels [B, L-1], L the batch's longest; labels -100 on padding."""
    longest = max(len(t) for t in items)
    ids = torch.zeros(len(items), longest - 1, dtype=torch.long)
    labels = torch.full((len(items), longest - 1), -100, dtype=torch.long)
    for row, t in enumerate(items):
        ids[row, : len(t) - 1] = t[:-1]
        labels[row, : len(t) - 1] = t[1:]
    return {"ids": ids, "labels": labels}


class TinyGPT(nn.Module):
    """Token and position embeddings, pre-norm causal transformer blocks, a vocabulary head."""

    def __init__(self, vocab: int = 256, d_model: int = 64, heads: int = 4, layers: int = 2, max_len: int = 320):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        block = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(length)
        h = self.tok(ids) + self.pos(torch.arange(length))
        return self.head(self.blocks(h, mask=mask, is_causal=True))


def token_loss(model: nn.Module, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean over the batch's real tokens (padding ignored)."""
    logits = model(batch["ids"])
    return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)


def real_tokens(batch: Dict[str, torch.Tensor]) -> int:
    return int((batch["labels"] != -100).sum())


def make_model(seed: int = 0, d_model: int = 64, layers: int = 2):
    torch.manual_seed(seed)
    model = TinyGPT(d_model=d_model, layers=layers)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    return model, opt


def train_step(model, opt, batch) -> float:
    loss = token_loss(model, batch)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())


def run_epoch(model, opt, loader, guard=None) -> Dict[str, float]:
    """One epoch; an out-of-memory is counted (and the batch skipped) unless a guard recovers it."""
    ooms, steps, samples, tokens, loss_tokens = 0, 0, 0, 0, 0.0
    for batch in loader:
        try:
            loss = guard.step(batch) if guard is not None else train_step(model, opt, batch)
        except torch.OutOfMemoryError as error:
            saturate.release_exception(error)
            del error
            opt.zero_grad(set_to_none=True)
            ooms += 1
            continue
        steps += 1
        samples += batch["ids"].shape[0]
        n = real_tokens(batch)
        tokens += n
        loss_tokens += loss * n
    return {"ooms": ooms, "steps": steps, "samples": samples, "tokens": tokens,
            "loss_per_token": loss_tokens / max(1, tokens)}


def worst_batch(ds: TextDataset, batch: int) -> Dict[str, torch.Tensor]:
    """The batch saturate.search(data=ds) measures at `batch`: the costliest items, from the library's order."""
    order = saturate._C.WorstCaseOrder([saturate.item_size(ds[i]) for i in range(len(ds))], "data")
    return pad_collate([ds[i] for i in order.worst_items(batch)])


def steps_under_budget(budget: int, batch: int, mode: str = "train", d_model: int = 64) -> str:
    """Two steps of the worst batch of `batch` under the budget, on one thread: "ok" or "oom". Modes:
    "eval" the evaluation step (no_grad, eval mode) on its own; "eval-training" after a training step
    (AdamW's state alive, gradients set to None); "eval-training-grads" with the step's gradients
    alive too. `d_model`: the model's width (make_model)."""
    torch.set_num_threads(1)
    evaluate = mode.startswith("eval")
    ds = TextDataset(make_corpus())
    model, opt = make_model(d_model=d_model)
    with saturate.cpu_memory_budget(budget):
        try:
            if mode.startswith("eval-training"):
                token_loss(model, worst_batch(ds, 2)).backward()
                opt.step()
                if mode == "eval-training":
                    opt.zero_grad(set_to_none=True)
            for _ in range(2):
                if evaluate:
                    model.eval()
                    with torch.no_grad():
                        token_loss(model, worst_batch(ds, batch))
                else:
                    train_step(model, opt, worst_batch(ds, batch))
            return "ok"
        except torch.OutOfMemoryError:
            return "oom"


if __name__ == "__main__":
    # a fresh process: `python textlm.py BUDGET_BYTES BATCH [MODE [D_MODEL]]` prints steps_under_budget's answer
    import sys

    print(steps_under_budget(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:4], *map(int, sys.argv[4:5])))
