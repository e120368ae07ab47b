"""One worker process of the tests of resuming, of making a State and of the density
(test_ddp_resume.py), one per rank, over Gloo on loopback; models written here, as a user writes
their own.

    ddp_resume_worker.py MODE RANK WORLD RENDEZVOUS OUT STEPS [ARG] [VARIANT]
        MODE: whole (ARG: checkpoint prefix): every compressor, STEPS steps, saved after
              save_step(STEPS) steps (past every window the state carries)
              | resume (ARG: the same prefix): every compressor from its checkpoint to STEPS, in a
                new process
              VARIANT: "" (every compressor), "accordion" (the density-based ones, with Accordion's
                density schedule), "mc" (the sparse ones, with momentum correction and the
                optimizer without momentum), "accordion-mc" (both), "shared-mc" and "sparse-mc"
                (momentum correction with the shared exchange, or the sparse all-reduce)
              | late_state: the ranks make their State at different points of the program
              | gru (ARG: options as key=value,...: the State's, symmetric, device_collectives):
                sidco-e at 0.01 on a small GRU
              | stock (ARG: "", nan, save:N or resume:N): compress-when auto's dense steps through
                DDP's own all-reduce against the state's thread
              | mismatch (ARG: a case of MISMATCH): the last rank's State differs
              | optimizer_momentum (ARG: sgd, adam, sgd-ok or sgd-plain): momentum correction
                beside that optimizer
              | unhooked: only rank 0 registers the hook
    writes OUT (torch.save).
"""

import datetime
import os
import sys
import warnings

import torch
import torch.distributed as dist

import gradscope
import gradscope.ddp as gddp

TIMEOUT_S = 60.0
BATCH = 32
# Accordion checking every 4 steps: a save after 26 steps falls mid-interval (the sums of steps 24
# and 25 carry over), past six checks.
ACCORDION = {"density_schedule": "accordion", "density_high": 0.2, "density_interval": 4, "density_eta": 0.3}
MOMENTUM_CORRECTION = {"momentum_correction": 0.9}
VARIANTS = {
    "": {},
    "accordion": ACCORDION,
    "mc": MOMENTUM_CORRECTION,
    "accordion-mc": dict(ACCORDION, **MOMENTUM_CORRECTION),
    "shared-mc": dict(MOMENTUM_CORRECTION, exchange="shared"),
    "sparse-mc": dict(MOMENTUM_CORRECTION, exchange="sparse-allreduce"),
}


def save_step(steps):
    """The step a run is saved after: 8 steps before its end (26 of 34), past the warm-up (2 steps),
    SIDCo's stage controller (5-step windows) and Accordion's intervals."""
    return steps - 8


def methods(variant):
    """The compressors a variant applies to: Accordion moves a density, momentum correction masks a
    sparse selection."""
    rows = gradscope._options.compressor_rows()
    keep = [r for r in rows if r["available"]]
    if "accordion" in variant:
        keep = [r for r in keep if r["density_based"]]
    if "mc" in variant or "shared" in variant or "sparse" in variant:
        keep = [r for r in keep if r["sparse_selection"]]
    if "sparse" in variant:
        # the sparse all-reduce exchanges any selection alike: SIDCo-E (the recommended setup) and
        # DGC (a sampled threshold) stand for them; the other variants cover every compressor
        keep = [r for r in keep if r["name"] in ("sidco-e", "dgc")]
    return [r["name"] for r in keep]


class Reordered(torch.nn.Module):
    """Layers registered in another order than the forward uses them (head first, stem last). DDP
    (torch 1.13) hands a new model's first step over as one bucket in registration order, and
    regroups after it by the order backward makes gradients ready: {head, mid} (its first bucket,
    of FIRST_BUCKET_BYTES), then {side, stem}. Small (73k parameters): the claims are about the
    buckets, the checkpoints and the decisions, which a larger model only makes slower."""

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(256, 10)
        self.mid = torch.nn.Linear(64, 256)
        self.side = torch.nn.Linear(64, 64)
        self.stem = torch.nn.Linear(784, 64)

    def forward(self, x):
        x = torch.relu(self.stem(x.flatten(1)))
        x = x + torch.relu(self.side(x))
        return self.head(torch.relu(self.mid(x)))


def batches(rank, world, steps):
    x, y = gradscope.fashion_mnist("train", 2048)
    shard = torch.arange(rank, 2048, world)
    for step in range(steps):
        idx = shard[(step * BATCH) % (len(shard) - BATCH) :][:BATCH]
        yield step, x[idx], y[idx]


def squared_gradient(bucket):
    return bucket.buffer() ** 2


def layouts_hook(log):
    """gradscope's hook, noting each step's buckets as DDP hands them over (index, parameter names)."""

    def hook(state, bucket):
        if bucket.index() == 0:
            log.append([])
        log[-1].append([id(p) for p in bucket.parameters()])
        return gddp.hook(state, bucket)

    return hook


# DDP's first rebuilt bucket (1 MB by default, dist._DEFAULT_FIRST_BUCKET_BYTES), at the scale of
# the small model: {head, mid} fill it, and the model is regrouped into two buckets.
FIRST_BUCKET_BYTES = 64 * 1024


def make(method, log, variant=""):
    torch.manual_seed(0)
    model = Reordered()
    dist._DEFAULT_FIRST_BUCKET_BYTES = FIRST_BUCKET_BYTES
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.03)
    kw = {"variance": squared_gradient} if method == "variance" else {}
    if next(r for r in gradscope._options.compressor_rows() if r["name"] == method)["density_based"]:
        kw["ratio"] = 0.05
    kw.update(VARIANTS[variant])
    state = gddp.State(method, timeout=TIMEOUT_S, warmup_steps=2, **kw)
    ddp.register_comm_hook(state, layouts_hook(log))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.0 if "mc" in variant else 0.9)
    gddp.check_optimizer(opt, state)
    return model, ddp, state, opt


def train(ddp, opt, x, y):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(ddp(x), y).backward()
    opt.step()


def names(model, log):
    """The logged layouts with parameter names for ids (comparable across processes)."""
    by_id = {id(p): n for n, p in model.named_parameters()}
    return [[[by_id[i] for i in bucket] for bucket in step] for step in log]


def checkpointed(mode, rank, world, out, steps, prefix, variant=""):
    half = save_step(steps)
    results = {}
    for method in methods(variant):
        log = []
        model, ddp, state, opt = make(method, log, variant)
        start = 0
        if mode == "resume":
            saved = torch.load(f"{prefix}.{method}.{rank}")
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["optimizer"])
            state.load_state_dict(saved["gradscope"])
            start = half
        for step, x, y in batches(rank, world, steps):
            if step < start:
                continue
            if mode == "whole" and step == half:
                torch.save(
                    {"model": model.state_dict(), "optimizer": opt.state_dict(), "gradscope": state.state_dict()},
                    f"{prefix}.{method}.{rank}",
                )
            train(ddp, opt, x, y)
        results[method] = {
            "params": torch.cat([p.detach().flatten() for p in model.parameters()]),
            "layouts": names(model, log),
            "summary": state.summary(),
            "critical": [s.critical for s in state.steps],
            "target_density": [s.target_density for s in state.steps],
            "dense": [s.dense for s in state.steps],
        }
    torch.save(results, out)


def late_state(rank, world, out, steps):
    """Rank 0 makes its State before DDP, the others after DDP and a collective of their own."""
    torch.manual_seed(0)
    model = Reordered()
    state = gddp.State("topk", 0.05, timeout=TIMEOUT_S) if rank == 0 else None
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.03)
    dist.all_reduce(torch.ones(1))  # a collective of the program's own
    if state is None:
        state = gddp.State("topk", 0.05, timeout=TIMEOUT_S)
    ddp.register_comm_hook(state, gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for _, x, y in batches(rank, world, steps):
        train(ddp, opt, x, y)
    torch.save(
        {"params": torch.cat([p.detach().flatten() for p in model.parameters()]), "summary": state.summary()}, out
    )


class SmallGru(torch.nn.Module):
    """Rows of a Fashion-MNIST image as a sequence of 28 vectors of 28, read by a GRU."""

    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(28, 64, batch_first=True)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        _, h = self.gru(x.view(-1, 28, 28))
        return self.head(h[-1])


def gru(rank, world, out, steps, options):
    """symmetric=1: every rank trains on rank 0's batches (a job whose ranks do the same);
    device_collectives=1: the selections gathered as device memory (NCCL's way, over Gloo here);
    other options go to the State (integers, or texts such as backend=cuda-host)."""
    kw = {}
    for item in filter(None, options.split(",")):
        key, value = item.split("=")
        kw[key] = int(value) if value.isdigit() else value
    symmetric, device_collectives = kw.pop("symmetric", 0), kw.pop("device_collectives", 0)
    torch.manual_seed(0)
    model = SmallGru()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = gddp.State("sidco-e", 0.01, timeout=TIMEOUT_S, **kw)
    if device_collectives:
        state._group.device_collectives = True
    ddp.register_comm_hook(state, gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _, x, y in batches(0 if symmetric else rank, world, steps):
            train(ddp, opt, x, y)
    torch.save(
        {
            "steps": [vars(s) for s in state.steps],
            "summary": state.summary(),
            "warnings": [str(w.message) for w in caught if w.category is RuntimeWarning],
        },
        out,
    )


# mismatch: rank 0 makes State("sidco-e", 0.01); the last rank's State differs by these settings.
MISMATCH = {
    "ratio": {"ratio": 0.02},
    "method": {"method": "topk"},
    "momentum": {"momentum_correction": 0.9},
    "warmup": {"warmup_steps": 5},
    "accordion": {"density_schedule": "accordion"},
    "quantizer": {"method": "qsgd-mn", "ratio": None},
    "stages": {"stages": 2},
    "when": {"when": "auto"},
    "exchange": {"exchange": "shared"},
    "published": {"sidco_as_published": True},
}


def auto(rank, world, out, steps):
    """compress-when auto on two ranks: the steps each sent dense."""
    torch.manual_seed(0)
    model = Reordered()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.03)
    state = gddp.State("sidco-e", 0.01, timeout=TIMEOUT_S, when="auto", when_interval=2)
    ddp.register_comm_hook(state, gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for _, x, y in batches(rank, world, steps):
        train(ddp, opt, x, y)
    torch.save(
        {
            "dense": [s.dense for s in state.steps],
            "state": state.state_dict(),
            "params": torch.cat([p.detach().flatten() for p in model.parameters()]),
        },
        out,
    )


# stock: the dense warm-up of a when="auto" state, then its first compressed step
STOCK_WARMUP = 5


def stock(rank, world, out, steps, arg):
    """compress-when auto's dense steps through DDP's own all-reduce against the state's thread: the
    same model trained from the same start each way (momentum correction, so the velocity goes with
    the dense steps), STOCK_WARMUP dense warm-up steps then compressed ones. ARG: "nan" puts a NaN
    into rank 0's gradient at step 2; "save:N" saves each way after N steps, "resume:N" goes on from
    there in this new process."""
    results = {}
    for way in ("stock", "thread"):
        torch.manual_seed(0)
        model = Reordered()
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.03)
        state = gddp.State(
            "sidco-e",
            0.01,
            timeout=TIMEOUT_S,
            when="auto",
            when_interval=1000,
            warmup_steps=STOCK_WARMUP,
            momentum_correction=0.9,
        )
        state._buckets.stock_dense = way == "stock"
        ddp.register_comm_hook(state, gddp.hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.0)
        kind, _, at = arg.partition(":")
        path = f"{out}.{way}.ckpt"
        start = 0
        if kind == "resume":
            saved = torch.load(path)
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["optimizer"])
            state.load_state_dict(saved["gradscope"])
            start = int(at)
        skipped = []
        for step, x, y in batches(rank, world, steps):
            if step < start:
                continue
            if kind == "save" and step == int(at):
                torch.save(
                    {"model": model.state_dict(), "optimizer": opt.state_dict(), "gradscope": state.state_dict()}, path
                )
            if kind == "nan" and step == 2 and rank == 0:
                x = x.clone()
                x[0, 0] = float("nan")
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            skipped.append(state.step_skipped)
            if not state.step_skipped:
                opt.step()
        counted = [k for k in state.summary() if not k.endswith("ms_per_step")]
        results[way] = {
            "params": torch.cat([p.detach().flatten() for p in model.parameters()]),
            "dense": [s.dense for s in state.steps],
            "skipped": skipped,
            "stock_steps": state._buckets.stock_steps,
            "summary": {k: state.summary()[k] for k in counted},
            "link_bytes": [s.link_bytes for s in state.steps],
        }
    torch.save(results, out)


def mismatch(rank, world, out, case):
    """Two steps with settings that differ on the last rank; what each rank's backward raised."""
    torch.manual_seed(0)
    model = Reordered()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.03)
    kw = {"method": "sidco-e", "ratio": 0.01}
    if rank == world - 1:
        kw.update(MISMATCH[case])
    state = gddp.State(timeout=TIMEOUT_S, **kw)
    ddp.register_comm_hook(state, gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    errors = []
    for _, x, y in batches(rank, world, 2):
        try:
            train(ddp, opt, x, y)
        except RuntimeError as e:
            errors.append(str(e))
    torch.save({"errors": errors}, out)


def unhooked(rank, world, out, steps):
    """Rank 0 registers the hook, the others forget to: rank 0's backward fails within the State's
    timeout, naming what is missing; no rank waits for the group's own timeout."""
    torch.manual_seed(0)
    model = Reordered()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.03)
    if rank == 0:
        ddp.register_comm_hook(gddp.State("sidco-e", 0.01, timeout=3), gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    error = None
    try:
        for _, x, y in batches(rank, world, steps):
            train(ddp, opt, x, y)
    except RuntimeError as e:
        error = str(e)
    torch.save({"error": error}, out)


def optimizer_momentum(rank, world, out, case):
    """Momentum correction beside an optimizer of `case` (sgd, adam, sgd-ok, sgd-plain)."""
    torch.manual_seed(0)
    model = Reordered()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.03)
    state = gddp.State(
        "sidco-e", 0.01, timeout=TIMEOUT_S, momentum_correction=0.9, optimizer_momentum_ok=case == "sgd-ok"
    )
    ddp.register_comm_hook(state, gddp.hook)
    opt = (
        torch.optim.Adam(ddp.parameters(), lr=1e-3)
        if case == "adam"
        else torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.0 if case == "sgd-plain" else 0.9)
    )
    errors = []
    for _, x, y in batches(rank, world, 2):
        try:
            train(ddp, opt, x, y)
        except RuntimeError as e:
            errors.append(str(e))
    torch.save({"errors": errors, "steps": len(state.steps)}, out)


def main():
    mode, rank, world, url, out, steps = sys.argv[1:7]
    arg = sys.argv[7] if len(sys.argv) > 7 else ""
    variant = sys.argv[8] if len(sys.argv) > 8 else ""
    rank, world, steps = int(rank), int(world), int(steps)
    # unhooked: the ranks' collectives stop matching; the group's own timeout ends what waits
    timeout = datetime.timedelta(seconds=30 if mode == "unhooked" else 1800)
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world, timeout=timeout)
    try:
        if mode in ("whole", "resume"):
            checkpointed(mode, rank, world, out, steps, arg, variant)
        elif mode == "late_state":
            late_state(rank, world, out, steps)
        elif mode == "gru":
            gru(rank, world, out, steps, arg)
        elif mode == "auto":
            auto(rank, world, out, steps)
        elif mode == "stock":
            stock(rank, world, out, steps, arg)
        elif mode == "mismatch":
            mismatch(rank, world, out, arg)
        elif mode == "optimizer_momentum":
            optimizer_momentum(rank, world, out, arg)
        elif mode == "unhooked":
            unhooked(rank, world, out, steps)
            os._exit(0)  # no barrier, no teardown: the ranks' collectives no longer match
        else:
            raise SystemExit(f"unknown mode {mode}")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
