#!/usr/bin/env bash
# pytest.sh: the Python package's tests against a CMake build, with the environment ctest gives
# them (ctest runs them through this script too):
#   PYTHONPATH=BUILD/python     the package and its extension as the build laid them out
#   GS_GRADSCOPE_BIN            BUILD/cli/gradscope (tests compare the package with the CLI)
#   GS_GUI_BIN                  BUILD/gui/gradscope-gui, where the build has it
#   GS_BUILD_DIR                BUILD (the install tests install from it)
#   OMP_NUM_THREADS=1           unless set: test processes share the cores
# and the interpreter the build was configured for (GS_PYTHON_FOUND in its CMakeCache.txt).
#
# Usage: scripts/pytest.sh [--build BUILD] [PYTEST ARGS...]
#   BUILD: default $GS_BUILD_DIR, else build/ in the repository root
#   e.g.   scripts/pytest.sh tests/python/test_api.py -k select
#          scripts/pytest.sh tests/python/test_ddp.py::test_nan_in_a_bucket_skips_everywhere_then_stops
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GS_BUILD_DIR:-$root/build}
if [[ ${1:-} == --build ]]; then
  [[ $# -ge 2 ]] || { echo "pytest.sh: --build needs a folder" >&2; exit 2; }
  build=$2
  shift 2
fi
case "${1:-}" in -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;; esac
[[ -f $build/CMakeCache.txt ]] \
  || { echo "pytest.sh: $build is no CMake build (scripts/quickstart.sh test makes build/; or give --build)" >&2; exit 2; }
build=$(cd "$build" && pwd)
python=$(sed -n "s/^GS_PYTHON_FOUND:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1)
[[ -n $python ]] \
  || { echo "pytest.sh: $build found no Python that imports torch (GS_PYTHON_FOUND in its CMakeCache.txt)" >&2; exit 2; }
[[ -d $build/python/gradscope ]] \
  || { echo "pytest.sh: $build has no Python package (build/python/gradscope): configured without Python?" >&2; exit 2; }
[[ -x $build/cli/gradscope ]] \
  || { echo "pytest.sh: $build/cli/gradscope is not built (cmake --build $build --target gradscope)" >&2; exit 2; }
export PYTHONPATH="$build/python" GS_GRADSCOPE_BIN="$build/cli/gradscope" GS_BUILD_DIR="$build"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [[ -x $build/gui/gradscope-gui ]]; then export GS_GUI_BIN="$build/gui/gradscope-gui"; fi
exec "$python" -m pytest -q -p no:cacheprovider "$@"
