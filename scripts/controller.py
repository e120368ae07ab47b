"""Does SIDCo hold its density in training? Per step, the achieved density over the target
(quality) and SIDCo's stage count, on models gradscope did not write (scripts/study_models.py: a
small ViT, a CNN with BatchNorm, a GRU language model, a model with frozen, unused and
sometimes-used branches, torchvision's ResNet-18), each with gradscope's DDP hook on W Gloo
worker processes of this machine, one thread each (docs/algorithms.md, "SIDCo's controller in
training"; docs/RESULTS.md).

    PYTHONPATH=build/python python3 scripts/controller.py [--models vit,cnn-bn,gru,branchy,resnet18]
        [--methods sidco-e,sidco-p,sidco-gp] [--setups plain,mc,accordion] [--steps 300]
        [--workers 2] [--seeds 1] [--ratio 0.01] [--published | --estimate fit]
        [--out docs/results/controller] [--figure FILE --figure-runs RUN,RUN] [--check]

Setups: plain (SGD momentum 0.9 in the optimizer), mc (momentum correction 0.9 in the hook, none
in the optimizer), accordion (Accordion's density schedule: 0.1 in critical regimes, checks every
20 steps). --published runs SIDCo as published (no count correction: State(sidco_as_published=
True)); its runs are named with "-published". --estimate fit runs SIDCo's fit alone, without the
threshold carried from step to step (State(sidco_estimate="fit"), the estimate before it); its
runs are named with "-fit". Each run is one JSON file in OUT, made once and
reused; the table (OUT/controller.table.md, with --published OUT/controller-published.table.md) gives
per run:
    in band: the share of compressed steps whose quality lies in [0.5, 2];
    changes/20: the most stage-count changes within any 20 steps once past the first 20;
    density: the mean achieved density over the mean target, over the compressed steps;
    p5, p95: the quality's percentiles;
    estimate in band: the share of compressed steps whose estimate_quality (SIDCo's own threshold,
        before any correction) lies in [0.8, 1.25];
    corrected, exact: the shares of the compressed steps' buckets whose count correction ran, and
        that ended on an exact top-k;
    test accuracy of rank 0's replica at the end.
When a SIDCo method and top-k both ran on a model, setup and seed, OUT/controller-paired.table.md
(OUT/controller-fit-paired.table.md with --estimate fit) sets them side by side, paired by seed:
the test accuracy of each and their difference (mean and standard error over the seeds), and the
cost of a step: the hook's compress time per step (the median over a run's compressed steps, then
over the seeds), its ratio to top-k's (per seed, then the median), and its ratio to one plain
gradscope.select of the method on the model's last gradient, timed in the same process (the median
of 21). --check exits 1 unless every run meets the goals: in band >= 0.9, changes/20 <= 1, density in
[0.8, 1.25]; with momentum correction (mc), also SIDCo's own estimate: in band >= 0.8, corrected
<= 0.2, exact <= 0.05 (the "estimate goals" column; "-" for the other setups). --figure draws quality and stages per step for the runs named (RUN as in the
tables, made by this call or an earlier one, as published or not). The two figures of
docs/algorithms.md, from the runs in docs/results/controller (no training: every run is reused, and
the tables come out as committed):

    PYTHONPATH=build/python python3 scripts/controller.py --figure docs/results/controller/controller.png \
        --figure-runs cnn-bn-sidco-e-mc-published-s1,cnn-bn-sidco-e-mc-s1,vit-sidco-e-mc-published-s1,vit-sidco-e-mc-s1
    PYTHONPATH=build/python python3 scripts/controller.py --figure docs/results/controller/estimate.png \
        --figure-runs vit-sidco-e-mc-fit-s1,vit-sidco-e-mc-s1
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import gradscope
import gradscope.ddp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plotstyle  # noqa: E402
import runs  # noqa: E402
import study_models  # noqa: E402

SETUPS = {
    "plain": ({}, 0.9),
    "mc": ({"momentum_correction": 0.9}, 0.0),
    "accordion": ({"density_schedule": "accordion", "density_high": 0.1, "density_interval": 20}, 0.9),
}
LR = {"vit": 0.05, "cnn-bn": 0.05, "gru": 0.5, "branchy": 0.05, "resnet18": 0.05}
GOALS = {"in_band": 0.9, "changes": 1, "density": (0.8, 1.25)}
ESTIMATE_GOALS = {"in_band": 0.8, "corrected": 0.2, "exact": 0.05}
ESTIMATE_BAND = (0.8, 1.25)
BAND = (0.5, 2.0)


def run_name(model, method, setup, seed, published, estimate="carried"):
    suffix = "-published" if published else "-fit" if estimate == "fit" else ""
    return f"{model}-{method}-{setup}{suffix}-s{seed}"


def worker(rank, cfg, port, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=cfg["workers"])
    torch.set_num_threads(1)
    torch.manual_seed(cfg["seed"])
    task = study_models.task(cfg["model"], cfg["seed"], rank, cfg["workers"])
    model = task.model()
    ddp = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=task.find_unused_parameters)
    options, momentum = SETUPS[cfg["setup"]]
    options = dict(options, sidco_as_published=True) if cfg["published"] else dict(options)
    if cfg.get("estimate", "carried") != "carried":
        options["sidco_estimate"] = cfg["estimate"]
    state = gradscope.ddp.State(cfg["method"], ratio=cfg["ratio"], history=cfg["steps"], timeout=600, **options)
    ddp.register_comm_hook(state, gradscope.ddp.hook)
    params = [p for p in ddp.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=LR[cfg["model"]], momentum=momentum)
    gradscope.ddp.check_optimizer(opt, state)
    t0 = time.perf_counter()
    for step in range(cfg["steps"]):
        task.before_step(model, step)
        loss = task.loss(ddp, step)
        opt.zero_grad()
        loss.backward()
        if not state.step_skipped:
            opt.step()
    if rank == 0:
        fields = (
            "quality",
            "estimate_quality",
            "stages",
            "corrected",
            "exact",
            "buckets",
            "density",
            "target_density",
            "warmup",
            "skipped",
            "critical",
            "compress_s",
            "compress_cpu_s",
        )
        result = dict(
            cfg,
            steps_run=[{f: getattr(s, f) for f in fields} for s in state.steps],
            summary=state.summary(),
            final_loss=float(loss),
            train_s=time.perf_counter() - t0,
            test_accuracy=task.evaluate(model),
            **select_ms(cfg, params),
        )
        with open(out, "w") as f:
            json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


def select_ms(cfg, params, repeats=21):
    """The median time of one plain gradscope.select of the method on the model's last gradient
    laid end to end (the vector a one-bucket step selects from), in the same process: the
    baseline the hook's compress time per step is compared with. Wall time (select_ms) and the
    thread's CPU time (select_cpu_ms); the other worker waits at a barrier meanwhile."""
    flat = torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None])
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.thread_time()
        gradscope.select(flat, cfg["method"], cfg["ratio"])
        wall.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
    return {"select_ms": 1e3 * statistics.median(wall), "select_cpu_ms": 1e3 * statistics.median(cpu)}


def run_path(name, opts):
    return os.path.join(opts.out, f"{name}-w{opts.workers}-n{opts.steps}.json")


def run_once(cfg, opts):
    name = run_name(cfg["model"], cfg["method"], cfg["setup"], cfg["seed"], cfg["published"], cfg["estimate"])
    path = run_path(name, opts)

    def make(partial):
        print(f"controller: {name}, {cfg['steps']} steps", file=sys.stderr, flush=True)
        runs.spawn(worker, (cfg, runs.free_port(), partial), cfg["workers"])

    return runs.cached_json(path, make)


def compressed(result):
    return [s for s in result["steps_run"] if not s["warmup"] and not s["skipped"] and s["target_density"] < 1.0]


def most_changes(stages, window=20, skip=20):
    """The most stage-count changes within any `window` consecutive steps after the first `skip`."""
    changes = [i for i in range(max(skip, 1), len(stages)) if stages[i] != stages[i - 1]]
    return max(
        (
            sum(1 for c in changes if start <= c < start + window)
            for start in range(skip, max(skip + 1, len(stages) - window + 1))
        ),
        default=0,
    )


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))] if v else float("nan")


def share(part, whole):
    return part / whole if whole else float("nan")


def metrics(result):
    steps = compressed(result)
    q = [s["quality"] for s in steps]
    # Runs made before the estimate's fields (no "estimate_quality") show "-" for them.
    estimated = [s["estimate_quality"] for s in steps if s.get("estimate_quality") is not None]
    buckets = sum(s.get("buckets", 0) for s in steps)
    has = "exact" in (steps[0] if steps else {})
    return {
        "run": run_name(
            result["model"],
            result["method"],
            result["setup"],
            result["seed"],
            result["published"],
            result.get("estimate", "carried"),
        ),
        "setup": result["setup"],
        "estimate_in_band": share(sum(ESTIMATE_BAND[0] <= x <= ESTIMATE_BAND[1] for x in estimated), len(estimated)),
        "corrected": share(sum(s["corrected"] for s in steps), buckets) if has else float("nan"),
        "exact": share(sum(s["exact"] for s in steps), buckets) if has else float("nan"),
        "steps": len(steps),
        "in_band": sum(BAND[0] <= x <= BAND[1] for x in q) / max(1, len(q)),
        "changes": most_changes([s["stages"] for s in result["steps_run"]]),
        "density": (sum(s["density"] for s in steps) / max(1e-300, sum(s["target_density"] for s in steps))),
        "p5": percentile(q, 0.05),
        "p95": percentile(q, 0.95),
        "accuracy": 100 * result["test_accuracy"],
    }


def meets(m):
    lo, hi = GOALS["density"]
    return m["in_band"] >= GOALS["in_band"] and m["changes"] <= GOALS["changes"] and lo <= m["density"] <= hi


def meets_estimate(m):
    """SIDCo's own estimate under momentum correction: None for the other setups."""
    if m["setup"] != "mc":
        return None
    return (
        m["estimate_in_band"] >= ESTIMATE_GOALS["in_band"]
        and m["corrected"] <= ESTIMATE_GOALS["corrected"]
        and m["exact"] <= ESTIMATE_GOALS["exact"]
    )


def percent(x):
    return "-" if math.isnan(x) else f"{100 * x:.1f}%"


def table(rows):
    header = [
        "run",
        "compressed steps",
        "in [0.5, 2]",
        "changes/20",
        "density / target",
        "quality p5",
        "p95",
        "estimate in band",
        "corrected",
        "exact",
        "test acc. %",
        "goals",
        "estimate goals",
    ]
    verdict = {None: "-", True: "met", False: "missed"}
    return runs.markdown(
        header,
        [
            [
                m["run"],
                m["steps"],
                f"{100 * m['in_band']:.1f}%",
                m["changes"],
                f"{m['density']:.3f}",
                f"{m['p5']:.2f}",
                f"{m['p95']:.2f}",
                percent(m["estimate_in_band"]),
                percent(m["corrected"]),
                percent(m["exact"]),
                f"{m['accuracy']:.2f}",
                "met" if meets(m) else "missed",
                verdict[meets_estimate(m)],
            ]
            for m in rows
        ],
    )


def compress_ms(result, field="compress_s"):
    return 1e3 * statistics.median(s[field] for s in compressed(result))


def mean_se(values):
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan"))


def cost_cells(mine, topk, field, select):
    """The hook's compress time per step (the median over a run's compressed steps, then over the
    seeds) against top-k's and against a plain select, in wall or CPU time (field, select)."""
    ms_m, ms_t = [compress_ms(r, field) for r in mine], [compress_ms(r, field) for r in topk]
    return [
        f"{statistics.median(ms_m):.2f}",
        f"{statistics.median(ms_t):.2f}",
        f"{statistics.median(a / b for a, b in zip(ms_m, ms_t)):.2f}",
        f"{statistics.median(r[select] for r in mine):.2f}",
        f"{statistics.median(a / r[select] for a, r in zip(ms_m, mine)):.2f}",
    ]


def paired_table(results):
    """Each SIDCo method against top-k on the same model, setup and seeds (runs with the cost fields)."""
    runs_by = {
        (r["model"], r["method"], r["setup"], r["seed"]): r
        for r in results
        if "select_ms" in r and "compress_s" in r["steps_run"][0]
    }
    rows = []
    for model, method, setup in sorted({k[:3] for k in runs_by}):
        if method == "topk":
            continue
        seeds = sorted(
            s
            for (m, me, se, s) in runs_by
            if (m, me, se) == (model, method, setup) and (model, "topk", setup, s) in runs_by
        )
        if not seeds:
            continue
        mine = [runs_by[(model, method, setup, s)] for s in seeds]
        topk = [runs_by[(model, "topk", setup, s)] for s in seeds]
        acc_m, acc_t = ([100 * r["test_accuracy"] for r in rs] for rs in (mine, topk))
        diff = mean_se([a - b for a, b in zip(acc_m, acc_t)])
        rows.append(
            [
                model,
                setup,
                method,
                ",".join(map(str, seeds)),
                "%.2f ± %.2f" % mean_se(acc_m),
                "%.2f ± %.2f" % mean_se(acc_t),
                "%+.2f ± %.2f" % diff,
            ]
            + cost_cells(mine, topk, "compress_s", "select_ms")
        )
        if all("select_cpu_ms" in r for r in mine + topk):
            rows[-1] += cost_cells(mine, topk, "compress_cpu_s", "select_cpu_ms")
    header = [
        "model",
        "setup",
        "method",
        "seeds",
        "test acc. %",
        "top-k's",
        "difference, paired",
        "compress ms/step",
        "top-k's",
        "x top-k",
        "plain select ms",
        "x plain select",
    ]
    if all(len(r) > len(header) for r in rows):
        header += ["CPU: compress ms/step", "top-k's", "x top-k", "plain select ms", "x plain select"]
    rows = [r[: len(header)] for r in rows]
    return runs.markdown(header, rows) if rows else ""


def figure(names, path, opts):
    """Quality and stages per step of the runs named, made by this call or an earlier one (with or
    without --published) at the same --workers and --steps: a panel per run, the quality in its
    method's colour and marker (plotstyle), SIDCo's own estimate in the same colour, hollow, the
    stage count in a strip beneath; one legend for the figure, above the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    missing = [n for n in names if not os.path.exists(run_path(n, opts))]
    if missing:
        raise SystemExit(f"--figure-runs: {', '.join(missing)} not run yet (no {run_path(missing[0], opts)})")
    chosen = []
    for n in names:
        with open(run_path(n, opts)) as f:
            chosen.append(json.load(f))
    # a panel of quality per run, its stage count in a strip beneath it
    fig, axes = plt.subplots(
        2 * len(chosen),
        1,
        figsize=(10, 3.2 * len(chosen)),
        squeeze=False,
        sharex=True,
        gridspec_kw={"height_ratios": [3, 1] * len(chosen)},
    )
    handles = {}
    for ax, strip, r in zip(axes[0::2, 0], axes[1::2, 0], chosen):
        steps = r["steps_run"]
        look = plotstyle.style(f"{r['method']}-{r['setup']}")
        ax.axhspan(*BAND, color="0.9", label="band [0.5, 2]")
        ax.axhline(1.0, color="0.5", linewidth=0.6)
        ax.semilogy(
            [s["quality"] if s["quality"] > 0 else float("nan") for s in steps],
            markersize=2,
            linewidth=0.7,
            label="quality: achieved / target density",
            **look,
        )
        if any(s.get("estimate_quality") is not None for s in steps):
            ax.semilogy(
                [s["estimate_quality"] if (s.get("estimate_quality") or 0) > 0 else float("nan") for s in steps],
                linestyle="none",
                marker=look["marker"],
                markersize=3,
                markeredgewidth=0.6,
                markerfacecolor="none",
                color=look["color"],
                label="SIDCo's own estimate, before any correction",
            )
        ax.set_ylim(0.01, 10)
        ax.set_ylabel("quality (log)")
        strip.step(
            range(len(steps)),
            [s["stages"] for s in steps],
            where="post",
            color="0.3",
            linewidth=1.0,
            label="SIDCo stages",
        )
        strip.set_ylabel("stages")
        strip.set_ylim(0, max(s["stages"] for s in steps) + 1)
        strip.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=3))
        strip.grid(True, axis="y", linewidth=0.3)
        m = metrics(r)
        ax.set_title(
            f"{m['run']}: {100 * m['in_band']:.0f}% of steps in [0.5, 2], at most {m['changes']} stage "
            f"changes in 20 steps, density {m['density']:.2f}x",
            fontsize=9,
        )
        for a in (ax, strip):
            for h, label in zip(*a.get_legend_handles_labels()):
                handles.setdefault(label, h)
    order = ["band", "quality", "SIDCo's own", "SIDCo stages"]  # the same order in every figure
    handles = dict(sorted(handles.items(), key=lambda kv: next(i for i, o in enumerate(order) if kv[0].startswith(o))))
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    # one legend for every panel, above the first: it covers no data
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=len(handles),
        fontsize=8,
        frameon=False,
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(study_models.TASKS))
    p.add_argument("--methods", default="sidco-e,sidco-p,sidco-gp")
    p.add_argument("--setups", default=",".join(SETUPS))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seeds", default="1")
    p.add_argument("--ratio", type=float, default=0.01)
    p.add_argument("--published", action="store_true", help="SIDCo as published (no count correction)")
    p.add_argument(
        "--estimate",
        default="carried",
        choices=("carried", "fit"),
        help="SIDCo's threshold: carried from step to step (default) or the fit alone",
    )
    p.add_argument("--out", default="docs/results/controller")
    p.add_argument("--figure", default="")
    p.add_argument("--figure-runs", default="")
    p.add_argument("--check", action="store_true", help="exit 1 unless every run meets the goals")
    opts = p.parse_args()
    for option, given, known in (
        ("--models", opts.models, study_models.TASKS),
        ("--setups", opts.setups, SETUPS),
        ("--methods", opts.methods, gradscope.compressor_names()),
    ):
        unknown = [v for v in given.split(",") if v not in known]
        if unknown:
            raise SystemExit(f"{option}: unknown {', '.join(unknown)}; use {', '.join(known)}")
    if opts.steps < 21:
        raise SystemExit(f"--steps {opts.steps}: at least 21 (the stage changes are counted after step 20)")
    if opts.workers < 1:
        raise SystemExit(f"--workers {opts.workers}: at least 1")
    if opts.published and opts.estimate != "carried":
        raise SystemExit("--estimate fit: SIDCo as published (--published) already runs the fit alone")
    if opts.figure and not opts.figure_runs:
        raise SystemExit("--figure needs --figure-runs RUN,RUN (names as in the table)")
    return opts


def main():
    opts = parse()
    os.makedirs(opts.out, exist_ok=True)
    t0 = time.perf_counter()
    results = []
    for model in opts.models.split(","):
        for method in opts.methods.split(","):
            for setup in opts.setups.split(","):
                for seed in [int(s) for s in opts.seeds.split(",")]:
                    cfg = {
                        "model": model,
                        "method": method,
                        "setup": setup,
                        "seed": seed,
                        "steps": opts.steps,
                        "workers": opts.workers,
                        "ratio": opts.ratio,
                        "published": opts.published,
                        "estimate": opts.estimate,
                    }
                    results.append(run_once(cfg, opts))
    rows = [metrics(r) for r in results]
    table_name = (
        "controller-published.table.md"
        if opts.published
        else "controller-fit.table.md"
        if opts.estimate == "fit"
        else "controller.table.md"
    )
    runs.publish(table(rows), os.path.join(opts.out, table_name))
    paired = paired_table(results)
    if paired:
        runs.publish(paired, os.path.join(opts.out, table_name.replace(".table.md", "-paired.table.md")))
    if opts.figure:
        figure(opts.figure_runs.split(","), opts.figure, opts)
    print(
        f"controller: {len(rows)} runs, {sum(meets(m) for m in rows)} meet the goals; "
        f"{time.perf_counter() - t0:.0f} s",
        file=sys.stderr,
    )
    if opts.check and not all(meets(m) for m in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
