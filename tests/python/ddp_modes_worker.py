"""One worker process of the DDP-mode, dtype and checkpoint tests (started by test_ddp_modes.py,
one per rank, over Gloo on loopback). Models are written here, as a user writes their own.

    ddp_modes_worker.py MODE RANK WORLD RENDEZVOUS OUT STEPS [ARG]
        MODE: plain | find_unused | static_graph | bucket_view | no_sync | two_models
              | shared_state (ARG: sequential or one_backward; one State on two models: refused)
              | dtype (ARG: float16, bfloat16 or float64) | warmup (ARG: dense or exponential)
              | save (ARG: checkpoint path; trains STEPS // 2 steps, saves, stops)
              | resume (ARG: checkpoint path; loads it, trains on to STEPS)
              | whole (the same run as save + resume, uninterrupted)
              | nan (the last rank's gradient is NaN at every step)
              | dtype_exchange (State.exchange on buckets of each float dtype)
              | pickle (a State pickled and unpickled mid-run trains on)
    writes OUT (torch.save): final parameters, losses, the state's summary and its steps' stats.
"""

import sys

import torch
import torch.distributed as dist

import gradscope
import gradscope.ddp as gddp

TIMEOUT_S = 60.0  # every collective of the hook gives up after this: a test fails, never hangs
BATCH = 32


class BranchNet(torch.nn.Module):
    """A small CNN with a branch some steps take (the model find_unused_parameters exists for).
    Parameters are kept in `dtype`; the computation runs in float32 (CPU kernels lack float16)."""

    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, 3, padding=1).to(dtype)
        self.mid = torch.nn.Linear(8 * 14 * 14, 64).to(dtype)
        self.branch = torch.nn.Linear(64, 64).to(dtype)
        self.head = torch.nn.Linear(64, 10).to(dtype)

    def forward(self, x, use_branch=True):
        f = lambda layer: (layer.weight.float(), layer.bias.float())  # noqa: E731
        x = torch.max_pool2d(torch.relu(torch.conv2d(x, *f(self.conv), padding=1)), 2)
        x = torch.relu(torch.nn.functional.linear(x.flatten(1), *f(self.mid)))
        if use_branch:
            x = x + torch.relu(torch.nn.functional.linear(x, *f(self.branch)))
        return torch.nn.functional.linear(x, *f(self.head))


def batches(rank, world, steps, seed=0):
    x, y = gradscope.fashion_mnist("train", 4096)
    shard = torch.arange(rank, 4096, world)
    for step in range(steps):
        idx = shard[(step * BATCH) % (len(shard) - BATCH) :][:BATCH]
        yield step, x[idx], y[idx]


def make(mode, arg, **state_kw):
    dtype = getattr(torch, arg) if mode == "dtype" else torch.float32
    torch.manual_seed(0)
    model = BranchNet(dtype)
    kw = {"bucket_cap_mb": 0.05}
    if mode == "find_unused":
        kw["find_unused_parameters"] = True
    elif mode == "static_graph":
        kw["static_graph"] = True
    elif mode == "bucket_view":
        kw.update(gradient_as_bucket_view=True, bucket_cap_mb=0.01)
    ddp = torch.nn.parallel.DistributedDataParallel(model, **kw)
    state = gddp.State("sidco-e", 0.01, timeout=TIMEOUT_S, **state_kw)
    ddp.register_comm_hook(state, gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    return model, ddp, state, opt


def step_once(mode, ddp, opt, state, x, y, step):
    loss_fn = torch.nn.functional.cross_entropy
    opt.zero_grad()
    if mode == "no_sync":  # two micro-batches: the first accumulates locally, the second syncs
        half = len(x) // 2
        with ddp.no_sync():
            loss_fn(ddp(x[:half]), y[:half]).backward()
        loss = loss_fn(ddp(x[half:]), y[half:])
    else:
        # Without find_unused_parameters every parameter must take part in every step.
        loss = loss_fn(ddp(x, use_branch=mode != "find_unused" or step % 2 == 0), y)
    loss.backward()
    if not state.step_skipped:
        opt.step()
    return float(loss)


def train(mode, rank, world, out, steps, arg):
    state_kw = {}
    if mode == "warmup":
        state_kw = {"warmup_steps": 4, "warmup": arg}
    model, ddp, state, opt = make(mode, arg, **state_kw)
    losses = []
    for step, x, y in batches(rank, world, steps):
        losses.append(step_once(mode, ddp, opt, state, x, y, step))
    save_result(out, [model], [state], losses)


def pickled(rank, world, out, steps):
    """A State pickled after STEPS steps and unpickled (binding the default group, as PowerSGDState
    does) holds the same state and trains on, on a new DDP wrapper of the model."""
    import pickle

    torch.manual_seed(0)
    model = BranchNet()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.05)
    state = gddp.State("qsgd-mn-ts", 1.0, timeout=TIMEOUT_S, bits=[6, 10], warmup_steps=1)
    ddp.register_comm_hook(state, gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = list(batches(rank, world, steps + 2))
    for step, x, y in data[:steps]:
        step_once("plain", ddp, opt, state, x, y, step)
    blob = pickle.dumps(state)
    again = pickle.loads(blob)
    same = again.state_dict()["core"] == state.state_dict()["core"] and again.summary() == state.summary()
    ddp2 = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.05)
    ddp2.register_comm_hook(again, gddp.hook)
    for step, x, y in data[steps:]:
        step_once("plain", ddp2, opt, again, x, y, step)
    save_result(out, [model], [again], [])
    torch.save(dict(torch.load(out), same=same, pickled_bytes=len(blob)), out)


def dtype_exchange(rank, world, out, steps):
    """State.exchange on buckets of every float dtype, next to a float32 state fed the same values
    (each bucket's values representable in float16 and bfloat16 alike): Gloo in torch 1.13 has no
    bfloat16, so DDP cannot start on a bfloat16 model there, but the hook's path is this one."""
    params = [torch.nn.Parameter(torch.zeros(300)), torch.nn.Parameter(torch.zeros(77))]
    states = {d: gddp.State("sidco-e", 0.05, timeout=TIMEOUT_S) for d in ("float32", "float16", "bfloat16", "float64")}
    gen = torch.Generator().manual_seed(rank)
    results = {d: [] for d in states}
    for _ in range(steps):
        g = (torch.randn(377, generator=gen) * 64).round() / 64  # exact in every dtype here
        for d, state in states.items():
            results[d].append(state.exchange(0, g.to(getattr(torch, d)), params, last=True).wait())
    torch.save({"results": results, "summaries": {d: s.summary() for d, s in states.items()}}, out)


def nan_run(rank, world, out, steps):
    """The last rank's gradient is NaN from the first step on: every worker skips each step, and
    the tenth skipped step in a row fails backward() with gradscope's message."""
    model, ddp, state, opt = make("plain", None)
    skipped, error = [], None
    for step, x, y in batches(rank, world, steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x, use_branch=True), y)
        if rank == world - 1:
            loss = loss + model.head.bias.sum() * float("nan")
        try:
            loss.backward()
        except RuntimeError as e:
            error = {
                "step": step,
                "type": type(e).__name__,
                "message": str(e),
                "last_error": type(state.last_error).__name__,
                "is_gradscope_error": isinstance(state.last_error, gradscope.Error),
            }
            break
        skipped.append(state.step_skipped)
    torch.save({"skipped": skipped, "error": error, "summary": state.summary()}, out)


def two_models(rank, world, out, steps):
    """Two DDP models on the default group, one backward for both: their hooks' calls interleave."""
    models, ddps, states = [], [], []
    for seed in (0, 1):
        torch.manual_seed(seed)
        m = BranchNet()
        d = torch.nn.parallel.DistributedDataParallel(m, bucket_cap_mb=0.02)
        s = gddp.State("sidco-e", 0.01, timeout=TIMEOUT_S)
        d.register_comm_hook(s, gddp.hook)
        models.append(m)
        ddps.append(d)
        states.append(s)
    opt = torch.optim.SGD([p for m in models for p in m.parameters()], lr=0.05)
    losses = []
    for _, x, y in batches(rank, world, steps):
        opt.zero_grad()
        loss = sum(torch.nn.functional.cross_entropy(d(x), y) for d in ddps)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    save_result(out, models, states, losses)


def shared_state(rank, world, out, steps, how):
    """One State registered on two DDP models, which it cannot serve: the second model's first
    bucket fails its backward naming the cause. how: "sequential" (a backward per model, the
    second after the first's step) or "one_backward" (one backward through both)."""
    ddps, state = [], gddp.State("sidco-e", 0.01, timeout=TIMEOUT_S)
    for seed in (0, 1):
        torch.manual_seed(seed)
        ddps.append(torch.nn.parallel.DistributedDataParallel(BranchNet(), bucket_cap_mb=0.02))
        ddps[-1].register_comm_hook(state, gddp.hook)
    ((_, x, y),) = batches(rank, world, 1)
    loss = lambda d: torch.nn.functional.cross_entropy(d(x), y)  # noqa: E731
    error = None
    try:
        if how == "sequential":
            loss(ddps[0]).backward()  # the first model's step: it is the state's model
            loss(ddps[1]).backward()
        else:
            (loss(ddps[0]) + loss(ddps[1])).backward()
    except RuntimeError as e:
        error = str(e)
    torch.save({"error": error, "steps": state.summary()["steps"], "last_error": str(state.last_error)}, out)


def checkpointed(mode, rank, world, out, steps, path):
    """save: STEPS // 2 steps, then model, optimizer and state into path (one file per rank);
    resume: a new process loads them and trains on to STEPS (the same batches)."""
    model, ddp, state, opt = make("plain", None, warmup_steps=3, warmup="exponential")
    losses, start = [], 0
    if mode == "resume":
        saved = torch.load(path)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        state.load_state_dict(saved["gradscope"])
        start = saved["step"]
    stop = steps // 2 if mode == "save" else steps  # resume and whole: to the end
    for step, x, y in batches(rank, world, stop):
        if step >= start:
            losses.append(step_once("plain", ddp, opt, state, x, y, step))
    if mode == "save":
        torch.save(
            {"model": model.state_dict(), "optimizer": opt.state_dict(), "gradscope": state.state_dict(), "step": stop},
            path,
        )
    save_result(out, [model], [state], losses)


def save_result(out, models, states, losses):
    params = torch.cat([p.detach().double().flatten() for m in models for p in m.parameters()])
    torch.save(
        {
            "params": params,
            "losses": losses,
            "summaries": [s.summary() for s in states],
            "steps": [[vars(st) for st in s.steps] for s in states],
            "dtypes": sorted({str(p.dtype) for m in models for p in m.parameters()}),
        },
        out,
    )


def main():
    mode, rank, world, url, out, steps = sys.argv[1:7]
    arg = sys.argv[7] if len(sys.argv) > 7 else None
    rank, world, steps = int(rank), int(world), int(steps)
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
    try:
        if mode == "two_models":
            two_models(rank, world, out, steps)
        elif mode == "shared_state":
            shared_state(rank, world, out, steps, arg)
        elif mode == "nan":
            nan_run(rank, world, out, steps)
        elif mode == "dtype_exchange":
            dtype_exchange(rank, world, out, steps)
        elif mode == "pickle":
            pickled(rank, world, out, steps)
        elif mode in ("save", "resume", "whole"):
            checkpointed(mode, rank, world, out, steps, f"{arg}.{rank}")
        else:
            train(mode, rank, world, out, steps, arg)
        dist.barrier()  # leave together
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
