"""gradscope.ddp as a user's job meets it: resumed in new processes with a model DDP regroups
after its first step (every compressor, bit-identical to the run that never stopped), a State
made at different points on different ranks, and the density sidco-e keeps on a small GRU."""

import pytest
import torch

import gradscope
from conftest import run_script

STEPS = 12


def run(mode, world, tmp_path, steps, arg=""):
    return [torch.load(o) for o in run_script("ddp_resume_worker.py", mode, world, tmp_path, steps, arg)]


def test_every_compressor_resumes_bit_identical_when_ddp_regroups(tmp_path):
    prefix = str(tmp_path / "ckpt")
    whole = run("whole", 2, tmp_path, STEPS, prefix)
    resumed = run("resume", 2, tmp_path, STEPS, prefix)
    methods = gradscope.compressor_names()
    assert sorted(whole[0]) == sorted(methods)
    for method in methods:
        w, r = whole[0][method], resumed[0][method]
        # DDP regrouped: its first step's buckets hold other parameters than the later steps', and
        # the resumed process's first step (DDP's first) is grouped as the uninterrupted run's
        # first, not as its step STEPS // 2
        first, later = w["layouts"][0], w["layouts"][1]
        assert sorted(map(sorted, first)) != sorted(map(sorted, later)), method
        assert r["layouts"][0] == first and r["layouts"][1] == w["layouts"][STEPS // 2 + 1], method
        assert torch.equal(resumed[1][method]["params"], r["params"]), method  # replicas agree
        assert torch.equal(r["params"], w["params"]), f"{method}: the resumed run ends elsewhere"
        # the statistics carry on: the run's counts and means as if it had never stopped
        counted = [k for k in w["summary"] if not k.endswith("ms_per_step")]
        assert {k: r["summary"][k] for k in counted} == {k: w["summary"][k] for k in counted}, method
    # density_mean: the compressed steps (top-k sends exactly its ratio); density_mean_all: every
    # step, the two dense warm-up steps included
    topk = whole[0]["topk"]["summary"]
    assert topk["density_mean"] == pytest.approx(0.05, rel=1e-3)
    assert topk["density_mean_all"] == pytest.approx((2 * 1.0 + (STEPS - 2) * 0.05) / STEPS, rel=1e-3)


def test_ranks_may_make_their_state_at_different_points(tmp_path):
    a, b = run("late_state", 2, tmp_path, 4)
    assert torch.equal(a["params"], b["params"])
    assert a["summary"]["steps"] == 4 and b["summary"]["steps"] == 4


@pytest.fixture
def one_process_group(tmp_path):
    """torch.distributed in this process, alone (a State needs it; nothing is exchanged)."""
    import torch.distributed as dist
    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


class ScriptedCore:
    """Stands in for a State's C++ core: the last step's statistics, from a script."""

    def __init__(self):
        self.step = None

    def last_step(self):
        return self.step


def test_a_density_far_from_the_ratio_for_50_steps_warns_once(one_process_group):
    import warnings
    import gradscope.ddp as gddp
    state = gddp.State("sidco-e", 0.01)
    state._core = core = ScriptedCore()
    script = [(0.05, True)] * 60 + [(0.025, False)] * 49 + [(0.01, False)] + [(0.004, False)] * 50 \
        + [(0.03, False)] * 60
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        at = []
        for step, (density, warmup) in enumerate(script):
            core.step = {"density": density, "target_density": 0.01, "skipped": False, "warmup": warmup}
            before = len(caught)
            state._watch_density()
            if len(caught) > before:
                at.append(step)
    # warm-up steps do not count; 49 steps off and one on start the count over; the 50th step in
    # a row off warns, once for the run
    assert at == [60 + 49 + 1 + 49], at
    assert "below half the ratio for 50 steps" in str(caught[0].message)


def test_sidco_e_keeps_near_its_ratio_from_the_first_steps_on_a_gru(tmp_path):
    (r, _) = run("gru", 2, tmp_path, 10)
    steps = r["steps"]
    assert len(steps) == 10 and steps[0]["stages"] == gradscope.default_sidco_stages(0.01)
    sent = sum(s["selected"] for s in steps)
    target = sum(s["target_density"] * s["n"] for s in steps)
    assert sent <= 2.0 * target, [round(s["density"] / s["target_density"], 2) for s in steps]
    assert r["warnings"] == []
