"""One worker process of the DDP tests (started by test_ddp.py, one per rank, over Gloo on loopback).

    ddp_worker.py train    RANK WORLD RENDEZVOUS OUT METHOD RATIO STEPS
        trains ResidualNet (written here, not one of gradscope's models) on Fashion-MNIST with DDP
        and gradscope's hook; writes OUT (torch.save): final parameters, losses, the state summary,
        which steps were skipped.
    ddp_worker.py exchange RANK WORLD RENDEZVOUS OUT METHOD RATIO STEPS [MOMENTUM]
        runs State.exchange directly on fixed per-rank gradients of two "buckets" for STEPS steps
        (with momentum_correction=MOMENTUM, default 0); writes OUT: the inputs and the mean updates
        it returned, for the C++ reference.
    ddp_worker.py device   RANK WORLD RENDEZVOUS OUT METHOD RATIO STEPS BACKEND
        trains an MLP (2 MiB of gradients) with the hook on BACKEND: cpu, cuda-host (each rank's
        buckets on fake device `rank`, the CUDA path's code on the host), or cuda-host-device (the
        same with the selections gathered as device memory, NCCL's way, here over Gloo); writes OUT:
        parameters, losses, the summary and the work done on each fake device.
    ddp_worker.py nan      RANK WORLD RENDEZVOUS OUT METHOD RATIO STEPS FROM
        exchanges one bucket per step; the last rank puts a NaN in it from step FROM on; writes OUT:
        per step whether it was skipped and what came back, and the error that ended the run.
"""

import sys
import time

import torch
import torch.distributed as dist

import gradscope
import gradscope.ddp as gddp
from gradscope import _gradscope, _testing


class Block(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


class ResidualNet(torch.nn.Module):
    """A small residual CNN: a stem, two residual blocks, a linear head."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.block1 = Block(8)
        self.block2 = Block(8)
        self.head = torch.nn.Linear(8 * 7 * 7, 10)

    def forward(self, x):
        x = torch.max_pool2d(self.block1(torch.relu(self.stem(x))), 2)
        x = torch.max_pool2d(self.block2(x), 2)
        return self.head(x.flatten(1))


def squared_gradient(bucket):
    """A stand-in for the per-sample variance the variance compressor weighs by (g^2)."""
    return bucket.buffer() ** 2


def train(rank, world, out, method, ratio, steps):
    torch.manual_seed(0)
    model = ResidualNet()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.05)  # several buckets
    options = {"variance": squared_gradient} if method == "variance" else {}
    state = gddp.State(method, ratio, **options)
    ddp.register_comm_hook(state, gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    x, y = gradscope.fashion_mnist("train", 2048)
    shard = torch.arange(rank, 2048, world)
    losses, skipped = [], []
    batch = 32
    for step in range(steps):
        idx = shard[(step * batch) % (len(shard) - batch) :][:batch]
        loss = torch.nn.functional.cross_entropy(ddp(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        skipped.append(state.step_skipped)
        if not state.step_skipped:
            opt.step()
        losses.append(float(loss))
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.save({"params": params, "losses": losses, "summary": state.summary(), "skipped": skipped}, out)


def device(rank, world, out, method, ratio, steps, backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(784, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = gddp.State(method, ratio, backend="cpu" if backend == "cpu" else "cuda-host")
    if backend == "cuda-host-device":
        state._group.device_collectives = True
    ddp.register_comm_hook(state, gddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    x, y = gradscope.fashion_mnist("train", 1024)
    shard = torch.arange(rank, 1024, world)
    _testing.cuda_host_reset_work()
    losses = []
    for step in range(steps):
        idx = shard[(step * 32) % (len(shard) - 32) :][:32]
        loss = torch.nn.functional.cross_entropy(ddp(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.save(
        {
            "params": params,
            "losses": losses,
            "summary": state.summary(),
            "work": _testing.cuda_host_work_by_device(),
            "legacy_orders": _testing.cuda_host_legacy_stream_orders(),
        },
        out,
    )


def exchange(rank, world, out, method, ratio, steps, momentum=0.0, how="allgather"):
    """State.exchange on fixed gradients: two buckets (of two and one parameters), exchanged `how`."""
    shapes = [[(300,), (5, 40)], [(77,)]]
    params = [[torch.nn.Parameter(torch.zeros(s)) for s in bucket] for bucket in shapes]
    # The reference samples with seed 5: give it to the methods that read a seed (the others refuse it).
    reads = next(r for r in _gradscope.compressors() if r["name"] == method)["options"]
    state = gddp.State(
        method, ratio, **({"seed": 5} if "seed" in reads else {}), momentum_correction=momentum, exchange=how
    )
    gen = torch.Generator().manual_seed(100 + rank)
    inputs, outputs = [], []
    for step in range(steps):
        step_in, step_out = [], []
        for b, bucket in enumerate(params):
            n = sum(p.numel() for p in bucket)
            # Laplace-like gradients, a few large values, different per worker and step.
            g = torch.randn(n, generator=gen) * torch.rand(n, generator=gen).pow(4)
            step_in.append(g.clone())
            fut = state.exchange(b, g, bucket, last=b == len(params) - 1)
            step_out.append(fut.wait().clone())
        inputs.append(torch.cat(step_in))
        outputs.append(torch.cat(step_out))
    fields = ("estimate_quality", "exact", "corrected", "buckets", "quality", "exchange")
    torch.save(
        {
            "inputs": inputs,
            "outputs": outputs,
            "bucket_sizes": [sum(p.numel() for p in b) for b in params],
            "steps": [{f: getattr(s, f) for f in fields} for s in state.steps],
            "summary": state.summary(),
        },
        out,
    )


def returns_early(rank, out):
    """The hook returns before its bucket is exchanged (rank 1 arrives a second late, so rank 0's
    Future cannot be done yet); an error in the state's thread reaches the caller through the
    bucket's Future, and the thread serves the next bucket."""
    state = gddp.State("sidco-e", 0.05)
    bucket = [torch.nn.Parameter(torch.zeros(1000))]
    g = torch.randn(1000, generator=torch.Generator().manual_seed(rank))
    if rank == 1:
        time.sleep(1.0)
    t0 = time.perf_counter()
    fut = state.exchange(0, g, bucket, last=True)
    returned_s, done_at_return = time.perf_counter() - t0, fut.done()
    mean = fut.wait()
    # A bucket whose parameters do not add up to its size: the C++ core refuses it on the
    # state's thread, and the error comes back through the Future as it was raised.
    fut = state.exchange(0, g[:999], bucket, last=True)
    try:
        fut.wait()
        error, error_type = "", ""
    except Exception as e:  # noqa: BLE001 - the test checks the type
        error, error_type = str(e), type(e).__name__
    is_gradscope_error = isinstance(state.last_error, gradscope.Error) and isinstance(state.last_error, RuntimeError)
    again = state.exchange(0, g, bucket, last=True).wait()
    torch.save(
        {
            "returned_s": returned_s,
            "done_at_return": done_at_return,
            "mean": mean,
            "error": error,
            "error_type": error_type,
            "is_gradscope_error": is_gradscope_error,
            "again": again,
            "steps": len(state.steps),
        },
        out,
    )


class PoisonedState(gddp.State):
    """Puts a NaN into one worker's gradient at one step (the fault the NaN rule is for)."""

    def __init__(self, *args, poison_step, poison_rank, **kw):
        super().__init__(*args, **kw)
        self.poison_step, self.poison_rank = poison_step, poison_rank

    def exchange(self, index, grad, parameters, last=True, bucket=None):
        if len(self.steps) >= self.poison_step and self.rank == self.poison_rank and index == 0:
            grad[0] = float("nan")
        return super().exchange(index, grad, parameters, last, bucket)


def main():
    mode, rank, world, url, out, method, ratio, steps = sys.argv[1:9]
    rank, world, steps, ratio = int(rank), int(world), int(steps), float(ratio)
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
    try:
        if mode == "train":
            train(rank, world, out, method, ratio, steps)
        elif mode == "exchange":
            exchange(
                rank,
                world,
                out,
                method,
                ratio,
                steps,
                float(sys.argv[9]) if len(sys.argv) > 9 else 0.0,
                sys.argv[10] if len(sys.argv) > 10 else "allgather",
            )
        elif mode == "device":
            device(rank, world, out, method, ratio, steps, sys.argv[9])
        elif mode == "early":
            returns_early(rank, out)
        elif mode == "nan":
            poison_from = int(sys.argv[9])
            state = PoisonedState(method, ratio, poison_step=poison_from, poison_rank=world - 1)
            bucket = [torch.nn.Parameter(torch.zeros(1000))]
            results = []
            try:
                for step in range(steps):
                    g = torch.full((1000,), 0.5) * (rank + 1)
                    mean = state.exchange(0, g, bucket, last=True).wait()
                    results.append((state.step_skipped, float(mean.abs().sum())))
                error = ""
            except gradscope.Error as e:
                error = str(e)
            torch.save({"results": results, "error": error, "skipped": state.skipped_steps}, out)
        else:
            raise SystemExit(f"unknown mode {mode}")
        # Leave together: a peer tearing its Gloo connections down while another still uses them
        # aborts that one.
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
