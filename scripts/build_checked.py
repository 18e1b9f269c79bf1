#!/usr/bin/env python3
"""`make build`: runs `cmake --build` with the given arguments, passes its output through as it
comes, and fails when the compiler warned (issue 44: the build is -Wall -Wextra clean, checked in
CI). ccache replays a cached object's warnings, so a fresh clone's build sees every file's.

    build_checked.py BUILD_DIR [cmake --build arguments...]
"""
import re
import subprocess
import sys

# gcc/clang: "path:line:col: warning: text [-Wflag]"; CMake's own "CMake Warning" lines are not the compiler's
WARNING = re.compile(r"^(\S+?):(\d+):(\d+): warning: (.*)$")


def main():
    build, rest = sys.argv[1], sys.argv[2:]
    proc = subprocess.Popen(["cmake", "--build", build, *rest], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    warnings = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        m = WARNING.match(line.strip())
        if m and "/_deps/" not in m.group(1) and "site-packages" not in m.group(1):
            warnings.append(line.strip())
    status = proc.wait()
    if status != 0:
        return status
    if warnings:
        unique = sorted(set(warnings))
        print(f"\nbuild_checked: the build is not warning-free: {len(unique)} compiler warning(s) in our sources "
              f"(-Wall -Wextra); fix them:", file=sys.stderr)
        for w in unique:
            print("  " + w, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
