"""gradscope.ddp as a user's job meets it: resumed in new processes with a model DDP regroups
after its first step (every compressor, bit-identical to the run that never stopped; and with
Accordion's density schedule and momentum correction on), a State made at different points on
different ranks, and the density sidco-e keeps on a small GRU."""

import pytest
import torch

import gradscope
from gradscope import _testing
from conftest import run_script

STEPS = 34  # saved after 26 (ddp_resume_worker.save_step): past every window a state carries
SAVED = STEPS - 8


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
        # every compressor trains in the hook: the replicas agree at every step's end, the
        # parameters stay finite, and every step is counted
        assert torch.equal(whole[1][method]["params"], w["params"]), method
        assert torch.isfinite(w["params"]).all() and w["summary"]["steps"] == STEPS, method
        # DDP regrouped: its first step's buckets hold other parameters than the later steps', and
        # the resumed process's first step (DDP's first) is grouped as the uninterrupted run's
        # first, not as its step SAVED
        first, later = w["layouts"][0], w["layouts"][1]
        assert sorted(map(sorted, first)) != sorted(map(sorted, later)), method
        assert r["layouts"][0] == first and r["layouts"][1] == w["layouts"][SAVED + 1], method
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


@pytest.mark.parametrize("variant", ["accordion", "mc", "accordion-mc", "shared-mc", "sparse-mc"])
def test_accordion_and_momentum_correction_agree_and_resume_bit_identical(tmp_path, variant):
    prefix = str(tmp_path / "ckpt")
    whole = run("whole", 2, tmp_path, STEPS, prefix, variant)
    resumed = run("resume", 2, tmp_path, STEPS, prefix, variant)
    for method, w in whole[0].items():
        r = resumed[0][method]
        # every worker takes the same decisions (their norms differ; the sum is all-reduced)
        assert whole[1][method]["critical"] == w["critical"], method
        assert torch.equal(whole[1][method]["params"], w["params"]), method
        if "accordion" in variant:
            # the schedule moves the density after the 2 warm-up steps: 0.2 when critical, else 0.05
            after = w["critical"][2:]
            assert True in after and False in after, (method, w["critical"])
            if method not in ("fft",):
                assert all(d == (0.2 if c else 0.05) for c, d in zip(after, w["target_density"][2:])), method
        # a resumed run takes the same decisions and ends at the same parameters, to the bit
        assert r["critical"] == w["critical"][SAVED:], method
        assert torch.equal(r["params"], w["params"]), f"{method} ({variant}): the resumed run ends elsewhere"
        counted = [k for k in w["summary"] if not k.endswith("ms_per_step")]
        assert {k: r["summary"][k] for k in counted} == {k: w["summary"][k] for k in counted}, method
        assert w["summary"]["critical_steps"] == sum(w["critical"])


def test_momentum_correction_and_schedule_settings_are_checked(one_process_group):
    import gradscope.ddp as gddp

    state = gddp.State("sidco-e", 0.01, momentum_correction=0.9)
    model = torch.nn.Linear(4, 2)
    with pytest.raises(gradscope.Error, match="momentum=0"):
        gddp.check_optimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), state)
    with pytest.raises(gradscope.Error, match=r"parameter group 0 .*give Adam betas=\(0.0, 0.999\)"):
        gddp.check_optimizer(torch.optim.Adam(model.parameters()), state)
    with pytest.raises(gradscope.Error, match=r"make it RMSprop\(\.\.\., momentum=0\)"):
        gddp.check_optimizer(torch.optim.RMSprop(model.parameters(), momentum=0.9), state)
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


def test_state_dicts_and_pickles_of_an_older_gradscope_load(one_process_group):
    """A state_dict saved before `when` and `exchange` existed loads with their old defaults, and so
    does a pickle without optimizer_momentum_ok; the keywords are the rows of one table."""
    import inspect
    import gradscope.ddp as gddp
    from gradscope._state_settings import SETTINGS

    state = gddp.State("sidco-e", 0.02, timeout=60)
    param = torch.nn.Parameter(torch.zeros(3000))
    state.exchange(0, torch.randn(3000), [param], True).wait()
    older = {k: v for k, v in state.state_dict().items() if k not in ("when", "exchange")}
    gddp.State("sidco-e", 0.02).load_state_dict(older)
    unpickled = gddp.State.__new__(gddp.State)
    unpickled.__setstate__({"state": older, "options": {"backend": "auto"}, "variance": None, "timeout": 60.0})
    assert unpickled.state_dict()["core"] == state.state_dict()["core"] and unpickled.timeout == 60.0
    # A state saved again before its next step keeps the saved step's grouping (the resume after
    # it regroups as the first would have).
    assert unpickled.state_dict()["layout"] == state.state_dict()["layout"] == [[0, [0]]]
    assert unpickled.state_dict()["when"] == ("always", 50) and unpickled.exchange_mode == "allgather"
    with pytest.raises(gradscope.Error, match=r"saved with when=\('always', 50\), this State has when=\('auto', 3\)"):
        gddp.State("sidco-e", 0.02, when="auto", when_interval=3).load_state_dict(older)
    keywords = [name for name in inspect.signature(gddp.State).parameters]
    assert keywords == [row.name for row in SETTINGS if row.kind is not None and row.name != "options"] + ["options"]


def test_a_density_far_from_the_ratio_warns_once(one_process_group):
    """The density watch (the C++ step rule) reaches Python as one RuntimeWarning: GaussianKSGD on a
    vector of rare spikes sends about a third of its ratio at every step."""
    import warnings
    import gradscope.ddp as gddp

    state = gddp.State("gaussianksgd", 0.01, timeout=60)
    param = torch.nn.Parameter(torch.zeros(10000))
    g = torch.zeros(10000)
    g[::300] = 1.0  # 34 spikes, a third of the 100 the ratio asks for
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        at = []
        for step in range(120):
            before = len(caught)
            state.exchange(0, g.clone(), [param], True).wait()
            if any(w.category is RuntimeWarning for w in caught[before:]):
                at.append(step)
    caught = [w for w in caught if w.category is RuntimeWarning]
    assert at == [49], at
    message = str(caught[0].message)
    assert message.startswith("gradscope.ddp.State('gaussianksgd', ratio=0.01): the achieved density has averaged 0.34")
    assert "50 of them below half" in message


def test_sidco_e_keeps_near_its_ratio_from_the_first_steps_on_a_gru(tmp_path):
    (r, _) = run("gru", 2, tmp_path, 10)
    steps = r["steps"]
    assert len(steps) == 10 and steps[0]["stages"] == gradscope.default_sidco_stages(0.01)
    sent = sum(s["selected"] for s in steps)
    target = sum(s["target_density"] * s["n"] for s in steps)
    assert sent <= 2.0 * target, [round(s["density"] / s["target_density"], 2) for s in steps]
    assert r["warnings"] == []


@pytest.mark.parametrize("gather", ["host", "device", "device-carried"])
def test_bus_bytes_and_waits_are_the_same_on_every_rank_of_a_symmetric_job(tmp_path, gather):
    """The CUDA path on cuda-host, two Gloo workers training a GRU on the same batches: each rank
    counts what crossed per call of its own, so the ranks' own and gathered bytes and their waits
    are equal. Through the host one wait a bucket (the selection coming down); with device
    collectives and SIDCo's fit alone none, and only each bucket's report crosses; with device
    collectives and the carried estimate (the default) one wait a bucket, its selection coming down
    to teach the next step's threshold."""
    extra = {
        "host": "",
        "device": ",device_collectives=1,sidco_estimate=fit",
        "device-carried": ",device_collectives=1",
    }[gather]
    ranks = run("gru", 2, tmp_path, 4, "backend=cuda-host,symmetric=1" + extra)
    (a, b) = (r["summary"] for r in ranks)
    own = [s["host_device_bytes_per_step"] - s["host_device_gathered_bytes_per_step"] for s in (a, b)]
    assert own[0] == own[1] > 0, (a, b)
    assert a["host_device_gathered_bytes_per_step"] == b["host_device_gathered_bytes_per_step"], (a, b)
    assert a["host_syncs_per_step"] == b["host_syncs_per_step"], (a, b)
    buckets = ranks[0]["steps"][-1]["buckets"]
    # what each rank queued on its device, counted as the CUDA backend queues it: alike on both
    for key in ("launches", "single_thread_launches", "allocations", "events_created", "scratch_queries"):
        assert [s[key] for s in ranks[0]["steps"]] == [s[key] for s in ranks[1]["steps"]], key
    assert all(s["launches"] >= s["buckets"] and s["elements_passed"] >= s["n"] for s in ranks[0]["steps"])
    if gather == "device":
        assert all(s["host_syncs"] == 0 for s in ranks[0]["steps"]), ranks[0]["steps"]
        assert (
            a["host_device_gathered_bytes_per_step"] == 0 and own[0] <= 80 * buckets
        ), a  # one 80-byte report a bucket
    elif gather == "device-carried":
        assert all(0 < s["host_syncs"] <= s["buckets"] for s in ranks[0]["steps"]), ranks[0]["steps"]
        assert a["host_device_gathered_bytes_per_step"] == 0, a
    else:
        assert all(0 < s["host_syncs"] <= s["buckets"] for s in ranks[0]["steps"]), ranks[0]["steps"]
        assert a["host_device_gathered_bytes_per_step"] > 0, a


def test_making_a_state_asks_no_device_and_nccl_is_found_in_a_composite_backend(one_process_group, monkeypatch):
    """A State asks the CUDA runtime about no device when it is made (backend auto is resolved at
    the first bucket, on its device: no context on GPU 0 for the other ranks); a group over
    "cpu:gloo,cuda:nccl" all-gathers CUDA buckets' selections as device memory and reduces host
    buffers in host memory."""
    import torch.distributed as dist
    import gradscope.ddp as gddp

    before = _testing.backend_probes()
    gddp.State("sidco-e", 0.01)
    gddp.State("topk", 0.05, backend="auto")
    assert _testing.backend_probes() == before
    assert gddp._backend_for("cpu:gloo,cuda:nccl", "cuda") == "nccl"
    assert gddp._backend_for("cpu:gloo,cuda:nccl", "cpu") == "gloo"
    assert gddp._backend_for("nccl", "cpu") is None and gddp._backend_for("gloo", "cuda") == "gloo"
    for backend, host in (("cpu:gloo,cuda:nccl", "cpu"), ("nccl", "cuda")):
        monkeypatch.setattr(dist, "get_backend", lambda group=None, b=backend: b)
        c = gddp.TorchCollectives(dist.group.WORLD, torch.device("cuda", 0))
        assert c.device_collectives and c.device.type == host, (backend, c.device)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "gloo")
    c = gddp.TorchCollectives(dist.group.WORLD, torch.device("cuda", 0))
    assert not c.device_collectives and c.device.type == "cpu"
    assert c.take_copies() == (0, 0)


def test_the_copies_torch_makes_in_a_collective_count_as_bus_bytes_and_waits(one_process_group):
    """A group over NCCL alone reduces host buffers on the device: TorchCollectives takes them up
    and back through torch and counts those copies (take_copies), and the hook adds them to the
    bucket's bus bytes and waits, beside its own copies."""
    import torch.distributed as dist
    import gradscope.ddp as gddp

    c = gddp.TorchCollectives(dist.group.WORLD, torch.device("cpu"))
    c.device = torch.device("meta")  # stands for the GPU the host buffers would go to
    assert c._to_device(torch.zeros(10)).device.type == "meta"
    assert c.take_copies() == (40, 1) and c.take_copies() == (0, 0)

    class Copying(gddp.TorchCollectives):  # as if each collective had copied 1000 bytes, waiting twice
        calls = 0

        def take_copies(self):
            Copying.calls += 1
            return (1000, 2)

    def step(comm):
        torch.manual_seed(3)
        params = [torch.nn.Parameter(torch.zeros(4000))]
        state = gddp.State("sidco-e", 0.01, backend="cuda-host")
        state._group.comm = comm
        state.exchange(0, torch.randn(4000), params, last=True).wait()
        return state.steps[-1]

    plain = step(gddp.TorchCollectives(dist.group.WORLD, torch.device("cpu")))
    copying = step(Copying(dist.group.WORLD, torch.device("cpu")))
    assert Copying.calls > 0
    assert copying.host_device_bytes - plain.host_device_bytes == 1000 * Copying.calls, (plain, copying)
    assert copying.host_syncs - plain.host_syncs == 2 * Copying.calls, (plain, copying)


@pytest.mark.parametrize(
    "case,setting",
    [
        ("ratio", "ratio is 0.02 on worker 1 and 0.01 on worker 0"),
        ("method", "method is topk on worker 1 and sidco-e on worker 0"),
        ("momentum", "momentum_correction is 0.9 on worker 1 and 0.0 on worker 0"),
        ("stages", "stages is 2 on worker 1 and 0 on worker 0"),
        # these once hung until the group's timeout, or failed with a bare Gloo timeout
        ("warmup", "warmup_steps is 5 on worker 1 and 0 on worker 0"),
        ("accordion", "density_schedule is accordion on worker 1 and constant on worker 0"),
        ("quantizer", "method is qsgd-mn on worker 1 and sidco-e on worker 0"),
        ("when", "when is auto on worker 1 and always on worker 0"),
        ("exchange", "exchange is shared on worker 1 and allgather on worker 0"),
        ("published", "sidco_as_published is True on worker 1 and False on worker 0"),
    ],
)
def test_ranks_whose_settings_differ_stop_with_one_line(tmp_path, case, setting):
    ranks = run("mismatch", 2, tmp_path, 2, case)
    for r in ranks:
        assert r["errors"], case
        assert f"the workers' settings differ: {setting}" in r["errors"][0], r["errors"][0]
        assert "make every rank's gradscope.ddp.State with the same settings" in r["errors"][0]


@pytest.mark.parametrize("case", ["sgd", "adam", "sgd-ok", "sgd-plain"])
def test_momentum_correction_beside_an_optimizer_momentum_is_refused_at_the_first_step(tmp_path, case):
    ranks = run("optimizer_momentum", 2, tmp_path, 2, case)
    for r in ranks:
        if case in ("sgd-ok", "sgd-plain"):
            assert r["errors"] == [] and r["steps"] == 2
        else:
            assert len(r["errors"]) == 2, r
            expected = "Adam betas[0] 0.9" if case == "adam" else "SGD momentum 0.9"
            assert f"keeps one of its own ({expected})" in r["errors"][0], r["errors"][0]
            assert "optimizer_momentum_ok=True" in r["errors"][0]


def test_a_rank_without_the_hook_is_named_within_the_states_timeout(tmp_path):
    first, other = run("unhooked", 2, tmp_path, 1)
    assert first["error"] is not None, first
    # within the State's timeout (3 s), not the group's
    assert "did not all reach their first bucket within 0:00:03" in first["error"], first["error"]
    assert "every rank must register the hook" in first["error"], first["error"]
    assert "model.register_comm_hook(gradscope.ddp.State(...), gradscope.ddp.hook)" in first["error"]
    assert other["error"] is not None, other  # DDP's own all-reduce, left alone, fails too


def test_ratios_are_real_numbers_and_options_that_do_nothing_are_refused(one_process_group):
    import gradscope.ddp as gddp

    for bad in ("0.01", True, [0.01]):
        with pytest.raises(TypeError, match="ratio must be a real number"):
            gddp.State("sidco-e", bad)
    with pytest.raises(TypeError, match="ratio must be a real number"):
        gradscope.select(torch.randn(1000), "sidco-e", "0.01")
    assert gddp.State("sidco-e", torch.tensor(0.02, dtype=torch.float64)).ratio == 0.02
    with pytest.raises(gradscope.Error, match="density_high is a setting of density_schedule accordion"):
        gddp.State("sidco-e", 0.01, density_high=0.2)
    with pytest.raises(gradscope.Error, match="warmup exponential does nothing without warmup_steps"):
        gddp.State("sidco-e", 0.01, warmup="exponential")
    with pytest.raises(gradscope.Error, match="warmup_start_ratio 0.5 does nothing"):
        gddp.State("sidco-e", 0.01, warmup_steps=3, warmup_start_ratio=0.5)
    with pytest.raises(gradscope.Error, match="momentum_correction does nothing at density 1"):
        gddp.State("sidco-e", 1.0, momentum_correction=0.9)


def test_keywords_take_their_own_types_and_companions_alone_are_refused(one_process_group):
    import re
    import gradscope.ddp as gddp

    for keyword, bad, words in [
        ("momentum_correction", "0.9", "momentum_correction must be a real number, got str '0.9'"),
        ("momentum_correction", True, "momentum_correction must be a real number, got bool True"),
        ("warmup_steps", 2.5, "warmup_steps must be a whole number, got float 2.5"),
        ("when_interval", "5", "when_interval must be a whole number, got str '5'"),
        ("device_timing", 1, "device_timing must be True or False, got int 1"),
        ("timeout", "60", "timeout must be a number of seconds, got str '60'"),
    ]:
        with pytest.raises(TypeError, match=re.escape(words)):
            gddp.State("sidco-e", 0.01, **{keyword: bad})
    with pytest.raises(
        ValueError,
        match=re.escape(
            "when_interval=10 does nothing with when='always': give " 'when="auto" too, or leave when_interval out'
        ),
    ):
        gddp.State("sidco-e", 0.01, when_interval=10)
    assert gddp.State("sidco-e", 0.01, when="auto", when_interval=10).state_dict()["when"] == ("auto", 10)
    with pytest.raises(
        ValueError, match=re.escape("optimizer_momentum_ok=True does nothing with " "momentum_correction=0.0")
    ):
        gddp.State("sidco-e", 0.01, optimizer_momentum_ok=True)
    # a load refused for another stage count names it as Python writes it
    saved = gddp.State("sidco-e", 0.01, stages=2).state_dict()
    with pytest.raises(gradscope.Error, match=re.escape("saved with stages=2, this State has stages=3")):
        gddp.State("sidco-e", 0.01, stages=3).load_state_dict(saved)


def test_a_ratio_below_one_element_of_a_bucket_warns_once(one_process_group):
    import warnings
    import gradscope.ddp as gddp

    state = gddp.State("sidco-e", 1e-9, timeout=60)
    param = torch.nn.Parameter(torch.zeros(3000))
    with pytest.warns(
        RuntimeWarning, match=r"ratio=1e-09\) asks 3e-06 elements of bucket 0's 3000: a bucket " r"sends at least one"
    ):
        state.exchange(0, torch.randn(3000), [param], True).wait()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        state.exchange(0, torch.randn(3000), [param], True).wait()
        gddp.State("sidco-e", 0.01, timeout=60).exchange(0, torch.randn(3000), [param], True).wait()


def test_errors_speak_python(one_process_group):
    import gradscope.ddp as gddp

    with pytest.raises(gradscope.Error) as e:
        gddp.State("qsgd-mn", bits=[40])
    assert "--" not in str(e.value) and "bits" in str(e.value), str(e.value)
    if not _testing.cuda_available():
        with pytest.raises(gradscope.Error) as e:
            gradscope.select(torch.randn(1000), "sidco-e", 0.01, backend="cuda")
        assert "--backend" not in str(e.value) and "backend cpu" in str(e.value), str(e.value)


def test_ratio_1_sends_the_dense_gradient(one_process_group):
    import gradscope.ddp as gddp

    state = gddp.State("sidco-e", 1.0, timeout=60)
    param = torch.nn.Parameter(torch.zeros(5000))
    g = torch.randn(5000)
    out = state.exchange(0, g.clone(), [param], True).wait()
    assert torch.equal(out, g)
    step = state.steps[-1]
    assert step.bytes_sent == 4 * 5000 == step.dense_bytes, step


def test_the_hook_group_takes_the_default_groups_timeout(tmp_path):
    import datetime
    import torch.distributed as dist
    from gradscope._hook_group import default_timeout

    if dist.is_initialized():
        pytest.skip("needs a process group of its own")
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rdv'}", rank=0, world_size=1, timeout=datetime.timedelta(seconds=77)
    )
    try:
        assert default_timeout() == datetime.timedelta(seconds=77)
    finally:
        dist.destroy_process_group()


def test_compress_when_auto_chooses_alike_on_every_rank(tmp_path):
    a, b = run("auto", 2, tmp_path, 12)
    assert a["dense"] == b["dense"]
    assert a["dense"][:2] == [False, True]  # both modes timed first
    assert torch.equal(a["params"], b["params"])
    assert a["state"]["when"] == ("auto", 2) and a["state"]["exchange"] == "allgather"


def test_exchange_and_when_settings_are_checked(one_process_group):
    import gradscope.ddp as gddp

    with pytest.raises(gradscope.Error, match="sends no sparse selection"):
        gddp.State("qsgd-mn", exchange="shared")
    with pytest.raises(gradscope.Error, match="unknown exchange 'broadcast'"):
        gddp.State("sidco-e", 0.01, exchange="broadcast")
    with pytest.raises(gradscope.Error, match="use always or auto"):
        gddp.State("sidco-e", 0.01, when="sometimes")
    saved = gddp.State("sidco-e", 0.01, when="auto").state_dict()
    with pytest.raises(gradscope.Error, match="when"):
        gddp.State("sidco-e", 0.01).load_state_dict(saved)
    # a state_dict from before these settings loads into a State of neither
    older = gddp.State("sidco-e", 0.01).state_dict()
    del older["when"], older["exchange"]
    gddp.State("sidco-e", 0.01).load_state_dict(older)


# ddp_resume_worker.STOCK_WARMUP dense warm-up steps, then one compressed (the step after it is the
# gate's choice, which rests on times and may differ between the two ways)
STOCK_STEPS = 6


def stock_ways(results):
    """Each rank's stock and thread runs: the same floats either way, the replicas alike."""
    for r in results:
        s, t = r["stock"], r["thread"]
        assert torch.equal(s["params"], t["params"])
        assert s["dense"] == t["dense"] and s["skipped"] == t["skipped"] and s["summary"] == t["summary"]
        assert s["link_bytes"] == t["link_bytes"]
        assert t["stock_steps"] == 0
        assert torch.equal(s["params"], results[0]["stock"]["params"])
        assert torch.isfinite(s["params"]).all()


@pytest.mark.parametrize("world", [2, 3])
def test_dense_steps_of_when_auto_go_through_ddps_own_allreduce(tmp_path, world):
    results = run("stock", world, tmp_path, STOCK_STEPS)
    stock_ways(results)
    s = results[0]["stock"]
    assert s["dense"] == [True] * 5 + [False]
    # every dense step but the first (the settings' agreement runs on the state's thread) went
    # DDP's way; the compressed ones after them the state's thread
    assert s["stock_steps"] == 4


def test_a_nan_in_a_stock_dense_step_skips_it_on_every_rank(tmp_path):
    results = run("stock", 2, tmp_path, STOCK_STEPS, "nan")
    stock_ways(results)
    for r in results:
        assert r["stock"]["skipped"][:4] == [False, False, True, False]
        assert r["stock"]["stock_steps"] == r["stock"]["dense"].count(True) - 1


def test_stock_dense_steps_resume_to_the_bit_across_the_switch(tmp_path):
    whole = run("stock", 2, tmp_path, STOCK_STEPS, "save:3")
    resumed = run("stock", 2, tmp_path, STOCK_STEPS, "resume:3")
    stock_ways(resumed)
    for w, r in zip(whole, resumed):
        # from step 3 on: one dense step on the state's thread (the resumed settings' agreement),
        # one through DDP's all-reduce, then the compressed steps
        assert r["stock"]["stock_steps"] == 1
        assert torch.equal(r["stock"]["params"], w["stock"]["params"])
        assert r["stock"]["summary"] == w["stock"]["summary"]
