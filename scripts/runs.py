"""What the study scripts (frontier.py, ddp_results.py, controller.py, speedup.py,
exchange_model.py) share: a free loopback port for a run's rendezvous, a run's JSON made once and
reused (with the number of test images it was evaluated on), the statistics of their tables (mean
and standard error, Student's t intervals, paired ratios), and their Markdown tables, printed and
written beside the runs."""

import json
import math
import os
import shutil
import socket
import statistics


def free_port():
    """A loopback port free now (for a run's rendezvous, taken at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, args, nprocs):
    """torch.multiprocessing.spawn's ranks fn(rank, *args), forked from a server that has imported
    the study's script (and with it torch) once, instead of each rank importing it anew (about
    1.5 s of CPU a rank): a short run is then its steps, not its imports."""
    import torch.multiprocessing as mp

    mp.start_processes(fn, args=args, nprocs=nprocs, start_method="forkserver")


def cached_json(path, make):
    """The JSON at path, made by make(partial_path) when absent: make writes the partial file, which
    becomes the run's only once whole (a run stopped midway is made again)."""
    if not os.path.exists(path):
        partial = path + ".partial"
        make(partial)
        os.replace(partial, path)
    with open(path) as f:
        return json.load(f)


TEST_IMAGES = 10000  # Fashion-MNIST's test set


def add_eval_images(parser):
    """--eval-images: how many of the test images a run's accuracy is read on."""
    parser.add_argument(
        "--eval-images",
        type=int,
        default=TEST_IMAGES,
        help=f"the first N of the {TEST_IMAGES:,} test images give a run's accuracy (default: "
        "all; fewer for a smoke run of the pipeline)",
    )


def check_eval_images(parser, opts):
    if not 1 <= opts.eval_images <= TEST_IMAGES:
        parser.error(f"--eval-images {opts.eval_images}: from 1 to {TEST_IMAGES}")


def same_eval_images(result, asked, path):
    """A run reused from path must have been evaluated on as many test images as asked for."""
    made = result.get("eval_images", TEST_IMAGES)
    if made != asked:
        raise SystemExit(
            f"{path} was evaluated on {made} test images and this invocation asks for {asked}: "
            f"give --eval-images {made}, or another --out"
        )
    return result


def same_eval_every(result, asked, path):
    """A run reused from path must have been evaluated every `asked` steps (its curve's spacing
    decides what a smoothed reading of it means)."""
    made = result.get("eval_every")
    if made is not None and made != asked:
        raise SystemExit(
            f"{path} was evaluated every {made} steps and this invocation asks for {asked}: "
            f"give --eval-every {made}, or another --out"
        )
    return result


def drop_quiet_logs(folder):
    """Removes a run's log folder when every log in it is empty (a run that printed nothing)."""
    if os.path.isdir(folder) and all(os.path.getsize(os.path.join(folder, f)) == 0 for f in os.listdir(folder)):
        shutil.rmtree(folder)


def markdown(header, rows):
    """A Markdown table: header cells and rows of cells (text)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def publish(text, path):
    """Prints a table and writes it to path."""
    print(text)
    with open(path, "w") as f:
        f.write(text + "\n")


# ---- statistics --------------------------------------------------------------------------------


def mean_se(values):
    """(mean, standard error) of values; the error is None for fewer than 2 values, and both are
    None for none."""
    values = list(values)
    if not values:
        return None, None
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None)


def _beta_fraction(a, b, x):
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def beta_regularized(x, a, b):
    """I_x(a, b), the regularized incomplete beta function, for 0 <= x <= 1."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """Student's t distribution with df degrees of freedom: P(T <= t)."""
    tail = 0.5 * beta_regularized(df / (df + t * t), df / 2.0, 0.5)
    return 1.0 - tail if t > 0 else tail


def t_quantile(p, df):
    """The p-quantile of Student's t with df degrees of freedom, 0.5 <= p < 1 (bisection)."""
    if not 0.5 <= p < 1.0 or df < 1:
        raise ValueError(f"t_quantile({p}, {df}): p from 0.5 to 1, df at least 1")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return 0.5 * (lo + hi)


def mean_ci(values, level=0.95):
    """(mean, half-width of its two-sided Student's t interval); the half-width is None for fewer
    than 2 values, and both are None for none."""
    values = list(values)
    m, se = mean_se(values)
    if se is None:
        return m, None
    return m, t_quantile(0.5 + level / 2.0, len(values) - 1) * se


def ratio_ci(ratios, level=0.95):
    """A ratio's geometric mean over paired runs with its Student's t interval, taken on the logs:
    (mean, low, high, n); low and high are None for fewer than 2 ratios, all None for none."""
    logs = [math.log(r) for r in ratios]
    m, half = mean_ci(logs, level)
    if m is None:
        return None, None, None, 0
    if half is None:
        return math.exp(m), None, None, len(logs)
    return math.exp(m), math.exp(m - half), math.exp(m + half), len(logs)
