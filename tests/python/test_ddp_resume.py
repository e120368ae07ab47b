"""gradscope.ddp as a user's job meets it: resumed in new processes with a model DDP regroups
after its first step (every compressor, bit-identical to the run that never stopped; and with
Accordion's density schedule and momentum correction on), a State made at different points on
different ranks, and the density sidco-e keeps on a small GRU."""

import pytest
import torch

import gradscope
from conftest import run_script

STEPS = 12


def run(mode, world, tmp_path, steps, arg="", variant=""):
    return [torch.load(o) for o in run_script("ddp_resume_worker.py", mode, world, tmp_path, steps, arg, variant)]


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


def test_accordion_and_momentum_correction_agree_and_resume_bit_identical(tmp_path):
    prefix = str(tmp_path / "ckpt")
    whole = run("whole", 2, tmp_path, STEPS, prefix, "accordion-mc")
    resumed = run("resume", 2, tmp_path, STEPS, prefix, "accordion-mc")
    for method in ("sidco-e", "topk", "dgc"):
        w, r = whole[0][method], resumed[0][method]
        # every worker takes the same decisions (their norms differ; the sum is all-reduced)
        assert whole[1][method]["critical"] == w["critical"], method
        assert torch.equal(whole[1][method]["params"], w["params"]), method
        # the schedule moves the density after the 2 warm-up steps: 0.2 when critical, else 0.05
        after = w["critical"][2:]
        assert True in after and False in after, (method, w["critical"])
        assert all(d == (0.2 if c else 0.05) for c, d in zip(after, w["target_density"][2:])), method
        # a resumed run takes the same decisions and ends at the same parameters, to the bit
        assert r["critical"] == w["critical"][STEPS // 2:], method
        assert torch.equal(r["params"], w["params"]), f"{method}: the resumed run ends elsewhere"
        counted = [k for k in w["summary"] if not k.endswith("ms_per_step")]
        assert {k: r["summary"][k] for k in counted} == {k: w["summary"][k] for k in counted}, method
        assert w["summary"]["critical_steps"] == sum(w["critical"])


def test_momentum_correction_and_schedule_settings_are_checked(one_process_group):
    import gradscope.ddp as gddp
    state = gddp.State("sidco-e", 0.01, momentum_correction=0.9)
    model = torch.nn.Linear(4, 2)
    with pytest.raises(gradscope.Error, match="momentum=0"):
        gddp.check_optimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), state)
    with pytest.raises(gradscope.Error, match="parameter group 0"):
        gddp.check_optimizer(torch.optim.Adam(model.parameters()), state)
    gddp.check_optimizer(torch.optim.SGD(model.parameters(), lr=0.1), state)
    gddp.check_optimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), gddp.State("topk", 0.01))
    with pytest.raises(gradscope.Error, match="momentum_correction masks .* 'none' is not one"):
        gddp.State("none", 1.0, momentum_correction=0.9)
    with pytest.raises(gradscope.Error, match=r"density_high 0.005 must lie above ratio \(0.01\)"):
        gddp.State("sidco-e", 0.01, density_schedule="accordion", density_high=0.005)
    with pytest.raises(gradscope.Error, match="unknown density schedule 'adaptive'"):
        gddp.State("sidco-e", 0.01, density_schedule="adaptive")
    # a state_dict of another schedule or momentum is refused, naming the setting
    saved = gddp.State("sidco-e", 0.01, density_schedule="accordion").state_dict()
    with pytest.raises(gradscope.Error, match="density_schedule"):
        gddp.State("sidco-e", 0.01).load_state_dict(saved)
    with pytest.raises(gradscope.Error, match="momentum_correction"):
        gddp.State("sidco-e", 0.01, density_schedule="accordion", momentum_correction=0.5).load_state_dict(saved)


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
