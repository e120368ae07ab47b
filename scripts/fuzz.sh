#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each (default 60) in a clang build with ASan and UBSan
# (GS_FUZZ_BUILD_DIR, default build-fuzz/, configured and built here when missing), starting from
# the committed seeds; new inputs go to build-fuzz/tests/fuzz/found/<target>/, crashes to
# build-fuzz/tests/fuzz/crashes/. Prints each target's executions and coverage (libFuzzer's cov
# and ft counters) as a Markdown table. Exit status 1 when a target crashed.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
seconds=${1:-60}
shift || true
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GS_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${GS_JOBS:-2}

if [[ ! -f $build/tests/fuzz/targets.txt ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DGS_FUZZ=ON >/dev/null
fi
cmake --build "$build" -j"$jobs" >/dev/null

fuzz=$build/tests/fuzz
mkdir -p "$fuzz/crashes" "$fuzz/logs"
status=0
echo "| target | seconds | executions | exec/s | cov | ft | corpus | result |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
while IFS=: read -r name corpus; do
  [[ -z $name ]] && continue
  if (($# > 0)) && [[ " $* " != *" $name "* ]]; then continue; fi
  mkdir -p "$fuzz/found/$name"
  log=$fuzz/logs/$name.log
  result=ok
  "$fuzz/$name" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$fuzz/crashes/$name-" \
    "$fuzz/found/$name" "$root/tests/fuzz/corpus/$corpus" >"$log" 2>&1 || { result=CRASH; status=1; }
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{print $2}' | tail -1 || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | awk '{print $2}' | tail -1 || true)
  last=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' | tail -1 || true)
  cov=$(awk '{print $2}' <<<"$last")
  ft=$(awk '{print $4}' <<<"$last")
  corp=$(awk '{print $6}' <<<"$last")
  echo "| $name | $seconds | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $result |"
done <"$fuzz/targets.txt"
exit $status
