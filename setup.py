"""Builds the _gradscope extension with the project's CMake for `pip install --no-build-isolation .`.

CMake configures a build of only what the extension needs (no tests, benchmarks, GUI or training
executables) for the interpreter running pip (GS_PYTHON), builds the _gradscope target and puts
the module into the package (not gradscope._testing, the tests' module: a CMake build tree alone
has it). Environment:
  GS_CMAKE_ARGS   more arguments for the configure step, e.g. "-DGS_ENABLE_CUDA=OFF"
  GS_CUDA_ARCHS   the CUDA targets (CMake's GS_CUDA_ARCHS): unset, this machine's GPUs (compute_75
                  PTX where none is visible); "all", machine code for sm_75 to sm_90 and PTX, for
                  a package built for others; or a CMAKE_CUDA_ARCHITECTURES list
  GS_JOBS         parallel build jobs (default: the machine's processors)
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError(
                "gradscope builds with CMake 3.25 or newer: install it (Debian: apt-get "
                "install cmake) and the packages scripts/setup.sh lists"
            )
        build = Path(self.build_temp).resolve() / "cmake"
        configure = [
            "cmake",
            "-S",
            str(ROOT),
            "-B",
            str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DGS_PYTHON={sys.executable}",
            "-DGS_BUILD_TESTS=OFF",
            "-DGS_BUILD_BENCH=OFF",
            "-DGS_ENABLE_GUI=OFF",
            "-DGS_ENABLE_TORCH=OFF",
            "-DGS_ENABLE_PYTHON=ON",
            f"-DGS_CUDA_ARCHS={os.environ.get('GS_CUDA_ARCHS', '')}",
            *shlex.split(os.environ.get("GS_CMAKE_ARGS", "")),
        ]
        jobs = os.environ.get("GS_JOBS", str(os.cpu_count() or 1))
        forget_other_generator(build, configure)
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "_gradscope", "-j", jobs], check=True)
        built = sorted((build / "python" / "gradscope").glob("_gradscope*.so"))
        if not built:
            raise RuntimeError(f"CMake built no _gradscope module in {build / 'python' / 'gradscope'}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)


def forget_other_generator(build, configure):
    """A build folder made before with another generator than `configure` asks for (-G) is
    configured anew: CMake refuses to switch the generator of a folder."""
    cache = build / "CMakeCache.txt"
    if "-G" not in configure or not cache.exists():
        return
    asked = configure[configure.index("-G") + 1]
    for line in cache.read_text().splitlines():
        if line.startswith("CMAKE_GENERATOR:") and line.split("=", 1)[1] != asked:
            print(f"gradscope: {build} was configured for {line.split('=', 1)[1]}, now {asked}: configuring anew")
            cache.unlink()
            shutil.rmtree(build / "CMakeFiles", ignore_errors=True)
            return


# build-pip/, not build/: that is where the Quick start's CMake build lives.
setup(
    ext_modules=[CMakeExtension("gradscope._gradscope")],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-pip"}},
)
