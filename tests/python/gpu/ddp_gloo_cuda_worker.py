"""One rank of test_cuda_tensors.py's Gloo test: DDP over Gloo with the model on the GPU (both
ranks share it), the hook on backend cuda (the selection made on the GPU, gathered through the
host, the update written on the GPU). Prints one JSON line: rank, the parameters' digest and the
state's summary."""

import hashlib
import json
import sys

import torch
import torch.distributed as dist

import gradscope.ddp


def main():
    rank, world, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    state = gradscope.ddp.State("sidco-e", 0.01, backend="cuda")
    ddp.register_comm_hook(state, gradscope.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(6):
        x = torch.randn(64, 1024, generator=gen).cuda()
        y = torch.randint(0, 10, (64,), generator=gen).cuda()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    print(
        json.dumps(
            {"rank": rank, "digest": digest, "summary": state.summary(), "steps": [vars(s) for s in state.steps]}
        ),
        flush=True,
    )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
