"""Helpers of the sharded tests (issue 42): run a worker under torchrun (or as torchrun would on
ranks forked from the fork server, fresh.py), and the fresh-process check
that each rank's plain steps fit ("ok"), run out of memory ("oom"), or lost a peer that did
("peer-gone")."""
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = ("ok", "oom", "peer-gone")


def torchrun(worker, *args, nproc=2, timeout=900):
    """`worker` (a file beside this one) on `nproc` Gloo ranks, one thread each."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                           os.path.join(HERE, worker), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def ranks(worker, *args, nproc=2, timeout=900):
    """`worker` on `nproc` Gloo ranks forked from the fork server (fresh.py: torchrun's environment
    and one thread each, without torchrun's launcher and each rank's imports: 10-12 s sooner)."""
    import fresh
    return fresh.ranks(worker, *args, nproc=nproc, timeout=timeout)


def fresh_results(tmp_path, worker, *args, nproc=2, mode="fresh"):
    """Every rank's result of a worker's "fresh" mode (or `mode`; its arguments after the mode),
    checked: each rank wrote tmp_path/fresh<R>.txt through run_fresh."""
    for r in range(nproc):
        (tmp_path / f"fresh{r}.txt").unlink(missing_ok=True)
    out = ranks(worker, mode, tmp_path, *args, nproc=nproc)
    results = [(tmp_path / f"fresh{r}.txt").read_text() if (tmp_path / f"fresh{r}.txt").exists() else "none"
               for r in range(nproc)]
    assert all(r in RESULTS for r in results), (results, out.stderr[-3000:])
    return results


def run_fresh(path, steps):
    """In a worker: runs `steps()` and writes this rank's result to `path`, then leaves at once. A rank
    that runs out of memory leaves without waiting, so that its peers' collectives fail now instead
    of at the timeout; why it ran out goes to `path`.why."""
    import torch

    try:
        steps()
        result = "ok"
    except torch.OutOfMemoryError:
        with open(path + ".why", "w") as f:
            f.write(traceback.format_exc())
        result = "oom"
    except Exception as e:  # noqa: BLE001 - the peer left mid-collective
        result = "peer-gone" if "onnection" in str(e) or "closed" in str(e) or "peer" in str(e) else f"error {e}"
    with open(path, "w") as f:
        f.write(result)
    os._exit(0)
