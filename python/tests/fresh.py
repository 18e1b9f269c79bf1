"""Fresh processes without paying for the imports each time (issue 46 item 8). A fork server that
has imported torch, saturate, timm and transformers, and run nothing else, forks a new child for
each call: the child starts as a new `python3 worker.py` starts after its imports (no tensor, no
thread pool started, the counting allocator not in charge), so a check in it is as fresh as one in
a new interpreter, 3-8 s sooner (the imports: torch and saturate 3.2 s, timm 2.8 s more,
transformers 5.5 s more, measured here).

    fresh.call("archs", "check", name, precision, budget, batch)   # archs.check(...) in a new child

The child's value comes back (it must pickle); an exception in it is an AssertionError here with
the child's traceback, a child that dies (a signal, os._exit) one naming its exit code, and one
that runs past `timeout` is killed and named."""
import importlib
import multiprocessing
import traceback

_context = multiprocessing.get_context("forkserver")
# what every worker imports; a module missing here is imported in the child (slower, still fresh)
_context.set_forkserver_preload(["torch", "torch.nn.functional", "saturate", "timm", "transformers"])


def _run(conn, module, function, args):
    try:
        result = ("returned", getattr(importlib.import_module(module), function)(*args))
    except BaseException:  # noqa: BLE001 - every failure goes back to the test, named
        result = ("raised", traceback.format_exc())
    conn.send(result)
    conn.close()


def call(module: str, function: str, *args, timeout: float = 900):
    """`module.function(*args)` (a module beside this file) in a new child of the fork server."""
    receive, send = _context.Pipe(duplex=False)
    child = _context.Process(target=_run, args=(send, module, function, args), name=f"{module}.{function}")
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

