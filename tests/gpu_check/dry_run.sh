#!/usr/bin/env bash
# ctest gpu_check.dry_run ROOT DIR: the bundle into DIR/bundle, then the quick dry run (build in
# DIR/build, results in DIR/results).
set -euo pipefail
root=$1 dir=$2
bash "${root}/scripts/gpu-bundle.sh" "${dir}/bundle"
exec bash "${root}/scripts/gpu-check.sh" --bundle "${dir}/bundle" --out "${dir}/results" --build "${dir}/build" --dry-run --quick
