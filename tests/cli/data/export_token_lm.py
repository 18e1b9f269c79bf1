# A small token language model, scripted with torch.jit.script and saved to argv[1], for the CLI
# tests of --tokens / --seq-len / --vocab on a TorchScript file: ids [batch, seq] -> logits
# [batch, seq, vocab] (vocab 8192, the CLI's default).
import sys

import torch


class TokenLM(torch.nn.Module):
    def __init__(self, vocab: int, width: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.mix = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        h = h + torch.relu(self.mix(h))
        return self.head(h)


torch.manual_seed(0)
torch.jit.script(TokenLM(8192, 32)).save(sys.argv[1])
