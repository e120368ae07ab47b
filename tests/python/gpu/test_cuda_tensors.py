"""CUDA tensors through the gradscope package, for a GPU machine (scripts/gpu-check.sh runs this
with a CUDA build of PyTorch; ctest does not, since CI has no GPU). The same code paths run in CI
on the host through backend="cuda-host" (tests/python/test_api.py, tests/python/test_ddp.py).
GS_GPU_CHECK_OUT=FILE appends each test's figures as JSON lines for the check's report."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import gradscope
import gradscope.ddp

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU and a CUDA PyTorch")


def laplace(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.distributions.Laplace(0.0, 1e-3).sample((n,)).float() * (1 + torch.rand(n, generator=g))


def report(name, figures):
    if os.environ.get("GS_GPU_CHECK_OUT"):
        with open(os.environ["GS_GPU_CHECK_OUT"], "a") as out:
            out.write(json.dumps({"test": name, **figures}) + "\n")


@pytest.mark.parametrize("method", ["topk", "sidco-topk", "dgc", "sidco-e"])
def test_select_reads_a_cuda_tensor_in_place(method):
    t = laplace(1_000_000, 3)
    i_cpu, v_cpu, info_cpu = gradscope.select(t, method, 0.01, backend="cpu")
    i_gpu, v_gpu, info_gpu = gradscope.select(t.cuda(), method, 0.01, backend="cuda")
    assert torch.equal(v_gpu.cpu(), t[i_gpu.cpu()])
    if method == "sidco-e":
        assert info_gpu["threshold"] == pytest.approx(info_cpu["threshold"], rel=1e-6)
    else:
        assert torch.equal(i_cpu, i_gpu.cpu())


def test_fit_on_a_cuda_tensor_equals_the_cpu():
    t = laplace(500_000, 4)
    cpu = gradscope.fit(t, backend="cpu")
    gpu = gradscope.fit(t.cuda(), backend="cuda")
    assert gpu["backend"] == "cuda" and gpu["n"] == cpu["n"]
    for a, b in zip(cpu["fits"], gpu["fits"]):
        assert a["dist"] == b["dist"]
        for key, value in a["params"].items():
            assert b["params"][key] == pytest.approx(value, rel=1e-9), (a["dist"], key)
        assert b["ks_D"] == pytest.approx(a["ks_D"], rel=1e-6, abs=1e-12), a["dist"]
    exact = {(r["method"], r["ratio"]): r for r in cpu["thresholds"] if r["method"] in ("topk", "sidco-topk")}
    for r in gpu["thresholds"]:
        if (r["method"], r["ratio"]) in exact:
            assert r["selected"] == exact[(r["method"], r["ratio"])]["selected"], r


def _init_nccl_world_of_one(port):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=0, world_size=1)


def test_the_hook_keeps_cuda_buckets_on_the_gpu_over_nccl():
    _init_nccl_world_of_one(29581)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
        # SIDCo's fit alone: the carried estimate brings each selection to the host to learn from it
        # (one wait a bucket, docs/gpu.md).
        state = gradscope.ddp.State("sidco-e", 0.01, backend="cuda", sidco_estimate="fit")
        ddp.register_comm_hook(state, gradscope.ddp.hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        x, y = torch.randn(64, 1024, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
        for _ in range(8):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        s = state.summary()
        later = state.steps[1:]  # the first step's settings agreement goes through the host
        report(
            "hook_nccl_world_1",
            {
                **{
                    k: s[k]
                    for k in (
                        "density_mean",
                        "host_device_bytes_per_step",
                        "dense_bytes_per_step",
                        "hook_ms_per_step",
                        "host_syncs_per_step",
                        "overflow_per_step",
                    )
                },
                "buckets": later[-1].buckets,
                "host_syncs_per_bucket_after_step_0": max(x.host_syncs / x.buckets for x in later),
                "bus_bytes_per_bucket_after_step_0": max(x.host_device_bytes / x.buckets for x in later),
            },
        )
        assert s["steps"] == 8 and s["skipped_steps"] == 0
        assert 0 < s["density_mean"] < 0.05
        assert all(torch.isfinite(p).all() for p in model.parameters())
        # NCCL gathers the selections on the device, decided there: nothing is waited for, and
        # only each bucket's report (its figures, 80 bytes) crosses.
        assert s["host_device_gathered_bytes_per_step"] == 0, s
        assert all(x.host_syncs == 0 and x.host_device_bytes <= 80 * x.buckets for x in later), later
    finally:
        dist.destroy_process_group()


def test_the_hook_over_gloo_with_cuda_tensors_on_two_processes(tmp_path):
    worker = Path(__file__).with_name("ddp_gloo_cuda_worker.py")
    url = f"file://{tmp_path / 'rendezvous'}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(r), "2", url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for r in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-3000:] for o in outs)
    ranks = [json.loads(line) for o in outs for line in o.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    digests = {r["digest"] for r in ranks}
    assert len(digests) == 1, ranks  # bit-identical replicas
    for r in ranks:
        s = r["summary"]
        own = s["host_device_bytes_per_step"] - s["host_device_gathered_bytes_per_step"]
        assert 0 < own <= 0.03 * s["dense_bytes_per_step"], s
        # Through the host: one wait a bucket, the selection coming down.
        assert all(x["host_syncs"] <= x["buckets"] for x in r["steps"]), r["steps"]
        report(
            f"hook_gloo_cuda_rank{r['rank']}",
            {
                "own_bus_bytes_per_step": own,
                "gathered_bus_bytes_per_step": s["host_device_gathered_bytes_per_step"],
                "dense_bytes_per_step": s["dense_bytes_per_step"],
                "host_syncs_per_step": s["host_syncs_per_step"],
                "buckets": r["steps"][-1]["buckets"],
            },
        )
