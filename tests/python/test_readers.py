"""Reading back: gradscope.open_snapshot on files the Recorder writes (also while another process
still writes them), gradscope.analyze against `gradscope analyze` on the same snapshot, and
gradscope.load_analysis with and without pandas; the refusals name the problem."""

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import gradscope

HERE = os.path.dirname(os.path.abspath(__file__))
TIMINGS = {"seconds", "fit_seconds"}  # wall times: the only columns two runs may differ in


class Net(torch.nn.Module):
    """Layers of several kinds: conv weight, bias, linear weight, a free-standing parameter, scalar."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 3, 3)
        self.fc = torch.nn.Linear(12, 4)
        self.scale = torch.nn.Parameter(torch.ones(4))
        self.temperature = torch.nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        h = self.conv(x).flatten(1)
        return self.fc(h) * self.scale / self.temperature


def python_env(**more):
    """The environment of a Python child that imports the gradscope package tested here."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(gradscope.__file__)))
    path = os.pathsep.join([package, os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path, **more)


def record(path, steps, every=1, seed=0):
    """Trains Net for `steps` steps, recording every `every`-th; returns {step: {name: grad}} and
    {step: (loss, lr)} of the recorded steps."""
    torch.manual_seed(seed)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    grads, losses = {}, {}
    with gradscope.Recorder(model, path, every=every) as rec:
        for step in range(steps):
            recorded = rec.begin_step(step)
            loss = model(torch.randn(6, 1, 4, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            lr = 0.05 / (1 + step)
            rec.end_step(loss, lr)
            if recorded:
                grads[step] = {n: p.grad.clone() for n, p in model.named_parameters()}
                losses[step] = (loss.item(), lr)
            opt.step()
    return grads, losses


def test_open_snapshot_reads_what_the_recorder_wrote(tmp_path):
    path = tmp_path / "run.h5"
    grads, losses = record(path, 7, every=3)
    snap = gradscope.open_snapshot(path)
    assert snap.model == "Net" and snap.path == str(path)
    names = [n for n, _ in Net().named_parameters()]
    assert [layer.name for layer in snap.layers] == names
    # A module's own parameters come first, then its children's.
    assert [layer.shape for layer in snap.layers] == [(4,), (), (3, 1, 3, 3), (3,), (4, 12), (4,)]
    assert [layer.numel for layer in snap.layers] == [4, 1, 27, 3, 48, 4]
    assert [layer.kind for layer in snap.layers] == [
        "parameter",
        "scalar",
        "conv weight",
        "bias",
        "linear weight",
        "bias",
    ]
    assert snap.total_numel == 87
    assert [s.step for s in snap] == [0, 3, 6] == [s.step for s in snap.steps] and len(snap) == 3
    for s in snap:
        assert s.loss == pytest.approx(losses[s.step][0], rel=1e-6) and s.lr == losses[s.step][1]
        for name in names:
            g = snap.grad(s.step, name)
            assert g.dtype == np.float32 and g.shape == grads[s.step][name].shape
            np.testing.assert_array_equal(g, grads[s.step][name].numpy())
        # The whole model: every layer flattened, in layer order.
        whole = np.concatenate([snap.grad(s, name).ravel() for name in names])
        np.testing.assert_array_equal(snap.grad(s.step), whole)
        np.testing.assert_array_equal(whole, torch.cat([grads[s.step][n].flatten() for n in names]).numpy())
    as_tensor = snap.grad(3, "fc.weight", torch=True)
    assert isinstance(as_tensor, torch.Tensor) and torch.equal(as_tensor, grads[3]["fc.weight"])
    np.testing.assert_array_equal(snap.grad(), snap.grad(6))  # no step: the last one


def test_errors_name_the_problem(tmp_path):
    path = tmp_path / "run.h5"
    record(path, 3)
    snap = gradscope.open_snapshot(path)
    with pytest.raises(gradscope.Error, match=r"step 5 is not recorded; recorded steps run from 0 to 2"):
        snap.grad(5)
    with pytest.raises(
        gradscope.Error, match=r"no layer 'fc.wieght'; layers are: scale, temperature, conv.weight, conv.bias"
    ):
        snap.grad(0, "fc.wieght")
    with pytest.raises(TypeError):
        snap.grad(1.5)
    with pytest.raises(gradscope.Error, match="missing.h5: no such file"):
        gradscope.open_snapshot(tmp_path / "missing.h5")
    text = tmp_path / "notes.txt"
    text.write_text("not a snapshot\n")
    with pytest.raises(gradscope.Error, match="notes.txt: not an HDF5 file"):
        gradscope.open_snapshot(text)
    with pytest.raises(gradscope.Error, match="not a gradscope analysis file"):
        gradscope.load_analysis(path)
    gradscope.analyze(path, tmp_path / "a.h5", ratios=0.01, dists="gamma", methods="topk", jobs=1)
    with pytest.raises(gradscope.Error, match="a.h5: format is 'gradscope-analysis', not 'gradscope-snapshot'"):
        gradscope.open_snapshot(tmp_path / "a.h5")
    with gradscope.Recorder(Net(), tmp_path / "empty.h5"):
        pass
    with pytest.raises(gradscope.Error, match="holds no recorded step yet"):
        gradscope.open_snapshot(tmp_path / "empty.h5").grad()


# Records steps 0 and 1, waits for a line on stdin, records steps 2 and 3, says so, and keeps the
# file open until a second line: the reader's test reads in between. Expected values go to .npy,
# each before its step is recorded: the recorder's thread may flush a step to the file before
# end_step returns, and a reader that sees the step then finds its .npy complete.
WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import torch
    import gradscope
    sys.path.insert(0, sys.argv[2])
    from test_readers import Net
    out = sys.argv[1]
    torch.manual_seed(3)
    model = Net()
    with gradscope.Recorder(model, out + "/live.h5", every=1) as rec:
        for step in range(4):
            if step == 2:
                sys.stdin.readline()
            rec.begin_step(step)
            model(torch.randn(6, 1, 4, 4)).pow(2).mean().backward()
            np.save(f"{out}/step{step}.npy", torch.cat([p.grad.flatten() for p in model.parameters()]).numpy())
            rec.end_step(1.0, 0.1)
            model.zero_grad()
        print("recorded", flush=True)
        sys.stdin.readline()
"""
)


def wait_for(what, check, timeout=60):
    """check()'s result once it is neither False nor a gradscope.Error (a step not there yet)."""
    end = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result is not False:
                return result
        except gradscope.Error:
            pass
        if time.monotonic() > end:
            pytest.fail(f"waited {timeout} s for {what}")
        time.sleep(0.05)


def test_reads_a_snapshot_another_process_still_writes(tmp_path):
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), HERE],
        env=python_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        path = tmp_path / "live.h5"
        snap = wait_for("the file", lambda: gradscope.open_snapshot(path))
        wait_for("steps 0 and 1", lambda: len(snap.steps) == 2)  # the writer's thread flushes them
        np.testing.assert_array_equal(snap.grad(1), np.load(tmp_path / "step1.npy"))
        writer.stdin.write("\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "recorded"
        # grad() of a step it has not seen reads the step list again.
        g3 = wait_for("step 3", lambda: snap.grad(3))
        np.testing.assert_array_equal(g3, np.load(tmp_path / "step3.npy"))
        assert [s.step for s in snap] == [0, 1, 2, 3]
        assert writer.poll() is None  # still writing: the file is open there
        writer.stdin.write("\n")
        writer.stdin.flush()
        assert writer.wait(timeout=60) == 0
    finally:
        if writer.poll() is None:
            writer.kill()


def same_tables(a, b):
    assert list(a.keys()) == list(b.keys())
    for name in a.keys():
        assert list(a[name].columns) == list(b[name].columns), name
        for column in a[name].columns:
            if column not in TIMINGS:
                assert a[name][column].equals(b[name][column]), (name, column)


def test_analyze_writes_the_store_the_cli_writes(gradscope_bin, tmp_path):
    snapshot = tmp_path / "run.h5"
    record(snapshot, 3)
    calls = []
    result = gradscope.analyze(
        gradscope.open_snapshot(snapshot),
        tmp_path / "py.h5",
        progress=lambda *a: calls.append(a),
        ratios=(0.1, 0.01),
        jobs=1,
    )
    cli = json.loads(
        subprocess.run(
            [
                gradscope_bin,
                "analyze",
                str(snapshot),
                "--out",
                str(tmp_path / "cli.h5"),
                "--ratios",
                "0.1,0.01",
                "--jobs",
                "1",
                "--json",
                "--quiet",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    assert sorted(result) == sorted(cli)
    for key in ("source", "created", "steps_selected", "steps_analyzed", "vectors_analyzed", "backend"):
        assert result[key] == cli[key], key
    assert result["summary"]["kinds"] == cli["summary"]["kinds"]
    assert result["steps_analyzed"] == 3 and result["vectors_analyzed"] == 3 * 7

    # Progress: (0, total, "") first, then one call a vector, each naming its step and vector.
    assert calls[0] == (0, 21, "") and len(calls) == 22
    assert [c[0] for c in calls] == list(range(22)) and all(c[1] == 21 for c in calls)
    # every vector of every step once, step after step (the order within a step is the plan's)
    scopes = ["(model)"] + [layer.name for layer in gradscope.open_snapshot(snapshot).layers]
    for step in range(3):
        notes = sorted(c[2] for c in calls[1 + 7 * step : 8 + 7 * step])
        assert notes == sorted(f"step {step} {s}" for s in scopes), notes

    py, ref = gradscope.load_analysis(tmp_path / "py.h5"), gradscope.load_analysis(tmp_path / "cli.h5")
    same_tables(py, ref)
    assert len(py["fits"]) == 3 * 7 * 4
    assert {k: v for k, v in py.attrs.items() if k != "created"}.keys() == ref.attrs.keys() - {"created"}
    for key, value in ref.attrs.items():
        if key != "created":
            np.testing.assert_array_equal(py.attrs[key], value)
    assert py.attrs["source_path"] == str(snapshot)


def test_analyze_keeps_what_exists_unless_forced(tmp_path):
    snapshot, out = tmp_path / "run.h5", tmp_path / "a.h5"
    record(snapshot, 3)
    options = dict(ratios=[0.01], dists=["exponential", "gamma"], methods=["topk", "sidco-e"], jobs=1)

    def stop_at_step_1(done, total, note):
        if note.startswith("step 1"):
            raise KeyError("stopped by the callback")

    with pytest.raises(KeyError, match="stopped by the callback"):
        gradscope.analyze(snapshot, out, progress=stop_at_step_1, **options)
    assert list(gradscope.load_analysis(out)["steps"]["step"]) == [0]  # the step done before stays
    again = gradscope.analyze(snapshot, out, **options)  # the same options: the missing steps added
    assert again["steps_skipped"] == 1 and again["steps_analyzed"] == 2 and not again["created"]
    with pytest.raises(gradscope.Error, match=r"other options .* pass force=True to recompute it"):
        gradscope.analyze(snapshot, out, **dict(options, ratios=[0.1]))
    assert list(gradscope.load_analysis(out)["steps"]["step"]) == [0, 1, 2]  # untouched
    forced = gradscope.analyze(snapshot, out, force=True, **dict(options, ratios=[0.1]))
    assert forced["created"] and forced["steps_analyzed"] == 3
    assert list(gradscope.load_analysis(out).attrs["ratios"]) == [0.1]
    # A file that is no analysis store is never written over.
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    with pytest.raises(gradscope.Error, match="notes.txt: not an HDF5 file"):
        gradscope.analyze(snapshot, notes, **options)
    assert notes.read_text() == "keep me\n"


HOLDER = """import sys, time, h5py
f = h5py.File(sys.argv[1], "r+")  # open for writing: HDF5 locks the file
print("open", flush=True)
time.sleep(120)
"""


def test_a_store_another_process_has_open_is_refused_in_one_line(tmp_path):
    snapshot, out = tmp_path / "run.h5", tmp_path / "a.h5"
    record(snapshot, 2)
    options = dict(ratios=[0.01], dists=["exponential"], methods=["topk"], jobs=1)
    gradscope.analyze(snapshot, out, **options)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, env=python_env())
    try:
        assert holder.stdout.readline().strip() == b"open"
        with pytest.raises(gradscope.Error) as e:
            gradscope.analyze(snapshot, out, **options)
    finally:
        holder.kill()
        holder.wait()
    message = str(e.value)
    assert "another process has the file open" in message and "gradscope analyze" in message, message
    assert "HDF5:" not in message and "\n" not in message, message  # one line, not HDF5's error chain
    assert gradscope.analyze(snapshot, out, **options)["steps_skipped"] == 2  # opens once it is closed


def test_analyze_takes_the_cli_options_by_keyword(tmp_path):
    snapshot = tmp_path / "run.h5"
    record(snapshot, 4)
    result = gradscope.analyze(
        snapshot,
        tmp_path / "a.h5",
        ratios=0.01,
        dists="gamma",
        methods=("topk",),
        granularity="model",
        steps="1:4:2",
        stages=2,
        ks_max_points=50,
        seed=7,
        jobs=1,
        memory=1,
        backend="cpu",
        on_device_error="cpu",
        csv=tmp_path / "csv",
    )
    assert result["steps_analyzed"] == 2 and result["vectors_analyzed"] == 2
    a = gradscope.load_analysis(tmp_path / "a.h5")
    assert list(a["steps"]["step"]) == [1, 3] and set(a["fits"]["scope"]) == {"(model)"}
    assert (a.attrs["steps"], a.attrs["stages"], a.attrs["ks_max_points"], a.attrs["seed"]) == ("1:4:2", 2, 50, 7)
    assert (tmp_path / "csv" / "fits.csv").exists()
    with pytest.raises(TypeError, match=r"unknown analyze option 'ratio': the options are ratios, dists, methods"):
        gradscope.analyze(snapshot, tmp_path / "b.h5", ratio=0.01)
    for bad, message in [
        ({"stages": "x"}, "stages='x' is not an integer"),
        ({"granularity": "bucket"}, "unknown granularity 'bucket'"),
        ({"on_device_error": "retry"}, "on_device_error='retry' is not one of stop, cpu"),
        ({"memory": 0}, "memory must be at least 1 MiB"),
        ({"ratios": 2.0}, "2"),
    ]:
        with pytest.raises(gradscope.Error, match=message):
            gradscope.analyze(snapshot, tmp_path / "b.h5", **bad)
    assert not (tmp_path / "b.h5").exists()
    with pytest.raises(gradscope.Error, match="missing.h5: no such file"):
        gradscope.analyze(tmp_path / "missing.h5", tmp_path / "b.h5")
    with pytest.raises(TypeError, match="progress must be callable"):
        gradscope.analyze(snapshot, tmp_path / "b.h5", progress="bar")
    # The defaults, from the command line's table, are in the docstring.
    assert "ks_max_points=1000000: Largest sample for KS/AD" in gradscope.analyze.__doc__


def test_load_analysis_without_pandas_gives_the_same_columns(tmp_path, monkeypatch):
    snapshot = tmp_path / "run.h5"
    record(snapshot, 2)
    gradscope.analyze(snapshot, tmp_path / "a.h5", ratios=(0.1, 0.01), jobs=1)
    frames = gradscope.load_analysis(tmp_path / "a.h5")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    arrays = gradscope.load_analysis(tmp_path / "a.h5")
    assert list(arrays.keys()) == ["steps", "vectors", "fits", "tails", "qq", "thresholds"]
    for name in arrays.keys():
        table = arrays[name]
        assert isinstance(table, dict) and list(table) == list(frames[name].columns), name
        for column, values in table.items():
            expected = frames[name][column].to_numpy()
            if column == "stages":  # NA where a method counts none: pandas' Int32, else NaN in floats
                assert str(frames[name][column].dtype) == "Int32" and values.dtype == np.float64
                expected = frames[name][column].to_numpy(dtype=np.float64, na_value=np.nan)
            assert isinstance(values, np.ndarray) and values.dtype == expected.dtype, (name, column)
            if values.dtype == object:
                assert list(values) == list(expected) and all(isinstance(v, str) for v in values)
            else:
                np.testing.assert_array_equal(values, expected)
    assert arrays.fits is arrays["fits"] and arrays.attrs["source_path"] == str(snapshot)
    assert list(arrays["thresholds"])[:6] == ["step", "scope", "kind", "method", "ratio", "threshold"]
    with pytest.raises(KeyError, match="no table 'fit'.*the tables are steps, vectors, fits"):
        arrays["fit"]


def test_reads_while_a_recorder_in_this_process_writes(tmp_path):
    torch.manual_seed(4)
    model = Net()
    path = tmp_path / "run.h5"
    want = {}
    with gradscope.Recorder(model, path, every=1) as rec:
        snap = None
        for step in range(4):
            rec.begin_step(step)
            model(torch.randn(6, 1, 4, 4)).pow(2).mean().backward()
            rec.end_step(1.0, 0.1)
            want[step] = torch.cat([p.grad.flatten() for p in model.parameters()]).numpy().copy()
            model.zero_grad()
            snap = snap or wait_for("the first step", lambda: gradscope.open_snapshot(path))
            np.testing.assert_array_equal(wait_for(f"step {step}", lambda: snap.grad(step)), want[step])
    assert [s.step for s in snap] == [0, 1, 2, 3]
    for step, values in want.items():
        np.testing.assert_array_equal(snap.grad(step), values)


def walkthrough_in_docs():
    """The code block of docs/python.md's "From recording to a table"."""
    with open(os.path.join(HERE, "..", "..", "docs", "python.md")) as f:
        text = f.read()
    section = text[text.index("## From recording to a table") :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```\n", start)]


def test_the_walkthrough_in_the_docs_is_the_example_and_runs(tmp_path):
    script = os.path.join(HERE, "..", "..", "examples", "python", "recording_to_table.py")
    with open(script) as f:
        assert walkthrough_in_docs() == f.read(), "docs/python.md must quote the example whole"
    done = subprocess.run(
        [sys.executable, script],
        cwd=tmp_path,
        env=python_env(MPLBACKEND="Agg"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 steps, 110 vectors" in done.stdout
    # The thresholds table filtered on too_small prints what the summary prints.
    lines = done.stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("ratio ")]
    methods = len(gradscope.load_analysis(tmp_path / "run.analysis.h5").attrs["methods"].split(","))
    assert len(starts) == 2 and lines[starts[0] : starts[0] + 2 + methods] == lines[starts[1] : starts[1] + 2 + methods]
    assert "norm weight" in done.stdout and "norm bias" in done.stdout
    assert gradscope.load_analysis(tmp_path / "run.analysis.h5")["steps"]["step"].tolist() == list(range(0, 20, 2))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "histogram_gamma.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
