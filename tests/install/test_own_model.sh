#!/usr/bin/env bash
# install.own_model: BUILD_DIR EXAMPLE_DIR WORK_DIR
# Installs BUILD_DIR into WORK_DIR/prefix, builds the example against that prefix only, runs two
# workers of it on loopback and checks what they report and the snapshot rank 0 recorded, read by
# the installed gradscope; then runs a torch command through the installed gradscope, which hands
# it to the installed gradscope-torch beside it.
set -euo pipefail
build=$1 example=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
gradscope="$work/prefix/bin/gradscope"
[[ -x "$gradscope" && -x "$work/prefix/bin/gradscope-torch" ]] \
  || { echo "bin/gradscope and bin/gradscope-torch were not installed" >&2; exit 1; }
# Only the prefix: no path into the source or build tree reaches the example.
cmake -S "$example" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
  > "$work/configure.log"
cmake --build "$work/build" -j2 > "$work/build.log"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
common=(--world 2 --port "$port" --steps 20 --compressor sidco-e --ratio 0.05)
"$work/build/own_model" --rank 0 "${common[@]}" --record "$work/run.h5" > "$work/rank0.log" 2>&1 &
r0=$!
"$work/build/own_model" --rank 1 "${common[@]}" > "$work/rank1.log" 2>&1 &
r1=$!
status=0
wait $r0 || status=$?
wait $r1 || status=$?
cat "$work/rank0.log"
if [[ $status -ne 0 ]]; then
  echo "a worker failed (status $status):" >&2
  cat "$work/rank1.log" >&2
  exit 1
fi
grep -q "replicas agree: yes" "$work/rank0.log" || { echo "replicas differ" >&2; exit 1; }
grep -q "with sidco-e at density 0.05" "$work/rank0.log" || { echo "no compression summary" >&2; exit 1; }

# Rank 0 recorded every 5th step of its own model: steps 0, 5, 10, 15 of its 16 layers.
"$gradscope" info "$work/run.h5" --json > "$work/info.json"
python3 - "$work/info.json" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
assert info["model"] == "resnet-small", info["model"]
assert info["steps"]["numbers"] == [0, 5, 10, 15], info["steps"]
layers = info["layers"]
assert len(layers) == 16 and layers[0]["name"] == "stem.weight", layers
assert info["total_numel"] == sum(l["numel"] for l in layers)
print("snapshot ok:", len(layers), "layers, steps", info["steps"]["numbers"])
PY

# The installed pair: gradscope without libtorch, a torch command run by gradscope-torch.
if ldd "$gradscope" | grep -E 'libtorch|libc10'; then
  echo "the installed gradscope links libtorch" >&2
  exit 1
fi
"$gradscope" capture --model mlp --steps 2 --every 1 --out "$work/capture.h5" --quiet > "$work/capture.log" 2>&1 \
  || { cat "$work/capture.log" >&2; exit 1; }
"$gradscope" info "$work/capture.h5" --json > "$work/capture.json"
python3 - "$work/capture.json" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
assert info["model"] == "mlp" and info["steps"]["numbers"] == [0, 1], info
print("installed gradscope capture ok: steps", info["steps"]["numbers"])
PY
