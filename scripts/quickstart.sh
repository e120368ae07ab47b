#!/usr/bin/env bash
# The two Quick start commands:
#   scripts/quickstart.sh demo   set up, build what the demo runs (the gradscope CLI and its
#                                libraries), run `gradscope demo` on the built-in default data
#   scripts/quickstart.sh test   set up, build everything, run the whole test suite through ctest,
#                                then the fuzz targets (ctest -L fuzz in build-fuzz/, clang with
#                                sanitizers)
# Each phase (packages, configure, build, demo or tests) is printed with its time, and all of them
# at the end. GS_BUILD_DIR (default build/) and GS_JOBS (default 2) may be set; GS_CUDA_ARCHS as
# CMake's (docs/architecture.md). On a machine without a GPU both commands add sm_75 machine code
# to the compute_75 PTX, so that ptxas sees every kernel, and configure the build alike: the test
# command after the demo rebuilds nothing the demo built.
set -euo pipefail
mode=${1:-demo}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GS_BUILD_DIR:-$root/build}
jobs=${GS_JOBS:-2}

case "$mode" in
  demo|test) ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

phases=()
start=$SECONDS
# phase NAME COMMAND...: runs the command, says how long it took; its exit status.
phase() {
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "== quickstart: $name"
  "$@" || rc=$?
  phases+=("$(printf '%-10s %4d s' "$name" $((SECONDS - t0)))")
  echo "== quickstart: $name took $((SECONDS - t0)) s"
  return $rc
}
summary() {
  echo "== quickstart $mode: $((SECONDS - start)) s in all"
  printf '   %s\n' "${phases[@]}"
}

configure_args=(-DCMAKE_BUILD_TYPE=Release)
# Ninja (scripts/setup.sh installs it) for a new build folder; one made before keeps its generator.
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then
  configure_args+=(-G Ninja)
fi
# ccache (GS_CCACHE), its cache in the build folder (CCACHE_DIR, unless set): a build a test makes
# of its own (the pip install's) takes the objects this build compiled with the same settings.
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$build/ccache}
  configure_args+=(-DGS_CCACHE=ON)
fi
if [[ -z ${GS_CUDA_ARCHS+set} ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  configure_args+=("-DGS_CUDA_ARCHS=75-real;75-virtual")
elif [[ -n ${GS_CUDA_ARCHS+set} ]]; then
  configure_args+=("-DGS_CUDA_ARCHS=$GS_CUDA_ARCHS")
fi

phase packages bash "$root/scripts/setup.sh"
phase configure cmake -S "$root" -B "$build" "${configure_args[@]}"

if [[ $mode == demo ]]; then
  phase build cmake --build "$build" -j"$jobs" --target gradscope
  phase demo "$build/cli/gradscope" demo
  summary
  exit 0
fi

phase build cmake --build "$build" -j"$jobs"
# The fuzz targets (clang, ASan and UBSan) in their own build, each then run for a bounded number
# of inputs from the committed corpus: ctest -L fuzz. The fuzz build runs beside the suites at the
# lowest priority: the suites leave about a quarter of the two cores idle (processes waiting on
# one another, on sockets and on timeouts), and it takes only that; its log is $fuzz_log.
fuzz_build=${GS_FUZZ_BUILD_DIR:-$root/build-fuzz}
fuzz_log=$build/fuzz-build.log
setsid nice -n 19 bash -c "cmake -S '$root' -B '$fuzz_build' -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGS_FUZZ=ON && cmake --build '$fuzz_build' -j$jobs" \
  >"$fuzz_log" 2>&1 &
fuzz_pid=$!
trap 'kill -- -$fuzz_pid 2>/dev/null || true' EXIT  # its own process group (setsid)
# The suites share the 2 cores; torch and OpenMP would otherwise each take both.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Idle OpenMP threads sleep instead of spinning on cores the other suites need.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
tests_log=$build/ctest.log
run_tests() { ctest --test-dir "$build" --output-on-failure -j"$jobs" 2>&1 | tee "$tests_log"; }
# slowest: the ten slowest cases of the run, from its log.
slowest() {
  echo "== quickstart: the ten slowest cases (seconds)"
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9]+\.[0-9]+) sec$/\2 \1/p' "$tests_log" \
    | sort -rn | awk 'NR <= 10 { printf "   %8.1f  %s\n", $1, $2 }'  # reads it all: no SIGPIPE for sort
}
tests_rc=0
phase tests run_tests || tests_rc=$?
if ((tests_rc != 0)); then
  slowest
  exit "$tests_rc"
fi
# The rest of the fuzz build, now on both cores at the lowest priority still (nothing else runs).
fuzz_wait() {
  wait "$fuzz_pid" && return 0
  echo "the fuzz build failed; the end of $fuzz_log:" >&2
  tail -n 40 "$fuzz_log" >&2
  return 1
}
phase fuzz-build fuzz_wait
trap - EXIT
phase fuzz ctest --test-dir "$fuzz_build" -L fuzz --output-on-failure -j"$jobs"
summary
slowest
