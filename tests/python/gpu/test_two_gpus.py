"""The DDP hook on backend cuda with two GPUs under torchrun (ddp_two_gpus_worker.py): each rank's
buckets on its own device, the ranks' parameters equal after 10 steps. Skipped with fewer than
two GPUs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"
)


def test_the_hook_trains_on_two_gpus_with_backend_cuda():
    worker = Path(__file__).with_name("ddp_two_gpus_worker.py")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0,1"))
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(worker)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    ranks = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    assert all(r["same"] and r["finite"] and r["steps"] == 10 for r in ranks), ranks
    assert {r["device"] for r in ranks} == {0, 1}
