"""A complete DDP example with gradscope's compressed communication hook.

Trains a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist) with DistributedDataParallel
over Gloo, W processes on this machine, the gradients compressed by SIDCo at density 0.01, and
rank 0's gradients recorded every 20 steps to a gradscope snapshot:

    PYTHONPATH=build/python python3 examples/python/ddp_example.py --workers 4 --steps 200
    build/cli/gradscope info ddp-example.h5

The workers are started with torch.multiprocessing.spawn, which works with Debian's torch 1.13 as
with upstream torch; Debian's torchrun fails there before starting any worker (AttributeError:
'NoneType' object has no attribute 'get'), upstream torch's torchrun works (docs/python.md,
"Launching the workers").
"""

import argparse
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import gradscope
import gradscope.ddp


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def worker(rank, args, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.workers)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Net()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = gradscope.ddp.State(method=args.method, ratio=args.ratio)
    ddp.register_comm_hook(state, gradscope.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    x, y = gradscope.fashion_mnist("train")
    mine = torch.arange(rank, len(y), args.workers)  # this worker's shard
    recorder = gradscope.Recorder(model, args.record, every=20, force=True) if rank == 0 else None
    for step in range(args.steps):
        idx = mine[torch.randint(len(mine), (args.batch,), generator=torch.Generator().manual_seed(step))]
        if recorder:
            recorder.begin_step(step)
        loss = torch.nn.functional.cross_entropy(ddp(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        if recorder:
            recorder.end_step(loss, 0.05)
        if not state.step_skipped:  # a NaN/Inf somewhere: every worker skips the update
            opt.step()
    if recorder:
        recorder.close()
    if rank == 0:
        tx, ty = gradscope.fashion_mnist("test")
        with torch.no_grad():
            accuracy = (model(tx).argmax(1) == ty).float().mean().item()
        s = state.summary()
        print(
            f"{args.method} at density {state.ratio}, {args.workers} workers, {args.steps} steps: "
            f"test accuracy {100 * accuracy:.2f}%"
        )
        print(
            f"sent {s['bytes_per_step']:.0f} of {s['dense_bytes_per_step']:.0f} dense bytes per step, "
            f"quality {s['quality_mean']:.3f}, hook {s['hook_ms_per_step']:.2f} ms per step"
        )
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--method", default="sidco-e", choices=gradscope.compressor_names())
    p.add_argument(
        "--ratio", type=float, default=None, help="density (default 0.01; methods that are not density-based take none)"
    )
    p.add_argument("--record", default="ddp-example.h5")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args, port), nprocs=args.workers)


if __name__ == "__main__":
    main()
