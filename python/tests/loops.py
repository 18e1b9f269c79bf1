"""Plain-Python training loops the tests search on, and a fresh-process check of an answer.

Each loop is built by a function of its own so that a fresh process can build the same one:
run_fresh runs STEPS steps at BATCH under a CPU budget of BUDGET bytes in a new child of the fork
server (fresh.py), as `python loops.py NAME BUDGET BATCH STEPS` does (it prints "ok" or "oom")."""
from __future__ import annotations

import sys

import fresh
import saturate
import torch
import torch.nn as nn
import torch.nn.functional as F


class TwoInputNet(nn.Module):
    """An image and a table of numbers in, a class and a regression value out."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.table = nn.Sequential(nn.Linear(20, 64), nn.ReLU())
        self.head = nn.Linear(32 * 16 + 64, 10 + 1)

    def forward(self, image, table):
        z = torch.cat([self.conv(image).flatten(1), self.table(table)], dim=1)
        out = self.head(z)
        return out[:, :10], out[:, 10]


def two_input_loss(logits, value, labels, target):
    """A custom loss: label-smoothed cross-entropy plus a Huber term on the regression head."""
    return F.cross_entropy(logits, labels, label_smoothing=0.1) + 0.5 * F.smooth_l1_loss(value, target)


def make_two_input():
    torch.manual_seed(0)
    model = TwoInputNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def forward_loss(batch_size):
        image = torch.randn(batch_size, 1, 28, 28)
        table = torch.randn(batch_size, 20)
        labels = torch.randint(0, 10, (batch_size,))
        target = torch.randn(batch_size)
        with saturate.phase("forward"):
            logits, value = model(image, table)
            return two_input_loss(logits, value, labels, target)

    def step(batch_size):
        loss = forward_loss(batch_size)
        with saturate.phase("backward"):
            loss.backward()
        with saturate.phase("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    step.forward_loss = forward_loss
    return model, opt, step


def make_resnet():
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def forward_loss(batch_size):
        x = torch.randn(batch_size, 3, 32, 32)
        y = torch.randint(0, 10, (batch_size,))
        return loss_fn(model(x), y)

    def step(batch_size):
        loss = forward_loss(batch_size)
        loss.backward()
        opt.step()
        opt.zero_grad()

    step.forward_loss = forward_loss
    return model, opt, step


def make_mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters())

    def forward_loss(batch_size):
        x = torch.randn(batch_size, 1, 28, 28)
        y = torch.randint(0, 10, (batch_size,))
        return F.cross_entropy(model(x), y)

    def step(batch_size):
        forward_loss(batch_size).backward()
        opt.step()
        opt.zero_grad()

    step.forward_loss = forward_loss
    return model, opt, step


LOOPS = {"two_input": make_two_input, "resnet18": make_resnet, "mlp": make_mlp}


def steps_under_budget(name: str, budget_bytes: int, batch: int, steps: int, mode: str = "train") -> str:
    """'ok' or 'oom': `steps` steps of loop `name` at `batch` in this process under the budget (mode
    'eval': its forward_loss under torch.no_grad() with the model in eval mode)."""
    model, _, step = LOOPS[name]()
    if mode == "eval":
        model.eval()
        train_step = step

        def step(b):
            with torch.no_grad():
                train_step.forward_loss(b)
    try:
        with saturate.cpu_memory_budget(budget_bytes):
            for _ in range(steps):
                step(batch)
        return "ok"
    except torch.OutOfMemoryError:
        return "oom"


def run_fresh(name: str, budget_bytes: int, batch: int, steps: int, mode: str = "train") -> str:
    """steps_under_budget in a new process (fresh.py): 'ok' or 'oom'."""
    return fresh.call("loops", "steps_under_budget", name, budget_bytes, batch, steps, mode, timeout=600)


if __name__ == "__main__":
    print(steps_under_budget(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                             sys.argv[5] if len(sys.argv) > 5 else "train"))
