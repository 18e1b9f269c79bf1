#!/usr/bin/env python3
"""Checks that the library names no command-line flag: no string literal in src/ or
include/saturate/ contains --[a-z]. The library writes an option mid-sentence as `micro_batch`;
the command line says it as its flag (tools/saturate: with_flags), Python as its keyword.

Prints file:line and the literal for each one found and exits 1 when there is one. Comments may
name flags (a header's doc comment saying what the command line does); only literals are read.
"""
import pathlib
import re
import sys

EXCLUDED = []

FLAG = re.compile(r"--[a-z]")


def string_literals(text):
    """(line, literal) for each string literal of C++ source `text`, comments skipped."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_end = text.find("(", i)
            delim = ")" + text[i + 2:open_end] + '"'
            j = text.find(delim, open_end)
            j = n if j < 0 else j + len(delim)
            yield line, text[i:j]
            line += text.count("\n", i, j)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if c == '"':
                yield line, text[i:j + 1]
            i = j + 1
        else:
            if c == "\n":
                line += 1
            i += 1


def main(root: pathlib.Path) -> int:
    bad = []
    files = 0
    for base in (root / "src", root / "include" / "saturate"):
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".h", ".cpp", ".cu", ".cuh") or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            if any(rel.startswith(e) for e in EXCLUDED):
                continue
            files += 1
            for line, literal in string_literals(path.read_text()):
                if FLAG.search(literal):
                    bad.append(f"{rel}:{line}: {literal}")
    for b in bad:
        print(b)
    print(f"{files} files checked, {len(bad)} string literal(s) naming a flag "
          "(write the option as `option_name`; the command line names its flag)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
