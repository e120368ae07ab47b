"""Bytes and time per worker of a compressed step's exchange, from 4 to 1024 workers: the all-gather
of every worker's (index, value) pairs against the shared exchange (one set of indices per bucket,
a rotating leader's; the workers' values there all-reduced) and the sparse all-reduce (each worker
sums one region of the indices; the largest sums all-gathered), with the dense all-reduce beside them
(docs/RESULTS.md, "Bytes at scale"). The model is checked against the network lab at W = 2, 4 and
8: the bytes each worker's link carried (the kernel's counters) for the same exchange of the same
vector by gradscope's DDP hook, and the hook's own figure of them (summary()'s
link_bytes_per_step: the same model applied to the collectives it called) beside them; the dense row
is the hook's dense (warm-up) step, its ring all-reduce.

    PYTHONPATH=build/python python3 scripts/exchange_model.py [--n 11181642] [--density 0.01]
        [--alpha-us 30] [--lab] [--lab-workers 2,4,8] [--lab-steps 6] [--out docs/results/scale] [--force]

The model, per worker and step, for n elements at density d (k = d n selected), W workers, links of
B bit/s each way and a per-message latency alpha. The all-gather's payload codes its ascending
indices as Rice-coded gaps, about log2(1/d) + 2 bits each (docs/compressors.md), so a pair costs
p = 4 + (log2(1/d) + 2) / 8 bytes (5.08 at d = 0.01); the shared exchange all-reduces plain int32
indices and float32 values, 8 bytes a pair:
  dense, ring all-reduce:     sends 2 (W-1)/W 4n bytes;           time 2 (W-1) alpha + bytes / B
  dense, tree (reduce + broadcast, unpipelined): time 2 log2(W) (alpha + 4n / B)
  all-gather of pairs, ring:  sends (W-1) p k bytes (each worker's payload passes every link: Gloo
                              gathers equal sizes, the longest); time (W-1) alpha + bytes / B
  all-gather, tree (gather + broadcast): time 2 log2(W) alpha + 2 (W-1) p k / B
  shared, ring all-reduce of k indices and k values (and a 24-byte head): sends 2 (W-1)/W (8k + 24)
                              bytes; time 3 2 (W-1) alpha + bytes / B
  shared, tree:               time 3 2 log2(W) alpha + 2 log2(W) 8k / B
  sparse all-reduce: its selection outside its own region to the regions' owners (all-to-all,
                              (W-1)/W 8k bytes), the W region counts and a NaN flag all-reduced
                              (ring), and the kept sums all-gathered, their sizes known from the
                              counts (K = min(3, W) k in all, the workers' selections not
                              overlapping: K/W pairs a region, balanced, (W-1) 8K/W); about
                              (1 + 3) (W-1)/W 8k bytes; time 4 (W-1) alpha + bytes / B (ring),
                              (W-1 + 4 log2(W)) alpha + ((W-1)/W 8k + 2 (W-1)/W 8K) / B (tree)
The lab's counters hold every header (Ethernet, IP, TCP) and the acknowledgements of what the
worker receives; a veth passes the kernel's large (GSO) segments, so they add a few percent.
"""

import argparse
import datetime
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plotstyle  # noqa: E402
import runs  # noqa: E402

RESNET18 = 11181642  # torchvision's ResNet-18 with 10 classes: its gradient's elements
SPARSE_KEEP = 3  # the sparse all-reduce keeps up to 3k sums (compressor.hpp, kSparseAllreduceKeep)
WORKERS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
RATES = {"1gbit": 1e9, "10gbit": 1e10}


def pair_bytes(density):
    """Bytes a selected pair costs in the all-gather's payload: a float32 value and a Rice-coded gap."""
    return 4 + (math.log2(1 / density) + 2) / 8


def model(n, density, workers, bps, alpha):
    """{exchange: (bytes sent per worker, ring time s, tree time s)} of one step."""
    k = max(1, math.floor(n * density))
    w, lg = workers, math.log2(workers)
    dense = 2 * (w - 1) / w * 4 * n
    gather = (w - 1) * pair_bytes(density) * k
    shared = 2 * (w - 1) / w * (8 * k + 24)
    # sparse all-reduce: its selection outside its region to the owners, the W region counts and
    # the NaN flag all-reduced, and the kept sums (K/W pairs a region, balanced) all-gathered
    kept = min(SPARSE_KEEP, w) * k
    sparse = (w - 1) / w * 8 * k + 2 * (w - 1) / w * 8 * (w + 1) + (w - 1) * 8 * kept / w
    to_s = 8 / bps
    return {
        "dense": (dense, 2 * (w - 1) * alpha + dense * to_s, 2 * lg * (alpha + 4 * n * to_s)),
        "allgather": (gather, (w - 1) * alpha + gather * to_s, 2 * lg * alpha + 2 * gather * to_s),
        "shared": (shared, 6 * (w - 1) * alpha + shared * to_s, 6 * lg * alpha + 2 * lg * 8 * k * to_s),
        # pairwise all-to-all (W - 1 messages), one small all-reduce, ring or tree all-gather
        "sparse-allreduce": (
            sparse,
            4 * (w - 1) * alpha + sparse * to_s,
            (w - 1 + 4 * lg) * alpha + ((w - 1) / w * 8 * k + 2 * (w - 1) / w * 8 * kept) * to_s,
        ),
    }


def model_table(opts):
    kinds = ("dense", "allgather", "shared", "sparse-allreduce")
    lines = [
        "| workers | rate | dense MB sent | all-gather MB | shared MB | sparse all-reduce MB | dense ring / tree ms | "
        "all-gather ring / tree ms | shared ring / tree ms | sparse all-reduce ring / tree ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rate, bps in RATES.items():
        for w in WORKERS:
            m = model(opts.n, opts.density, w, bps, opts.alpha_us * 1e-6)
            cells = [f"{m[x][0] / 1e6:.2f}" for x in kinds]
            times = [f"{1e3 * m[x][1]:.1f} / {1e3 * m[x][2]:.1f}" for x in kinds]
            lines.append(f"| {w} | {rate} | " + " | ".join(cells + times) + " |")
    return "\n".join(lines)


# each exchange as a variant of the hook's SIDCo-E (the points of speedup.py that run it), so that it
# looks as it does in every figure (plotstyle): the method's colour and marker, the variant's line
EXCHANGES = {
    "dense": ("dense", "dense all-reduce"),
    "allgather": ("sidco-e-mc", "all-gather of pairs"),
    "shared": ("sidco-e-mc-shared", "shared exchange"),
    "sparse-allreduce": ("sidco-e-mc-sparse", "sparse all-reduce"),
}


def figure(opts, lab_rows, path):
    """Bytes per worker and step against the workers (the model's lines, the lab's hollow markers),
    then the time per step at each rate, a panel for the ring collectives and one for the tree: at
    most four series a panel, each exchange in its plotstyle look, the legend in a panel of its own."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1 + len(RATES), figsize=(5 * (1 + len(RATES)), 8.4))
    ws = [2, 4] + WORKERS[1:]
    bytes_ax, legend_ax = axes[0, 0], axes[1, 0]
    for x, (point, label) in EXCHANGES.items():
        look = plotstyle.style(point)
        bytes_ax.plot(
            ws,
            [model(opts.n, opts.density, w, 1e9, 0)[x][0] / 1e6 for w in ws],
            label=label,
            linewidth=1.6,
            markersize=3,
            **look,
        )
    for row in lab_rows:
        look = plotstyle.style(EXCHANGES[row["exchange"]][0])
        bytes_ax.plot(
            row["workers"],
            row["measured_tx"] / 1e6,
            look["marker"],
            color=look["color"],
            markerfacecolor="none",
            markersize=9,
        )
    bytes_ax.set(
        xscale="log",
        yscale="log",
        xlabel="workers",
        ylabel="MB sent per worker per step",
        title="bytes: the model" + (" (lines), the lab (hollow)" if lab_rows else ""),
    )
    for col, (rate, bps) in enumerate(RATES.items(), start=1):
        for row, (kind, name) in enumerate(((1, "ring"), (2, "tree"))):
            ax = axes[row, col]
            for x, (point, label) in EXCHANGES.items():
                ms = [model(opts.n, opts.density, w, bps, opts.alpha_us * 1e-6)[x] for w in WORKERS]
                ax.plot(WORKERS, [1e3 * m[kind] for m in ms], linewidth=1.6, markersize=3, **plotstyle.style(point))
            ax.set(
                xscale="log",
                yscale="log",
                xlabel="workers",
                ylabel="ms per step",
                title=f"time, {name} collectives, {bps / 1e9:g} Gbit/s per link, {opts.alpha_us:g} us a message",
            )
        low = min(axes[r, col].get_ylim()[0] for r in (0, 1))  # ring and tree on one scale a rate
        high = max(axes[r, col].get_ylim()[1] for r in (0, 1))
        for r in (0, 1):
            axes[r, col].set_ylim(low, high)
    for ax in axes.flat:
        ax.grid(True, which="both", linewidth=0.3)
        ax.title.set_fontsize(9)
    handles, labels = bytes_ax.get_legend_handles_labels()
    if lab_rows:
        handles.append(plt.Line2D([], [], marker="o", color="0.3", markerfacecolor="none", linestyle=""))
        labels.append("the lab's links, W = " + ", ".join(str(w) for w in sorted({r["workers"] for r in lab_rows})))
    legend_ax.axis("off")  # the legend's own panel: it covers no data
    legend_ax.legend(handles, labels, loc="center", fontsize=10, frameon=False, handlelength=5)
    legend_ax.text(
        0.5,
        0.12,
        f"n = {opts.n:,} elements, density {opts.density:g}",
        transform=legend_ax.transAxes,
        ha="center",
        fontsize=8,
        color="0.3",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- the lab's check ---------------------------------------------------------------------------


def lab_worker(cfg_path):
    """One rank in the lab: the hook's exchange of one bucket of n values, `steps` times."""
    import torch
    import torch.distributed as dist
    import gradscope.ddp

    with open(cfg_path) as f:
        cfg = json.load(f)
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=600))
    rank = dist.get_rank()
    torch.set_num_threads(1)
    if cfg["exchange"] == "dense":  # every step a dense warm-up step: the hook's ring all-reduce
        state = gradscope.ddp.State("topk", ratio=cfg["density"], warmup_steps=cfg["steps"] + 1, timeout=600)
    else:
        state = gradscope.ddp.State("topk", ratio=cfg["density"], exchange=cfg["exchange"], timeout=600)
    param = torch.nn.Parameter(torch.zeros(cfg["n"]))
    g = torch.Generator().manual_seed(rank + 1)
    for _ in range(cfg["steps"]):
        grad = torch.randn(cfg["n"], generator=g) * torch.rand(cfg["n"], generator=g) ** 4
        state.exchange(0, grad, [param], True).wait()
    if rank == 0:
        with open(cfg["out"], "w") as f:
            json.dump(
                {
                    "bytes_sent": [s.bytes_sent for s in state.steps],
                    "gathered_bytes": [s.gathered_bytes for s in state.steps],
                    "link_bytes": [s.link_bytes for s in state.steps],
                },
                f,
            )
    dist.barrier()
    dist.destroy_process_group()


def lab_row(exchange, workers, opts):
    """Bytes per worker per step the lab's links carried, against the model's."""
    path = os.path.join(opts.out, f"lab-{exchange}-w{workers}.json")
    if not os.path.exists(path):
        cfg = {
            "exchange": exchange,
            "n": opts.lab_n,
            "density": opts.density,
            "steps": opts.lab_steps,
            "out": path + ".hook",
        }
        cfg_path = path + ".cfg"
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        stats = path + ".stats"
        cmd = [
            sys.executable,
            os.path.join(HERE, "netlab.py"),
            "--rate",
            "none",
            "--no-measure",
            "--workers",
            str(workers),
            "--stats",
            stats,
            "--timeout",
            "1200",
            "--logs",
            path + ".logs",
            "--",
            sys.executable,
            os.path.abspath(__file__),
            "--lab-worker",
            cfg_path,
        ]
        r = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if r.returncode != 0:
            raise SystemExit(f"exchange_model: the lab run of {exchange} at {workers} workers failed ({r.returncode})")
        with open(stats) as f:
            counted = json.load(f)
        with open(cfg["out"]) as f:
            hook = json.load(f)
        row = {
            "exchange": exchange,
            "workers": workers,
            "steps": opts.lab_steps,
            "n": opts.lab_n,
            # the rendezvous and the settings' agreement are once per run: a step's share
            "measured_tx": sum(counted["tx_bytes"]) / workers / opts.lab_steps,
            "hook_bytes_sent": sum(hook["bytes_sent"]) / opts.lab_steps,
            # what the hook's summary says the link sent (link_bytes_per_step), the same steps
            "hook_link_bytes": sum(hook["link_bytes"]) / opts.lab_steps,
            "model": model(opts.lab_n, opts.density, workers, 1e9, 0)[exchange][0],
        }
        with open(path, "w") as f:
            json.dump(row, f)
        for extra in (cfg_path, stats, cfg["out"]):
            os.remove(extra)
        runs.drop_quiet_logs(path + ".logs")
    with open(path) as f:
        return json.load(f)


def lab_table(rows):
    header = [
        "exchange",
        "workers",
        "model: MB sent per worker per step",
        "the lab's links: MB sent per worker per step",
        "lab / model",
        "the hook's link_bytes_per_step, MB",
        "lab / the hook's",
    ]

    def hook(r, cell):
        return cell(r) if "hook_link_bytes" in r else "-"

    return runs.markdown(
        header,
        [
            [
                r["exchange"],
                r["workers"],
                f"{r['model'] / 1e6:.3f}",
                f"{r['measured_tx'] / 1e6:.3f}",
                f"{r['measured_tx'] / r['model']:.3f}",
                hook(r, lambda r: f"{r['hook_link_bytes'] / 1e6:.3f}"),
                hook(r, lambda r: f"{r['measured_tx'] / r['hook_link_bytes']:.3f}"),
            ]
            for r in rows
        ],
    )


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--lab-worker":
        return lab_worker(sys.argv[2])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=RESNET18)
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--alpha-us", type=float, default=30.0)
    p.add_argument("--lab", action="store_true", help="check the model's bytes in the network lab (root)")
    p.add_argument("--lab-workers", default="2,4,8")
    p.add_argument("--lab-n", type=int, default=RESNET18)
    p.add_argument("--lab-steps", type=int, default=6)
    p.add_argument("--out", default="docs/results/scale")
    p.add_argument("--force", action="store_true", help="replace a table or figure already in --out")
    opts = p.parse_args()
    if not (0 < opts.density < 1) or opts.n < 1 or opts.lab_steps < 1:
        p.error("--density in (0, 1), --n and --lab-steps at least 1")
    outputs = [os.path.join(opts.out, name) for name in ("scale.table.md", "scale.png")]
    there = [path for path in outputs if os.path.exists(path)]
    if there and not opts.force:
        p.error(
            f"{there[0]} exists (the committed one holds the lab's rows, which only --lab remakes): "
            "pass --force to replace it, or --out DIR to write elsewhere"
        )
    os.makedirs(opts.out, exist_ok=True)
    text = model_table(opts)
    rows = []
    if opts.lab:
        sys.path.insert(0, HERE)
        import netlab

        reason = netlab.unavailable_reason("none")
        if reason:
            p.error(reason)
        rows = [
            lab_row(x, int(w), opts)
            for w in opts.lab_workers.split(",")
            for x in ("allgather", "shared", "sparse-allreduce", "dense")
        ]
        text += "\n\n" + lab_table(rows)
    runs.publish(text, os.path.join(opts.out, "scale.table.md"))
    figure(opts, rows, os.path.join(opts.out, "scale.png"))


if __name__ == "__main__":
    main()
