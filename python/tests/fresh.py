"""Fresh processes without paying for the imports each time (issue 46 item 8). A fork server that
has imported torch, saturate, timm and transformers, and run nothing else, forks a new child for
each call: the child starts as a new `python3 worker.py` starts after its imports (no tensor, no
thread pool started, the counting allocator not in charge), so a check in it is as fresh as one in
a new interpreter, 3-8 s sooner (the imports: torch and saturate 3.2 s, timm 2.8 s more,
transformers 5.5 s more, measured here).

    fresh.call("archs", "check", name, precision, budget, batch)   # archs.check(...) in a new child
    fresh.ranks("shard_plan_lm.py", "plan", out_dir, ..., nproc=2)   # the script on 2 Gloo ranks

call: the child's value comes back (it must pickle); an exception in it is an AssertionError here
with the child's traceback, a child that dies (a signal, os._exit) one naming its exit code, and
one that runs past `timeout` is killed and named. ranks: a worker script run as `__main__` in
`nproc` children with the environment torchrun gives its workers (RANK, WORLD_SIZE, the local
pair, MASTER_ADDR and MASTER_PORT: the process group rendezvouses through rank 0's store, not
torchrun's agent) and one thread each (torchrun's OMP_NUM_THREADS=1); like torchrun, a rank that
fails stops the others, and the result is a subprocess.CompletedProcess (return code, the ranks'
stdout and stderr, rank by rank)."""
import importlib
import multiprocessing
import os
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import wait

_context = multiprocessing.get_context("forkserver")
# what every worker imports; a module missing here is imported in the child (slower, still fresh)
_context.set_forkserver_preload(["torch", "torch.nn.functional", "saturate", "timm", "transformers"])


def _inherit(environment):
    """The caller's environment now, as a new process started now gets it (the server has the one
    of its own start; what the imports read from it was read there)."""
    os.environ.clear()
    os.environ.update(environment)


def _run(conn, module, function, args, environment):
    _inherit(environment)
    try:
        result = ("returned", getattr(importlib.import_module(module), function)(*args))
    except BaseException:  # noqa: BLE001 - every failure goes back to the test, named
        result = ("raised", traceback.format_exc())
    conn.send(result)
    conn.close()


def call(module: str, function: str, *args, timeout: float = 900):
    """`module.function(*args)` (a module beside this file) in a new child of the fork server."""
    receive, send = _context.Pipe(duplex=False)
    child = _context.Process(target=_run, args=(send, module, function, args, dict(os.environ)),
                             name=f"{module}.{function}")
    child.start()
    send.close()
    what = f"{module}.{function}{args!r}"
    try:
        if not receive.poll(timeout):
            child.kill()
            child.join()
            raise AssertionError(f"{what} ran past {timeout} s in its fresh process: killed")
        try:
            kind, value = receive.recv()
        except EOFError:
            child.join()
            raise AssertionError(f"{what} died in its fresh process (exit code {child.exitcode})") from None
    finally:
        receive.close()
    child.join()
    if kind == "raised":
        raise AssertionError(f"{what} raised in its fresh process:\n{value}")
    return value


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(script, args, env, out_path, err_path):
    _inherit(env)
    import torch
    torch.set_num_threads(1)  # OMP_NUM_THREADS=1 is read when the thread pool starts: in the server
    for fd, path in ((1, out_path), (2, err_path)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.argv = [script, *map(str, args)]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")


def ranks(script: str, *args, nproc: int = 2, timeout: float = 900) -> subprocess.CompletedProcess:
    """`script` (beside this file) as `__main__` on `nproc` Gloo ranks, each a new child of the fork
    server; subprocess.TimeoutExpired past `timeout` (every rank killed)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), script)
    logs = tempfile.mkdtemp(prefix="saturate_ranks_")
    try:
        return _run_ranks(script, path, args, nproc, timeout, logs)
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def _run_ranks(script, path, args, nproc, timeout, logs):
    port, children = _free_port(), []
    for r in range(nproc):
        env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(nproc),
               "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        child = _context.Process(target=_rank, name=f"{script} rank {r}",
                                 args=(path, args, env, os.path.join(logs, f"out{r}"), os.path.join(logs, f"err{r}")))
        child.start()
        children.append(child)
    deadline, pending, failed = time.monotonic() + timeout, list(children), None
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            for child in pending:
                child.kill()
                child.join()
            raise subprocess.TimeoutExpired([script, *map(str, args)], timeout)
        for child in [c for c in pending if c.sentinel in wait([c.sentinel for c in pending], timeout=left)]:
            child.join()
            pending.remove(child)
            if child.exitcode != 0 and failed is None:
                failed = child.exitcode
                for other in pending:  # as torchrun's agent does: the group fails together
                    os.kill(other.pid, signal.SIGTERM)
    read = []
    for r in range(nproc):
        with open(os.path.join(logs, f"out{r}")) as out, open(os.path.join(logs, f"err{r}")) as err:
            read.append((out.read(), err.read()))
    return subprocess.CompletedProcess([script, *map(str, args)], 0 if failed is None else failed or 1,
                                       "".join(o for o, _ in read),
                                       "".join(f"[rank {r}]\n{e}" for r, (_, e) in enumerate(read)))
