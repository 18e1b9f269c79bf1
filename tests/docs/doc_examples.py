#!/usr/bin/env python3
"""The docs are tests (issue 44): every example in README.md and docs/*.md runs, on this CPU, as
written or with the substitutions that docs/examples.md lists in its tables (this script reads
them from there, so the doc and the test cannot drift apart).

    doc_examples.py list SOURCE_DIR            the runnable examples' ids (FILE:LINE), one a line
    doc_examples.py show SOURCE_DIR [ID]       every example with what the test runs, or why not
    doc_examples.py run SOURCE_DIR ID SATURATE_BIN BUILD_DIR WORK_DIR

An example is a line of a ```sh block that starts with `saturate` (continuation lines joined), a
```python block, or an output block the docs show for a command (an unlabelled block whose first
line is `$ saturate ...`, or that follows a paragraph naming exactly one `saturate ...` command in
backquotes): the command runs and each labelled line the block shows (a line starting with a
lower-case word such as `max_batch`) must start a line of what it prints. A line with `...` or a
placeholder in angle brackets that no substitution fills is a template, not run; commands of other
programs (make, pip, cmake, torchrun, ...) are the build's and CI runs them itself.
"""
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import zlib

DOCS = ["README.md"]  # + docs/*.md, sorted
TIMEOUT_S = int(os.environ.get("DOC_EXAMPLE_TIMEOUT_S", "600"))


# ---------------------------------------------------------------------------------------------
# docs/examples.md's tables

def read_table(root, heading):
    """The rows of the markdown table under `## heading` in docs/examples.md, as lists of cells."""
    text = open(os.path.join(root, "docs", "examples.md"), encoding="utf-8").read()
    m = re.search(r"^## " + re.escape(heading) + r"\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        sys.exit(f"docs/examples.md has no section '## {heading}'")
    rows = []
    for line in m.group(1).splitlines():
        if not line.startswith("|") or re.match(r"^\|[-| ]+\|$", line):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        if cells[0].startswith("`"):
            rows.append([unquote(c) for c in cells])
    return rows


def unquote(cell):
    """`a` -> a; a cell of several `x` `y` keeps only the first; \\| is |."""
    m = re.match(r"^`(.*?)`", cell)
    return (m.group(1) if m else cell).replace("\\|", "|")


def substitutions(root):
    return [(row[0], row[1]) for row in read_table(root, "Substitutions")]


def defaults(root):
    """(text a command has, flags it gets unless it gives them) rows, in order."""
    return [(row[0], re.findall(r"`([^`]+)`", row[1]) and " ".join(re.findall(r"`([^`]+)`", row[1])))
            for row in read_table_raw(root, "Defaults on the test's CPU")]


def read_table_raw(root, heading):
    """Like read_table, but the cells after the first keep their backquotes."""
    rows = []
    text = open(os.path.join(root, "docs", "examples.md"), encoding="utf-8").read()
    m = re.search(r"^## " + re.escape(heading) + r"\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        sys.exit(f"docs/examples.md has no section '## {heading}'")
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])] if line.startswith("|") else []
        if cells and cells[0].startswith("`"):
            rows.append([unquote(cells[0])] + cells[1:])
    return rows


SUBCOMMANDS_WITH_A_BUDGET = ("search", "probe", "memory", "train")
# train's --steps is the short name of --optimizer-steps
STEP_FLAGS = ("--steps", "--optimizer-steps")


def add_defaults(cmd, rows):
    """Each `saturate SUB` of the command (launch's too) gets the rows' flags it does not give."""
    parts = re.split(r"(?=\bsaturate (?:%s)\b)" % "|".join(SUBCOMMANDS_WITH_A_BUDGET), cmd)
    out = [parts[0]]
    for part in parts[1:]:
        head, sub, rest = part.split(" ", 2) if part.count(" ") >= 2 else (part.split(" ") + [""])[:3]
        tail = re.split(r"(\s\|\s)", rest, maxsplit=1)  # a pipe ends the command
        own, after = tail[0], "".join(tail[1:])
        added = []
        for when, flags in rows:
            if when in f"{head} {sub} {own}":
                words = flags.split()
                for i, w in enumerate(words):
                    if not w.startswith("--"):
                        continue
                    value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else None
                    names = STEP_FLAGS if w in STEP_FLAGS else (w,)
                    given = any(re.search(r"(^|\s)" + re.escape(n) + r"(\s|=|$)", own + " " + " ".join(added))
                                for n in names)
                    if not given:
                        added += [w] + ([value] if value else [])
        out.append(" ".join([head, sub] + added + ([own] if own else [])) + after)
    return "".join(out)


def gpu_only(root):
    """(text in the command, exit status on CPU, regex of its message) for examples that need a GPU."""
    return [(row[0], int(row[1]), row[2]) for row in read_table(root, "Examples that need a GPU")]


# ---------------------------------------------------------------------------------------------
# finding the examples

class Example:
    def __init__(self, doc, line, kind, text, shown=None, block=None):
        self.doc, self.line, self.kind, self.text, self.shown, self.block = doc, line, kind, text, shown, block
        self.skip = None  # why it does not run, or None

    @property
    def id(self):
        return f"{self.doc}:{self.line}"


def strip_comment(line):
    """The command without a trailing `# comment` (a # after whitespace, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def blocks(path):
    """(first line number, language, lines, the paragraph before) of each fenced block."""
    lines = open(path, encoding="utf-8").read().splitlines()
    out, i, para, fresh = [], 0, [], True
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:  # the last paragraph before a block, blank lines between them allowed
            if lines[i].strip():
                para, fresh = (([] if fresh else para) + [lines[i]]), False
            else:
                fresh = True
            i += 1
            continue
        start, j = i + 1, i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        out.append((start + 1, m.group(1), lines[start:j], " ".join(para)))
        para, i = [], j + 1
    return out


def examples(root):
    found = []
    docs = DOCS + sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    for doc in docs:
        for first, lang, body, para in blocks(os.path.join(root, doc)):
            if lang == "sh":
                n = 0
                while n < len(body):
                    line_no, text = first + n, body[n]
                    while text.rstrip().endswith("\\") and n + 1 < len(body):
                        n += 1
                        text = text.rstrip()[:-1] + " " + body[n].strip()
                    n += 1
                    cmd = strip_comment(text).strip()
                    if not cmd:
                        continue
                    ex = Example(doc, line_no, "command", cmd, block=(doc, first))
                    if not cmd.startswith("saturate "):
                        ex.skip = f"a command of {cmd.split()[0]}, not saturate: the build's (CI runs it)"
                    found.append(ex)
            elif lang == "python":
                found.append(Example(doc, first, "python", "\n".join(body)))
            elif lang == "" and body:
                shown = [l for l in body]
                if body[0].startswith("saturate "):
                    continue  # a synopsis (usage line), not output
                if body[0].startswith("$ saturate "):
                    found.append(Example(doc, first, "shown", strip_comment(body[0][2:]), shown=body[1:]))
                    continue
                named = re.findall(r"`(saturate [^`]+)`", para)
                if len(named) == 1 and labels(shown):
                    found.append(Example(doc, first, "shown", named[0], shown=shown))
    return found


def labels(shown):
    """The labels a shown output block has: the first word of each line that starts with one."""
    out = []
    for line in shown:
        m = re.match(r"^([a-z][A-Za-z_]*)(\s|:|$)", line)
        if m:
            out.append(m.group(1))
    return out


def prepare(root, found):
    """Applies the substitutions; marks templates."""
    subs, rows = substitutions(root), defaults(root)
    for ex in found:
        if ex.skip:
            continue
        text = ex.text
        for before, after in subs:
            text = text.replace(before, after)
        ex.run_text = text if ex.kind == "python" else add_defaults(text, rows)
        if ex.kind != "python" and ("..." in text or re.search(r"<[^<>]+>", text)):
            ex.skip = "a template (`...` or a <placeholder>), not a command"
    return found


# ---------------------------------------------------------------------------------------------
# running one

PRELUDE = '''
import torch, saturate
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10))
opt = optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = torch.nn.functional.cross_entropy
def make_batch(batch_size):
    return torch.randn(batch_size, 1, 28, 28), torch.randint(0, 10, (batch_size,))
loader = [make_batch(32) for _ in range(8)]
'''
PRELUDE_TOKENS = '''
import torch, saturate
torch.manual_seed(0)
class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.emb = torch.nn.Embedding(256, 64); self.out = torch.nn.Linear(64, 256)
    def forward(self, ids):
        return self.out(self.emb(ids))
model = Tiny()
opt = optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
def loss_fn(logits, labels):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
def make_batch(batch_size):
    ids = torch.randint(0, 256, (batch_size, 32))
    return {"ids": ids, "labels": ids.roll(-1, 1)}
loader = [make_batch(8) for _ in range(6)]
'''
MY_TRAINING_JOB = """#!/usr/bin/env python3
import torch
m = torch.nn.Linear(256, 256); opt = torch.optim.SGD(m.parameters(), lr=0.01)
for _ in range(200):
    m(torch.randn(64, 256)).square().mean().backward(); opt.step(); opt.zero_grad()
"""


def fixtures(work, text, build):
    """The files an example names that a user would have: made in the work folder when named."""
    if "corpus.txt" in text and not os.path.exists("corpus.txt"):
        with open("corpus.txt", "w") as f:
            f.write(("the quick brown fox jumps over the lazy dog; " * 40 + "\n") * 60)
    if "my_model.pt" in text and not os.path.exists("my_model.pt"):
        script = ("import torch\n"
                  "m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),\n"
                  "    torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(128, 10))\n"
                  "torch.jit.script(m).save('my_model.pt')\n")
        subprocess.run([sys.executable, "-c", script], check=True)
    if "./my_training_job" in text and not os.path.exists("my_training_job"):
        with open("my_training_job", "w") as f:
            f.write(MY_TRAINING_JOB)
        os.chmod("my_training_job", 0o755)
    if "images-fixture" in text and not os.path.isdir("images-fixture"):
        for k in range(160):
            png(os.path.join("images-fixture", ("dark", "light")[k % 2], f"{k:03d}.png"), 16, 16, 40 + 160 * (k % 2))
    if "cifar-fixture" in text and not os.path.isdir("cifar-fixture"):
        os.makedirs("cifar-fixture")
        for name in ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]:
            with open(os.path.join("cifar-fixture", name), "wb") as f:
                for r in range(40):
                    f.write(bytes([r % 10]) + bytes((r * 7 + k) % 251 for k in range(3072)))


def png(path, width, height, grey):
    """A grey PNG (the format's smallest valid file: one IDAT of filter-0 rows)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rows = (b"\0" + bytes([grey]) * width) * height
    chunk = lambda kind, body: (struct.pack(">I", len(body)) + kind + body +
                                struct.pack(">I", zlib.crc32(kind + body)))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def output_tokens(cmd):
    """The files a command writes (the value after an output flag)."""
    words = shlex.split(cmd)
    return {words[i + 1] for i, w in enumerate(words[:-1])
            if w in ("--json", "--html", "-o", "--timeline", "--save", "--trace", "--log") and words[i + 1] != "-"}


def run_shell(cmd, bin_dir, env, status, pattern):
    env = dict(env, PATH=bin_dir + os.pathsep + env["PATH"])
    print(f"$ {cmd}", flush=True)
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, env=env,
                       timeout=TIMEOUT_S)
    out = p.stdout + p.stderr
    print(out[-6000:])
    if p.returncode != status:
        sys.exit(f"FAIL: exit status {p.returncode}, expected {status}: {cmd}")
    if pattern and not re.search(pattern, out, re.S):
        sys.exit(f"FAIL: no /{pattern}/ in what `{cmd}` printed")
    return out


def run(root, ex_id, binary, build, work, found):
    by_id = {ex.id: ex for ex in found}
    if ex_id not in by_id:
        sys.exit(f"no example {ex_id} (doc_examples.py show {root} lists them)")
    ex = by_id[ex_id]
    if ex.skip:
        sys.exit(f"{ex_id} is not run: {ex.skip}")
    folder = os.path.join(work, "docs_" + re.sub(r"[^A-Za-z0-9]+", "_", ex_id))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    os.chdir(folder)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.path.join(build, "python"),
               SATURATE_SOURCE_DIR=root, SATURATE_BINARY=binary)
    bin_dir = os.path.dirname(os.path.abspath(binary))
    if ex.kind == "python":
        prelude = PRELUDE_TOKENS if '["ids"]' in ex.run_text else PRELUDE
        with open("example.py", "w") as f:
            f.write(prelude + "\n" + ex.run_text + "\n")
        print(ex.run_text)
        p = subprocess.run([sys.executable, "example.py"], env=env, timeout=TIMEOUT_S)
        if p.returncode != 0:
            sys.exit(f"FAIL: the Python example {ex_id} exited with status {p.returncode}")
        return
    status, pattern = 0, None
    for text, want_status, regex in gpu_only(root):
        if text in ex.text:
            status, pattern = want_status, regex
    # an input an earlier command of the same block writes: run that one first
    if ex.block:
        earlier = [e for e in found if e.block == ex.block and e.line < ex.line and not e.skip]
        words = set(shlex.split(ex.run_text))
        for e in earlier:
            if output_tokens(e.run_text) & words - output_tokens(ex.run_text):
                fixtures(folder, e.run_text, build)
                run_shell(e.run_text, bin_dir, env, 0, None)
    fixtures(folder, ex.run_text, build)
    out = run_shell(ex.run_text, bin_dir, env, status, pattern)
    if ex.kind == "shown":
        starts = {m.group(1) for m in re.finditer(r"^\s*([A-Za-z][A-Za-z_]*)", out, re.M)}
        missing = [label for label in labels(ex.shown) if label not in starts]
        if missing:
            sys.exit(f"FAIL: {ex_id} shows lines starting {missing} that `{ex.run_text}` no longer prints")


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("list", "show", "run"):
        sys.exit(__doc__)
    root = os.path.abspath(sys.argv[2])
    found = prepare(root, examples(root))
    if sys.argv[1] == "list":
        for ex in found:
            if not ex.skip:
                print(ex.id)
    elif sys.argv[1] == "show":
        for ex in found:
            if len(sys.argv) > 3 and ex.id != sys.argv[3]:
                continue
            what = f"SKIP ({ex.skip})" if ex.skip else ex.run_text.replace("\n", "\n      ")
            print(f"{ex.id:24} {ex.kind:8} {what}")
        ran = sum(1 for ex in found if not ex.skip)
        print(f"{ran} of {len(found)} examples run")
    else:
        if len(sys.argv) != 7:
            sys.exit(__doc__)
        run(root, sys.argv[3], os.path.abspath(sys.argv[4]), os.path.abspath(sys.argv[5]),
            os.path.abspath(sys.argv[6]), found)


if __name__ == "__main__":
    main()
