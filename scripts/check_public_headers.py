#!/usr/bin/env python3
"""Checks that include/saturate/ holds only what a user of the library calls (issue 46: a narrow
public API). The public headers are those that tools/, python/ and examples/ (the library's own
users: the command line, the Python package, the C++ examples) include, and the headers those
include, followed to the end. Every installed header must be one of them; a header only the
library's own .cpp files (and its tests) include belongs in src/<part>/, included as
"<part>/name.h", where it is not installed. An installed header that includes a private one
would not compile for a user: that fails too.

    check_public_headers.py ROOT

Prints each header that should move, and each installed header that includes a private one;
exits 1 when there is one.
"""
import pathlib
import re
import sys

QUOTED = re.compile(r'^\s*#\s*include\s+"([a-z_]+/[^"]+)"', re.M)
USERS = ("tools", "python", "examples")


def quoted_includes(path: pathlib.Path):
    return QUOTED.findall(path.read_text(errors="replace"))


def main(root: pathlib.Path) -> int:
    include = root / "include"
    installed = {str(p.relative_to(include)) for p in (include / "saturate").rglob("*.h")}
    todo = []
    for folder in USERS:
        for path in (root / folder).rglob("*"):
            if path.suffix in (".h", ".hpp", ".cpp", ".cc") and path.is_file():
                todo += [h for h in quoted_includes(path) if h.startswith("saturate/")]
    public = set()
    while todo:
        header = todo.pop()
        if header in public or header not in installed:
            continue
        public.add(header)
        todo += [h for h in quoted_includes(include / header) if h.startswith("saturate/")]
    bad = []
    for header in sorted(installed - public):
        part = header.split("/")[1]
        bad.append(f"include/{header}: no user of the library includes it; move it to src/{part}/ "
                   f"and include it as \"{header[len('saturate/'):]}\"")
    for header in sorted(installed):
        for h in quoted_includes(include / header):
            if not h.startswith("saturate/"):
                bad.append(f"include/{header}: includes the private \"{h}\", which is not installed")
    for line in bad:
        print(line)
    print(f"{len(installed)} installed headers, {len(public)} of them reached from {', '.join(USERS)}; "
          f"{len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
