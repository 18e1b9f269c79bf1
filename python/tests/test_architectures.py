"""Real architectures through saturate.search, exact (issue 29): timm's ViT-Tiny (at 32x32, 4x4
patches), ConvNeXt-Atto and EfficientNet-B0, and transformers' GPT-2 and BERT from configs, random
weights, AdamW, fp32 and bf16 autocast, on the CPU under a byte budget. The search runs in a
process of its own and each check in a fresh one (the model, its optimizer and three steps at the
batch, as a trial runs them): the max fits, max + 1 runs out of memory."""
import fresh
import pytest

MODELS = ["vit_tiny_patch16_224", "convnext_atto", "efficientnet_b0", "gpt2", "bert"]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("name", MODELS)
def test_the_max_batch_of_a_real_architecture_is_exact_in_fresh_processes(name, precision):
    budget, max_batch, exact = map(int, fresh.call("archs", "search", name, precision).split())
    assert exact and max_batch >= 2, (budget, max_batch, exact)
    assert fresh.call("archs", "check", name, precision, budget, max_batch) == "ok"
    assert fresh.call("archs", "check", name, precision, budget, max_batch + 1) == "oom"
