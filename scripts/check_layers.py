#!/usr/bin/env python3
"""Checks the library's layering: a part may include only itself and the parts below it.

  core < models < step < probe < data < search < memory < monitor < train < dist < report < session

Reads every #include "saturate/<part>/..." (an installed header) and "<part>/..." (a private one,
in src/<part>/) in include/saturate/<part>/ and src/<part>/; prints each include of a part above
(or of an unknown part) and exits 1 when there is one.
"""
import pathlib
import re
import sys

LAYERS = ["core", "models", "step", "probe", "data", "search", "memory", "monitor", "train", "dist", "report", "session"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:saturate/)?([a-z_]+)/')


def main(root: pathlib.Path) -> int:
    rank = {part: i for i, part in enumerate(LAYERS)}
    bad = []
    parts_seen = set()
    for base in (root / "include" / "saturate", root / "src"):
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".h", ".cpp") or path.parent == base:
                continue
            part = path.relative_to(base).parts[0]
            parts_seen.add(part)
            if part not in rank:
                bad.append(f"{path.relative_to(root)}: part '{part}' is not in the layer list")
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                used = m.group(1)
                if used not in rank:
                    bad.append(f"{path.relative_to(root)}:{n}: includes unknown part '{used}'")
                elif rank[used] > rank[part]:
                    bad.append(f"{path.relative_to(root)}:{n}: {part} includes {used}, a part above it")
    for line in bad:
        print(line)
    print(f"{len(parts_seen)} parts checked, {len(bad)} layering violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
