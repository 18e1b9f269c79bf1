#!/usr/bin/env python3
"""Checks that the sessions and the text printers read no JSON key (issue 46 item 1): a result
is a typed struct, and its JSON one printer of it; text for people is printed from the struct,
never from keys read back. In src/session/*.cpp and the report layer's text printers (the files
below), a JSON key may be written (`j["key"] = ...`) but not read: `j["key"]` anywhere else,
`.value("key"`, `.contains("key"`, `.at("key"` are reads. The HTML report is not checked: its input
is a saved run's JSON file (`saturate report RUN.json`).

The Python package receives typed objects from its extension (python/typed_results.h), never a JSON
string it parses: python/saturate/*.py may not call json.loads, nor python/*.cpp hand Python a
`.dump()` of a result.

    check_no_json_reads.py SOURCE_DIR

Prints file:line and the read for each one found and exits 1 when there is one.
"""
import pathlib
import re
import sys

TEXT_PRINTERS = ["console_printer.cpp", "table_printers.cpp", "printer.cpp", "report.cpp", "search_text.cpp",
                 "memory_text.cpp", "monitor_text.cpp", "data_text.cpp", "checkpointing_report.cpp", "train_text.cpp",
                 "progress_lines.cpp"]

KEY = re.compile(r'(?:\["[A-Za-z_0-9]+"\])+')
CALL = re.compile(r'\.(?:value|contains|at)\("[A-Za-z_0-9]+"')


def without_comments(text):
    """The source with // and /* */ comments blanked (newlines kept, so lines still count)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def reads(text):
    """(line, what) for each JSON key read in C++ source `text`."""
    code = without_comments(text)
    for m in KEY.finditer(code):
        after = code[m.end():].lstrip()
        if after.startswith("=") and not after.startswith("=="):
            continue  # a write: j["key"] = ... (also across a line break)
        yield code.count("\n", 0, m.start()) + 1, m.group(0)
    for m in CALL.finditer(code):
        yield code.count("\n", 0, m.start()) + 1, m.group(0)


def main():
    root = pathlib.Path(sys.argv[1])
    files = sorted((root / "src" / "session").glob("*.cpp")) + [root / "src" / "report" / f for f in TEXT_PRINTERS]
    found = 0
    for path in files:
        for line, what in reads(path.read_text()):
            print(f"{path.relative_to(root)}:{line}: reads a JSON key: {what} (print from the typed result)")
            found += 1
    package = sorted((root / "python" / "saturate").glob("*.py")) + sorted((root / "python").glob("*.cpp"))
    for path in package:
        code = path.read_text() if path.suffix == ".py" else without_comments(path.read_text())
        for number, line in enumerate(code.splitlines(), 1):
            for what in ("json.loads(", ".dump()"):
                if what in line and not line.lstrip().startswith("#"):
                    print(f"{path.relative_to(root)}:{number}: {what} (give Python the typed result: python/typed_results.h)")
                    found += 1
    files += package
    print(f"{len(files)} files, {found} JSON key read(s) or string(s) parsed")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
