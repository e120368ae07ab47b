"""gradscope.ddp in every DDP mode a user may turn on (find_unused_parameters with a branch some
steps skip, static_graph, gradient_as_bucket_view with small buckets, no_sync accumulation, two
models on one process group), with float16, bfloat16 and float64 parameters, with warm-up, and
checkpointed and resumed in new processes: replicas stay bit-identical and nothing hangs (every
collective of the hook times out after 60 s, every worker process after 240 s)."""

import pytest
import torch

from conftest import run_script

STEPS = 8


def run(mode, world, tmp_path, steps=STEPS, arg=None):
    extra = [] if arg is None else [arg]
    outs = run_script("ddp_modes_worker.py", mode, world, tmp_path, steps, *extra)
    return [torch.load(o) for o in outs]


def assert_replicas_equal(results):
    for r in results[1:]:
        assert torch.equal(r["params"], results[0]["params"])  # bit-identical replicas


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("mode", ["find_unused", "static_graph", "bucket_view", "no_sync", "two_models"])
def test_every_ddp_mode_keeps_replicas_bit_identical(tmp_path, mode, world):
    if world == 4 and mode not in ("find_unused", "two_models"):
        pytest.skip("4 workers for the modes with their own collectives; 2 cover the rest")
    results = run(mode, world, tmp_path)
    assert_replicas_equal(results)
    for r in results:
        for summary in r["summaries"]:
            assert summary["steps"] == STEPS and summary["skipped_steps"] == 0, summary
            assert 0.2 < summary["quality_mean"] < 3.0, summary
            assert summary["bytes_per_step"] < 0.1 * summary["dense_bytes_per_step"], summary
        # float32 models: 4 bytes an element, every parameter once a step, in each model's state
        assert sum(s["dense_bytes_per_step"] for s in r["summaries"]) == 4 * r["params"].numel()
        assert all(torch.isfinite(torch.tensor(r["losses"])))


@pytest.mark.parametrize("dtype", ["float16", "float64"])  # Gloo (torch 1.13) has no bfloat16
def test_float_dtypes_train_with_bit_identical_replicas(tmp_path, dtype):
    results = run("dtype", 2, tmp_path, arg=dtype)
    assert results[0]["dtypes"] == [f"torch.{dtype}"]
    assert_replicas_equal(results)
    losses = results[0]["losses"]
    assert all(torch.isfinite(torch.tensor(losses))), losses
    s = results[0]["summaries"][0]
    assert s["steps"] == STEPS, s
    # What the model would send uncompressed is counted in its own dtype (2 bytes an element in
    # float16, 8 in float64), not as float32: the saving is not over- or under-stated.
    size = torch.tensor([], dtype=getattr(torch, dtype)).element_size()
    assert s["dense_bytes_per_step"] == size * results[0]["params"].numel(), s


def test_every_float_dtype_goes_through_the_float32_path(tmp_path):
    a, b = run("dtype_exchange", 2, tmp_path, steps=4)
    for d in ("float16", "bfloat16", "float64"):
        for s, (mine, theirs, f32) in enumerate(zip(a["results"][d], b["results"][d], a["results"]["float32"])):
            assert mine.dtype == getattr(torch, d)  # the update comes back in the bucket's dtype
            assert torch.equal(mine, theirs)  # the same on every worker
            # the same selection and mean as float32, rounded to the dtype
            assert torch.equal(mine, f32.to(mine.dtype)), (d, s)
    # Dense bytes in each dtype (377 elements a step); what is sent travels as float32 whatever
    # the dtype: the same bytes as the float32 state's.
    summaries = a["summaries"]
    for d, size in (("float32", 4), ("float16", 2), ("bfloat16", 2), ("float64", 8)):
        assert summaries[d]["dense_bytes_per_step"] == size * 377, (d, summaries[d])
        assert summaries[d]["bytes_per_step"] == summaries["float32"]["bytes_per_step"], d


@pytest.mark.parametrize("how", ["sequential", "one_backward"])
def test_a_state_on_a_second_model_is_refused(tmp_path, how):
    # One State registered on two DDP models would count each model's backward as a step of its
    # own (6 steps for 3) and mix their statistics: the second model's first bucket fails its
    # backward, naming the cause.
    for r in run("shared_state", 2, tmp_path, steps=1, arg=how):
        assert r["error"] is not None and "one State per DDP model" in r["error"], r
        assert "one State per DDP model" in r["last_error"], r
        # sequential: the first model's step counts, the second model's none; in one backward
        # the first model's step fails too when the hooks interleave (else it counts)
        assert r["steps"] == 1 if how == "sequential" else r["steps"] <= 1, r


def test_the_model_a_state_serves_is_learned_in_its_first_step():
    # The stages of gradscope.ddp's ModelIdentity: the first step's buckets name the model; a bucket
    # 0 of parameters not seen yet in that step is a second model's (refused, and the rest of that
    # step goes to the core, which refuses it), after which the next step is learned again; once
    # known, any bucket holding another parameter is refused.
    from gradscope._model_identity import ModelIdentity, Stage

    m = ModelIdentity()
    assert m.refusal(0, [1, 2], False) is None and m.stage is Stage.LEARNING
    assert "one State per DDP model" in str(m.refusal(0, [7], False)) and m.stage is Stage.ABANDONED
    assert m.refusal(1, [8], False) is None and m.refusal(2, [3], True) is None and m.stage is Stage.LEARNING
    assert m.refusal(0, [1, 2], False) is None and m.refusal(1, [3], True) is None and m.stage is Stage.KNOWN
    assert m.refusal(0, [3, 1], True) is None
    assert "one State per DDP model" in str(m.refusal(1, [3, 9], True)) and m.stage is Stage.KNOWN


@pytest.mark.parametrize("schedule", ["dense", "exponential"])
def test_warmup_follows_the_schedules_of_gradscope_train(tmp_path, schedule):
    (r, _) = run("warmup", 2, tmp_path, arg=schedule)
    steps = r["steps"][0]
    assert [s["warmup"] for s in steps] == [True] * 4 + [False] * (STEPS - 4)
    if schedule == "dense":  # uncompressed: every element, density 1
        assert all(s["target_density"] == 1.0 and s["selected"] == s["n"] for s in steps[:4])
    else:  # density falling geometrically from 0.25 towards 0.01
        targets = [s["target_density"] for s in steps[:4]]
        assert targets[0] == pytest.approx(0.25) and all(a > b for a, b in zip(targets, targets[1:]))
        assert all(s["selected"] < s["n"] for s in steps[:4])
    assert all(s["target_density"] == pytest.approx(0.01) for s in steps[4:])


def test_resume_in_new_processes_ends_bit_identical(tmp_path):
    ckpt = str(tmp_path / "ckpt.pt")
    steps = 12
    whole = run("whole", 2, tmp_path, steps=steps)
    run("save", 2, tmp_path, steps=steps, arg=ckpt)
    resumed = run("resume", 2, tmp_path, steps=steps, arg=ckpt)
    assert_replicas_equal(resumed)
    assert torch.equal(resumed[0]["params"], whole[0]["params"])
    # the statistics carry on: steps and summary over the whole run
    assert resumed[0]["summaries"][0]["steps"] == steps
    assert resumed[0]["losses"] == whole[0]["losses"][steps // 2 :]


def test_an_error_in_the_hook_fails_backward_with_gradscopes_message(tmp_path):
    for r in run("nan", 2, tmp_path, steps=12):
        # nine steps skipped everywhere (zeros, no optimizer step), then the tenth is an error
        assert r["skipped"] == [True] * 9, r["skipped"]
        e = r["error"]
        assert e is not None and e["step"] == 9, e
        # DDP re-raises its hook's error as a RuntimeError with the message; the state keeps it
        # as raised: a gradscope.Error, which is a RuntimeError too
        assert e["type"] == "RuntimeError" and "Unable to cast" not in e["message"], e
        assert "gradients were NaN or Inf for 10 steps in a row" in e["message"], e
        assert e["last_error"] == "Error" and e["is_gradscope_error"], e


def test_a_pickled_state_unpickles_with_its_state_and_trains_on(tmp_path):
    results = run("pickle", 2, tmp_path, steps=4)
    assert_replicas_equal(results)
    for r in results:
        assert r["same"], "the unpickled state differs"
        s = r["summaries"][0]
        assert s["steps"] == 6 and s["skipped_steps"] == 0, s
