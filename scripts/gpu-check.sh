#!/usr/bin/env bash
# gpu-check.sh: proves the GPU path on a GPU node in one command, with nothing but what
# scripts/gpu-bundle.sh gathered (no network, no package manager), timings first. Three phases,
# each under what is left of the check's budget:
#   timing      builds what the timings need (gs_kernels_bench and the Python extension, every
#               core), runs the GPU benchmarks (scripts/gpu_bench.py) and tests/python/gpu (the
#               hook's waits, bus bytes and overlap), then writes results.json and report.md;
#   tests       builds the C++ suites (fitting/, kernels/, compress/), checks that every test filter
#               it uses selects cases, runs the suites with their CUDA cases;
#   sanitizers  compute-sanitizer memcheck over the CUDA cases, racecheck over a bounded subset
#               (gradscope's own shared-memory kernels at n <= 131075, the log histogram, the
#               resident selections).
# Writes RESULTS/results.json (every step, each phase's seconds, the targets), RESULTS/report.md
# (for docs/gpu.md: met, missed or open) and RESULTS/check.log, and prints a table of the steps.
# Exit status: 0 passed; 1 something failed, or did not run that had to (a CUDA case that skips on
# the GPU, zero CUDA cases, a filter that selects no case); 2 incomplete: nothing failed, but a
# step was cut by the budget or the sanitizer cannot use this device (the report says which).
#
# Needs on the node: an NVIDIA GPU and driver, CUDA 13 (nvcc, compute-sanitizer) on PATH or in
# /usr/local/cuda/bin, CMake >= 3.25 (ninja if there), a C++20 compiler, Python 3 with a CUDA
# torch, torchvision, pybind11 and pytest (GS_PYTHON names it; default: the first of python3,
# /usr/bin/python3 that imports torch).
#
# Usage: scripts/gpu-check.sh --bundle DIR --out RESULTS [--dry-run [--quick]] [--build BUILD] [--large]
#   --bundle DIR   what scripts/gpu-bundle.sh made (here, then carried to the node)
#   --out RESULTS  results.json, report.md and check.log (made; files in it are replaced)
#   --dry-run      no GPU: the same steps with CUDA off (configure from DIR, build, the C++
#                  suites, the extension imported); the GPU steps are named "skipped: no GPU"
#   --quick        with --dry-run: the kernel benchmark and one suite (gs_fitting_tests: Boost.Math
#                  and GoogleTest from the bundle; fitting/ and kernels/, FFTW3 from the bundle),
#                  without compress/ and the extension (the test suite's check of this script; the
#                  full dry run is the one to make before a GPU session)
#   --build BUILD  build folder (default build-gpu-check in the repository root)
#   --large        also the large-vector case (CudaLarge: minutes, up to 10 GB of device memory)
# GS_CHECK_SECONDS: the whole check's budget (default 360): each step runs under what is left; a
# step the budget stops, or leaves no time for, is reported as cut. GS_CHECK_JOBS: build jobs
# (default: every core, nproc); GS_CHECK_COMMIT: the commit to report where the tree has no .git.
set -euo pipefail
# The whole script is one block, read before it runs: a checkout changed under a running check
# (a pull, an edit) does not change what it does.
{
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="" RESULTS="" BUILD="" DRY=0 QUICK=0 LARGE=0
die() { echo "gpu-check: error: $*" >&2; exit 1; }
say() { echo "gpu-check: $*" >&2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle|--out|--build)
      [[ $# -ge 2 ]] || die "$1 needs a folder"
      case "$1" in --bundle) BUNDLE="$2" ;; --out) RESULTS="$2" ;; --build) BUILD="$2" ;; esac
      shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --quick) QUICK=1; shift ;;
    --large) LARGE=1; shift ;;
    -h|--help) sed -n '2,37p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ -n "${BUNDLE}" && -n "${RESULTS}" ]] || die "give --bundle DIR and --out RESULTS (see --help)"
[[ ${QUICK} -eq 0 || ${DRY} -eq 1 ]] || die "--quick goes with --dry-run (a GPU check builds and runs everything)"
[[ -d "${BUNDLE}/prefix" ]] || die "${BUNDLE} holds no prefix/: make it with scripts/gpu-bundle.sh"
BUNDLE="$(cd "${BUNDLE}" && pwd)"
P="${BUNDLE}/prefix"
BUILD="${BUILD:-${ROOT}/build-gpu-check}"
mkdir -p "${RESULTS}" "${BUILD}"
RESULTS="$(cd "${RESULTS}" && pwd)" BUILD="$(cd "${BUILD}" && pwd)"
WORK="${BUILD}/check-work"          # steps.jsonl, the suites' JSON, figures: read by the report
rm -rf "${WORK}" && mkdir -p "${WORK}"
rm -f "${RESULTS}/results.json" "${RESULTS}/report.md" "${RESULTS}/check.log"
LOG="${RESULTS}/check.log"
JOBS="${GS_CHECK_JOBS:-$(nproc)}"
MODE=gpu
[[ ${DRY} -eq 1 ]] && MODE=dry

# ---- the tools: every problem said before anything is built.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH="/usr/local/cuda/bin:${PATH}"; fi
command -v cmake >/dev/null || die "cmake (>= 3.25) not found"
PY=""
for candidate in "${GS_PYTHON:-}" python3 /usr/bin/python3; do
  if [[ -z "${candidate}" ]] || ! command -v "${candidate}" >/dev/null; then continue; fi
  if "${candidate}" -c 'import torch' 2>/dev/null; then PY="$(command -v "${candidate}")"; break; fi
done
if [[ ${MODE} == gpu ]]; then
  if ! nvidia-smi -L >/dev/null 2>&1; then die "no GPU (nvidia-smi); without one use --dry-run"; fi
  command -v nvcc >/dev/null || die "nvcc not found (CUDA's bin folder)"
  command -v compute-sanitizer >/dev/null || die "compute-sanitizer not found (CUDA's bin folder)"
  [[ -n "${PY}" ]] || die "no Python that imports torch (set GS_PYTHON)"
  "${PY}" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || die "${PY}'s torch sees no GPU"
fi
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
CHECK_START=$(date +%s)
# The whole check's budget (GS_CHECK_SECONDS, default 6 minutes): each step runs under the time
# left (less a reserve for the report); a step the budget stops, or that would start with too
# little left, is cut (reported as such, not as failed). The timings run first.
CHECK_SECONDS="${GS_CHECK_SECONDS:-360}"
[[ "${CHECK_SECONDS}" =~ ^[0-9]+$ ]] || die "GS_CHECK_SECONDS must be a number of seconds"
DEADLINE=$(( CHECK_START + CHECK_SECONDS ))

# ---- steps: each one's output a section of check.log (long ones cut in the middle), one line of
# steps.jsonl that scripts/gpu_check_report.py reads; its long commands under its time limit (lim).
step_log="" STEP_LIMIT=60 STEP_EXTRA="" PHASE=setup
section() {  # section NAME FILE: FILE into check.log, at most 400 lines
  local n; n=$(wc -l < "$2")
  { echo "===== $1"
    if (( n > 400 )); then head -n 200 "$2"; echo "[... $((n - 400)) lines cut ...]"; tail -n 200 "$2"; else cat "$2"; fi
  } >> "${LOG}"
}
record() {  # record STEP STATUS SECONDS [JSON fields without braces]; the step's phase is PHASE's
  printf '{"step": "%s", "phase": "%s", "status": "%s", "seconds": %s%s}\n' "$1" "${PHASE}" "$2" "$3" "${4:+, $4}" \
    >> "${WORK}/steps.jsonl"
}
BLOCKED="" NO_TESTS=""  # why every later step, or every step of the C++ suites, cannot run
run_step() {  # run_step STEP LIMIT_S COMMAND...: runs it, logs it, records rc and seconds (LAST_RC)
  local step="$1"; STEP_LIMIT="$2"; shift 2
  LAST_RC=1
  local left=$(( DEADLINE - $(date +%s) - 15 )) by_budget=0
  if [[ ${MODE} == gpu ]] && (( left < 20 )); then
    record "${step}" "cut: the check's ${CHECK_SECONDS} s were spent before it" 0; STEP_EXTRA=""; return
  fi
  if [[ -n "${BLOCKED}" ]]; then skip "${step}" "${BLOCKED}"; STEP_EXTRA=""; return; fi
  case "${step}" in
    build-suites|cuda-filters|cpp-suites|memcheck|racecheck|large-vectors)
      if [[ -n "${NO_TESTS}" ]]; then skip "${step}" "${NO_TESTS}"; STEP_EXTRA=""; return; fi ;;
  esac
  if [[ ${MODE} == gpu ]] && (( STEP_LIMIT > left )); then STEP_LIMIT=${left} by_budget=1; fi
  step_log="${WORK}/${step}.log"
  say "${step}"
  local t0 rc=0 status=ran; t0=$(date +%s)
  "$@" > "${step_log}" 2>&1 || rc=$?
  # Stopped at a limit that the budget set, not the step's own: cut, not failed.
  if (( by_budget && (rc == 124 || rc == 137) )); then
    status="cut: stopped when the check's ${CHECK_SECONDS} s ran out"
  fi
  section "${step} (exit ${rc}, $(( $(date +%s) - t0 )) s)" "${step_log}"
  record "${step}" "${status}" "$(( $(date +%s) - t0 ))" \
    "\"rc\": ${rc}, \"limit_s\": ${STEP_LIMIT}${STEP_EXTRA:+, ${STEP_EXTRA}}"
  STEP_EXTRA="" LAST_RC="${rc}"
}
lim() {  # lim COMMAND...: COMMAND under the running step's time limit
  local rc=0
  timeout --kill-after=15 "${STEP_LIMIT}" "$@" || rc=$?
  if (( rc == 124 || rc == 137 )); then echo "[gpu-check: $1 stopped at the step's limit of ${STEP_LIMIT} s]"; fi
  return "${rc}"
}
skip() { record "$1" "skipped: $2" 0; }
blocks_if_failed() {  # after a step that everything later needs: the first reason stays
  if [[ -z "${BLOCKED}" && "${LAST_RC}" != 0 ]]; then BLOCKED="$1"; fi
}

# 1. The bundle's libraries resolve here: the node's own first, a bundled one where the node lacks
# it (or has one too old), every one named where neither will do.
bundle_libs="${BUILD}/bundle-libs"
check_bundle() {
  rm -rf "${bundle_libs}" && mkdir -p "${bundle_libs}"
  local ld="${P}/lib:${bundle_libs}" changed=1 missing=""
  local files=("${P}/lib/"*.so.* "${P}/lib/hdf5/plugins/"*.so "${P}/libexec/pkgconf")
  while (( changed )); do
    changed=0 missing=""
    for f in "${files[@]}" "${bundle_libs}"/*; do
      [[ -e "$f" ]] || continue
      while read -r soname; do
        if [[ -e "${P}/lib/deps/${soname}" && ! -e "${bundle_libs}/${soname}" ]]; then
          ln -s "${P}/lib/deps/${soname}" "${bundle_libs}/${soname}"; changed=1
        else
          missing+="${f#"${BUNDLE}/"}: ${soname}"$'\n'
        fi
      done < <(LD_LIBRARY_PATH="${ld}" ldd "$f" 2>&1 | sed -n -e 's/^\s*\(\S*\) => not found.*/\1/p' \
                 -e "s/^.*: \(\S*\): version .* not found.*/\1/p" | xargs -r -n1 basename | sort -u)
    done
  done
  local taken; taken="$(find "${bundle_libs}" -mindepth 1 -printf '%f\n' | sort | paste -sd' ')"
  echo "prefix/lib/deps: taken from the bundle (this machine lacks them): ${taken:-none}; the rest from this machine"
  [[ -z "${missing}" ]] || { printf 'DO NOT RESOLVE:\n%s' "${missing}"; return 1; }
}
RUNTIME_LD="${P}/lib:${bundle_libs}"
run_step bundle 60 check_bundle
blocks_if_failed "the bundle's libraries do not resolve (step bundle)"

# 2. GoogleTest from the bundle's source.
GTEST_DIR="${BUILD}/_gtest-install/lib/cmake/GTest"
# --quick proves that it builds from the bundle: unoptimized, its one large file takes a third of
# the time.
GTEST_FLAGS=()
[[ ${QUICK} -eq 1 ]] && GTEST_FLAGS=(-DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG")
build_gtest() {
  lim cmake -S "${BUNDLE}/src/googletest" -B "${BUILD}/_gtest" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON -DCMAKE_INSTALL_PREFIX="${BUILD}/_gtest-install" \
      -DCMAKE_INSTALL_MESSAGE=NEVER "${GTEST_FLAGS[@]}" || return 1
  lim cmake --build "${BUILD}/_gtest" -j "${JOBS}" --target install
}
run_step googletest 300 build_gtest
(( LAST_RC == 0 )) || NO_TESTS="no GoogleTest (step googletest failed)"

# 3. Configure against the prefix only, then say where each dependency was found.
CMAKE_ARGS=("${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGS_ENABLE_TORCH=OFF -DGS_ENABLE_GUI=OFF
            -DGS_ENABLE_APPS=ON -DGS_BUILD_BENCH=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
            -DCMAKE_PREFIX_PATH="${P}" -DBOOST_ROOT="${P}" -DBoost_NO_SYSTEM_PATHS=ON -DHDF5_ROOT="${P}"
            -DZLIB_ROOT="${P}" -DPKG_CONFIG_EXECUTABLE="${P}/bin/pkg-config")
if [[ -z "${NO_TESTS}" ]]; then CMAKE_ARGS+=(-DGS_BUILD_TESTS=ON -DGTest_DIR="${GTEST_DIR}"); else CMAKE_ARGS+=(-DGS_BUILD_TESTS=OFF); fi
# The libraries that libhdf5 needs, found at link time where they lie at run time.
for kind in EXE SHARED MODULE; do CMAKE_ARGS+=("-DCMAKE_${kind}_LINKER_FLAGS=-Wl,-rpath-link,${RUNTIME_LD}"); done
# The extension needs a Python that imports torch, its headers (Python.h) and pybind11 (the pip
# package's CMake config, else one CMake finds); without them the rest of the check still runs.
NO_EXT=""
if [[ ${QUICK} -eq 1 ]]; then
  NO_EXT="left out (--quick)"
  # What --quick proves is where every header and library came from, not the code's speed: -O1
  # builds its libraries and suite in about half the time of -O3.
  CMAKE_ARGS+=(-DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG")
elif [[ -z "${PY}" ]]; then
  NO_EXT="no Python that imports torch (GS_PYTHON)"
elif ! "${PY}" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'; then
  NO_EXT="${PY} has no Python.h (its development headers)"
fi
if [[ -z "${NO_EXT}" ]]; then
  CMAKE_ARGS+=(-DGS_PYTHON="${PY}")
  pybind11_dir="$("${PY}" -m pybind11 --cmakedir 2>/dev/null || true)"
  if [[ -n "${pybind11_dir}" ]]; then CMAKE_ARGS+=(-Dpybind11_DIR="${pybind11_dir}"); fi
else
  CMAKE_ARGS+=(-DGS_ENABLE_PYTHON=OFF)
fi
if [[ ${MODE} == gpu ]]; then
  CMAKE_ARGS+=(-DGS_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native)
else
  CMAKE_ARGS+=(-DGS_ENABLE_CUDA=OFF)
fi
configure() {
  rm -f "${BUILD}/CMakeCache.txt"
  lim cmake -S "${ROOT}" -B "${BUILD}" "${CMAKE_ARGS[@]}" || return 1
  # One line per dependency the bundle provides (each must lie in the prefix), then the node's own.
  local cache="${BUILD}/CMakeCache.txt" outside=0
  get() { sed -n "s/^$1:[A-Z]*=//p" "${cache}" | head -1; }
  echo "----- dependencies"
  local rows=("Boost headers|boost_headers_DIR" "Boost.Math include|Boost_INCLUDE_DIR" "HDF5 headers|HDF5_C_INCLUDE_DIR"
              "HDF5 library|HDF5_hdf5_LIBRARY_RELEASE" "zlib headers|ZLIB_INCLUDE_DIR" "zlib library|ZLIB_LIBRARY_RELEASE"
              "FFTW3 (fftw3f)|pkgcfg_lib_FFTW3F_fftw3f" "CLI11|CLI11_DIR" "nlohmann-json|nlohmann_json_DIR")
  [[ -n "${NO_TESTS}" ]] || rows+=("GoogleTest|GTest_DIR")
  for row in "${rows[@]}"; do
    local name="${row%%|*}" value; value="$(get "${row#*|}")"
    if [[ "${value}" == "${P}"/* || ( "${name}" == GoogleTest && "${value}" == "${BUILD}/_gtest-install"/* ) ]]; then
      printf '  %-20s %s\n' "${name}" "${value}"
    else
      printf '  %-20s %s   <-- NOT FROM THE BUNDLE\n' "${name}" "${value:-not found}"; outside=1
    fi
  done
  printf '  %-20s %s\n' "pybind11 (node)" "$(get pybind11_DIR)" "Python (node)" "$(get GS_PYTHON)" \
    "C++ compiler" "$(get CMAKE_CXX_COMPILER)"
  if [[ ${MODE} == gpu ]]; then
    printf '  %-20s %s\n' "CUDA compiler" "$(get CMAKE_CUDA_COMPILER)" "CUDA architectures" "$(get CMAKE_CUDA_ARCHITECTURES)"
  fi
  return "${outside}"
}
run_step configure 180 configure
blocks_if_failed "configure failed"

# ---- phase timing: build what the timings need, every core; then whether any header or library
# of the bundle's kinds came from elsewhere, and whether the extension imports.
PHASE=timing
TIMING_TARGETS=(gs_kernels_bench)
SUITES=(fitting/gs_fitting_tests kernels/gs_kernels_tests compress/test_compress)
[[ ${QUICK} -eq 1 ]] && SUITES=(fitting/gs_fitting_tests)
SUITE_TARGETS=()
[[ -z "${NO_TESTS}" ]] && for s in "${SUITES[@]}"; do SUITE_TARGETS+=("$(basename "${s}")"); done
if [[ -z "${NO_EXT}" && -f "${BUILD}/CMakeCache.txt" ]] && ! grep -q '^GS_ENABLE_PYTHON:BOOL=ON' "${BUILD}/CMakeCache.txt"; then
  NO_EXT="CMake found no pybind11 (the pip package: ${PY:-python3} -m pybind11 --cmakedir)"
fi
[[ -z "${NO_EXT}" ]] && TIMING_TARGETS+=(_gradscope)
provenance() {  # every header and library of the bundle's kinds from the bundle
  local bad=""
  if [[ ${#GEN[@]} -gt 0 ]]; then
    bad="$(ninja -C "${BUILD}" -t deps | grep -E '/(boost|CLI|nlohmann|gtest)/|/(hdf5|H5[A-Za-z]*public|fftw3|zlib|zconf)\.h$' \
           | grep -v -e "${P}/" -e "${BUILD}/_gtest-install/" | sort -u | head -5 || true)"
  fi
  for f in "${BUILD}"/tests/{fitting,kernels,compress}/*_tests "${BUILD}/tests/compress/test_compress" \
           "${BUILD}/bench/gs_kernels_bench" "${BUILD}"/python/gradscope/_gradscope*.so; do
    [[ -e "$f" ]] || continue
    bad+="$(LD_LIBRARY_PATH="${RUNTIME_LD}" ldd "$f" | grep -E 'libhdf5|libfftw3f' | grep -v "${P}/" || true)"
  done
  [[ -z "${bad}" ]] || { printf 'FROM OUTSIDE THE BUNDLE:\n%s\n' "${bad}"; return 1; }
  echo "every header and library of the bundle's kinds came from ${P}"
}
build_timing() {
  lim cmake --build "${BUILD}" -j "${JOBS}" --target "${TIMING_TARGETS[@]}" || return 1
  provenance || return 1
  if [[ -z "${NO_EXT}" ]]; then
    PYTHONPATH="${BUILD}/python" LD_LIBRARY_PATH="${RUNTIME_LD}" lim "${PY}" -c \
      'import gradscope, torch; print("extension imports:", gradscope.__file__, "torch", torch.__version__)'
  fi
}
STEP_EXTRA="\"python\": \"${PY}\", \"extension\": \"${NO_EXT:+not built: }${NO_EXT:-built}\""
run_step build-timing "$([[ ${MODE} == gpu ]] && echo 240 || echo 1200)" build_timing
blocks_if_failed "the build failed (step build-timing)"

export LD_LIBRARY_PATH="${RUNTIME_LD}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export HDF5_PLUGIN_PATH="${P}/lib/hdf5/plugins"
REPORT_PY="${PY:-$(command -v python3)}"
report() {  # report [--interim]: results.json, report.md and the table of steps; its exit status
  "${REPORT_PY}" "${ROOT}/scripts/gpu_check_report.py" --mode "${MODE}" --work "${WORK}" --out "${RESULTS}" \
    --root "${ROOT}" --build "${BUILD}" --python "${PY}" --seconds "$(( $(date +%s) - CHECK_START ))" "$@"
}

# The GPU benchmarks (copy bandwidth, kernels, selections against torch.topk, ResNet-18 under DDP),
# then tests/python/gpu: the Python package on CUDA tensors, the hook's waits and bus bytes over
# NCCL and Gloo, and its overlap with the backward pass.
if [[ ${MODE} == gpu ]]; then
  STEP_EXTRA="\"bench\": \"bench.json\""
  run_step benchmarks 180 lim env PYTHONPATH="${BUILD}/python" "${PY}" "${ROOT}/scripts/gpu_bench.py" \
    --kernels-bench "${BUILD}/bench/gs_kernels_bench" --out "${WORK}/bench.json"
else
  skip benchmarks "no GPU"
fi
if [[ ${MODE} == gpu && -n "${NO_EXT}" ]]; then
  skip python-gpu-tests "no extension: ${NO_EXT}"
elif [[ ${MODE} == gpu ]]; then
  STEP_EXTRA="\"junit\": \"pytest.xml\", \"figures\": \"figures.jsonl\""
  run_step python-gpu-tests 120 lim env PYTHONPATH="${BUILD}/python" GS_GPU_CHECK_OUT="${WORK}/figures.jsonl" \
    "${PY}" -m pytest -q -rs -p no:cacheprovider --junitxml="${WORK}/pytest.xml" "${ROOT}/tests/python/gpu"
else
  skip python-gpu-tests "no GPU"
fi
# The timings are written now: a node taken back during the tests still leaves them.
report --interim > "${WORK}/interim.log" 2>&1 || true

# ---- phase tests: the C++ suites built, their filters checked, run.
PHASE=tests
build_suites() { lim cmake --build "${BUILD}" -j "${JOBS}" --target "${SUITE_TARGETS[@]}" && provenance; }
run_step build-suites "$([[ ${MODE} == gpu ]] && echo 180 || echo 1200)" build_suites
[[ -n "${NO_TESTS}" ]] || (( LAST_RC == 0 )) || NO_TESTS="the suites' build failed (step build-suites)"

# The CUDA cases: the kernels' table-driven cases on backend cuda, the CUDA-only checks and cuFFT's;
# the compressors' on backend cuda: cuFFT in the fft compressor and the DDP hook's device path
# (CudaBucket.*; its cuda-host twins, CudaHostBucket*, run on the host and are no CUDA cases).
KERNELS_CUDA='*/cuda:Cuda.*:RealFft.CudaMatchesDirectDft'
COMPRESS_CUDA='Fft.CudaBackendMatchesCpu:CudaBucket.*'
MEMCHECK_KERNELS="${KERNELS_CUDA}-Cuda.ErrorsBecomeGsError"
# racecheck's subset (slower, and only shared memory is its concern): the statistics passes' fused
# block reduction at every shape (GS_PASSES_MAX_N: n up to 131075, not the two cases of 1e6), the
# log histogram; then the resident selections (Selector.*: every rule's selection at n up to
# 200,003: the stages' reduce_then, the gated radix histograms, select_then's blocks; sidco-topk's
# cases at 1e6 over 18 shapes and densities, and the selections of 5M elements denser than a block
# keeps, are left to memcheck).
RACECHECK_KERNELS='*/PassesVsOracle.EveryPassOnEveryShapeAndSize/cuda:*/LogHistogram.*/cuda'
RACECHECK_SELECTIONS='*/Selector.*/cuda-*/Selector.SelectionsDenserThanABlockKeepsStayInOrder/cuda'
RACECHECK_MAX_N=131075
# cases_match SUITE FILTER: fails, saying so, when FILTER selects no case of the suite (a step
# whose filter matched nothing would pass having checked nothing).
cases_match() { "${REPORT_PY}" "${ROOT}/scripts/gpu_check_report.py" count-cases "${BUILD}/tests/$1" "$2"; }

# Every filter the check runs a suite with selects cases of it (those of the suites built).
check_filters() {
  local rc=0 run
  for run in "kernels/gs_kernels_tests|${KERNELS_CUDA}" "compress/test_compress|${COMPRESS_CUDA}" \
             "kernels/gs_kernels_tests|${MEMCHECK_KERNELS}" "kernels/gs_kernels_tests|${RACECHECK_KERNELS}" \
             "kernels/gs_kernels_tests|${RACECHECK_SELECTIONS}"; do
    [[ -x "${BUILD}/tests/${run%%|*}" ]] || continue
    cases_match "${run%%|*}" "${run#*|}" || rc=1
  done
  return "${rc}"
}
run_step cuda-filters 60 check_filters

# The C++ suites, every case (the large-vector one apart), each writing gtest JSON.
suites() {
  local rc=0 s
  for s in "${SUITES[@]}"; do
    echo "--- ${s}"
    lim "${BUILD}/tests/${s}" --gtest_brief=1 --gtest_filter='-CudaLarge.*' \
      --gtest_output="json:${WORK}/gtest-$(basename "${s}").json" || rc=1
  done
  return "${rc}"
}
SUITE_NAMES="$(printf '"%s", ' "${SUITES[@]##*/}")"
STEP_EXTRA="\"suite_names\": [${SUITE_NAMES%, }], \"gtest_json\": \"gtest-*.json\", \"cuda_filters\": {\"gs_kernels_tests\": \"${KERNELS_CUDA}\", \"test_compress\": \"${COMPRESS_CUDA}\"}"
run_step cpp-suites "$([[ ${MODE} == gpu ]] && echo 120 || echo 600)" suites

# Vectors past the 32-bit limits: only with --large.
if [[ ${MODE} == gpu && ${LARGE} -eq 1 ]]; then
  run_step large-vectors 300 lim env GS_LARGE_N=1 "${BUILD}/tests/kernels/gs_kernels_tests" --gtest_filter='CudaLarge.*'
elif [[ ${MODE} == gpu ]]; then
  skip large-vectors "not asked (--large: minutes, up to 10 GB of device memory)"
else
  skip large-vectors "no GPU"
fi

# ---- phase sanitizers: compute-sanitizer over the CUDA cases, less those that make an API call
# fail on purpose (Cuda.ErrorsBecomeGsError asks for 4 PiB); first whether it can use this device
# at all (a GPU under gVisor, for one, it refuses: "Device not supported").
PHASE=sanitizers
sanitize() {  # sanitize TOOL SUITE|FILTER...
  local tool="$1" rc=0 run; shift
  for run in "$@"; do
    [[ -n "${run#*|}" ]] || continue
    echo "--- ${run%%|*} --gtest_filter=${run#*|}"
    cases_match "${run%%|*}" "${run#*|}" || { rc=1; continue; }
    lim env GS_PASSES_MAX_N="${RACECHECK_MAX_N}" compute-sanitizer --tool "${tool}" --error-exitcode 3 \
      --print-limit 20 "${BUILD}/tests/${run%%|*}" --gtest_brief=1 --gtest_filter="${run#*|}" || rc=1
  done
  return "${rc}"
}
SANITIZER_OFF=""
if [[ ${MODE} == gpu && -z "${NO_TESTS}" && -z "${BLOCKED}" ]]; then
  probe="$(timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 "${BUILD}/tests/kernels/gs_kernels_tests" \
           --gtest_brief=1 --gtest_filter='Cuda.DeviceBufferRoundTripAndMove' 2>&1)" || true
  if ! grep -q '\[  PASSED  \] 1 test' <<<"${probe}"; then
    SANITIZER_OFF="$(grep -m1 -i -E 'not supported|error' <<<"${probe}" | cut -c1-160)"
    SANITIZER_OFF="compute-sanitizer cannot run a CUDA case on this device (${SANITIZER_OFF:-no output})"
  fi
fi
if [[ ${MODE} != gpu ]]; then
  skip memcheck "no GPU"; skip racecheck "no GPU"
elif [[ -n "${SANITIZER_OFF}" ]]; then
  record memcheck "unavailable: ${SANITIZER_OFF//\"/\'}" 0; record racecheck "unavailable: ${SANITIZER_OFF//\"/\'}" 0
else
  STEP_EXTRA="\"filters\": [\"${MEMCHECK_KERNELS}\", \"${COMPRESS_CUDA}\"]"
  run_step memcheck 90 sanitize memcheck "kernels/gs_kernels_tests|${MEMCHECK_KERNELS}" \
    "compress/test_compress|${COMPRESS_CUDA}"
  STEP_EXTRA="\"filters\": [\"${RACECHECK_KERNELS}\", \"${RACECHECK_SELECTIONS}\"], \"max_n\": ${RACECHECK_MAX_N}, \"subset\": \"gradscope's own shared-memory kernels, the resident selections\""
  run_step racecheck 120 sanitize racecheck "kernels/gs_kernels_tests|${RACECHECK_KERNELS}" \
    "kernels/gs_kernels_tests|${RACECHECK_SELECTIONS}"
fi

# results.json, report.md and the table of steps; the verdict is the report's exit status.
report
exit $?
}
