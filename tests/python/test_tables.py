"""Tables safe to aggregate: the thresholds table's n and too_small under the summary's rule, layer
kinds by rule, named fit parameters and fitted laws (against scipy), the tails' threshold, the
options a notebook gives (lists or comma lists, training steps, re-runs), snapshots that close, the
loss of every step, FileNotFoundError, ratio 1, one counting rule for every method, and stages."""

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch

import gradscope


class BnNet(torch.nn.Module):
    """A small CNN with BatchNorm: layers from 16 to 4608 values, so that some are too small to
    judge a density of 0.01 by and some are not."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(32)
        self.fc = torch.nn.Linear(32 * 16, 10)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.bn2(self.conv2(h))), 4)
        return self.fc(h.flatten(1))


def record(path, steps=6, every=1, seed=0):
    """Trains BnNet on random data, recording every `every`-th step; returns every step's loss."""
    torch.manual_seed(seed)
    model = BnNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = {}
    with gradscope.Recorder(model, path, every=every, force=True) as rec:
        for step in range(steps):
            rec.begin_step(step)
            loss = torch.nn.functional.cross_entropy(model(torch.randn(16, 1, 12, 12)), torch.randint(0, 10, (16,)))
            opt.zero_grad()
            loss.backward()
            rec.end_step(loss, 0.05)
            losses[step] = loss.item()
            opt.step()
    return losses


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """A BnNet snapshot and its analysis at ratios 0.1, 0.01 (every method, every law)."""
    d = tmp_path_factory.mktemp("analysed")
    record(d / "run.h5", steps=3)
    result = gradscope.analyze(d / "run.h5", d / "a.h5", ratios=(0.1, 0.01), jobs=1)
    return d / "run.h5", result, gradscope.load_analysis(d / "a.h5")


def test_thresholds_carry_n_and_too_small_under_the_summary_rule(analysed):
    _, result, analysis = analysed
    th, vectors = analysis.thresholds, analysis.vectors
    n = th.merge(vectors[["step", "scope", "n"]], on=["step", "scope"], suffixes=("", "_vector"))
    assert (n.n == n.n_vector).all() and len(n) == len(th)
    assert th.too_small.dtype == bool
    assert (th.too_small == (th.n * th.ratio < 100)).all()
    assert th.too_small.any() and not th.too_small.all()  # both kinds of rows, so the filter matters
    # Filtered on the flag, the table gives what the summary prints, count and median alike.
    kept = th[~th.too_small & (th.error == "")]
    table = kept.groupby(["method", "ratio"]).quality
    for q in result["summary"]["quality"]:
        key = (q["method"], q["ratio"])
        assert q["count"] == table.size().get(key, 0), key
        rows = th[(th.method == q["method"]) & (th.ratio == q["ratio"]) & (th.error == "")]
        assert q["too_small"] == int(rows.too_small.sum()), key
        if q["count"]:
            assert table.median()[key] == pytest.approx(q["median"], rel=1e-12, abs=0), key


# (model, parameter name, the kind the rule gives it): one case per rule of docs/analysis-format.md.
class Free(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos_embedding = torch.nn.Parameter(torch.zeros(1, 5, 8))
        self.cls_token = torch.nn.Parameter(torch.zeros(1, 1, 8))
        self.temperature = torch.nn.Parameter(torch.tensor(1.0))


class Rms(torch.nn.Module):  # a norm with a scale alone (RMSNorm), told by its module's name
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8))


RULES = [
    (Free(), "temperature", "scalar"),
    (Free(), "pos_embedding", "parameter"),
    (Free(), "cls_token", "parameter"),
    (torch.nn.ModuleDict({"bn1": torch.nn.BatchNorm2d(4)}), "bn1.bias", "norm bias"),
    (torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)), "1.bias", "norm bias"),
    (torch.nn.ModuleDict({"fc": torch.nn.Linear(3, 4)}), "fc.bias", "bias"),
    (torch.nn.ModuleDict({"lstm": torch.nn.LSTM(3, 4)}), "lstm.bias_ih_l0", "bias"),
    (torch.nn.ModuleDict({"lstm": torch.nn.LSTM(3, 4)}), "lstm.bias_hh_l0", "bias"),
    (torch.nn.ModuleDict({"attn": torch.nn.MultiheadAttention(8, 2)}), "attn.in_proj_bias", "bias"),
    (torch.nn.ModuleDict({"bn1": torch.nn.BatchNorm2d(4)}), "bn1.weight", "norm weight"),
    (torch.nn.ModuleDict({"norm1": torch.nn.LayerNorm(8)}), "norm1.weight", "norm weight"),
    (torch.nn.ModuleDict({"ln_f": torch.nn.LayerNorm(8)}), "ln_f.weight", "norm weight"),
    (
        torch.nn.ModuleDict({"downsample": torch.nn.Sequential(torch.nn.Conv2d(2, 4, 1), torch.nn.BatchNorm2d(4))}),
        "downsample.1.weight",
        "norm weight",
    ),
    (torch.nn.ModuleDict({"rms_norm": Rms()}), "rms_norm.weight", "norm weight"),
    (torch.nn.ModuleDict({"act": torch.nn.PReLU(8)}), "act.weight", "1-d weight"),
    (torch.nn.ModuleDict({"embedding": torch.nn.Embedding(10, 8)}), "embedding.weight", "embedding"),
    (torch.nn.ModuleDict({"tok_emb": torch.nn.Embedding(10, 8)}), "tok_emb.weight", "embedding"),
    (torch.nn.ModuleDict({"conv": torch.nn.Conv2d(2, 4, 3)}), "conv.weight", "conv weight"),
    (torch.nn.ModuleDict({"fc": torch.nn.Linear(3, 4)}), "fc.weight", "linear weight"),
    (torch.nn.ModuleDict({"lstm": torch.nn.LSTM(3, 4)}), "lstm.weight_hh_l0", "linear weight"),
    (torch.nn.ModuleDict({"attn": torch.nn.MultiheadAttention(8, 2)}), "attn.in_proj_weight", "linear weight"),
]


@pytest.mark.parametrize("model, name, kind", RULES, ids=[f"{n}:{k}" for _, n, k in RULES])
def test_layer_kind_rule(model, name, kind):
    assert gradscope.layer_kinds(model)[name] == kind


def test_snapshot_layers_have_the_kinds_of_the_rules(analysed):
    path, _, analysis = analysed
    with gradscope.open_snapshot(path) as snap:
        kinds = {layer.name: layer.kind for layer in snap.layers}
    assert kinds == gradscope.layer_kinds(BnNet())
    assert kinds["bn1.weight"] == "norm weight" and kinds["conv2.bias"] == "bias"
    stored = analysis.vectors.drop_duplicates("scope").set_index("scope").kind.to_dict()
    assert stored == dict(kinds, **{"(model)": "whole model"})


def test_fit_params_are_named_as_fit_names_them(analysed):
    path, _, analysis = analysed
    params = analysis.fit_params
    assert list(params.columns) == ["step", "scope", "kind", "dist", "name", "value"]
    assert analysis.param_names == {
        "exponential": ["beta"],
        "gamma": ["alpha", "beta"],
        "gpareto": ["xi", "sigma"],
        "normal": ["mu", "sigma"],
    }
    fits = analysis.fits
    assert len(params) == sum(len(analysis.param_names[d]) for d in fits[fits.error == ""].dist)
    # The names and values gradscope.fit gives the same vector.
    with gradscope.open_snapshot(path) as snap:
        g = snap.grad(2, "fc.weight")
    by_fit = {f["dist"]: f["params"] for f in gradscope.fit(g, ratios=0.1)["fits"]}
    stored = params[(params.step == 2) & (params.scope == "fc.weight")]
    for dist, named in by_fit.items():
        got = stored[stored.dist == dist].set_index("name").value.to_dict()
        assert got.keys() == named.keys(), dist
        for name, value in named.items():
            assert got[name] == pytest.approx(value, rel=1e-12), (dist, name)


@pytest.mark.parametrize(
    "dist, params, law",
    [
        ("exponential", (0.003, float("nan")), scipy.stats.expon(scale=0.003)),
        ("gamma", (0.6, 0.004), scipy.stats.gamma(0.6, scale=0.004)),
        ("gpareto", (0.2, 0.002), scipy.stats.genpareto(0.2, scale=0.002)),
        ("gpareto", (-0.3, 0.002), scipy.stats.genpareto(-0.3, scale=0.002)),
        ("normal", (0.001, 0.002), scipy.stats.norm(0.001, 0.002)),
    ],
)
def test_fitted_law_agrees_with_scipy(dist, params, law):
    fitted = gradscope.fitted(dist, params)
    x = np.array([1e-6, 1e-4, 1e-3, 2e-3, 4e-3, 6e-3])
    np.testing.assert_allclose(fitted.pdf(x), law.pdf(x), rtol=1e-9)
    np.testing.assert_allclose(fitted.cdf(x), law.cdf(x), rtol=1e-9)
    q = np.array([0.5, 0.1, 0.01, 1e-3])
    np.testing.assert_allclose(fitted.isf(q), law.isf(q), rtol=1e-9)
    assert isinstance(fitted.pdf(1e-3), float) and fitted.cdf(x.reshape(2, 3)).shape == (2, 3)


def test_fitted_takes_a_fits_row_or_names(analysed):
    _, _, analysis = analysed
    row = analysis.fits[analysis.fits.dist == "gamma"].iloc[0]
    law = gradscope.fitted("gamma", row)
    assert law.params == {"alpha": row.param1, "beta": row.param2}
    assert gradscope.fitted("gamma", {"alpha": row.param1, "beta": row.param2}).pdf(1e-3) == law.pdf(1e-3)
    with pytest.raises(gradscope.Error, match="unknown distribution 'cauchy'"):
        gradscope.fitted("cauchy", (1.0, 1.0))
    with pytest.raises(ValueError, match="gamma needs 2 parameters"):
        gradscope.fitted("gamma", (0.5,))
    with pytest.raises(gradscope.Error):
        gradscope.fitted("gamma", (-1.0, 1.0))


def test_tails_threshold_is_the_isf_of_ratio_n_over_the_nonzero_count(analysed):
    _, _, analysis = analysed
    fits, vectors = analysis.fits.set_index(["step", "scope", "dist"]), analysis.vectors.set_index(["step", "scope"])
    tails = analysis.tails
    assert len(tails) > 0
    for t in tails.itertuples():
        v = vectors.loc[(t.step, t.scope)]
        nonzero = v.n - v.zeros - v.nonfinite
        q = t.ratio * v.n / nonzero
        expected = 0.0 if q >= 1 else gradscope.fitted(t.dist, fits.loc[(t.step, t.scope, t.dist)]).isf(q)
        assert t.threshold == pytest.approx(expected, rel=1e-12), t


def test_ratios_dists_and_methods_take_lists_or_comma_lists(tmp_path):
    record(tmp_path / "run.h5", steps=2)
    listed = gradscope.analyze(
        tmp_path / "run.h5",
        tmp_path / "a.h5",
        ratios=[0.1, 0.01],
        dists=["gamma", "exponential"],
        methods=("topk", "dgc"),
        jobs=1,
    )
    comma = gradscope.analyze(
        tmp_path / "run.h5", tmp_path / "b.h5", ratios="0.1,0.01", dists="gamma,exponential", methods="topk,dgc", jobs=1
    )

    def untimed(result):
        return [{k: v for k, v in q.items() if k != "median_seconds"} for q in result["summary"]["quality"]]

    assert untimed(listed) == untimed(comma)
    a, b = gradscope.load_analysis(tmp_path / "a.h5"), gradscope.load_analysis(tmp_path / "b.h5")
    for key in ("ratios", "dists", "methods"):
        np.testing.assert_array_equal(a.attrs[key], b.attrs[key])
    for bad, message in [
        ({"ratios": "0.1,x"}, r"^ratios='x' is not a number"),
        ({"ratios": [0.1, "x"]}, r"^ratios='x' is not a number"),
        ({"ratios": [0.1, 2.0]}, r"^ratios: density 2 is outside \(0, 1\]"),
        ({"ratios": "0.1,0.1"}, r"^ratios: ratio 0.1.* is repeated"),
        ({"dists": "gamma,cauchy"}, r"^dists: unknown distribution 'cauchy'"),
        ({"methods": ["topk", "magic"]}, r"^methods: unknown method 'magic'"),
    ]:
        with pytest.raises(gradscope.Error, match=message):
            gradscope.analyze(tmp_path / "run.h5", tmp_path / "c.h5", **bad)
    t = torch.randn(5000)
    assert [r["ratio"] for r in gradscope.fit(t, ratios="0.1,0.01")["thresholds"][:2]] == [0.1, 0.01]
    with pytest.raises(ValueError, match=r"^ratios: '0.1,x' is not a comma list"):
        gradscope.fit(t, ratios="0.1,x")
    with pytest.raises(ValueError, match=r"^ratios: ratio 2 is outside"):
        gradscope.fit(t, ratios=[0.1, 2])


def steps_of(path):
    return gradscope.load_analysis(path).steps.step.tolist()


def test_steps_are_training_step_numbers(tmp_path):
    snapshot = tmp_path / "run.h5"
    record(snapshot, steps=20, every=2)  # steps 0, 2, ..., 18 recorded
    options = dict(ratios=0.1, dists="exponential", methods="topk", jobs=1, force=True)
    out = tmp_path / "a.h5"
    for steps, expected in [
        (4, [4]),
        (range(4, 12), [4, 6, 8, 10]),
        (slice(10, None), [10, 12, 14, 16, 18]),
        (slice(None, None, 8), [0, 8, 16]),
        ([18, 0], [0, 18]),
        ([range(0, 3), 16], [0, 2, 16]),
        (gradscope.Step(6, 0.0, 0.0), [6]),
        ("2:7", [2, 4, 6]),
    ]:
        gradscope.analyze(snapshot, out, steps=steps, **options)
        assert steps_of(out) == expected, steps
    out.unlink()
    for steps, message in [
        (5, r"^steps: step 5 is not recorded; recorded steps run from 0 to 18, every 2 \(10 steps\)"),
        (range(100, 200), r"^steps='100:200:1' selects no recorded step; recorded steps run from 0 to 18"),
        ([0, 7], "step 7 is not recorded"),
        (range(5, 5), "selects no step"),
    ]:
        with pytest.raises(gradscope.Error, match=message):
            gradscope.analyze(snapshot, out, steps=steps, **options)
        assert not out.exists()  # no silently empty analysis
    with pytest.raises(ValueError, match="steps: .* does not run forwards"):
        gradscope.analyze(snapshot, out, steps=range(10, 0, -2), **options)
    with pytest.raises(TypeError, match="steps: give training-step numbers"):
        gradscope.analyze(snapshot, out, steps=1.5, **options)


def test_a_rerun_takes_the_options_in_any_order_and_adds_steps(tmp_path):
    snapshot, out = tmp_path / "run.h5", tmp_path / "a.h5"
    record(snapshot, steps=6)
    first = gradscope.analyze(
        snapshot, out, ratios=(0.1, 0.01), dists="gamma,exponential", methods="topk,dgc", steps=range(0, 3), jobs=1
    )
    assert first["steps_analyzed"] == 3
    again = gradscope.analyze(
        snapshot, out, ratios=(0.01, 0.1), dists=["exponential", "gamma"], methods="dgc,topk", steps=range(0, 6), jobs=1
    )
    assert (again["steps_skipped"], again["steps_analyzed"], again["created"]) == (3, 3, False)
    a = gradscope.load_analysis(out)
    assert steps_of(out) == list(range(6)) and a.attrs["steps"] == "0:6:1"
    per_step = a.thresholds.groupby("step")[["method", "ratio"]].apply(lambda g: list(map(tuple, g.values)))
    assert all(rows == per_step[0] for rows in per_step)  # every step's rows in the stored order
    with pytest.raises(gradscope.Error, match="other options"):
        gradscope.analyze(snapshot, out, ratios=(0.1, 0.02), dists="gamma,exponential", methods="topk,dgc", jobs=1)


def test_a_snapshot_closes_and_the_file_can_be_recorded_again(tmp_path):
    path = tmp_path / "run.h5"
    record(path, steps=2)
    snap = gradscope.open_snapshot(path)
    with pytest.raises(gradscope.Error, match="open for reading in this process; close its readers first"):
        record(path, steps=2)
    snap.close()
    snap.close()  # idempotent
    assert snap.closed and "closed" in repr(snap)
    with pytest.raises(gradscope.Error, match="the snapshot is closed"):
        snap.grad()
    for _ in range(2):  # a notebook cell run twice: record, then read in a with block
        record(path, steps=3, seed=1)
        with gradscope.open_snapshot(path) as snap:
            assert [s.step for s in snap.steps] == [0, 1, 2]
        assert snap.closed
    # A recorder that was never closed holds the file too, and says so.
    rec = gradscope.Recorder(BnNet(), path, force=True)
    with pytest.raises(gradscope.Error, match="a recorder of this process still writes it"):
        gradscope.Recorder(BnNet(), path, force=True)
    rec.close()
    gradscope.Recorder(BnNet(), path, force=True).close()


def test_the_loss_of_every_step_is_stored(tmp_path, gradscope_bin):
    path = tmp_path / "run.h5"
    losses = record(path, steps=75, every=20)  # more unrecorded steps than one batch of losses
    with gradscope.open_snapshot(path) as snap:
        curve = snap.losses
        recorded = snap.steps
    assert curve.step.tolist() == list(range(75)) and [s.step for s in recorded] == [0, 20, 40, 60]
    np.testing.assert_allclose(curve.loss, [losses[s] for s in range(75)], rtol=1e-6)
    assert (curve.lr == 0.05).all()
    for s in recorded:
        assert curve.loss[s.step] == s.loss
    info = json.loads(
        subprocess.run([gradscope_bin, "info", str(path), "--json"], check=True, capture_output=True, text=True).stdout
    )
    assert info["loss"]["steps"] == 75 and len(info["loss"]["trajectory"]) == 75
    assert info["steps"]["count"] == 4


def test_a_snapshot_without_losses_gives_the_recorded_steps(tmp_path, gradscope_bin):
    path = tmp_path / "old.h5"
    record(path, steps=5, every=2)
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "r+") as f:  # as files written before /losses existed
        del f["losses"]
    with gradscope.open_snapshot(path) as snap:
        assert snap.losses.step.tolist() == [0, 2, 4] == [s.step for s in snap.steps]
        assert snap.losses.loss.tolist() == [s.loss for s in snap.steps]
    info = subprocess.run([gradscope_bin, "info", str(path)], check=True, capture_output=True, text=True).stdout
    assert "3 steps" in info and "3 recorded" in info


def test_a_missing_file_is_a_file_not_found_error(tmp_path):
    missing = tmp_path / "missing.h5"
    for call in (
        lambda: gradscope.open_snapshot(missing),
        lambda: gradscope.load_analysis(missing),
        lambda: gradscope.analyze(missing, tmp_path / "a.h5"),
        lambda: gradscope.Recorder(BnNet(), tmp_path / "no" / "run.h5"),
    ):
        with pytest.raises(FileNotFoundError) as e:
            call()
        assert isinstance(e.value, gradscope.Error) and isinstance(e.value, gradscope.MissingFileError)
    with pytest.raises(FileNotFoundError, match="missing.h5: no such file"):
        gradscope.open_snapshot(missing)


def test_analyze_accepts_ratio_1(tmp_path):
    record(tmp_path / "run.h5", steps=1)
    gradscope.analyze(tmp_path / "run.h5", tmp_path / "a.h5", ratios=(1, 0.1), jobs=1)
    a = gradscope.load_analysis(tmp_path / "a.h5")
    dense = a.thresholds[a.thresholds.ratio == 1].merge(a.vectors[["step", "scope", "nonfinite"]], on=["step", "scope"])
    assert len(dense) > 0 and (dense.error == "").all()
    assert (dense.threshold == 0).all() and (dense.selected == dense.n - dense.nonfinite).all()
    assert (dense.quality == dense.selected / dense.n).all()
    assert (a.tails[a.tails.ratio == 1].threshold == 0).all()
    with gradscope.open_snapshot(tmp_path / "run.h5") as snap:
        g = snap.grad(0)
    by_fit = {t["method"]: t for t in gradscope.fit(g, ratios=1)["thresholds"]}
    model = dense[dense.scope == "(model)"].set_index("method")
    for method, t in by_fit.items():
        assert (t["threshold"], t["selected"]) == (model.threshold[method], model.selected[method]), method


def at_or_above(x, threshold):
    """What a threshold selects: the finite |x| at or above it (above 0 for a threshold of 0)."""
    x = np.abs(x[np.isfinite(x)])
    return int(np.count_nonzero(x >= threshold if threshold > 0 else x > 0))


def test_every_method_counts_what_lies_at_or_above_its_threshold():
    # Distinct magnitudes (no ties): DGC's threshold is the value of a sampled element, which it
    # keeps, as top-k keeps its k-th largest.
    for seed in (3, 4):
        draws = np.random.default_rng(seed).laplace(size=60000).astype(np.float32)
        _, first = np.unique(np.abs(draws), return_index=True)
        x = draws[np.sort(first)][:40000]
        t = torch.from_numpy(x)
        assert len(np.unique(np.abs(x))) == len(x) == 40000
        for row in gradscope.fit(t, ratios=(0.1, 0.01))["thresholds"]:
            assert row["selected"] == at_or_above(x, row["threshold"]), row
        for method in gradscope.sparse_selection_names():
            if method == "randomk":  # no threshold
                continue
            indices, values, info = gradscope.select(t, method, 0.01, backend="cpu")
            assert info["selected"] == len(indices) == at_or_above(x, info["threshold"]), (method, info)
            assert np.abs(values.numpy()).min() >= info["threshold"], (method, info)


def test_every_row_of_the_tables_counts_at_or_above_its_threshold(analysed):
    path, _, analysis = analysed
    th = analysis.thresholds
    with gradscope.open_snapshot(path) as snap:
        for row in th[(th.step == 2) & (th.error == "")].itertuples():
            g = snap.grad(2, None if row.scope == "(model)" else row.scope)
            if row.method in ("topk", "sidco-topk", "dgc") and row.selected != at_or_above(g, row.threshold):
                # The k largest (DGC's hierarchical step too): ties at the threshold to the lower indices.
                assert np.count_nonzero(np.abs(g) == row.threshold) > 1, row
                continue
            assert row.selected == at_or_above(g, row.threshold), row


def test_stages_are_na_where_the_method_has_none(analysed):
    _, _, analysis = analysed
    th = analysis.thresholds[analysis.thresholds.error == ""]
    assert str(th.stages.dtype) == "Int32"
    by_method = th.groupby("method").stages
    for method in ("topk", "dgc"):
        assert by_method.get_group(method).isna().all(), method
    for method in ("sidco-e", "sidco-p", "sidco-gp", "sidco-topk", "gaussianksgd"):
        assert (by_method.get_group(method) >= 1).all(), method
    fit = gradscope.fit(torch.randn(5000), ratios=0.01)["thresholds"]
    assert {r["method"]: r["stages"] for r in fit}["topk"] is None
    assert {r["method"]: r["stages"] for r in fit}["dgc"] is None
    assert {r["method"]: r["stages"] for r in fit}["sidco-e"] == gradscope.default_sidco_stages(0.01)


def test_step_seconds_account_for_the_analysis(analysed):
    _, result, analysis = analysed
    steps = analysis.steps
    assert (steps.seconds > 0).all()
    # Everything but opening the files and committing each step is in the steps' seconds.
    assert steps.seconds.sum() <= result["seconds"]
    assert steps.seconds.sum() >= 0.5 * result["seconds"], (steps.seconds.sum(), result["seconds"])


def test_a_version_1_analysis_reads_with_n_and_too_small_filled_in(analysed, tmp_path, gradscope_bin):
    h5py = pytest.importorskip("h5py")
    snapshot, _, current = analysed
    old = tmp_path / "old.h5"
    gradscope.analyze(snapshot, old, ratios=(0.1, 0.01), jobs=1)
    with h5py.File(old, "r+") as f:  # as version 1 wrote it: no n and too_small, steps by row
        rows = f["thresholds"][:]
        names = [n for n in rows.dtype.names if n not in ("n", "too_small")]
        table = np.empty(len(rows), dtype=[(n, rows.dtype[n]) for n in names])
        for n in names:
            table[n] = rows[n]
        del f["thresholds"]
        f.create_dataset("thresholds", data=table, maxshape=(None,), chunks=True)
        f.attrs["format_version"] = np.int64(1)
    a = gradscope.load_analysis(old)
    assert a.attrs["format_version"] == 1 and current.attrs["format_version"] == 2
    th, want = a.thresholds, current.thresholds
    assert th.n.tolist() == want.n.tolist() and th.too_small.tolist() == want.too_small.tolist()
    assert th.too_small.any() and not th.too_small.all()
    # Appending to it, or merging it, would read its steps as rows: refused, with the way out.
    with pytest.raises(gradscope.Error, match=r"older gradscope \(analysis format version 1.*force=True"):
        gradscope.analyze(snapshot, old, ratios=(0.1, 0.01), jobs=1)
    merged = subprocess.run(
        [gradscope_bin, "merge", "--out", str(tmp_path / "m.h5"), str(old)], capture_output=True, text=True
    )
    assert merged.returncode == 1 and "analysis format version 1" in merged.stderr
    with h5py.File(old, "r+") as f:
        f.attrs["format_version"] = np.int64(3)
    with pytest.raises(
        gradscope.Error, match="analysis format version 3 is not supported; this build reads versions 1 to 2"
    ):
        gradscope.load_analysis(old)
