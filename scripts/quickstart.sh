#!/usr/bin/env bash
# The two Quick start commands:
#   scripts/quickstart.sh demo   set up, build, run `gradscope demo` on the built-in default data
#   scripts/quickstart.sh test   set up, build, run the whole test suite through ctest, then the
#                                fuzz targets (ctest -L fuzz in build-fuzz/, clang with sanitizers)
# GS_BUILD_DIR (default build/) and GS_JOBS (default 2) may be set.
set -euo pipefail
mode=${1:-demo}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GS_BUILD_DIR:-$root/build}
jobs=${GS_JOBS:-2}

case "$mode" in
  demo|test) ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$jobs"

if [[ $mode == demo ]]; then
  exec "$build/cli/gradscope" demo
else
  # The suites share the 2 cores; torch and OpenMP would otherwise each take both.
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  # Idle OpenMP threads sleep instead of spinning on cores the other suites need.
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
  ctest --test-dir "$build" --output-on-failure -j"$jobs"
  # The fuzz targets (clang, ASan and UBSan) in their own build, each for a bounded number of
  # inputs from the committed corpus: ctest -L fuzz.
  fuzz_build=${GS_FUZZ_BUILD_DIR:-$root/build-fuzz}
  cmake -S "$root" -B "$fuzz_build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DGS_FUZZ=ON
  cmake --build "$fuzz_build" -j"$jobs"
  exec ctest --test-dir "$fuzz_build" -L fuzz --output-on-failure -j"$jobs"
fi
