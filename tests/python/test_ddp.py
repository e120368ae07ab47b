"""gradscope.ddp: the hook in real DistributedDataParallel training over Gloo (2 and 4 worker
processes), its equality with the C++ ModelCompressor::step, and the NaN/Inf rule."""

import pytest
import torch

from gradscope import _testing
from conftest import run_workers

# Every exchange kind: sparse all-gather (SIDCo, top-k, DGC, random-k), all-reduce (none),
# the compressors' own rounds (a quantizer, fft).
EXCHANGE_METHODS = [
    ("sidco-e", 0.05),
    ("sidco-gp", 0.05),
    ("topk", 0.05),
    ("dgc", 0.05),
    ("randomk", 0.05),
    ("none", 1.0),
    ("qsgd-mn", 1.0),
    ("fft", 0.05),
]


@pytest.mark.parametrize("world", [2, 4])
def test_residual_cnn_trains_with_bit_identical_replicas(tmp_path, world):
    outs = run_workers("train", world, tmp_path, "sidco-e", 0.01, 40)
    results = [torch.load(o) for o in outs]
    for r in results[1:]:
        assert torch.equal(r["params"], results[0]["params"])  # bit-identical replicas
    losses = results[0]["losses"]
    assert sum(losses[-10:]) / 10 < sum(losses[:5]) / 5 - 0.3, losses  # it learns
    s = results[0]["summary"]
    assert s["steps"] == 40 and s["skipped_steps"] == 0
    assert 0.2 < s["quality_mean"] < 3.0, s
    assert s["bytes_per_step"] < 0.1 * s["dense_bytes_per_step"], s  # sparse at density 0.01
    # The all-gathers carry whole encodings (39 header bytes a bucket), padded to the longest.
    assert s["gathered_bytes_per_step"] > s["bytes_per_step"], s
    # A worker's link sends each all-gather's longest encoding to the W - 1 others (a ring); the
    # step's other collectives (none at these settings) would add a little.
    link, ring = s["link_bytes_per_step"], (world - 1) * s["gathered_bytes_per_step"]
    assert ring * (1 - 1e-9) <= link <= 1.1 * ring, s


@pytest.mark.parametrize("world", [2, 4])
def test_device_buckets_stay_on_their_device_and_train_as_the_cpu_path(tmp_path, world):
    # backend="cuda-host" runs the CUDA bucket path (residuals, selection, update on the device;
    # rank r's worker thread on device r) on the host: the same parameters as the host path, to
    # the bit, with the selections gathered through Gloo's host all-gather and as device memory
    # (NCCL's way); no work on any other device than the rank's, none ordered with the legacy
    # stream; only the selection crosses.
    runs = {
        b: [torch.load(o) for o in run_workers("device", world, tmp_path, "sidco-e", 0.01, 8, b)]
        for b in ("cpu", "cuda-host", "cuda-host-device")
    }
    reference = runs["cpu"][0]["params"]
    for backend in ("cuda-host", "cuda-host-device"):
        for rank, r in enumerate(runs[backend]):
            assert torch.equal(r["params"], reference), (backend, rank)
            assert set(r["work"]) == {rank}, (backend, rank, r["work"])  # rank r on device r only
            assert r["legacy_orders"] == 0, r["legacy_orders"]  # after torch's stream, not the legacy one
            s = r["summary"]
            own = s["host_device_bytes_per_step"] - s["host_device_gathered_bytes_per_step"]
            assert 0 < own <= 0.03 * s["dense_bytes_per_step"], (backend, s)
            if backend == "cuda-host-device":
                assert s["host_device_gathered_bytes_per_step"] == 0, s
            else:  # the other workers' selections come up, about as many bytes again per worker
                assert 0 < s["host_device_gathered_bytes_per_step"] <= 0.03 * (world - 1) * s["dense_bytes_per_step"], s
    assert runs["cpu"][0]["summary"]["host_device_bytes_per_step"] == 0


# Momentum correction (the velocity kept per parameter in the hook, per group in ModelCompressor):
# the sparse methods with error feedback.
MOMENTUM_METHODS = [("sidco-e", 0.05, 0.9), ("topk", 0.05, 0.9), ("dgc", 0.05, 0.5)]


# The sparse all-reduce (torch.distributed's all_to_all_single under the hook, the in-process
# all-to-all under the reference): the same update at 3 ranks, its regions rebalanced each step.
SPARSE_ALLREDUCE = [
    ("topk", 0.05, 0.0, "sparse-allreduce"),
    ("sidco-e", 0.05, 0.9, "sparse-allreduce"),
    ("topk", 0.05, 0.0, "auto"),
]  # at 3 ranks and 0.05: the all-gather, by the link bytes


@pytest.mark.parametrize(
    "method,ratio,momentum,how",
    [(m, r, 0.0, "allgather") for m, r in EXCHANGE_METHODS]
    + [m + ("allgather",) for m in MOMENTUM_METHODS]
    + SPARSE_ALLREDUCE,
)
def test_hook_equals_the_cpp_model_compressor(tmp_path, method, ratio, momentum, how):
    world, steps = 3, 4
    outs = run_workers("exchange", world, tmp_path, method, ratio, steps, momentum, how)
    results = [torch.load(o) for o in outs]
    grads = [[results[r]["inputs"][s].numpy() for r in range(world)] for s in range(steps)]
    reference = _testing.model_compressor_steps(
        method, ratio, {"seed": "5"}, results[0]["bucket_sizes"], grads, momentum, how
    )
    for s in range(steps):
        for r in range(world):
            got = results[r]["outputs"][s].numpy()
            if method == "none":
                # A float sum over three workers depends on the order the all-reduce adds them
                # (Gloo's ring vs the reference's): equal to rounding. Every other method is exact:
                # sparse payloads are added in rank order, the quantizers sum integers.
                assert abs(got - reference[s][r]).max() <= 1e-6 * abs(reference[s][r]).max()
            else:
                assert (got == reference[s][r]).all(), f"{method}: step {s}, worker {r}"
    # Each step's record says where SIDCo's own estimate landed and which buckets ended on an
    # exact top-k: for top-k every bucket, for a method without an estimate None.
    ran = {"allgather": "allgather", "sparse-allreduce": "sparse-allreduce", "auto": "allgather"}[how]
    for r in results:
        for st in r["steps"]:
            assert st["buckets"] == 2
            assert st["exchange"] == ran, (how, st["exchange"])
            if method.startswith("sidco-"):
                assert st["estimate_quality"] >= 0 and 0 <= st["exact"] <= st["corrected"] <= 2
            else:
                assert st["estimate_quality"] is None
            if method == "topk":
                assert st["exact"] == 2
        summary = r["summary"]
        if method.startswith("sidco-"):
            assert 0.0 <= summary["estimate_in_band"] <= 1.0
            assert summary["corrected_share"] == sum(s["corrected"] for s in r["steps"]) / (2 * steps)
        if method == "topk":
            assert summary["exact_share"] == 1.0


def test_nan_in_a_bucket_skips_everywhere_then_stops(tmp_path):
    outs = run_workers("nan", 2, tmp_path, "sidco-e", 0.01, 14, 2)
    for o in outs:
        r = torch.load(o)
        skipped = [s for s, _ in r["results"]]
        # Steps 0 and 1 go through; from step 2 on every worker skips and gets zeros ...
        assert skipped[:2] == [False, False]
        assert all(skipped[2:]) and all(total == 0.0 for s, total in r["results"] if s)
        # ... until the tenth skipped step in a row ends the run with the same rule as train.
        assert r["skipped"] == 10 and len(r["results"]) == 11
        assert "NaN or Inf for 10 steps in a row" in r["error"]


def test_hook_returns_at_once_and_reports_errors_through_its_future(tmp_path):
    outs = run_workers("early", 2, tmp_path, "sidco-e", 0.05, 3)
    a, b = (torch.load(o) for o in outs)
    assert not a["done_at_return"]  # its peer was still a second away
    assert torch.equal(a["mean"], b["mean"]) and a["mean"].abs().sum() > 0
    for r in (a, b):
        assert r["error_type"] == "Error" and r["is_gradscope_error"], r
        assert "bucket 0: 999 elements for parameters of 1000" in r["error"], r["error"]
        assert torch.isfinite(r["again"]).all() and r["steps"] == 2  # the failed bucket closed no step
