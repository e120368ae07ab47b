"""Accuracy against bytes sent: the frontier of DDP communication hooks on torchvision's ResNet-18
(no weights) and Fashion-MNIST, 4 Gloo worker processes on this machine, one thread each
(docs/RESULTS.md, "The accuracy-bytes frontier"). The one command, from the repository root of a
build (hours of both cores of the 2-core machine of docs/BENCHMARKS.md: docs/RESULTS.md, "The
accuracy-bytes frontier", has the measured time; runs already in docs/results/frontier/ are
reused, so it may be run over several sittings and stopped at any point):

    PYTHONPATH=build/python python3 scripts/frontier.py

Points, 400 steps of batch 32 per worker (SGD lr 0.05, momentum 0.9 in the optimizer unless the
hook keeps it), seeds 1 and 2 unless said:
    dense (plain DDP, no hook; seeds 1 to 10), fp16 (fp16_compress_hook), PowerSGD ranks 1 and 4,
    SIDCo-E at densities 0.001, 0.01 and 0.05, top-k at 0.01, SIDCo-E at 0.01 with Accordion's
    density schedule (0.1 in critical regimes, checks every 20 steps, eta 0.5), SIDCo-E at 0.01
    with momentum correction (0.9 in the hook, none in the optimizer), and with both (these three
    with seeds 1 to 5, paired with dense);
and over 2 epochs of each worker's data (938 steps), seeds 1 and 2: dense, SIDCo-E at 0.01,
SIDCo-E at 0.01 with the schedule, and with momentum correction.

Each run is scripts/ddp_results.py's worker (the same model, data order, timing and byte counts);
its result is one JSON file, OUT/<point>-w<workers>-n<steps>-s<seed>.json, made once and reused.
The script then writes OUT/frontier.table.md (test accuracy mean ± standard error over the seeds;
the difference to dense paired by seed, mean ± standard error; bytes per step relative to dense,
every step counted; step and hook times; the share of steps the schedule ran critical) and
OUT/frontier.png (accuracy against bytes per step relative to dense, log x axis, standard-error
bars, dense's mean ± standard error as a band; one panel per horizon), and prints the run time.

Options: --points a,b,... (names as in the table; default all), --seeds 1,2 (every point's seeds
instead of its own), --steps N (the short horizon), --long-steps N (0: no long horizon), --workers
W, --out DIR (default docs/results/frontier), --figure FILE (default OUT/frontier.png). A smoke run
of the whole pipeline in about a minute:

    PYTHONPATH=build/python python3 scripts/frontier.py --workers 2 --steps 10 --seeds 1 \\
        --points dense,sidco-e-0.01-accordion-mc --long-steps 0 --out /tmp/frontier-smoke
"""

import argparse
import json
import math
import os
import statistics
import sys
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_results  # noqa: E402  (the runner: one worker of one run)
import plotstyle  # noqa: E402
import runs  # noqa: E402

ACCORDION = {"density_schedule": "accordion", "density_high": 0.1, "density_interval": 20, "density_eta": 0.5}
MOMENTUM_CORRECTION = {"momentum_correction": 0.9}
TEN, FIVE, TWO = tuple(range(1, 11)), (1, 2, 3, 4, 5), (1, 2)

# name: (hook, density, State options, optimizer momentum, seeds, label)
POINTS = {
    "dense": ("none", 1.0, {}, 0.9, TEN, "dense (no hook)"),
    "fp16": ("fp16", 0.5, {}, 0.9, TWO, "fp16"),
    "powersgd-1": ("powersgd-1", None, {}, 0.9, TWO, "PowerSGD rank 1"),
    "powersgd-4": ("powersgd-4", None, {}, 0.9, TWO, "PowerSGD rank 4"),
    "sidco-e-0.001": ("sidco-e", 0.001, {}, 0.9, TWO, "SIDCo-E 0.001"),
    "sidco-e-0.01": ("sidco-e", 0.01, {}, 0.9, TWO, "SIDCo-E 0.01"),
    "sidco-e-0.05": ("sidco-e", 0.05, {}, 0.9, TWO, "SIDCo-E 0.05"),
    "topk-0.01": ("topk", 0.01, {}, 0.9, TWO, "top-k 0.01"),
    "sidco-e-0.01-accordion": ("sidco-e", 0.01, ACCORDION, 0.9, FIVE, "SIDCo-E 0.01, Accordion"),
    "sidco-e-0.01-mc": ("sidco-e", 0.01, MOMENTUM_CORRECTION, 0.0, FIVE, "SIDCo-E 0.01, mom. corr."),
    "sidco-e-0.01-accordion-mc": (
        "sidco-e",
        0.01,
        dict(ACCORDION, **MOMENTUM_CORRECTION),
        0.0,
        FIVE,
        "SIDCo-E 0.01, Accordion + mom. corr.",
    ),
}
LONG_POINTS = ["dense", "sidco-e-0.01", "sidco-e-0.01-accordion", "sidco-e-0.01-mc"]
TRAIN_IMAGES = 60000


def epochs_steps(epochs, workers, batch):
    """Steps for `epochs` passes over each worker's share of the training set."""
    return math.ceil(epochs * (TRAIN_IMAGES // workers) / batch)


def run_args(name, steps, opts):
    """The ddp_results worker's arguments for one point."""
    hook, density, state_options, momentum, _, _ = POINTS[name]
    return (
        argparse.Namespace(
            workers=opts.workers,
            steps=steps,
            batch=opts.batch,
            lr=opts.lr,
            warmup_steps=0,
            warmup_schedule="dense",
            warmup_start_ratio=0.25,
            density=density,
            state_options=state_options,
            momentum=momentum,
            eval_images=opts.eval_images,
        ),
        hook,
    )


def run_once(name, seed, steps, opts):
    """One run's result, from its JSON when it was made before (else made now and saved)."""
    path = os.path.join(opts.out, f"{name}-w{opts.workers}-n{steps}-s{seed}.json")
    args, hook = run_args(name, steps, opts)

    def make(partial):
        print(f"frontier: {name}, {steps} steps, seed {seed}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        runs.spawn(ddp_results.worker, (args, runs.free_port(), hook, seed, partial), opts.workers)
        with open(partial) as f:
            result = json.load(f)
        result.update(
            point=name,
            density=args.density,
            state_options=args.state_options,
            optimizer_momentum=args.momentum,
            wall_s=time.perf_counter() - t0,
        )
        with open(partial, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
        print(
            f"frontier: {name} seed {seed}: {100 * result['test_accuracy']:.2f}% in {result['wall_s']:.0f} s",
            file=sys.stderr,
            flush=True,
        )

    return runs.same_eval_images(runs.cached_json(path, make), opts.eval_images, path)


def summarize(name, made, dense):
    """One row: accuracy (%), the paired difference to dense, bytes relative to dense, times."""
    acc = {r["seed"]: 100 * r["test_accuracy"] for r in made}
    dense_acc = {r["seed"]: 100 * r["test_accuracy"] for r in dense}
    paired = [acc[s] - dense_acc[s] for s in sorted(acc) if s in dense_acc]
    gs = [r["gradscope"] for r in made if "gradscope" in r]
    return {
        "point": name,
        "label": POINTS[name][5],
        "seeds": sorted(acc),
        "acc": runs.mean_se(list(acc.values())),
        "diff": runs.mean_se(paired) if paired and name != "dense" else None,
        "paired_seeds": len(paired),
        "bytes": statistics.mean(r["bytes_per_step"] / r["dense_bytes_per_step"] for r in made),
        "step_ms": statistics.mean(r["step_ms"] for r in made),
        "hook_ms": statistics.mean(r["hook_ms"] for r in made),
        "critical": (
            statistics.mean(g["critical_steps"] / g["steps"] for g in gs)
            if gs and POINTS[name][2].get("density_schedule")
            else None
        ),
    }


def pm(value, se, digits=2):
    return f"{value:.{digits}f}" + (f" ± {se:.{digits}f}" if se is not None else "")


def table(rows_by_steps):
    lines = [
        "| point | steps | seeds | test acc. % | vs dense, paired | bytes/step vs dense | step ms | "
        "hook ms/step | critical steps |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for steps, rows in rows_by_steps.items():
        for r in rows:
            diff = f"{pm(*r['diff'])} ({r['paired_seeds']})" if r["diff"] else ""
            critical = f"{100 * r['critical']:.0f}%" if r["critical"] is not None else ""
            seeds = ",".join(map(str, r["seeds"]))
            lines.append(
                f"| {r['label']} | {steps} | {seeds} | {pm(*r['acc'])} | {diff} | {r['bytes']:.4f} | "
                f"{r['step_ms']:.0f} | {r['hook_ms']:.2f} | {critical} |"
            )
    return "\n".join(lines)


def figure(rows_by_steps, path):
    """Accuracy against bytes, a column per horizon and a row per group of at most PER_PANEL
    methods (plotstyle), dense's band in each; every point named beside it (no legend over the
    data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    runs_by_steps = list(rows_by_steps.items())
    points = list(dict.fromkeys(r["point"] for _, rows in runs_by_steps for r in rows if r["point"] != "dense"))
    groups = plotstyle.panels(points)
    fig, axes = plt.subplots(
        len(groups), len(runs_by_steps), figsize=(6.5 * len(runs_by_steps), 4.2 * len(groups)), squeeze=False
    )
    for g, group in enumerate(groups):
        for ax, (steps, rows) in zip(axes[g], runs_by_steps):
            dense = next((r for r in rows if r["point"] == "dense"), None)
            if dense:
                m, se = dense["acc"]
                ax.axhspan(m - (se or 0), m + (se or 0), color="0.85")
                ax.axhline(m, color="0.5", linewidth=0.8)
                ax.annotate(
                    "dense, mean ± s.e.",
                    (0.0, m),
                    xycoords=("axes fraction", "data"),
                    xytext=(4, 3),
                    textcoords="offset points",
                    ha="left",
                    fontsize=7,
                    color="0.35",
                )
            for r in (x for x in rows if x["point"] in group):  # each method in its colour and marker, named
                m, se = r["acc"]
                look = plotstyle.style(r["point"])
                ax.errorbar(r["bytes"], m, yerr=se or 0, fmt=look["marker"], capsize=3, color=look["color"])
                ax.annotate(
                    r["label"],
                    (r["bytes"], m),
                    xytext=(6, -3),
                    textcoords="offset points",
                    fontsize=7,
                    color=look["color"],
                )
            ax.set_xscale("log")
            ax.margins(x=0.35, y=0.12)
            low, high = ax.get_xlim()
            if high / low < 100:  # within two decades: ticks at 1, 2 and 5 of each, written plainly
                ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
                ax.xaxis.set_major_formatter(FormatStrFormatter("%.3g"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("bytes per step per worker, relative to dense (log)")
            ax.set_ylabel("test accuracy %")
            ax.set_title(f"ResNet-18, Fashion-MNIST, {steps} steps")
            ax.grid(True, which="both", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", default=",".join(POINTS))
    p.add_argument("--seeds", default="", help="these seeds for every point (default: each point's own)")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--long-steps", type=int, default=-1, help="default: 2 epochs of each worker's data; 0: none")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--out", default="docs/results/frontier")
    p.add_argument("--figure", default="")
    runs.add_eval_images(p)
    opts = p.parse_args()
    runs.check_eval_images(p, opts)
    unknown = [n for n in opts.points.split(",") if n not in POINTS]
    if unknown:
        raise SystemExit(f"unknown point(s) {', '.join(unknown)}: use {', '.join(POINTS)}")
    ddp_results.check_run_size("--steps", opts.steps, opts.workers)
    if opts.long_steps < 0:
        opts.long_steps = epochs_steps(2, opts.workers, opts.batch)
    if opts.long_steps > 0:
        ddp_results.check_run_size("--long-steps", opts.long_steps, opts.workers)
    return opts


def main():
    opts = parse()
    t0 = time.perf_counter()
    os.makedirs(opts.out, exist_ok=True)
    names = opts.points.split(",")
    horizons = [(opts.steps, names)]
    if opts.long_steps > 0:
        horizons.append((opts.long_steps, [n for n in names if n in LONG_POINTS]))
    rows_by_steps, compute_s = {}, 0.0
    for steps, points in horizons:
        results = {}
        for name in points:
            seeds = (
                [int(s) for s in opts.seeds.split(",")]
                if opts.seeds
                else (POINTS[name][4] if steps == opts.steps else TWO)
            )
            results[name] = [run_once(name, seed, steps, opts) for seed in seeds]
            compute_s += sum(r["wall_s"] for r in results[name])
        if points:
            dense = results.get("dense", [])
            rows_by_steps[steps] = [summarize(n, results[n], dense) for n in points]
    runs.publish(table(rows_by_steps), os.path.join(opts.out, "frontier.table.md"))
    figure(rows_by_steps, opts.figure or os.path.join(opts.out, "frontier.png"))
    print(
        f"frontier: this invocation took {time.perf_counter() - t0:.0f} s; the runs in the table took "
        f"{compute_s:.0f} s when they were made",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
