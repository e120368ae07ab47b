#!/usr/bin/env bash
# Reproduces docs/RESULTS.md: Fashion-MNIST CNN, 4 workers (processes on this machine, c10d Gloo on
# loopback), one epoch, densities 0.01 and 0.001, every compressor (none once), the rival methods,
# and several seeds (SEEDS, default 1 to 10) for the rows the accuracy goal is about (none,
# SIDCo, sidco-topk and top-k at 0.01, SIDCo and top-k also with a dense warm-up; with SCHEDULE_ROWS="cosine step" also
# with those learning-rate schedules, and with EXP_WARMUP_ROWS="23 58" under each of them the
# SIDCo and top-k rows with an exponential warm-up over that many steps; with BATCH_ROWS="32" the
# uncompressed, SIDCo and top-k rows, with and without a dense warm-up over 10% of the epoch, at
# that batch size under the step schedule).
#   [SEEDS="1 2"] [SCHEDULE_ROWS="cosine step" [EXP_WARMUP_ROWS="23"]] [BATCH_ROWS="32"] \
#   scripts/results.sh [BUILD_DIR] [OUT_DIR]
# (EXP_WARMUP_ROWS adds rows under each SCHEDULE_ROWS schedule only; EXP_START sets their
# --warmup-start-ratio, default 0.25, and enters the file names and labels when set.)
# Each run's JSON lands in OUT_DIR (default results/compressors); the table is printed on stdout
# and written to OUT_DIR/RESULTS.table.md. Runs already present in OUT_DIR are reused.
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-results/compressors}
BIN="$BUILD/cli/gradscope"
[ -x "$BIN" ] || { echo "results.sh: $BIN not found; build the gradscope target first" >&2; exit 1; }
mkdir -p "$OUT"
COMMON=(--model cnn --workers 4 --epochs 1 --lr 0.05 --granularity model
        --timeout 300 --json --quiet)
run() {  # name ratio seed [extra flags...] (WARMUP=N adds --warmup-steps N, EXP_WARMUP=N
         # --warmup-steps N --warmup-schedule exponential, SCHED=S --lr-schedule S, BATCH=B
         # --batch B instead of 64)
  local name=$1 ratio=$2 seed=$3
  shift 3
  local tag=${SCHED:-}
  [ "$tag" = cosine ] && tag=cos  # (the file names of earlier runs)
  local start=""
  [ -n "${EXP_WARMUP:-}" ] && start=${EXP_START:-}
  local f="$OUT/$name-$ratio-s$seed${WARMUP:+-w$WARMUP}${EXP_WARMUP:+-e$EXP_WARMUP}${start:+-from$start}${tag:+-$tag}${BATCH:+-b$BATCH}.json"
  if [ -n "${WARMUP:-}" ]; then set -- "$@" --warmup-steps "$WARMUP"; fi
  if [ -n "${EXP_WARMUP:-}" ]; then
    set -- "$@" --warmup-steps "$EXP_WARMUP" --warmup-schedule exponential
    if [ -n "$start" ]; then set -- "$@" --warmup-start-ratio "$start"; fi
  fi
  if [ -n "${SCHED:-}" ]; then set -- "$@" --lr-schedule "$SCHED"; fi
  set -- --batch "${BATCH:-64}" "$@"
  if [ -s "$f" ]; then return; fi
  echo "results.sh: $name at $ratio, seed $seed $*" >&2
  "$BIN" train "${COMMON[@]}" --seed "$seed" --compressor "$name" --ratio "$ratio" "$@" > "$f.tmp"
  mv "$f.tmp" "$f"
}
goal_rows() {  # seed: uncompressed, SIDCo and top-k at 0.01, then the latter with a dense warm-up
              # over the first 10% of the epoch (23 of 234 steps at batch 64, 47 of 468 at 32);
              # SCHED and BATCH pass through to run
  local steps=$(( 60000 / 4 / ${BATCH:-64} ))  # each worker: a quarter of 60000
  run none 1 "$1"
  for c in sidco-e sidco-p sidco-gp sidco-topk topk; do run "$c" 0.01 "$1"; done
  for c in sidco-e sidco-p sidco-gp topk; do WARMUP=$(( (steps + 5) / 10 )) run "$c" 0.01 "$1"; done
}
for seed in ${SEEDS:-1 2 3 4 5 6 7 8 9 10}; do
  goal_rows "$seed"
  # With SCHEDULE_ROWS, the same rows under each learning-rate schedule listed (cosine: decaying to
  # 0 over the epoch; step: a tenth of the rate over the last tenth of the steps).
  for sched in ${SCHEDULE_ROWS:-}; do
    SCHED=$sched goal_rows "$seed"
    # Exponential warm-up (DGC's): the first N steps compressed at a ratio falling from 0.25
    # (EXP_START: from that ratio instead).
    for n in ${EXP_WARMUP_ROWS:-}; do
      for c in sidco-e sidco-p sidco-gp topk; do EXP_WARMUP=$n SCHED=$sched run "$c" 0.01 "$seed"; done
    done
  done
  # With BATCH_ROWS, the step-rate rows at each batch size listed (more, smaller steps in the same
  # epoch).
  for b in ${BATCH_ROWS:-}; do BATCH=$b SCHED=step goal_rows "$seed"; done
done
for c in dgc redsync gaussianksgd randomk fft; do run "$c" 0.01 1; done
# Rival methods whose ratio is not a density run at 1 (gradscope train refuses any other): the
# quantizers send every element, the variance method what passes its test.
run qsgd-mn 1 1
run qsgd-mn-ts 1 1
run qsgd-mn-ms 1 1
run variance 1 1
for c in sidco-e sidco-p sidco-gp topk dgc redsync gaussianksgd randomk fft; do run "$c" 0.001 1; done
/usr/bin/python3 - "$OUT" <<'PY' | tee "$OUT/RESULTS.table.md"
import glob, json, os, statistics, sys
out = sys.argv[1]
order = ["none", "sidco-e", "sidco-p", "sidco-gp", "topk", "dgc", "redsync", "gaussianksgd",
         "randomk", "fft", "variance", "qsgd-mn", "qsgd-mn-ts", "qsgd-mn-ms"]
groups = {}
for f in glob.glob(os.path.join(out, "*.json")):
    r = json.load(open(f))
    c = r["config"]
    sched = ["constant", "step", "cosine"].index(c.get("lr_schedule", "constant"))
    steps = c.get("warmup_steps", 0)
    kind = c.get("warmup_schedule", "dense") if steps else ""
    warm = (steps, kind, c.get("warmup_start_ratio", 0.25) if kind == "exponential" else 0)
    groups.setdefault((c["compressor"], c["ratio"], warm, sched, c["batch"]), []).append(r)
def key(k):
    name, ratio, warm, sched, batch = k
    tier = 0.01 if name == "none" else ratio  # uncompressed heads each block of 0.01 rows
    return (name not in order[:9], -tier if name in order[:9] else 0, batch != 64, sched,
            ["", "dense", "exponential"].index(warm[1]), warm[0], warm[2],
            order.index(name) if name in order else 99)
print("| compressor | density | test acc. | seeds | quality mean | p5 | p95 | sent/step/worker | vs dense | compress ms/step | comm ms/step | step ms | wall s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for k in sorted(groups, key=key):
    runs = sorted(groups[k], key=lambda r: r["config"]["seed"])
    accs = [100 * r["test_accuracy"] for r in runs]
    acc = f"{accs[0]:.2f}" if len(accs) == 1 else f"{statistics.mean(accs):.2f} ± {statistics.stdev(accs):.2f}"
    seeds = ",".join(str(r["config"]["seed"]) for r in runs)
    r = runs[0]  # the other columns: seed 1
    c, s = r["config"], r["summary"]
    label = c["compressor"]
    if c.get("warmup_steps", 0):
        exp = c.get("warmup_schedule", "dense") == "exponential"
        label += f" + {c['warmup_steps']} {'exp. warm-up' if exp else 'dense'} steps"
        if exp and c.get("warmup_start_ratio", 0.25) != 0.25:
            label += f" from {c['warmup_start_ratio']:g}"
    sched = c.get("lr_schedule", "constant")
    label += "" if sched == "constant" else f", {sched} lr"
    label += "" if c["batch"] == 64 else f", batch {c['batch']}"
    print(f"| {label} | {c['ratio']:g} | {acc} | {seeds} | {s['quality_mean']:.3f} | "
          f"{s['quality_p5']:.3f} | {s['quality_p95']:.3f} | {s['bytes_per_step']/1024:.1f} KiB | "
          f"{s['bytes_per_step']/s['dense_bytes_per_step']:.4f} | {s['compress_ms_per_step']:.2f} | "
          f"{s['comm_ms_per_step']:.2f} | {s['step_ms']:.1f} | {r['wall_s']:.0f} |")
PY
