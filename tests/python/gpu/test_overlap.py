"""Whether the DDP hook's work overlaps the backward pass, timed with CUDA events: the backward
pass with the hook (T_hook) against the same backward pass with DDP's own all-reduce (T_plain)
and the hook's own time per step (compress + exchange, measured on its thread, H). With no
overlap T_hook would be about T_plain + H; the overlap is T_plain + H - T_hook, and it must be
positive. GS_GPU_CHECK_OUT=FILE appends the figures as one JSON line (scripts/gpu-check.sh's
report)."""

import json
import os

import pytest
import torch
import torch.distributed as dist

import gradscope.ddp

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU and a CUDA PyTorch")


def model():
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(1024, 10)).cuda()


def backward_ms(ddp, steps=20):
    x, y = torch.randn(256, 1024, device="cuda"), torch.randint(0, 10, (256,), device="cuda")
    times = []
    for step in range(steps + 3):
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss.backward()  # DDP waits for every bucket's Future before it returns
        end.record()
        torch.cuda.synchronize()
        if step >= 3:
            times.append(start.elapsed_time(end))
        ddp.zero_grad(set_to_none=True)
    times.sort()
    return times[len(times) // 2]


def test_one_hook_step_overlaps_the_backward_pass():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29583")
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        plain = torch.nn.parallel.DistributedDataParallel(model(), device_ids=[0], bucket_cap_mb=4)
        t_plain = backward_ms(plain)
        hooked = torch.nn.parallel.DistributedDataParallel(model(), device_ids=[0], bucket_cap_mb=4)
        state = gradscope.ddp.State("sidco-topk", 0.01, backend="cuda")
        hooked.register_comm_hook(state, gradscope.ddp.hook)
        t_hook = backward_ms(hooked)
        h = state.summary()["hook_ms_per_step"]
        figures = {"backward_ms_plain": t_plain, "backward_ms_hook": t_hook, "hook_ms_per_step": h,
                   "overlap_ms": t_plain + h - t_hook}
        if os.environ.get("GS_GPU_CHECK_OUT"):
            with open(os.environ["GS_GPU_CHECK_OUT"], "a") as out:
                out.write(json.dumps(figures) + "\n")
        assert figures["overlap_ms"] > 0, figures
    finally:
        dist.destroy_process_group()
