#!/usr/bin/env python3
"""scripts/build_checked.py fails a build whose compiler warns and passes a clean one: a
two-file CMake project built with -Wall -Wextra, once clean and once with an unused variable."""
import os
import shutil
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "build_checked.py")


def build(source):
    work = tempfile.mkdtemp(prefix="build_checked_")
    try:
        with open(os.path.join(work, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.16)\nproject(p CXX)\nadd_executable(p main.cpp)\n"
                    "target_compile_options(p PRIVATE -Wall -Wextra)\n")
        with open(os.path.join(work, "main.cpp"), "w") as f:
            f.write(source)
        subprocess.run(["cmake", "-S", work, "-B", os.path.join(work, "b")], check=True, capture_output=True)
        p = subprocess.run([sys.executable, SCRIPT, os.path.join(work, "b")], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr
    finally:
        shutil.rmtree(work, ignore_errors=True)


status, out = build("int main() { return 0; }\n")
if status != 0:
    sys.exit(f"a clean build failed ({status}):\n{out}")
status, out = build("int main() { int unused = 3; return 0; }\n")
if status != 1 or "not warning-free" not in out or "-Wunused-variable" not in out:
    sys.exit(f"a build with a warning passed or failed otherwise ({status}):\n{out}")
print("clean build passes; a warning fails it, named:", [l for l in out.splitlines() if "warning:" in l][-1].strip())
