"""Recording and analysis at scale, timed side by side in one run (docs/BENCHMARKS.md, "Recording
and analysis at scale"):

    record   torchvision's ResNet-50 (no weights, batch 8 of 64x64): a plain training step against
             the same step recorded by gradscope.Recorder with each compression, in alternating
             rounds; seconds per step (median) and bytes per recorded step. Leaves OUT_DIR/resnet50.h5
             (the default compression) for `analyze`.
    analyze  `gradscope analyze` of one step, each granularity, every law and method, against one
             np.sort of the step's |g| (the whole model), alternating; wall seconds (median).
    sort     one np.sort of |g| of a snapshot's first step (a baseline for /usr/bin/time -v).

    PYTHONPATH=build/python python3 scripts/bench_analyze.py record --out-dir /tmp/scale
    PYTHONPATH=build/python python3 scripts/bench_analyze.py analyze /tmp/scale/resnet50.h5 \\
        --gradscope build/cli/gradscope
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np


def resnet50():
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 3, 64, 64), torch.randint(0, 1000, (8,))
    return model, opt, x, y


def step(model, opt, x, y, rec=None, number=0):
    import torch

    if rec is not None:
        rec.begin_step(number)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    if rec is not None:
        rec.end_step(loss, 0.01)
    opt.step()


def record(args):
    import gradscope

    model, opt, x, y = resnet50()
    params = sum(p.numel() for p in model.parameters())
    modes = ["plain"] + gradscope.Recorder.compressions()
    seconds = {m: [] for m in modes}  # per step, every round
    flushed = {m: [] for m in modes}  # per step, the writer's final flush included
    stored = {}
    for _ in range(2):  # warm-up
        step(model, opt, x, y)
    number = 0
    for _ in range(args.rounds):
        for mode in modes:
            path = os.path.join(args.out_dir, f"{mode}.h5")
            rec = None if mode == "plain" else gradscope.Recorder(model, path, every=1, force=True, compression=mode)
            t_all = time.perf_counter()
            for _ in range(args.steps):
                t0 = time.perf_counter()
                step(model, opt, x, y, rec, number)
                seconds[mode].append(time.perf_counter() - t0)
                number += 1
            if rec is not None:
                rec.close()
                stored[mode] = os.path.getsize(path) / args.steps
            flushed[mode].append((time.perf_counter() - t_all) / args.steps)
    plain = statistics.median(seconds["plain"])
    plain_flushed = statistics.median(flushed["plain"])
    print(
        f"ResNet-50: {params} parameters ({4 * params / 1e6:.1f} MB of float32 gradients), "
        f"{args.rounds} rounds of {args.steps} steps per mode, torch threads {__import__('torch').get_num_threads()}"
    )
    print("| mode | s/step (median) | x plain | s/step with the final flush | x plain | MB/step on disk |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for mode in modes:
        s, f = statistics.median(seconds[mode]), statistics.median(flushed[mode])
        mb = f"{stored[mode] / 1e6:.1f}" if mode in stored else ""
        print(f"| {mode} | {s:.3f} | {s / plain:.2f} | {f:.3f} | {f / plain_flushed:.2f} | {mb} |")
    default = gradscope.Recorder.compressions()[0]
    out = os.path.join(args.out_dir, "resnet50.h5")
    os.replace(os.path.join(args.out_dir, f"{default}.h5"), out)
    print(f"kept {out} ({default})")


def model_magnitudes(path):
    """|g| of the first recorded step, every layer concatenated (as `--granularity model` reads it)."""
    with h5py.File(path, "r") as f:
        return np.abs(np.concatenate([f["layers"][name]["grad"][0] for name in f["layers"]]))


def timed_sort(x):
    t0 = time.perf_counter()
    np.sort(x)
    return time.perf_counter() - t0


def analyze(args):
    x = model_magnitudes(args.file)
    sorts = [timed_sort(x)]
    runs = {g: [] for g in args.granularity}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for g in args.granularity:
                cmd = [
                    args.gradscope,
                    "analyze",
                    args.file,
                    "--steps",
                    "0",
                    "--granularity",
                    g,
                    "--out",
                    os.path.join(tmp, f"{g}.h5"),
                    "--force",
                    "--quiet",
                    *args.extra,
                ]
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True)
                runs[g].append(time.perf_counter() - t0)
                sorts.append(timed_sort(x))
    sort = statistics.median(sorts)
    print(f"{args.file}: {x.size} values; one np.sort of |g|: {sort:.2f} s (median of {len(sorts)})")
    print("| granularity | analyze s (median) | x one sort |")
    print("| --- | ---: | ---: |")
    for g in args.granularity:
        s = statistics.median(runs[g])
        print(f"| {g} | {s:.2f} | {s / sort:.2f} |")


def sort(args):
    print(f"{timed_sort(model_magnitudes(args.file)):.3f} s")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out-dir", required=True)
    r.add_argument("--steps", type=int, default=8)
    r.add_argument("--rounds", type=int, default=2)
    a = sub.add_parser("analyze")
    a.add_argument("file")
    a.add_argument("--gradscope", required=True)
    a.add_argument("--rounds", type=int, default=2)
    a.add_argument("--granularity", nargs="+", default=["layer", "model", "both"])
    a.add_argument("extra", nargs="*", help="more gradscope analyze options (after --)")
    s = sub.add_parser("sort")
    s.add_argument("file")
    args = p.parse_args()
    if args.what == "record":
        os.makedirs(args.out_dir, exist_ok=True)
        record(args)
    elif args.what == "analyze":
        analyze(args)
    else:
        sort(args)


if __name__ == "__main__":
    sys.exit(main())
