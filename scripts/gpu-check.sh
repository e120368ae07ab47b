#!/usr/bin/env bash
# gpu-check.sh: build fitting/, kernels/ and compress/ with CUDA on a GPU machine, run their test
# suites (the CUDA cases included: kernels' backends and cuFFT engine, the compressors on backend
# cuda), the CUDA cases under compute-sanitizer (memcheck, racecheck, initcheck, synccheck), the
# large-vector cases (past 32-bit offsets and indices; sizes that do not fit in the device's free
# memory are skipped, and said) and the GPU kernel benchmarks, then the Python package's CUDA tensor
# tests (tests/python/gpu: a full build with the extension; the 2-GPU torchrun test of the DDP hook
# skips itself with fewer than two GPUs; the overlap of a hook step with the backward pass, timed
# with CUDA events), the same Python tests under compute-sanitizer, and print a short table.
#
# Needs: an NVIDIA GPU with its driver, CUDA 13 (nvcc and compute-sanitizer on PATH or in
# /usr/local/cuda/bin), CMake >= 3.25, a C++20 host compiler, Python 3 with PyTorch built for CUDA
# (device bandwidth and torch.topk figures). None of the project's Debian packages are needed:
#   - Boost headers (Boost.Math, header-only): found by CMake, or BOOST_ROOT=/path/to/boost
#     (a folder holding boost/math/...; carrying one in is enough).
#   - GoogleTest: found by CMake, or GTEST_SRC=/path/to/googletest-source (built here); without
#     either the test suites are skipped, said loudly, and only the benchmarks run.
#   - Google Benchmark: optional (the GPU figures come from gs_kernels_bench, which needs none).
# Usage: scripts/gpu-check.sh [--report FILE [--force]] [--no-sanitizer] [--no-large] [BUILD_DIR]
#   BUILD_DIR       default build-gpu; every log and result in BUILD_DIR/gpu-check
#   --report FILE   also write FILE (Markdown): the machine, the commit, what ran and what it
#                   measured, for docs/BENCHMARKS.md (an existing FILE only with --force)
#   --no-sanitizer  skip the compute-sanitizer runs (they take the longest)
#   --no-large      skip the large-vector cases
# CUDA_ARCHS=86 (say) builds for that architecture only instead of the default list (faster).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPORT=""
SANITIZE=1
LARGE=1
FORCE=0
BUILD=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --report) [[ $# -ge 2 ]] || { echo "gpu-check: error: --report needs a file name" >&2; exit 1; }
              REPORT="$2"; shift 2 ;;
    --no-sanitizer) SANITIZE=0; shift ;;
    --no-large) LARGE=0; shift ;;
    --force) FORCE=1; shift ;;
    -h|--help) sed -n '2,30p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "gpu-check: error: unknown option $1 (see --help)" >&2; exit 1 ;;
    *) [[ -z "${BUILD}" ]] || { echo "gpu-check: error: one build directory only" >&2; exit 1; }
       BUILD="$1"; shift ;;
  esac
done
BUILD="${BUILD:-${ROOT}/build-gpu}"
if [[ -n "${REPORT}" ]]; then
  [[ "${REPORT}" = /* ]] || REPORT="${PWD}/${REPORT}"
  [[ -d "$(dirname "${REPORT}")" ]] || { echo "gpu-check: error: no folder for --report ${REPORT}" >&2; exit 1; }
  [[ ! -e "${REPORT}" || ${FORCE} -eq 1 ]] \
    || { echo "gpu-check: error: ${REPORT} exists; pass --force to replace it, or name another" >&2; exit 1; }
fi
OUT_DIR="${BUILD}/gpu-check"
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-$(nproc)}"
SIZES="${SIZES:-1e6,1e7,1e8}"
DENSITIES="${DENSITIES:-0.1,0.01,0.001}"

die() { echo "gpu-check: error: $*" >&2; exit 1; }
say() { echo "gpu-check: $*" >&2; }

command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this script needs a machine with an NVIDIA GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 || die "no GPU visible to nvidia-smi"
if ! command -v nvcc >/dev/null; then
  [[ -x /usr/local/cuda/bin/nvcc ]] || die "nvcc not found (install CUDA 13 or put it on PATH)"
  export PATH="/usr/local/cuda/bin:${PATH}"
fi
command -v cmake >/dev/null || die "cmake (>= 3.25) not found"
"${PYTHON}" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || die "${PYTHON} has no PyTorch with CUDA (set PYTHON=/path/to/python)"

mkdir -p "${OUT_DIR}"
ARCH_ARGS=()
[[ -n "${CUDA_ARCHS:-}" ]] && ARCH_ARGS=(-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS}")
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DGS_ENABLE_APPS=OFF -DGS_ENABLE_TORCH=OFF -DGS_ENABLE_GUI=OFF
            -DGS_ENABLE_CUDA=ON "${ARCH_ARGS[@]}")
if [[ -n "${BOOST_ROOT:-}" ]]; then
  [[ -d "${BOOST_ROOT}/boost/math" ]] || die "BOOST_ROOT=${BOOST_ROOT} holds no boost/math headers"
  CMAKE_ARGS+=(-DBOOST_ROOT="${BOOST_ROOT}" -DBoost_INCLUDE_DIR="${BOOST_ROOT}" -DBoost_NO_SYSTEM_PATHS=ON)
fi

# GoogleTest: what CMake finds, else a carried source tree built here, else no tests.
have_gtest=0
if [[ -n "${GTEST_SRC:-}" ]]; then
  [[ -f "${GTEST_SRC}/CMakeLists.txt" ]] || die "GTEST_SRC=${GTEST_SRC} is not a googletest source tree"
  cmake -S "${GTEST_SRC}" -B "${BUILD}/_gtest" -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
        -DCMAKE_INSTALL_PREFIX="${BUILD}/_gtest-install" >/dev/null
  cmake --build "${BUILD}/_gtest" -j "${JOBS}" --target install >/dev/null
  CMAKE_ARGS+=(-DGTest_DIR="${BUILD}/_gtest-install/lib/cmake/GTest")
  have_gtest=1
elif cmake --find-package -DNAME=GTest -DCOMPILER_ID=GNU -DLANGUAGE=CXX -DMODE=EXIST >/dev/null 2>&1; then
  have_gtest=1
fi
if [[ ${have_gtest} -eq 0 ]]; then
  say "WARNING: GoogleTest not found (set GTEST_SRC): building without the test suites"
  CMAKE_ARGS+=(-DGS_BUILD_TESTS=OFF)
fi

say "configuring ${BUILD}"
cmake -S "${ROOT}" -B "${BUILD}" "${CMAKE_ARGS[@]}" > "${OUT_DIR}/configure.log" 2>&1 \
  || { tail -30 "${OUT_DIR}/configure.log" >&2; die "configure failed (log: ${OUT_DIR}/configure.log)"; }
targets=(gs_kernels gs_kernels_bench)
[[ ${have_gtest} -eq 1 ]] && targets+=(gs_kernels_tests test_compress)
say "building ${targets[*]}"
cmake --build "${BUILD}" -j "${JOBS}" --target "${targets[@]}" > "${OUT_DIR}/build.log" 2>&1 \
  || { tail -30 "${OUT_DIR}/build.log" >&2; die "build failed (log: ${OUT_DIR}/build.log)"; }

tests_status="not built"
if [[ ${have_gtest} -eq 1 ]]; then
  say "running the kernels and compress suites (every table-driven case runs the CUDA backend too)"
  : > "${OUT_DIR}/tests.log"
  tests_status="passed"
  for suite in kernels/gs_kernels_tests compress/test_compress; do
    if ! "${BUILD}/tests/${suite}" --gtest_brief=1 >> "${OUT_DIR}/tests.log" 2>&1; then
      tests_status="FAILED (${suite}; see ${OUT_DIR}/tests.log)"
    fi
  done
  if grep -q "SKIPPED" "${OUT_DIR}/tests.log"; then tests_status="${tests_status}, with skips"; fi
fi

# The CUDA cases (kernels' cuda twins and CUDA-only checks, the compressors' and the fft engine's
# cases that ask for backend cuda) under each compute-sanitizer tool.
CUDA_KERNEL_CASES='*/cuda:Cuda.*'
CUDA_COMPRESS_CASES='*Cuda*:*cuda*'
sanitizer_rows=()
SANITIZER="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
if [[ ${have_gtest} -eq 1 && ${SANITIZE} -eq 1 ]]; then
  [[ -x "${SANITIZER}" ]] || die "compute-sanitizer not found (CUDA's bin folder), or pass --no-sanitizer"
  for tool in memcheck racecheck initcheck synccheck; do
    say "compute-sanitizer --tool ${tool} over the cuda cases"
    status="clean"
    for run in "kernels/gs_kernels_tests:${CUDA_KERNEL_CASES}" "compress/test_compress:${CUDA_COMPRESS_CASES}"; do
      if ! "${SANITIZER}" --tool "${tool}" --error-exitcode 3 "${BUILD}/tests/${run%%:*}" \
           --gtest_filter="${run#*:}" --gtest_brief=1 > "${OUT_DIR}/sanitizer-${tool}-$(basename "${run%%:*}").log" 2>&1; then
        status="FAILED (${OUT_DIR}/sanitizer-${tool}-$(basename "${run%%:*}").log)"
      fi
    done
    sanitizer_rows+=("${tool}|${status}")
  done
fi

large_status="not run (--no-large)"
if [[ ${have_gtest} -eq 1 && ${LARGE} -eq 1 ]]; then
  say "large vectors: 6e8, 2^31 (int32), 2.2e9 (int64) elements, each where it fits"
  if GS_LARGE_N=1 "${BUILD}/tests/kernels/gs_kernels_tests" --gtest_filter='CudaLarge.*' > "${OUT_DIR}/large.log" 2>&1; then
    large_status="passed"
    grep -q "SKIPPED" "${OUT_DIR}/large.log" && large_status="passed, with sizes skipped: $(grep -c '^\[ SKIPPED  \] n =' "${OUT_DIR}/large.log") (see large.log)"
  else
    large_status="FAILED (see ${OUT_DIR}/large.log)"
  fi
fi

say "timing the CUDA backend (sizes ${SIZES}, densities ${DENSITIES})"
"${BUILD}/kernels/gs_kernels_bench" --backend cuda --sizes "${SIZES}" --densities "${DENSITIES}" --json \
  > "${OUT_DIR}/kernels_cuda.json" 2> "${OUT_DIR}/kernels_cuda.log" \
  || { tail -20 "${OUT_DIR}/kernels_cuda.log" >&2; die "gs_kernels_bench failed"; }

say "device bandwidth and torch.topk (PyTorch)"
"${PYTHON}" - "${OUT_DIR}/kernels_cuda.json" "${DENSITIES}" > "${OUT_DIR}/summary.txt" <<'PY'
import json, math, sys
import torch

bench = json.load(open(sys.argv[1]))
densities = [float(d) for d in sys.argv[2].split(",")]
dev = torch.device("cuda")

def median_ms(fn, reps=20):
    fn(); torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]

# Floor: a large device-to-device copy, bytes read plus bytes written.
n_copy = 1 << 28
src = torch.rand(n_copy, device=dev); dst = torch.empty_like(src)
copy_ms = median_ms(lambda: dst.copy_(src))
bw = 2 * 4 * n_copy / (copy_ms * 1e-3)
del src, dst
print(f"device: {torch.cuda.get_device_name()}  copy bandwidth {bw / 1e9:.0f} GB/s (read+write)")

rows = bench["rows"]
n_max = max(r["n"] for r in rows)
floor_ms = 4 * n_max / bw * 1e3  # one read of n floats at copy bandwidth
print(f"n = {n_max:.0e}: one read pass at that bandwidth = {floor_ms:.3f} ms")
# torch.topk(sorted=False) on Laplace data of the same size and law (not the same bits).
g = torch.distributions.Laplace(0.0, 1e-3).sample((n_max,)).to(dev)
torch_ms = {}
for d in densities:
    k = max(1, int(math.floor(n_max * d)))
    torch_ms[d] = median_ms(lambda: torch.topk(g.abs(), k, sorted=False), reps=10)

print(f"{'method':18} {'density':>8} {'ms':>9} {'x_read':>7} {'x_floor':>8}")
for r in rows:
    if r["n"] != n_max:
        continue
    print(f"{r['method']:18} {r['density']:8g} {r['median_ms']:9.3f} {r['ratio_to_read']:7.2f} "
          f"{r['median_ms'] / floor_ms:8.2f}")
read_ms = next(r["median_ms"] for r in rows if r["n"] == n_max and r["method"] == "read")
for d in densities:
    print(f"{'torch.topk':18} {d:8g} {torch_ms[d]:9.3f} {torch_ms[d] / read_ms:7.2f} "
          f"{torch_ms[d] / floor_ms:8.2f}")
PY
# The Python package's CUDA tensor paths (gradscope.select on the device, the DDP hook over NCCL):
# a full build with the extension, against this Python's CUDA PyTorch. GS_PYTHON_CHECK=0 skips it.
python_status="not run (GS_PYTHON_CHECK=0)"
if [[ "${GS_PYTHON_CHECK:-1}" != 0 ]]; then
  say "building the Python package (${BUILD}-python) and running tests/python/gpu"
  if cmake -S "${ROOT}" -B "${BUILD}-python" -DCMAKE_BUILD_TYPE=Release -DGS_ENABLE_CUDA=ON \
        "${ARCH_ARGS[@]}" -DGS_ENABLE_GUI=OFF -DGS_PYTHON="$(command -v "${PYTHON}")" \
        > "${OUT_DIR}/python-configure.log" 2>&1 \
     && cmake --build "${BUILD}-python" -j "${JOBS}" --target _gradscope > "${OUT_DIR}/python-build.log" 2>&1; then
    : > "${OUT_DIR}/overlap.jsonl"
    if GS_GPU_CHECK_OUT="${OUT_DIR}/overlap.jsonl" PYTHONPATH="${BUILD}-python/python" \
         "${PYTHON}" -m pytest -q -rs "${ROOT}/tests/python/gpu" > "${OUT_DIR}/python-tests.log" 2>&1; then
      python_status="passed"
    else
      python_status="FAILED (see ${OUT_DIR}/python-tests.log)"
    fi
    grep -q "SKIPPED" "${OUT_DIR}/python-tests.log" && python_status="${python_status}, with skips: $(grep -o 'SKIPPED.*' "${OUT_DIR}/python-tests.log" | head -3 | tr '\n' ' ')"
    if [[ ${SANITIZE} -eq 1 ]]; then
      # The single-process tests only: torchrun's workers and the timing check are not for a sanitizer.
      for tool in memcheck racecheck initcheck synccheck; do
        say "compute-sanitizer --tool ${tool} over tests/python/gpu"
        status="clean"
        PYTHONPATH="${BUILD}-python/python" "${SANITIZER}" --tool "${tool}" --error-exitcode 3 \
          "${PYTHON}" -m pytest -q "${ROOT}/tests/python/gpu/test_cuda_tensors.py" \
          > "${OUT_DIR}/sanitizer-${tool}-python.log" 2>&1 || status="FAILED (${OUT_DIR}/sanitizer-${tool}-python.log)"
        sanitizer_rows+=("${tool} (python)|${status}")
      done
    fi
  else
    python_status="not built (the full build needs the project's dependencies; see ${OUT_DIR}/python-*.log)"
  fi
fi
overlap="not measured"
if [[ -s "${OUT_DIR}/overlap.jsonl" ]]; then overlap="$(tail -1 "${OUT_DIR}/overlap.jsonl")"; fi
{
  echo "tests: ${tests_status}"
  for row in "${sanitizer_rows[@]}"; do echo "compute-sanitizer ${row%%|*}: ${row#*|}"; done
  [[ ${SANITIZE} -eq 1 ]] || echo "compute-sanitizer: not run (--no-sanitizer)"
  echo "large vectors: ${large_status}"
  echo "python CUDA tests: ${python_status}"
  echo "hook overlap with the backward pass (CUDA events, ms): ${overlap}"
} > "${OUT_DIR}/status.txt"
cat "${OUT_DIR}/status.txt" "${OUT_DIR}/summary.txt"
echo "full results: ${OUT_DIR}/ (kernels_cuda.json, tests.log, sanitizer-*.log, large.log, summary.txt)"

if [[ -n "${REPORT}" ]]; then
  {
    echo "# gpu-check report"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "- commit: $(git -C "${ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "${ROOT}" diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | paste -sd';')"
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; OS: $(. /etc/os-release && echo "${PRETTY_NAME}")"
    echo "- CUDA: $(nvcc --version | tail -1); architectures: $(grep -m1 '^CMAKE_CUDA_ARCHITECTURES' "${BUILD}/CMakeCache.txt" | cut -d= -f2)"
    echo "- PyTorch: $("${PYTHON}" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
    echo "- reproduce: scripts/gpu-check.sh --report FILE (sizes ${SIZES}, densities ${DENSITIES})"
    echo
    echo "## What ran"
    echo
    echo '```'
    cat "${OUT_DIR}/status.txt"
    echo '```'
    echo
    echo "## Kernels (medians)"
    echo
    echo '```'
    cat "${OUT_DIR}/summary.txt"
    echo '```'
  } > "${REPORT}"
  echo "report: ${REPORT}"
fi
