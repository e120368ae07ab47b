#!/usr/bin/env bash
# Lays out the tracked sources as the project keeps them: clang-format (.clang-format) for C++ and
# CUDA, black (pyproject.toml) for Python. --check changes nothing and fails naming the files that
# differ (the suite's format.check case).
#
#   scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[[ "${1:-}" == --check ]] && check=1
clang_format=$(command -v clang-format-14 || command -v clang-format || true)
[[ -n "$clang_format" ]] || { echo "format: clang-format is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
command -v black >/dev/null || { echo "format: black is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
[[ -d .git || -f .git ]] || { echo "format: needs the git checkout (it formats the tracked files)" >&2; exit 1; }
mapfile -d '' cxx < <(git ls-files -z -- '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h')
mapfile -d '' py < <(git ls-files -z -- '*.py')
status=0
if ((check)); then
  if ! out=$("$clang_format" --dry-run --Werror "${cxx[@]}" 2>&1); then
    bad=$(grep -oE '^[^: ]+\.(cpp|hpp|cu|cuh|h):' <<<"$out" | sort -u | tr -d ':' | tr '\n' ' ')
    echo "format: clang-format would change $(wc -w <<<"$bad") file(s): $bad(run scripts/format.sh)" >&2
    status=1
  fi
  black --check --quiet "${py[@]}" || { echo "format: black would change the files above (run scripts/format.sh)" >&2; status=1; }
else
  "$clang_format" -i "${cxx[@]}"
  black --quiet "${py[@]}"
fi
exit $status
