"""saturate.search on the user's own step under torchrun (seed M8): ranks with different budgets
run the same trials and agree on one exact answer, the smallest rank's, each reporting its own."""
import json
import os
import subprocess
import sys

from loops import run_fresh

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def test_ranks_with_different_budgets_agree_on_the_smallest_ranks_exact_max(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          os.path.join(HERE, "ranks_search.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=900, env=env)
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
    assert "ranks" in results[0]["text"] and "torch.distributed gloo" in results[0]["text"]
    common = d0["max_batch"]
    assert run_fresh("mlp", 40 * MiB, common, 3) == "ok"
    assert run_fresh("mlp", 40 * MiB, common + 1, 3) == "oom"
    assert run_fresh("mlp", 64 * MiB, ranks[0]["max_batch"] + 1, 3) == "oom"
