"""Whether the DDP hook's work overlaps the backward pass. T_plain: the backward pass with DDP's
own all-reduce; T_hook: the same backward pass with the hook; H: the hook's own compress and
exchange per step, timed with CUDA events on the hook's stream from each bucket being ready to its
update being written (State(device_timing=True).device_ms(): no host wait in it). With no overlap
T_hook would be about T_plain + H; the overlap is T_plain + H - T_hook. The test asks for at least a
quarter of what could overlap (the smaller of T_plain and H), and checks that the measure tells: the
same hook made synchronous (the autograd thread waits for each bucket's Future inside the hook)
must fall under that line. GS_GPU_CHECK_OUT=FILE appends the figures as one JSON line."""

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
        layers += [torch.nn.Linear(2048, 2048), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(2048, 10)).cuda()


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def backward_ms(ddp, state=None, steps=15):
    """Median backward time (CUDA events on the default stream) and, with a state, the median of
    its per-step device time."""
    x, y = torch.randn(1024, 2048, device="cuda"), torch.randint(0, 10, (1024,), device="cuda")
    times, hook = [], []
    for step in range(steps + 3):
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss.backward()  # DDP's stream waits for every bucket's Future before backward returns
        end.record()
        torch.cuda.synchronize()
        if step >= 3:
            times.append(start.elapsed_time(end))
            if state is not None:
                hook.append(state.device_ms())
        ddp.zero_grad(set_to_none=True)
    return median(times), (median(hook) if hook else 0.0)


def synchronous(state, bucket):
    """The hook made synchronous: the autograd thread waits for the bucket before going on."""
    fut = gradscope.ddp.hook(state, bucket)
    fut.wait()
    return fut


def hooked(hook):
    ddp = torch.nn.parallel.DistributedDataParallel(model(), device_ids=[0], bucket_cap_mb=8)
    state = gradscope.ddp.State("sidco-e", 0.01, backend="cuda", device_timing=True)
    ddp.register_comm_hook(state, hook)
    return backward_ms(ddp, state)


def test_one_hook_step_overlaps_the_backward_pass():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = "29583"
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        t_plain, _ = backward_ms(torch.nn.parallel.DistributedDataParallel(model(), device_ids=[0], bucket_cap_mb=8))
        t_hook, h = hooked(gradscope.ddp.hook)
        t_sync, h_sync = hooked(synchronous)
        figures = {
            "backward_ms_plain": t_plain,
            "backward_ms_hook": t_hook,
            "hook_device_ms_per_step": h,
            "overlap_ms": t_plain + h - t_hook,
            "backward_ms_synchronous_hook": t_sync,
            "overlap_ms_synchronous_hook": t_plain + h_sync - t_sync,
        }
        if os.environ.get("GS_GPU_CHECK_OUT"):
            with open(os.environ["GS_GPU_CHECK_OUT"], "a") as out:
                out.write(json.dumps({"test": "overlap", **figures}) + "\n")
        assert h > 0 and h_sync > 0, figures
        assert figures["overlap_ms"] > 0.25 * min(t_plain, h), figures
        # The measure tells a synchronous hook from an overlapping one.
        assert figures["overlap_ms_synchronous_hook"] < 0.25 * min(t_plain, h_sync), figures
    finally:
        dist.destroy_process_group()
