"""Each default of the search is said once (the library's option structs) and every front-end agrees
with it: the command line's help, the Python signatures and docs/python.md (issue 46)."""
import inspect
import os
import re
import subprocess

import saturate

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(os.environ.get("SATURATE_BUILD_DIR", os.path.join(HERE, "..", "..", "build")), "saturate")
DOCS = os.path.join(HERE, "..", "..", "docs", "python.md")

# Python keyword -> (the library's field, the command line's flag)
SEARCH = {
    "target_memory": ("target_fraction", "--target-memory"),
    "strategy": ("strategy", "--strategy"),
    "warmup_steps": ("warmup_steps", "--warmup-steps"),
    "timed_steps": ("measure_steps", "--timed-steps"),
    "objective": ("objective", "--objective"),
    "knee_fraction": ("knee_fraction", "--knee"),
    "noise_steps": ("noise_steps", "--noise-steps"),
}
ZOO = dict(SEARCH, max_batch=("max_batch", "--max-batch"), min_batch=("start_batch", "--start-batch"),
           base_batch=("base_batch", "--base-batch"))
del ZOO["warmup_steps"]  # zoo_search has none: the built-in models' warm-up is the command line's


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return str(a) == str(b)


def _cli_defaults(command: str) -> dict:
    """--flag -> its default as `saturate COMMAND --help` prints it (CLI11: `--flag TYPE=VALUE`)."""
    assert os.path.exists(BINARY), f"no saturate binary at {BINARY}: `make build` builds it beside the package"
    text = subprocess.run([BINARY, command, "--help"], capture_output=True, text=True, timeout=120).stdout
    out = {}
    for m in re.finditer(r"^\s+((?:--[a-z0-9-]+,?)+)\s+[A-Z]+(?::[^=\s]+)?(?:=(\S+))?", text, re.M):
        for flag in m.group(1).split(","):
            out[flag] = m.group(2)  # None: no default printed (unset, the library's 0: chosen for you)
    return out


def _doc_defaults(function: str) -> dict:
    """keyword -> default, from docs/python.md's table row `saturate.FUNCTION(..., key=value, ...)`."""
    text = open(DOCS).read()
    m = re.search(r"`saturate\." + re.escape(function) + r"\(([^`]*)\)`", text)
    out = {}
    if not m:
        return out
    for part in m.group(1).split(","):
        if "=" in part:
            key, value = (x.strip() for x in part.split("=", 1))
            out[key] = value.strip('"\'')
    return out


def test_the_searchs_defaults_are_the_librarys_in_the_command_line_the_python_signatures_and_the_docs():
    library = saturate._saturate.defaults()
    cli = _cli_defaults("search")
    for function, mapping in (("search", SEARCH), ("zoo_search", ZOO)):
        signature = inspect.signature(getattr(saturate, function)).parameters
        docs = _doc_defaults(function)
        for keyword, (field, flag) in mapping.items():
            want = library[field]
            assert _same(signature[keyword].default, want), (function, keyword, signature[keyword].default, want)
            assert flag in cli, (flag, sorted(cli))
            shown = 0 if cli[flag] is None else _number(cli[flag])
            assert _same(shown, want), (flag, cli[flag], want)
            if keyword in docs:
                assert _same(_number(docs[keyword]), want), (function, "docs/python.md", keyword, docs[keyword], want)
    # the docs row of search names the defaults users look for first
    assert {"target_memory", "strategy"} <= set(_doc_defaults("search"))


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return text


# the other calls: Python keyword -> the library's field in its section of defaults()
OTHERS = {
    "leak_check": {"steps": "steps", "site_steps": "site_steps", "warmup_steps": "warmup_steps",
                   "min_bytes_per_step": "min_bytes_per_step"},
    "plan_for": {"target_memory": "target_fraction"},
    "fast_paths": {"timed_steps": "timed_steps"},
    "monitor": {"sample_hz": "sample_hz"},
}


def test_the_other_calls_defaults_are_the_librarys_in_the_python_signatures_and_the_docs():
    library = saturate._saturate.defaults()
    for function, mapping in OTHERS.items():
        signature = inspect.signature(getattr(saturate, function)).parameters
        docs = _doc_defaults(function)
        for keyword, field in mapping.items():
            want = library[function][field]
            assert _same(signature[keyword].default, want), (function, keyword, signature[keyword].default, want)
            if keyword in docs:
                assert _same(_number(docs[keyword]), want), (function, "docs/python.md", keyword, docs[keyword], want)
    # plan_for's two recorded batches, one keyword
    plan = library["plan_for"]
    assert tuple(inspect.signature(saturate.plan_for).parameters["batches"].default) == (plan["batch_a"], plan["batch_b"])
    assert f"batches=({plan['batch_a']}, {plan['batch_b']})" in open(DOCS).read(), plan
    # the docs row of leak_check names its steps
    assert {"steps", "site_steps"} <= set(_doc_defaults("leak_check"))
    # the command line's monitor rate is the same struct's
    assert _same(_number(_cli_defaults("search")["--sample-hz"] or 0), library["monitor"]["sample_hz"])
