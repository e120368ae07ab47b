"""One rank of test_two_gpus.py under torchrun: rank r trains on cuda:r with the DDP hook on backend
cuda while the hook's own thread has whatever device current (device 0 unless it sets one), so
rank 1's buckets are on another device than the thread's. Prints one JSON line; exits 1 when
the ranks' parameters differ or are not finite."""

import json
import os
import sys

import torch
import torch.distributed as dist

import gradscope.ddp


def main():
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda(local)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], bucket_cap_mb=1)
    state = gradscope.ddp.State("sidco-e", 0.01, backend="cuda")
    ddp.register_comm_hook(state, gradscope.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(10):
        x = torch.randn(64, 256, generator=gen).cuda(local)
        y = torch.randint(0, 10, (64,), generator=gen).cuda(local)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    finite = bool(torch.isfinite(flat).all())
    summary = state.summary()
    print(
        json.dumps(
            {
                "rank": rank,
                "device": local,
                "same": same,
                "finite": finite,
                "steps": summary["steps"],
                "density_mean": summary["density_mean"],
            }
        ),
        flush=True,
    )
    dist.destroy_process_group()
    return 0 if same and finite and summary["steps"] == 10 else 1


if __name__ == "__main__":
    sys.exit(main())
