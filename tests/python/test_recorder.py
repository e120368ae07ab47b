"""gradscope.Recorder: a model written here, recorded every K-th step; the file reads back with
h5py and with `gradscope info --json`, also while it is still being written."""

import json
import os
import subprocess

import h5py
import numpy as np
import pytest
import torch

import gradscope


class TwoTower(torch.nn.Module):
    """Not one of gradscope's models: two branches, one unused parameter."""

    def __init__(self):
        super().__init__()
        self.left = torch.nn.Linear(12, 6)
        self.right = torch.nn.Sequential(torch.nn.Linear(12, 4), torch.nn.Tanh(), torch.nn.Linear(4, 6))
        self.scale = torch.nn.Parameter(torch.ones(6))
        self.unused = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return (self.left(x) + self.right(x)) * self.scale


def analyze_json(gradscope_bin, path, out):
    done = subprocess.run(
        [gradscope_bin, "analyze", str(path), "--out", str(out), "--json", "--quiet"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(done)


def info_json(gradscope_bin, path):
    out = subprocess.run(
        [gradscope_bin, "info", str(path), "--json"], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


def test_records_every_kth_step_and_reads_back(gradscope_bin, tmp_path):
    torch.manual_seed(0)
    model = TwoTower()
    path = tmp_path / "run.h5"
    expected = {}
    with gradscope.Recorder(model, path, every=3) as rec:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(10):
            recorded = rec.begin_step(step)
            loss = model(torch.randn(8, 12)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            rec.end_step(loss, 0.1)
            if recorded:
                expected[step] = {
                    n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
                    for n, p in model.named_parameters()
                }
            opt.step()
            if step == 4:  # the file opens while it is written (SWMR), with what is written so far
                live = info_json(gradscope_bin, path)
                assert live["model"] == "TwoTower"
                assert live["steps"]["numbers"] in ([], [0], [0, 3])
            if step == 7:  # and analyses while it is written (steps 0, 3, 6 queued by now)
                live = analyze_json(gradscope_bin, path, tmp_path / "live.analysis.h5")
                assert live["steps_analyzed"] >= 1
        assert rec.steps_recorded == 4
    assert sorted(expected) == [0, 3, 6, 9]

    info = info_json(gradscope_bin, path)
    assert info["model"] == "TwoTower" and info["steps"]["numbers"] == [0, 3, 6, 9]
    names = [layer["name"] for layer in info["layers"]]
    assert names == [n for n, _ in model.named_parameters()]
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "gradscope-snapshot"
        for name, p in model.named_parameters():
            grads = f[f"layers/{name}/grad"][...]
            assert grads.shape == (4, p.numel())
            assert list(f[f"layers/{name}/grad"].attrs["shape"]) == list(p.shape)
            for row, step in enumerate([0, 3, 6, 9]):
                np.testing.assert_array_equal(grads[row], expected[step][name].flatten().numpy())
        assert not f["layers/unused/grad"][...].any()  # no gradient: recorded as zeros
    assert analyze_json(gradscope_bin, path, tmp_path / "run.analysis.h5")["steps_analyzed"] == 4

    gui = os.environ.get("GS_GUI_BIN")
    if gui:  # the viewer renders it (offscreen)
        shot = tmp_path / "gui.png"
        subprocess.run(
            [gui, str(path), "--screenshot", str(shot)],
            check=True,
            capture_output=True,
            env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
        )
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_refuses_to_overwrite_and_bad_models(tmp_path):
    path = tmp_path / "run.h5"
    gradscope.Recorder(TwoTower(), path).close()
    with pytest.raises(gradscope.Error, match="exists"):
        gradscope.Recorder(TwoTower(), path)
    gradscope.Recorder(TwoTower(), path, force=True).close()
    with pytest.raises(TypeError, match="nn.Module"):
        gradscope.Recorder("model", tmp_path / "x.h5")
    frozen = torch.nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="no parameters"):
        gradscope.Recorder(frozen, tmp_path / "y.h5")
    with pytest.raises(gradscope.Error, match="at least 1"):
        gradscope.Recorder(TwoTower(), tmp_path / "z.h5", every=0)


def one_line(excinfo):
    text = str(excinfo.value)
    assert "\n" not in text, text
    return text


def test_refuses_bad_destinations_in_one_line(tmp_path):
    with pytest.raises(gradscope.Error) as e:
        gradscope.Recorder(TwoTower(), tmp_path / "missing" / "run.h5")
    assert "does not exist" in one_line(e) and "missing" in one_line(e)
    with pytest.raises(gradscope.Error) as e:
        gradscope.Recorder(TwoTower(), tmp_path)
    assert "is a directory" in one_line(e)
    path = tmp_path / "run.h5"
    gradscope.Recorder(TwoTower(), path).close()
    with pytest.raises(gradscope.Error) as e:
        gradscope.Recorder(TwoTower(), path)
    assert "force=True" in one_line(e) and "--force" not in one_line(e)
    with pytest.raises(gradscope.Error) as e:
        gradscope.Recorder(TwoTower(), tmp_path / "c.h5", compression="zip")
    assert "unknown snapshot compression 'zip'" in one_line(e)
    assert not (tmp_path / "c.h5").exists()


def test_a_forgotten_begin_step_is_an_error(tmp_path):
    model = TwoTower()
    with gradscope.Recorder(model, tmp_path / "run.h5", every=1) as rec:
        loss = model(torch.randn(4, 12)).pow(2).mean()
        with pytest.raises(gradscope.Error, match=r"call rec.begin_step\(step\) before backward\(\)"):
            loss.backward()
        # end_step alone names the call it misses (no gradient arrived anywhere).
        with pytest.raises(gradscope.Error, match=r"end_step\(\) without begin_step\(\)") as e:
            rec.end_step(1.0, 0.1)
        assert "outside a step" not in one_line(e)
        # Used as documented, the same recorder records.
        rec.begin_step(0)
        model.zero_grad()
        model(torch.randn(4, 12)).pow(2).mean().backward()
        rec.end_step(1.0, 0.1)
        assert rec.steps_recorded == 1
        with pytest.raises(gradscope.Error, match=r"end_step\(\) without begin_step\(\)"):
            rec.end_step(1.0, 0.1)  # a second end_step for one step


@pytest.mark.parametrize("compression", gradscope.Recorder.compressions())
def test_every_compression_reads_back_with_h5py(tmp_path, compression):
    torch.manual_seed(1)
    model = TwoTower()
    path = tmp_path / f"{compression}.h5"
    with gradscope.Recorder(model, path, every=1, compression=compression) as rec:
        rec.begin_step(0)
        model(torch.randn(8, 12)).pow(2).mean().backward()
        rec.end_step(1.0, 0.1)
        want = {n: p.grad.flatten().numpy().copy() for n, p in model.named_parameters() if p.grad is not None}
    with h5py.File(path, "r") as f:
        for name, grad in want.items():
            np.testing.assert_array_equal(f[f"layers/{name}/grad"][0], grad)


def test_read_grad_records_grad_as_it_is_at_end_step(tmp_path):
    """read_grad=True reads .grad at end_step (what DDP has averaged by then): a change made to
    .grad after backward() shows in the file, which the hooks would not see."""
    torch.manual_seed(2)
    model = TwoTower()
    paths = {mode: tmp_path / f"{mode}.h5" for mode in ("hooks", "grad")}
    recs = {
        "hooks": gradscope.Recorder(model, paths["hooks"], every=1),
        "grad": gradscope.Recorder(model, paths["grad"], every=1, read_grad=True),
    }
    for rec in recs.values():
        rec.begin_step(0)
    model(torch.randn(8, 12)).pow(2).mean().backward()
    local = {n: p.grad.flatten().numpy().copy() for n, p in model.named_parameters() if p.grad is not None}
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(0.5)  # stands for DDP's averaging
    for rec in recs.values():
        rec.end_step(1.0, 0.1)
        rec.close()
    with h5py.File(paths["hooks"], "r") as hooks, h5py.File(paths["grad"], "r") as grad:
        for name, g in local.items():
            np.testing.assert_array_equal(hooks[f"layers/{name}/grad"][0], g)
            np.testing.assert_array_equal(grad[f"layers/{name}/grad"][0], 0.5 * g)
        assert not grad["layers/unused/grad"][0].any()
