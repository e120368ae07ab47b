"""CUDA tensors through the gradscope package, for a GPU machine (scripts/gpu-check.sh runs this
with a CUDA build of PyTorch; ctest does not, since no machine of the project has a GPU). The same
code paths run in CI on the host through backend="cuda-host" (tests/python/test_api.py)."""

import os

import pytest
import torch
import torch.distributed as dist

import gradscope
import gradscope.ddp

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU and a CUDA PyTorch")


def laplace(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.distributions.Laplace(0.0, 1e-3).sample((n,)).float() * (1 + torch.rand(n, generator=g))


@pytest.mark.parametrize("method", ["topk", "sidco-topk", "dgc", "sidco-e"])
def test_select_reads_a_cuda_tensor_in_place(method):
    t = laplace(1_000_000, 3)
    i_cpu, v_cpu, info_cpu = gradscope.select(t, method, 0.01, backend="cpu")
    i_gpu, v_gpu, info_gpu = gradscope.select(t.cuda(), method, 0.01, backend="cuda")
    assert torch.equal(v_gpu, t[i_gpu])
    if method == "sidco-e":
        assert info_gpu["threshold"] == pytest.approx(info_cpu["threshold"], rel=1e-6)
    else:
        assert torch.equal(i_cpu, i_gpu)


def test_the_hook_trains_cuda_buckets_over_nccl(tmp_path):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29581")
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
        state = gradscope.ddp.State("sidco-e", 0.01, backend="cuda")
        ddp.register_comm_hook(state, gradscope.ddp.hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        x, y = torch.randn(32, 64, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        summary = state.summary()
        assert summary["steps"] == 5 and summary["skipped_steps"] == 0
        assert 0 < summary["density_mean"] < 0.1
        assert all(torch.isfinite(p).all() for p in model.parameters())
    finally:
        dist.destroy_process_group()
