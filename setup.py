"""Builds saturate's Python module with the project's CMake (see pyproject.toml):
    pip install --no-build-isolation .
The C++ build goes to build-pip/ (SATURATE_PIP_BUILD_DIR to change it) and reuses ccache's
objects from `make build`; it needs what `make setup` installs (compiler, CMake, Ninja, the
Debian libraries) and the torch 2.11 this Python imports."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import torch

        build = Path(os.environ.get("SATURATE_PIP_BUILD_DIR", ROOT / "build-pip")).resolve()
        env = dict(os.environ, CCACHE_BASEDIR=str(ROOT), CCACHE_NOHASHDIR="1",
                   CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime")
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}", f"-DPython3_EXECUTABLE={sys.executable}",
                     "-DSATURATE_BUILD_TESTS=OFF", "-DSATURATE_BUILD_EXAMPLES=OFF"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        subprocess.run(configure, check=True, env=env)
        subprocess.run(["cmake", "--build", str(build), "--target", "_saturate", "-j", str(os.cpu_count() or 2)],
                       check=True, env=env)
        built = sorted((build / "python" / "saturate").glob("_saturate*.so"))
        if not built:
            raise RuntimeError(f"the build did not make {build}/python/saturate/_saturate*.so")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[-1], target)


setup(ext_modules=[Extension("saturate._saturate", sources=[])], cmdclass={"build_ext": CMakeBuild})
