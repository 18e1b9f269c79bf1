#!/usr/bin/env python3
"""The command line stays a thin shell (issue 24): tools/saturate/ at most MAX_LINES lines, and no
function there longer than MAX_FUNCTION_LINES. Prints each offender; exit status 1 when any.

A function is a top-level brace block whose opening line looks like a definition (a name and a
parameter list), at namespace scope; lambdas count toward the function that holds them.
"""
import pathlib
import re
import sys

MAX_LINES = int(sys.argv[2]) if len(sys.argv) > 2 else 1300
MAX_FUNCTION_LINES = int(sys.argv[3]) if len(sys.argv) > 3 else 60
root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tools/saturate")

DEFINITION = re.compile(r"^[A-Za-z_][\w:<>,\s\*&]*\b([A-Za-z_]\w*(?:::\w+)*)\s*\(")


def strip(line):
    """The line without string and character literals and // comments (braces inside do not count)."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(?:\\.|[^'\\])'", "''", line)
    return line.split("//", 1)[0]


def functions(path):
    """(name, first line, length) of each function defined at namespace scope in `path`."""
    lines = path.read_text().splitlines()
    depth = 0  # braces open, namespaces excluded
    start = None
    name = None
    header = []
    for number, raw in enumerate(lines, 1):
        line = strip(raw)
        if depth == 0 and start is None:
            if re.match(r"\s*namespace\b[^;]*\{", line) or re.match(r"\s*\}\s*//\s*namespace", raw):
                header = []
                continue
            header.append(line)
            if "{" in line:
                text = " ".join(h.strip() for h in header[-4:])
                m = DEFINITION.search(text.lstrip())
                is_type = re.match(r"\s*(struct|class|enum|union)\b", text) or "=" in text.split("(")[0]
                if m and not is_type:
                    start, name = number - len([h for h in header[-4:] if h.strip()]) + 1, m.group(1)
                header = []
            elif line.strip().endswith(";") or not line.strip():
                header = []
        for ch in line:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and start is not None:
                    yield name, start, number - start + 1
                    start = None
        if depth < 0:  # a namespace's closing brace
            depth = 0


def main():
    files = sorted(p for p in root.iterdir() if p.suffix in (".cpp", ".h"))
    total = sum(len(p.read_text().splitlines()) for p in files)
    failures = []
    if total > MAX_LINES:
        failures.append(f"{root}: {total} lines, more than {MAX_LINES}; move orchestration into the library (src/session/)")
    for p in files:
        for name, start, length in functions(p):
            if length > MAX_FUNCTION_LINES:
                failures.append(f"{p}:{start}: {name} is {length} lines, more than {MAX_FUNCTION_LINES}")
    for f in failures:
        print(f)
    print(f"{root}: {total} lines in {len(files)} files; {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
