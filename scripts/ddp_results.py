"""DDP communication hooks side by side (docs/RESULTS.md, "A model gradscope did not write"):
torchvision's ResNet-18 (no weights) on Fashion-MNIST, W processes on this machine over Gloo,
the same seed and data order for every hook: plain DDP (no hook), PyTorch's fp16_compress_hook and
PowerSGD (ranks 1 and 4, compressing from step 2, its minimum with error feedback; one DDP bucket,
which its callbacks' collectives need on Gloo), and gradscope's hook with sidco-e, sidco-gp, topk
and dgc.

    PYTHONPATH=build/python python3 scripts/ddp_results.py [--workers 4] [--steps 400] [--seeds 1]
        [--hooks none,fp16,powersgd-1,...] [--warmup-steps N] [--warmup-schedule dense|exponential]
        [--warmup-start-ratio R] [--eval-images N] [--out results/ddp]

--warmup-*: gradscope.ddp.State's warm-up for the gradscope hooks (the steps it sends more count in
the bytes per step like any other).

Per run, one JSON in OUT (reused when present): test accuracy on the 10000 test images (the first
N with --eval-images N), bytes each worker sends per step (its own contribution: dense 4 n, fp16
2 n, PowerSGD its P and Q factors and the tensors it leaves uncompressed, gradscope the encoded
payload), averaged over every step (the steps a hook sends dense or denser count), step time and
the time spent inside the hook calls (what backward waits for), both per step after the first 5
steps. The table is printed and written to OUT/ddp.table.md.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torchvision
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

import gradscope
import gradscope.ddp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs  # noqa: E402
import study_models  # noqa: E402  (the image models' test accuracy)

HOOKS = ["none", "fp16", "powersgd-1", "powersgd-4", "sidco-e", "sidco-gp", "topk", "dgc"]
DENSITY = 0.01
WARMUP = 5


def check_run_size(option, steps, workers):
    """A clear error for a run too short to time (its first WARMUP steps are left out) or with no
    workers, before any process starts."""
    if steps <= WARMUP:
        raise SystemExit(
            f"{option} {steps}: at least {WARMUP + 1} steps (the first {WARMUP} are left out " f"of the step times)"
        )
    if workers < 1:
        raise SystemExit(f"--workers {workers}: at least 1")


class Timed:
    """A hook and its state, with the wall time of every hook call, summed per step."""

    def __init__(self, hook, state):
        self.hook, self.state = hook, state
        self.per_step, self.current = [], 0.0

    def call(self, bucket):
        t0 = time.perf_counter()
        fut = self.hook(self.state, bucket)
        self.current += time.perf_counter() - t0
        if bucket.is_last():
            self.per_step.append(self.current)
            self.current = 0.0
        return fut


def timed_hook(timed, bucket):
    """What DDP calls, with the Timed as its state."""
    return timed.call(bucket)


def make_hook(name, n, args):
    """(hook state, bytes this worker sends per step as a function of the step)."""
    if name == "fp16":
        return Timed(default_hooks.fp16_compress_hook, dist.group.WORLD), lambda s: 2 * n
    if name.startswith("powersgd"):
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=int(name[-1]), start_powerSGD_iter=2, random_seed=0
        )
        return Timed(powerSGD_hook.powerSGD_hook, state), None  # bytes: from its own counters
    # scripts/frontier.py sets a density and State options (density schedule, momentum correction)
    state = gradscope.ddp.State(
        method=name,
        ratio=getattr(args, "density", DENSITY),
        warmup_steps=args.warmup_steps,
        warmup=args.warmup_schedule,
        warmup_start_ratio=args.warmup_start_ratio,
        **getattr(args, "state_options", {}),
    )
    return Timed(gradscope.ddp.hook, state), None


def worker(rank, args, port, hook_name, seed, out_path):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.workers)
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(num_classes=10)
    if hook_name.startswith("powersgd"):
        # PowerSGD's hook issues collectives from its futures' callbacks; with several buckets in
        # flight, Gloo cannot keep them in the same order on every worker (the sizes mismatch and
        # it aborts). One bucket keeps them in order.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1024)
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    n = sum(p.numel() for p in model.parameters())
    timed, bytes_of = (None, lambda s: 4 * n) if hook_name == "none" else make_hook(hook_name, n, args)
    if timed:
        ddp.register_comm_hook(timed, timed_hook)
    # momentum 0 where the hook keeps it (momentum correction)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=getattr(args, "momentum", 0.9))
    if timed and is_gradscope(hook_name):
        gradscope.ddp.check_optimizer(opt, timed.state)
    x, y = gradscope.fashion_mnist("train")
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    mine = order[rank :: args.workers]
    step_s, sent = [], []
    powersgd_after = 0
    for step in range(args.steps):
        idx = mine[(step * args.batch) % (len(mine) - args.batch) :][: args.batch]
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(ddp(x[idx].expand(-1, 3, -1, -1)), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step_s.append(time.perf_counter() - t0)
        if hook_name.startswith("powersgd"):
            after = timed.state.total_numel_after_compression
            sent.append(4 * (after - powersgd_after) if after > powersgd_after else 4 * n)
            powersgd_after = after
        elif hook_name in ("none", "fp16"):
            sent.append(bytes_of(step))
        else:
            sent.append(timed.state.steps[-1].bytes_sent)
    result = {
        "hook": hook_name,
        "seed": seed,
        "workers": args.workers,
        "steps": args.steps,
        "batch": args.batch,
        "lr": args.lr,
        "parameters": n,
        # bytes over every step (a hook's dense first steps count); times after the first 5
        "bytes_per_step": statistics.mean(sent),
        "dense_bytes_per_step": 4 * n,
        "step_ms": 1e3 * statistics.mean(step_s[WARMUP:]),
        "hook_ms": 1e3 * statistics.mean(timed.per_step[WARMUP:]) if timed else 0.0,
        "final_loss": float(loss),
        "warmup": warmup_label(args) if is_gradscope(hook_name) else "",
    }
    if is_gradscope(hook_name):
        result["gradscope"] = timed.state.summary()
    if rank == 0:
        result["test_accuracy"] = study_models.test_accuracy(model, args.eval_images, rgb=True)
        result["eval_images"] = args.eval_images
        with open(out_path, "w") as f:
            json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


def is_gradscope(name):
    return name not in ("none", "fp16") and not name.startswith("powersgd")


def warmup_label(args):
    if args.warmup_steps == 0:
        return ""
    start = f" from {args.warmup_start_ratio:g}" if args.warmup_schedule == "exponential" else ""
    return f"{args.warmup_schedule} warm-up {args.warmup_steps}{start}"


def table(rows):
    lines = [
        "| hook | seeds | test acc. | sent/step/worker | vs dense | step ms | hook ms/step |",
        "|---|---|---|---|---|---|---|",
    ]
    kinds = sorted({(r["hook"], r.get("warmup", "")) for r in rows}, key=lambda k: (HOOKS.index(k[0]), k[1]))
    for name, warmup in kinds:
        runs = [r for r in rows if r["hook"] == name and r.get("warmup", "") == warmup]
        acc = [100 * r["test_accuracy"] for r in runs]
        spread = f" ± {statistics.stdev(acc):.2f}" if len(acc) > 1 else ""
        b = statistics.mean(r["bytes_per_step"] for r in runs)
        label = f"gradscope {name} at {DENSITY}" if is_gradscope(name) else name
        label += f", {warmup}" if warmup else ""
        lines.append(
            f"| {label} | {','.join(str(r['seed']) for r in runs)} | {statistics.mean(acc):.2f}{spread} | "
            f"{b / 1024:.1f} KiB | {b / runs[0]['dense_bytes_per_step']:.4f} | "
            f"{statistics.mean(r['step_ms'] for r in runs):.0f} | "
            f"{statistics.mean(r['hook_ms'] for r in runs):.2f} |"
        )
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seeds", default="1")
    p.add_argument("--hooks", default=",".join(HOOKS))
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--warmup-schedule", default="dense", choices=["dense", "exponential"])
    p.add_argument("--warmup-start-ratio", type=float, default=0.25)
    p.add_argument("--out", default="results/ddp")
    runs.add_eval_images(p)
    args = p.parse_args()
    runs.check_eval_images(p, args)
    check_run_size("--steps", args.steps, args.workers)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name in args.hooks.split(","):
            if name not in HOOKS:
                raise SystemExit(f"unknown hook {name}: use {', '.join(HOOKS)}")
            tag = warmup_label(args).replace(" ", "-") if is_gradscope(name) else ""
            path = os.path.join(
                args.out, f"{name}{'-' + tag if tag else ''}-s{seed}-w{args.workers}-n{args.steps}.json"
            )

            def make(partial, name=name, seed=seed):
                print(f"ddp_results: {name}, seed {seed}", file=sys.stderr, flush=True)
                runs.spawn(worker, (args, runs.free_port(), name, seed, partial), args.workers)

            rows.append(runs.same_eval_images(runs.cached_json(path, make), args.eval_images, path))
    runs.publish(table(rows), os.path.join(args.out, "ddp.table.md"))


if __name__ == "__main__":
    main()
