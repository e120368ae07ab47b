"""Time to accuracy on a constrained network: does gradscope's DDP hook make training finish sooner
than plain DDP, at which link speed does it stop paying (docs/RESULTS.md, "Time to accuracy")?

Two measurements, each made once and reused from OUT (the frontier's way, scripts/frontier.py):
  accuracy: every point trains W Gloo workers on this machine's loopback, one thread each, and
    rank 0's replica is evaluated on the 10,000 test images (--eval-images N: the first N) every
    --eval-every steps. Accuracy does not depend on the network, so this runs unshaped:
    OUT/acc/<model>-<point>-w<W>-n<steps>-s<seed>.json.
  timing: every point runs --timing-steps steps with its W workers in the network lab
    (scripts/netlab.py: one namespace and one tbf-shaped link per worker, both directions) at each
    rate; the median step after the first 3, split into compute (the step of the same workers with
    a hook that sends nothing), the hook's own work (compress and decode, gradscope's hook) and
    communication (the rest): OUT/time/<model>-<point>-w<W>-<rate>.json. --timing-budget S ends a
    run once its timed steps pass S seconds, with at least 2 timed (a dense ResNet-18 step takes
    about a minute at 10 Mbit/s). Needs root (the lab); --no-lab runs the unshaped rate on plain
    loopback instead (the smoke test).
--phase steps writes the table of the timing runs already made (OUT/steps.table.md: each point's
median step, its split and dense's step over it, per model and rate; it starts no run), for models
without accuracy runs.
The report (OUT/speedup.table.md, OUT/comparisons.table.md, OUT/speedup-<model>.png,
OUT/time-to-target-<model>.png and OUT/target-<model>.json; with --name NAME, each with -NAME) gives,
per model and rate, each point's median step and its split, and the wall time to a fixed target
accuracy, as MLPerf Training times to a quality target below the reference's converged accuracy:
  the target (--target fixed): dense's converged accuracy at its best learning rate (the mean of
    its last --smooth evaluations), averaged over the seeds, less --target-margin points (0.5),
    written with how it was chosen in OUT/target-<model>.json;
  time to it: the steps at which the run's curve, smoothed by a centred moving mean over --smooth
    evaluations (3; evaluations every --eval-every 25 steps), first reaches it, linear between
    evaluations, times the median step at that rate;
  the speed-up: dense's time to the target over the point's, paired by seed, as a geometric mean
    with its 95% Student's t interval over the seeds where both reach it; the ideal speed-up is
    dense's step over the compute-only step (no method beats it). A point that misses the target
    on a seed says so (seeds reaching it), with its final accuracy and interval.
OUT/comparisons.table.md pairs SIDCo-E with momentum correction against dense, DGC, top-k, fp16 and
PowerSGD by seed: the rival's time to the target over SIDCo-E's, and the final accuracies'
difference, each with its 95% interval. --target dense-final keeps the earlier rule (each seed's own
dense final evaluation, read off the raw curve; the speed-up is dense's whole run over the point's
time to it); --target X times every point to X%.

    sudo PYTHONPATH=build/python python3 scripts/speedup.py [--models resnet18,vit] [--points ...]
        [--rates 10mbit,100mbit,1gbit,10gbit,none] [--workers 4] [--steps 400] [--seeds 1,2,3]
        [--eval-every 25] [--target fixed|dense-final|X] [--target-margin 0.5] [--smooth 3]
        [--timing-steps 10] [--timing-budget S] [--phase accuracy|timing|report|all]
        [--out DIR]

Points: dense at the learning rates of --dense-lrs (SGD momentum 0.9; the best mean final accuracy
is "dense" from then on), fp16 (fp16_compress_hook), PowerSGD ranks 1 and 4, and top-k, DGC,
SIDCo-E, SIDCo-P and SIDCo-GP at 0.01 with momentum correction (0.9 in the hook, none in the
optimizer: DGC's recipe, and what made SIDCo-E beat dense on the frontier); SIDCo-E so with the
shared exchange, with the sparse all-reduce (sidco-e-mc-sparse), and with compress-when auto (no accuracy run of its own: it trains as the mode its
timing run chose at that rate, dense at lr 0.05 or SIDCo-E with momentum correction). Every point
but dense's trains at lr 0.05; <point>-lr<L> trains it at L instead (fp16-lr0.01, powersgd-4-lr0.01:
at ResNet-18's best dense learning rate), timed as <point> (the rate does not change a step). A
smoke run of the whole pipeline:

    PYTHONPATH=build/python python3 scripts/speedup.py --models vit --points dense,sidco-e-mc \\
        --dense-lrs 0.05 --workers 2 --steps 6 --eval-every 3 --seeds 1 --rates none --no-lab \\
        --timing-steps 4 --out /tmp/speedup-smoke
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

import gradscope
import gradscope.ddp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plotstyle  # noqa: E402
import runs  # noqa: E402
import study_models  # noqa: E402

MC = {"momentum_correction": 0.9}
# name: (hook, ratio, State options, optimizer momentum, label)
POINTS = {
    "fp16": ("fp16", None, {}, 0.9, "fp16"),
    "powersgd-1": ("powersgd", 1, {}, 0.9, "PowerSGD rank 1"),
    "powersgd-4": ("powersgd", 4, {}, 0.9, "PowerSGD rank 4"),
    "topk-mc": ("topk", 0.01, MC, 0.0, "top-k 0.01, mom. corr."),
    "dgc-mc": ("dgc", 0.01, MC, 0.0, "DGC 0.01, mom. corr."),
    "sidco-e-mc": ("sidco-e", 0.01, MC, 0.0, "SIDCo-E 0.01, mom. corr."),
    "sidco-p-mc": ("sidco-p", 0.01, MC, 0.0, "SIDCo-P 0.01, mom. corr."),
    "sidco-gp-mc": ("sidco-gp", 0.01, MC, 0.0, "SIDCo-GP 0.01, mom. corr."),
    "sidco-e-mc-shared": ("sidco-e", 0.01, dict(MC, exchange="shared"), 0.0, "SIDCo-E 0.01, mom. corr., shared"),
    "sidco-e-mc-sparse": (
        "sidco-e",
        0.01,
        dict(MC, exchange="sparse-allreduce"),
        0.0,
        "SIDCo-E 0.01, mom. corr., sparse all-reduce",
    ),
    "sidco-e-mc-auto": ("sidco-e", 0.01, dict(MC, when="auto"), 0.0, "SIDCo-E 0.01, mom. corr., when auto"),
    # compress-when auto's dense steps alone (timing only): a dense warm-up longer than the run, which
    # takes the path of the gate's dense steps (through DDP's own all-reduce); -thread: the same
    # through the state's thread (the path before it)
    "sidco-e-mc-auto-dense": (
        "sidco-e",
        0.01,
        dict(MC, when="auto", warmup_steps=10**9),
        0.0,
        "SIDCo-E 0.01, mom. corr., when auto, dense steps",
    ),
    "sidco-e-mc-auto-dense-thread": (
        "sidco-e",
        0.01,
        dict(MC, when="auto", warmup_steps=10**9),
        0.0,
        "SIDCo-E 0.01, mom. corr., when auto, dense steps on the state's thread",
    ),
}
# compress-when auto trains as the mode it chooses: its accuracy is that of the point it runs as
# (dense at the compressed points' lr, or SIDCo-E with momentum correction), chosen at each rate by
# its timing run.
AUTO = "sidco-e-mc-auto"
# The points that differ from sidco-e-mc by their exchange only: paired with it ("vs all-gather").
EXCHANGES = ("sidco-e-mc-shared", "sidco-e-mc-sparse")
LR = 0.05  # every point but the dense sweep
WARM = 3  # steps left out of the step times (the first DDP steps build its buckets)


def split_lr(point):
    """A point's name without its learning rate, and the rate or None: dense-lr0.01 is ("dense", 0.01),
    fp16-lr0.01 ("fp16", 0.01), fp16 ("fp16", None). ValueError for a rate that is not a number."""
    base, _, lr_text = point.partition("-lr")
    return base, (float(lr_text) if lr_text else None)


def point_spec(point):
    """(hook, ratio, State options, optimizer momentum, lr, label) of a point; dense-lr<L> is plain DDP,
    and <point>-lr<L> a point at learning rate L instead of LR (fp16-lr0.01: fp16 at dense's best)."""
    base, lr = split_lr(point)
    rate = LR if lr is None else lr
    if base == "dense":
        return ("none", None, {}, 0.9, rate, f"dense, lr {rate:g}")
    if point == "compute":
        return ("compute", None, {}, 0.9, LR, "compute only (no communication)")
    hook, ratio, options, momentum, label = POINTS[base]
    return (hook, ratio, options, momentum, rate, label + ("" if lr is None else f", lr {lr:g}"))


def timed_as(point):
    """The timing run a point's step is: its learning rate does not change a step (dense-lr<L> is dense)."""
    return point.partition("-lr")[0]


def known_point(point):
    """A point of POINTS, dense-lr<L>, or <point>-lr<L> with a positive number L."""
    if point.startswith("dense"):
        return True
    try:
        base, lr = split_lr(point)
    except ValueError:
        return False
    # not compress-when auto at another rate: its dense steps run at LR (it trains as dense-lr<LR> or sidco-e-mc)
    return base in POINTS and (lr is None or (base != AUTO and lr > 0))


def _sends_nothing(state, bucket):
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def build(model_name, point, seed, rank, world, batch=32):
    """The task, its DDP model with the point's hook, the optimizer and the gradscope State (or None)."""
    hook, ratio, options, momentum, lr, _ = point_spec(point)
    torch.manual_seed(seed)
    task = study_models.task(model_name, seed, rank, world, batch)
    model = task.model()
    if hook == "powersgd":
        # PowerSGD's callbacks issue the next collective of a bucket from a future's callback, so with
        # two buckets the ranks may issue them in different orders, which Gloo refuses (its "preamble
        # length" enforce). One bucket keeps them in order: a cap above the model, the first bucket's
        # too (DDP's rebuilt buckets start with one of dist._DEFAULT_FIRST_BUCKET_BYTES, its knob).
        first = dist._DEFAULT_FIRST_BUCKET_BYTES
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024 * 1024
        try:
            ddp = torch.nn.parallel.DistributedDataParallel(
                model, bucket_cap_mb=1024, find_unused_parameters=task.find_unused_parameters
            )
        finally:
            dist._DEFAULT_FIRST_BUCKET_BYTES = first
        ps = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=ratio, start_powerSGD_iter=2, random_seed=0
        )
        ddp.register_comm_hook(ps, powerSGD_hook.powerSGD_hook)
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=task.find_unused_parameters)
    state = None
    if hook == "fp16":
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    elif hook == "compute":
        ddp.register_comm_hook(None, _sends_nothing)
    elif hook not in ("none", "powersgd"):
        state = gradscope.ddp.State(hook, ratio=ratio, timeout=1800, **options)
        state._buckets.stock_dense = not point.endswith("-thread")
        ddp.register_comm_hook(state, gradscope.ddp.hook)
    opt = torch.optim.SGD([p for p in ddp.parameters() if p.requires_grad], lr=lr, momentum=momentum)
    if state is not None:
        gradscope.ddp.check_optimizer(opt, state)
    return task, model, ddp, opt, state


def train_step(task, model, ddp, opt, state, step):
    task.before_step(model, step)
    loss = task.loss(ddp, step)
    opt.zero_grad()
    loss.backward()
    if state is None or not state.step_skipped:
        opt.step()
    return float(loss)


# ---- accuracy ----------------------------------------------------------------------------------


def accuracy_worker(rank, cfg, port, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=cfg["workers"])
    torch.set_num_threads(1)
    task, model, ddp, opt, state = build(cfg["model"], cfg["point"], cfg["seed"], rank, cfg["workers"])
    curve, t0 = [], time.perf_counter()
    for step in range(cfg["steps"]):
        loss = train_step(task, model, ddp, opt, state, step)
        if rank == 0 and ((step + 1) % cfg["eval_every"] == 0 or step + 1 == cfg["steps"]):
            curve.append([step + 1, task.evaluate(model, cfg["eval_images"])])
    if rank == 0:
        result = dict(
            cfg,
            curve=curve,
            final_loss=loss,
            test_accuracy=curve[-1][1],
            train_s=time.perf_counter() - t0,
            gradscope=state.summary() if state else None,
        )
        with open(out, "w") as f:
            json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


def accuracy_path(model, point, seed, opts):
    return os.path.join(opts.out, "acc", f"{model}-{point}-w{opts.workers}-n{opts.steps}-s{seed}.json")


def accuracy_run(model, point, seed, opts):
    path = accuracy_path(model, point, seed, opts)
    cfg = {
        "model": model,
        "point": point,
        "seed": seed,
        "workers": opts.workers,
        "steps": opts.steps,
        "eval_every": opts.eval_every,
        "eval_images": opts.eval_images,
    }

    def make(partial):
        print(f"speedup: accuracy of {model} {point} seed {seed}", file=sys.stderr, flush=True)
        runs.spawn(accuracy_worker, (cfg, runs.free_port(), partial), opts.workers)

    result = runs.same_eval_images(runs.cached_json(path, make), opts.eval_images, path)
    return runs.same_eval_every(result, opts.eval_every, path)


# ---- timing ------------------------------------------------------------------------------------


def timing_worker(cfg_path):
    """One rank of a timing run, placed by the network lab (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT and GLOO_SOCKET_IFNAME from the environment, as torchrun sets them)."""
    with open(cfg_path) as f:
        cfg = json.load(f)
    dist.init_process_group("gloo", init_method="env://", timeout=__import__("datetime").timedelta(seconds=3600))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    task, model, ddp, opt, state = build(cfg["model"], cfg["point"], 1, rank, world)
    steps = []
    for step in range(cfg["steps"]):
        t0 = time.perf_counter()
        train_step(task, model, ddp, opt, state, step)
        steps.append(time.perf_counter() - t0)
        # --timing-budget: once two steps past the warm ones are timed and their time passes the
        # budget, stop (rank 0's clock decides for all, outside the timed steps)
        done = torch.tensor([len(steps) >= WARM + 2 and sum(steps[WARM:]) > cfg["budget"]], dtype=torch.int32)
        dist.broadcast(done, 0)
        if done.item():
            break
    hook = [s.compress_s for s in state.steps] if state else [0.0] * len(steps)
    dense = [s.dense for s in state.steps] if state else []
    if rank == 0:
        with open(cfg["out"], "w") as f:
            json.dump(
                dict(
                    cfg,
                    step_s=steps,
                    hook_s=hook,
                    dense=dense,
                    world=world,
                    stock_steps=state._buckets.stock_steps if state else 0,
                ),
                f,
            )
    dist.barrier()
    dist.destroy_process_group()


def unshaped_timing_rank(rank, cfg_path, world, port):
    """--no-lab: a rank of a timing run on loopback, its place set as the lab sets it."""
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1"
    )
    timing_worker(cfg_path)


def timing_run(model, point, rate, opts):
    path = os.path.join(opts.out, "time", f"{model}-{point}-w{opts.workers}-{rate}.json")

    def make(partial):
        print(f"speedup: timing of {model} {point} at {rate}", file=sys.stderr, flush=True)
        cfg_path = partial + ".cfg"
        with open(cfg_path, "w") as f:
            json.dump(
                {
                    "model": model,
                    "point": point,
                    "rate": rate,
                    "steps": opts.timing_steps,
                    "budget": opts.timing_budget,
                    "out": os.path.abspath(partial),
                },
                f,
            )
        worker = [sys.executable, os.path.abspath(__file__), "--time-worker", os.path.abspath(cfg_path)]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        if opts.no_lab:
            runs.spawn(unshaped_timing_rank, (os.path.abspath(cfg_path), opts.workers, runs.free_port()), opts.workers)
            codes = [0]  # a rank that fails raises here
        else:
            lab = [
                sys.executable,
                os.path.join(HERE, "netlab.py"),
                "--rate",
                rate,
                "--workers",
                str(opts.workers),
                "--timeout",
                str(opts.timing_timeout),
                "--logs",
                partial + ".logs",
                "--",
            ]
            codes = [subprocess.run(lab + worker, env=env).returncode]
        os.remove(cfg_path)
        if any(codes):
            raise SystemExit(f"speedup: the timing run of {model} {point} at {rate} failed ({codes})")
        runs.drop_quiet_logs(partial + ".logs")

    return runs.cached_json(path, make)


def split(t, compute_s):
    """Median step and its split (seconds): compute (the compute-only run's), the hook's own work,
    communication (the rest, never below 0)."""
    step = statistics.median(t["step_s"][WARM:])
    hook = statistics.median(t["hook_s"][WARM:]) if len(t["hook_s"]) > WARM else 0.0
    return {"step": step, "compute": compute_s, "hook": hook, "comm": max(0.0, step - compute_s - hook)}


# ---- report ------------------------------------------------------------------------------------


def steps_to(curve, target):
    """Steps to reach `target` accuracy, linear between evaluations; None when never reached."""
    prev_step, prev_acc = 0, 0.0
    for step, acc in curve:
        if acc >= target:
            if acc == prev_acc:
                return step
            return prev_step + (step - prev_step) * (target - prev_acc) / (acc - prev_acc)
        prev_step, prev_acc = step, acc
    return None


def smoothed(curve, window):
    """The accuracy curve as a centred moving mean over `window` evaluations (fewer at its ends, an
    odd window: as many before as after), so that one noisy evaluation does not decide when a
    target is reached. window 1: the curve itself."""
    half = window // 2
    accs = [acc for _, acc in curve]
    return [[step, statistics.fmean(accs[max(0, i - half) : i + half + 1])] for i, (step, _) in enumerate(curve)]


def converged(curve, window):
    """A run's converged accuracy: the mean of its last `window` evaluations."""
    return statistics.fmean(acc for _, acc in curve[-window:])


def choose_target(acc, best, seeds, opts):
    """The accuracy every point is timed to, per seed, and how it was chosen (written beside the
    results). fixed: one accuracy for the model, dense's converged accuracy at its best learning
    rate (the mean of its last --smooth evaluations) averaged over the seeds, less --target-margin
    points; a number: that accuracy (%); dense-final: each seed's own dense final evaluation (the
    earlier rule: a target at the top of dense's noisy curve)."""
    finals = {s: converged(acc[best][s]["curve"], opts.smooth) for s in seeds}
    info = {
        "rule": opts.target,
        "dense": best,
        "seeds": seeds,
        "smooth_evaluations": opts.smooth,
        "eval_every": opts.eval_every,
        "dense_converged_pct": {str(s): 100 * v for s, v in finals.items()},
    }
    if opts.target == "dense-final":
        info["target_pct"] = {str(s): 100 * acc[best][s]["test_accuracy"] for s in seeds}
        return {s: acc[best][s]["test_accuracy"] for s in seeds}, info
    if opts.target == "fixed":
        mean = statistics.fmean(finals.values())
        info.update(
            dense_converged_mean_pct=100 * mean,
            margin_points=opts.target_margin,
            target_pct=100 * mean - opts.target_margin,
        )
    else:
        info["target_pct"] = float(opts.target)
    return {s: info["target_pct"] / 100 for s in seeds}, info


def ci(values, fmt="{:.2f}"):
    """mean ± the half-width of its 95% interval (n), or "" for none."""
    m, half = runs.mean_ci(values)
    if m is None:
        return ""
    return fmt.format(m) + (f" ± {fmt.format(half)}" if half is not None else "")


def ratio(values, fmt="{:.2f}"):
    """A paired ratio's geometric mean [95% interval]; "" for none."""
    m, lo, hi, n = runs.ratio_ci(values)
    if m is None:
        return ""
    return fmt.format(m) + (f" [{fmt.format(lo)}, {fmt.format(hi)}]" if lo is not None else "")


def model_report(model, opts, points, dense_points):
    """The table rows of one model, the best dense point and the target's record."""
    seeds = [int(s) for s in opts.seeds.split(",")]
    acc = {p: {s: accuracy_run(model, p, s, opts) for s in seeds} for p in dense_points + points if p != AUTO}
    best = max(dense_points, key=lambda p: statistics.mean(r["test_accuracy"] for r in acc[p].values()))
    target, info = choose_target(acc, best, seeds, opts)
    window = 1 if opts.target == "dense-final" else opts.smooth  # the earlier rule read the raw curve

    def times_to_target(point, step_s):
        """Seed -> seconds to the target at a step of step_s, for the seeds whose curve reaches it."""
        reach = {sd: steps_to(smoothed(acc[point][sd]["curve"], window), target[sd]) for sd in seeds}
        return {sd: st * step_s for sd, st in reach.items() if st is not None}

    rows = []
    for rate in opts.rates.split(","):
        compute = split(timing_run(model, "compute", rate, opts), 0.0)["step"]
        dense_step = split(timing_run(model, "dense", rate, opts), compute)["step"]
        ideal = dense_step / compute
        # dense's time: to the target, or (the earlier rule) its whole run
        dense_time = (
            {sd: acc[best][sd]["steps"] * dense_step for sd in seeds}
            if opts.target == "dense-final"
            else times_to_target(best, dense_step)
        )
        for p in [best] + points:
            t = timing_run(model, timed_as(p), rate, opts)
            s = split(t, compute)
            runs_as = p
            if p == AUTO:  # trains as the mode it chose after its first looks
                # dense steps there are momentum SGD at the compressed points' lr (LR): dense at LR
                runs_as = (
                    f"dense-lr{LR:g}" if sum(t.get("dense", [])[WARM:]) * 2 > len(t["step_s"][WARM:]) else "sidco-e-mc"
                )
            times = times_to_target(runs_as, s["step"])
            speedups = [dense_time[sd] / times[sd] for sd in times if sd in dense_time]
            label = point_spec(p)[5] + (
                f" (ran {'compressed' if runs_as == 'sidco-e-mc' else 'dense'})" if p == AUTO else ""
            )
            finals = [100 * r["test_accuracy"] for r in acc[runs_as].values()]
            rows.append(
                {
                    "model": model,
                    "rate": rate,
                    "point": p,
                    "label": label,
                    "split": s,
                    "finals": finals,
                    "reached": len(times),
                    "seeds": len(seeds),
                    "times": times,
                    "speedups": speedups,
                    "ideal": ideal,
                    "target": target,
                    "curves": {sd: acc[runs_as][sd]["curve"] for sd in seeds},
                }
            )
    return rows, best, info


def pm(v, se, fmt="{:.2f}"):
    if v is None:
        return "not reached"
    return fmt.format(v) + (f" ± {fmt.format(se)}" if se is not None else "")


def paired(a, b):
    """Mean ± standard error of a's final accuracy minus b's (points), over the seeds both have."""
    both = sorted(set(a) & set(b))
    m, se = runs.mean_se([100 * (a[sd]["test_accuracy"] - b[sd]["test_accuracy"]) for sd in both])
    return pm(m, se) + f" ({len(both)})" if both else ""


def accuracy_table(models, opts):
    """Every accuracy run made: final test accuracy per point, and paired by seed against dense at
    its best learning rate, against top-k with momentum correction and (the shared exchange)
    against the all-gather's SIDCo-E."""
    lines = [
        "| model | point | seeds | test acc. % | vs best dense | vs top-k, mom. corr. | vs all-gather |",
        "|---|---|---|---|---|---|---|",
    ]
    for model in models:
        found = {}
        for p in opts.dense_list + list(POINTS) + [x for x in opts.point_list if x not in POINTS]:
            for sd in [int(x) for x in opts.seeds.split(",")]:
                path = accuracy_path(model, p, sd, opts)
                if os.path.exists(path):
                    with open(path) as f:
                        found.setdefault(p, {})[sd] = runs.same_eval_images(json.load(f), opts.eval_images, path)
        dense = [p for p in found if p.startswith("dense")]
        best = max(dense, key=lambda p: statistics.mean(r["test_accuracy"] for r in found[p].values()), default=None)
        for p, acc in found.items():
            m, se = runs.mean_se([100 * r["test_accuracy"] for r in acc.values()])
            label = point_spec(p)[5] + (" (best dense)" if p == best else "")
            lines.append(
                f"| {model} | {label} | {','.join(map(str, sorted(acc)))} | {pm(m, se)} | "
                f"{paired(acc, found[best]) if best and p != best else ''} | "
                f"{paired(acc, found['topk-mc']) if 'topk-mc' in found and p != 'topk-mc' else ''} | "
                f"{paired(acc, found['sidco-e-mc']) if p in EXCHANGES and 'sidco-e-mc' in found else ''} |"
            )
    return "\n".join(lines)


def step_table(models, opts):
    """The timing runs alone (no accuracy runs needed): per model and rate, each point's median
    step, its split, and dense's step over it (the speed-up per step), beside the ideal."""

    def made(model, point, rate):  # read only: a run not made is left out, never started
        path = os.path.join(opts.out, "time", f"{model}-{point}-w{opts.workers}-{rate}.json")
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        return None

    lines = [
        "| model | rate | point | step s | compute / hook / comm s | dense step / step | ideal |",
        "|---|---|---|---|---|---|---|",
    ]
    for model in models:
        for rate in opts.rates.split(","):
            if not made(model, "compute", rate) or not made(model, "dense", rate):
                continue
            compute = split(made(model, "compute", rate), 0.0)["step"]
            dense_step = split(made(model, "dense", rate), compute)["step"]
            for p in ["dense"] + opts.point_list:
                t = made(model, timed_as(p), rate)
                if t is None:
                    continue
                s = split(t, compute)
                label = ("dense" if p == "dense" else point_spec(p)[5]) + (
                    f" (ran {'dense' if sum(t.get('dense', [])[WARM:]) * 2 > len(t['step_s'][WARM:]) else 'compressed'})"
                    if p == AUTO
                    else ""
                )
                lines.append(
                    f"| {model} | {rate} | {label} | {s['step']:.3f} | {s['compute']:.3f} / {s['hook']:.3f} / "
                    f"{s['comm']:.3f} | {dense_step / s['step']:.2f} | {dense_step / compute:.2f} |"
                )
    return "\n".join(lines)


def table(rows, opts):
    """Per model, rate and point: final accuracy, the step and its split, the time to the target
    read off the smoothed curve (the seeds reaching it), the speed-up over dense paired by seed
    (dense's time to the target over the point's: a geometric mean with its 95% interval, over the
    seeds where both reach it), the ideal and the share of it. The earlier rule (--target
    dense-final): dense's whole run over the point's time to each seed's own dense final accuracy."""
    fixed = opts.target != "dense-final"
    to = "the target" if fixed else "dense's acc."
    lines = [
        f"| model | rate | point | final acc. % (95% CI) | step s | compute / hook / comm s | time to {to} s "
        "(95% CI) | seeds reaching it | speed-up (95% CI) | ideal | of ideal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["split"]
        sp = runs.ratio_ci(r["speedups"])[0]
        of_ideal = f"{sp / r['ideal']:.2f}" if sp and not r["point"].startswith("dense") else ""
        reached = f"{r['reached']}/{r['seeds']}" + ("" if r["reached"] == r["seeds"] else " (not every seed)")
        time_cell = ci(list(r["times"].values()), "{:.0f}") or "not reached"
        lines.append(
            f"| {r['model']} | {r['rate']} | {r['label']} | {ci(r['finals'])} | {s['step']:.3f} | "
            f"{s['compute']:.3f} / {s['hook']:.3f} / {s['comm']:.3f} | {time_cell} | {reached} | "
            f"{ratio(r['speedups'])} | {r['ideal']:.2f} | {of_ideal} |"
        )
    return "\n".join(lines)


def comparisons(rows, subject="sidco-e-mc"):
    """The subject's time to the target against every other point's at each rate, paired by seed: the
    rival's time over the subject's (above 1: the subject is faster), a geometric mean with its
    95% interval over the seeds where both reach the target; and their final accuracies' paired
    difference (points, 95% interval) over every seed."""
    lines = [
        "| model | rate | against | rival's time / SIDCo-E's (95% CI) | seeds both reach | "
        "final acc. difference, points (95% CI) |",
        "|---|---|---|---|---|---|",
    ]
    by = {(r["model"], r["rate"], r["point"]): r for r in rows}
    for (model, rate, p), r in by.items():
        if p != subject:
            continue
        others = [x[2] for x in by if x[:2] == (model, rate) and x[2] != subject]
        for rival in sorted(others, key=lambda x: not x.startswith("dense")):  # dense first, then in order
            o = by[(model, rate, rival)]
            both = sorted(set(r["times"]) & set(o["times"]))
            diffs = [a - b for a, b in zip(r["finals"], o["finals"])]  # the same seeds, in order
            cell = ratio([o["times"][sd] / r["times"][sd] for sd in both]) or "no seed where both reach it"
            lines.append(f"| {model} | {rate} | {o['label']} | {cell} | {len(both)} of {r['seeds']} | {ci(diffs)} |")
    return "\n".join(lines)


def figure(rows, model, path):
    """Test accuracy against wall-clock time (seed means at each evaluation), a column of panels
    per rate and a row per group of at most PER_PANEL methods, with the target the points are
    timed to; each method in its colour and marker (plotstyle), the legend beside the data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = list(dict.fromkeys(r["rate"] for r in rows if r["model"] == model))
    points = list(dict.fromkeys(r["point"] for r in rows if r["model"] == model))
    groups = plotstyle.panels(points)  # at most PER_PANEL methods a panel
    fig, axes = plt.subplots(
        len(groups), len(rates), figsize=(5 * len(rates), 4.2 * len(groups)), squeeze=False, sharey=True
    )
    for g, group in enumerate(groups):
        for ax, rate in zip(axes[g], rates):
            for r in (x for x in rows if x["model"] == model and x["rate"] == rate and x["point"] in group):
                curves = list(r["curves"].values())
                steps = [c[0] for c in curves[0]]
                mean = [statistics.mean(c[j][1] for c in curves) * 100 for j in range(len(steps))]
                ax.plot(
                    [st * r["split"]["step"] for st in steps],
                    mean,
                    label=r["label"],
                    linewidth=1.2,
                    markersize=3,
                    **plotstyle.style(r["point"]),
                )
            _rate_panel(ax, rows, model, rate)
        axes[g, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the data
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy %")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _rate_panel(ax, rows, model, rate):
    """A panel's target line, scale, title and grid."""
    targets = set(next(x for x in rows if x["model"] == model)["target"].values())
    if len(targets) == 1:  # one target for every seed
        ax.axhline(100 * targets.pop(), color="0.3", linestyle="--", linewidth=0.8, label="target")
    ax.set_xscale("log")
    ax.set_title(f"{model}, " + ("unshaped" if rate == "none" else f"{rate} per worker"))
    ax.set_xlabel("wall-clock time, s (log)")
    ax.grid(True, which="both", linewidth=0.3)


def time_figure(rows, model, path):
    """Time to the target per rate and method: each method's mean over the seeds reaching it with
    its 95% interval (log scale), its seeds reaching it beside; at most PER_PANEL methods a panel,
    one colour per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [r for r in rows if r["model"] == model]
    rates = list(dict.fromkeys(r["rate"] for r in mine))
    methods = list(dict.fromkeys(r["point"] for r in mine))
    groups = plotstyle.panels(methods)  # at most PER_PANEL methods a panel, evened out
    per = max(len(g) for g in groups)
    fig, axes = plt.subplots(
        len(groups), len(rates), figsize=(3.6 * len(rates), 0.45 * per * len(groups) + 1.4), squeeze=False, sharex=True
    )
    for g, group in enumerate(groups):
        for c, rate in enumerate(rates):
            ax = axes[g, c]
            for y, p in enumerate(group):
                r = next(x for x in mine if x["rate"] == rate and x["point"] == p)
                m, half = runs.mean_ci(list(r["times"].values()))
                tag = f"{r['reached']}/{r['seeds']}"
                if m is None:
                    ax.text(
                        0.02,
                        y,
                        f"not reached (0/{r['seeds']})",
                        transform=ax.get_yaxis_transform(),
                        va="center",
                        fontsize=7,
                        color=plotstyle.style(p)["color"],
                    )
                    continue
                lo = min(half, 0.95 * m) if half is not None else 0.0  # a log axis: the bar stays above 0
                ax.errorbar(
                    [m],
                    [y],
                    xerr=[[lo], [half or 0.0]],
                    fmt=plotstyle.style(p)["marker"],
                    color=plotstyle.style(p)["color"],
                    capsize=3,
                    markersize=4,
                )
                ax.annotate(
                    tag,
                    (m + (half or 0.0), y),
                    xytext=(4, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7,
                    color=plotstyle.style(p)["color"],
                )
            ax.set_yticks(range(len(group)))
            ax.set_yticklabels(
                [next(x for x in mine if x["point"] == p)["label"] for p in group] if c == 0 else [], fontsize=7
            )
            ax.set_ylim(-0.6, per - 0.4)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.grid(True, axis="x", which="both", linewidth=0.3)
            if g == 0:
                ax.set_title("unshaped" if rate == "none" else f"{rate} per worker", fontsize=9)
            if g == len(groups) - 1:
                ax.set_xlabel("time to target, s (log)", fontsize=8)
    fig.suptitle(f"{model}: time to the target accuracy, mean over the seeds reaching it, 95% interval", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="resnet18,vit")
    p.add_argument("--points", default=",".join(POINTS))
    p.add_argument("--dense-lrs", default="0.01,0.02,0.05,0.1")
    p.add_argument("--rates", default="10mbit,100mbit,1gbit,10gbit,none")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument(
        "--target",
        default="fixed",
        help="the accuracy every point is timed to: fixed (dense's converged accuracy at its best "
        "learning rate, the mean over the seeds, less --target-margin points), a number (that "
        "accuracy in %%), or dense-final (each seed's own dense final evaluation: the earlier rule)",
    )
    p.add_argument("--target-margin", type=float, default=0.5, help="points below dense's converged accuracy")
    p.add_argument(
        "--smooth",
        type=int,
        default=3,
        help="evaluations in the centred moving mean a curve is read through (odd; 1: the raw curve)",
    )
    runs.add_eval_images(p)
    p.add_argument("--timing-steps", type=int, default=10)
    p.add_argument("--timing-timeout", type=int, default=3600)
    p.add_argument(
        "--timing-budget",
        type=float,
        default=float("inf"),
        help="seconds of timed steps after which a timing run stops (at least 2 are timed)",
    )
    p.add_argument("--phase", default="all", choices=["accuracy", "timing", "report", "steps", "all"])
    p.add_argument("--no-lab", action="store_true", help="unshaped rate only, on loopback (no root needed)")
    p.add_argument("--out", default="docs/results/speedup")
    p.add_argument(
        "--name",
        default="",
        help="the report's files are OUT/speedup-NAME.table.md and "
        "OUT/speedup-<model>-NAME.png (a report of other seeds or points beside the first)",
    )
    opts = p.parse_args(argv)
    opts.suffix = f"-{opts.name}" if opts.name else ""
    points = [x for x in opts.points.split(",") if x]
    unknown = [x for x in points if not known_point(x)]
    if unknown:
        p.error(
            f"unknown point(s) {', '.join(unknown)}: use {', '.join(POINTS)}, or one of them (not {AUTO}) "
            "at another learning rate as <point>-lr<L>"
        )
    opts.point_list = [x for x in points if not x.startswith("dense")]
    opts.dense_list = [f"dense-lr{float(lr):g}" for lr in opts.dense_lrs.split(",") if lr]  # "": none
    for m in opts.models.split(","):
        if m not in study_models.TASKS:
            p.error(f"unknown model {m!r}: use {', '.join(study_models.TASKS)}")
    if opts.target not in ("fixed", "dense-final"):
        try:
            value = float(opts.target)
        except ValueError:
            value = float("nan")
        if not 0 < value < 100:
            p.error(f"--target {opts.target}: fixed, dense-final, or an accuracy in %% between 0 and 100")
    if not 0 <= opts.target_margin < 100:
        p.error(f"--target-margin {opts.target_margin}: points from 0 to 100")
    if opts.smooth < 1 or opts.smooth % 2 == 0:
        p.error(f"--smooth {opts.smooth}: an odd number of evaluations, at least 1")
    if opts.steps < 2 or opts.eval_every < 1 or opts.workers < 1:
        p.error("--steps at least 2, --eval-every and --workers at least 1")
    runs.check_eval_images(p, opts)
    if opts.timing_steps <= WARM:
        p.error(f"--timing-steps {opts.timing_steps}: at least {WARM + 1} (the first {WARM} are left out)")
    if opts.no_lab and opts.rates != "none":
        p.error("--no-lab runs the unshaped rate only: give --rates none")
    if not opts.no_lab and opts.phase in ("timing", "all"):
        sys.path.insert(0, HERE)
        import netlab

        reason = netlab.unavailable_reason(opts.rates.split(",")[0])
        if reason:
            p.error(reason)
    return opts


def main(argv=None):
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--time-worker":
        return timing_worker(sys.argv[2])
    opts = parse(argv)
    for sub in ("acc", "time"):
        os.makedirs(os.path.join(opts.out, sub), exist_ok=True)
    seeds = [int(s) for s in opts.seeds.split(",")]
    models = opts.models.split(",")
    if opts.phase in ("accuracy", "all"):
        for m in models:
            for p in opts.dense_list + opts.point_list:
                for s in seeds:
                    if p != AUTO:
                        accuracy_run(m, p, s, opts)
        runs.publish(accuracy_table(models, opts), os.path.join(opts.out, "accuracy.table.md"))
    if opts.phase in ("timing", "all"):
        for m in models:
            for rate in opts.rates.split(","):
                # a step is one whatever the learning rate: dense's is one, and <point>-lr<L>'s is <point>'s
                for p in dict.fromkeys(["compute", "dense"] + [timed_as(x) for x in opts.point_list]):
                    timing_run(m, p, rate, opts)
    if opts.phase == "steps":  # the timing runs made, without accuracy runs
        runs.publish(step_table(models, opts), os.path.join(opts.out, "steps.table.md"))
    if opts.phase in ("report", "all"):
        rows = []
        for m in models:
            model_rows, best, info = model_report(m, opts, opts.point_list, opts.dense_list)
            rows += model_rows
            with open(os.path.join(opts.out, f"target-{m}{opts.suffix}.json"), "w") as f:
                json.dump(info, f, indent=1)
            target = info["target_pct"]
            print(
                f"speedup: {m}: dense's best learning rate is {point_spec(best)[4]:g}; the target: "
                + (f"{target:.2f}% ({opts.target})" if isinstance(target, float) else "each seed's dense final"),
                file=sys.stderr,
            )
            figure(rows, m, os.path.join(opts.out, f"speedup-{m}{opts.suffix}.png"))
            time_figure(rows, m, os.path.join(opts.out, f"time-to-target-{m}{opts.suffix}.png"))
        runs.publish(table(rows, opts), os.path.join(opts.out, f"speedup{opts.suffix}.table.md"))
        runs.publish(comparisons(rows), os.path.join(opts.out, f"comparisons{opts.suffix}.table.md"))


if __name__ == "__main__":
    main()
