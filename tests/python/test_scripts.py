"""scripts/frontier.py, the one command behind docs/RESULTS.md's accuracy-bytes frontier: a run of
its whole pipeline at a small size (the worker processes, the table, the figure), the reuse of
runs already made, and its errors for bad options."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FRONTIER = ROOT / "scripts" / "frontier.py"
POINTS = "dense,sidco-e-0.01-accordion-mc"


def frontier(*args):
    return subprocess.run(
        [sys.executable, str(FRONTIER), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )


def small(out):
    # 500 test images: the pipeline at a small size (a ResNet-18 reads the 10,000 in seconds a run)
    return frontier(
        "--workers",
        "2",
        "--steps",
        "6",
        "--seeds",
        "1",
        "--points",
        POINTS,
        "--long-steps",
        "0",
        "--eval-images",
        "500",
        "--out",
        str(out),
    )


def test_frontier_makes_its_runs_table_and_figure_then_reuses_the_runs(tmp_path):
    out = tmp_path / "frontier"
    first = small(out)
    assert first.returncode == 0, first.stderr
    runs = sorted(p.name for p in out.glob("*.json"))
    assert runs == ["dense-w2-n6-s1.json", "sidco-e-0.01-accordion-mc-w2-n6-s1.json"]
    assert not list(out.glob("*.partial"))
    compressed = json.loads((out / runs[1]).read_text())
    assert compressed["steps"] == 6 and compressed["seed"] == 1
    assert compressed["state_options"]["density_schedule"] == "accordion"
    assert compressed["state_options"]["momentum_correction"] == 0.9 and compressed["optimizer_momentum"] == 0.0
    assert 0 < compressed["bytes_per_step"] < compressed["dense_bytes_per_step"]

    table = (out / "frontier.table.md").read_text().splitlines()
    assert table[0].startswith("| point | steps | seeds | test acc. %")
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in table[2:]}
    assert set(rows) == {"dense (no hook)", "SIDCo-E 0.01, Accordion + mom. corr."}
    row = rows["SIDCo-E 0.01, Accordion + mom. corr."]
    assert row[4].endswith("(1)")  # paired with dense's seed 1
    assert float(row[5]) < 1.0
    # a run starts critical and its first check keeps it: 6 steps are all at density_high
    assert row[8].rstrip(" |") == "100%"
    assert (out / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Again: nothing is run, the table is the same. Without one run's file, only that run is made.
    again = small(out)
    assert again.returncode == 0, again.stderr
    assert ", 6 steps, seed" not in again.stderr
    assert (out / "frontier.table.md").read_text().splitlines() == table
    (out / "dense-w2-n6-s1.json").unlink()
    (out / "dense-w2-n6-s1.json.partial").write_text("{ a run stopped midway")
    third = small(out)
    assert third.returncode == 0, third.stderr
    made = [line for line in third.stderr.splitlines() if ", 6 steps, seed" in line]
    assert made == ["frontier: dense, 6 steps, seed 1"]
    assert not list(out.glob("*.partial"))
    assert json.loads((out / "dense-w2-n6-s1.json").read_text())["point"] == "dense"
    # A run read on other test images than asked for is not reused as if it were comparable.
    other = frontier(
        "--workers", "2", "--steps", "6", "--seeds", "1", "--points", POINTS, "--long-steps", "0", "--out", str(out)
    )
    assert other.returncode != 0
    assert "was evaluated on 500 test images and this invocation asks for 10000" in other.stderr, other.stderr


def test_frontier_refuses_bad_options_before_it_starts_a_worker(tmp_path):
    out = tmp_path / "none"
    for args, message in [
        (["--steps", "3"], "--steps 3: at least 6 steps"),
        (["--long-steps", "2"], "--long-steps 2: at least 6 steps"),
        (["--workers", "0"], "--workers 0: at least 1"),
        (["--eval-images", "0"], "--eval-images 0: from 1 to 10000"),
        (["--points", "dense,sidco-x"], "unknown point(s) sidco-x"),
    ]:
        r = frontier(*args, "--out", str(out))
        assert r.returncode != 0
        assert message in r.stderr, r.stderr
    assert not out.exists()


def script(name, *args, timeout=900):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )


def test_sidco_holds_its_density_under_momentum_correction(tmp_path):
    """scripts/controller.py's goals on a CNN with BatchNorm and momentum correction, the setup whose
    stage controller cycled: at least 90% of the compressed steps within [0.5, 2] of the ratio, at
    most one change of the stage count in any 20 steps past the first 20, the mean density within
    [0.8, 1.25] of the ratio (--check exits 1 otherwise)."""
    r = script(
        "controller.py",
        "--models",
        "cnn-bn",
        "--methods",
        "sidco-e",
        "--setups",
        "mc",
        "--steps",
        "60",
        "--out",
        str(tmp_path / "controller"),
        "--check",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("| cnn-bn-sidco-e-mc-s1"))
    assert row.rstrip(" |").endswith("met"), row
    assert (tmp_path / "controller" / "controller.table.md").exists()


def test_speedup_runs_its_whole_pipeline_in_six_steps(tmp_path):
    """scripts/speedup.py at 6 steps on loopback (the lab needs root; --no-lab times the unshaped
    rate without it): accuracy runs, timing runs, the table and the figure."""
    out = tmp_path / "speedup"
    r = script(
        "speedup.py",
        "--models",
        "vit",
        "--points",
        "sidco-e-mc",
        "--dense-lrs",
        "0.05",
        "--workers",
        "2",
        "--steps",
        "6",
        "--eval-every",
        "3",
        "--seeds",
        "1",
        "--rates",
        "none",
        "--no-lab",
        "--timing-steps",
        "8",
        "--timing-budget",
        "0",
        "--eval-images",
        "500",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    for timed in (out / "time").glob("*.json"):  # the budget ends each at 3 warm + 2 timed steps
        assert len(json.loads(timed.read_text())["step_s"]) == 5, timed.name
    table = (out / "speedup.table.md").read_text()
    assert table in r.stdout  # printed, and written
    rows = [line for line in table.splitlines() if line.startswith("| vit | none |")]
    assert [line.split(" | ")[2] for line in rows] == ["dense, lr 0.05", "SIDCo-E 0.01, mom. corr."]
    for line in rows:
        cells = line.split(" | ")
        assert float(cells[4]) > 0 and float(cells[9]) > 0  # the median step (s) and the ideal speed-up
        assert cells[7].endswith("/1") or cells[7].endswith("/1 (not every seed)")  # seeds reaching the target
    # the target: dense's converged accuracy (its last 3 evaluations: steps 3 and 6) less 0.5 points
    target = json.loads((out / "target-vit.json").read_text())
    dense = json.loads((out / "acc" / "vit-dense-lr0.05-w2-n6-s1.json").read_text())["curve"]
    assert target["rule"] == "fixed" and target["dense"] == "dense-lr0.05"
    assert target["target_pct"] == pytest.approx(100 * sum(a for _, a in dense) / len(dense) - 0.5)
    assert "| vit | none | dense, lr 0.05 |" in (out / "comparisons.table.md").read_text()
    assert (out / "time-to-target-vit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (out / "acc").glob("*.json")) == [
        "vit-dense-lr0.05-w2-n6-s1.json",
        "vit-sidco-e-mc-w2-n6-s1.json",
    ]
    curve = json.loads((out / "acc" / "vit-sidco-e-mc-w2-n6-s1.json").read_text())["curve"]
    assert [step for step, _ in curve] == [3, 6]
    assert (out / "speedup-vit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # A second report under its own name, from the runs made, with SIDCo-E at another learning rate
    # (one accuracy run more; its steps are sidco-e-mc's timing run): the first report stays.
    first = (out / "speedup.table.md").read_text()
    again = script(
        "speedup.py",
        "--phase",
        "report",
        "--models",
        "vit",
        "--points",
        "sidco-e-mc,sidco-e-mc-lr0.02",
        "--dense-lrs",
        "0.05",
        "--workers",
        "2",
        "--steps",
        "6",
        "--eval-every",
        "3",
        "--seeds",
        "1",
        "--rates",
        "none",
        "--no-lab",
        "--name",
        "one",
        "--eval-images",
        "500",
        "--out",
        str(out),
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert (out / "speedup.table.md").read_text() == first
    named = (out / "speedup-one.table.md").read_text()
    assert "SIDCo-E 0.01, mom. corr. |" in named and "SIDCo-E 0.01, mom. corr., lr 0.02 |" in named
    assert (out / "acc" / "vit-sidco-e-mc-lr0.02-w2-n6-s1.json").exists()
    assert not list((out / "time").glob("*lr0.02*"))
    assert (out / "speedup-vit-one.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Each unknown one named, in one run: a point made up, auto at another rate, a rate not a number.
    bad = script(
        "speedup.py", "--points", "sidco-e-mc,sidco-x,sidco-e-mc-auto-lr0.01,fp16-lrx", "--out", str(tmp_path / "bad")
    )
    assert bad.returncode != 0, bad.stdout
    assert "unknown point(s) sidco-x, sidco-e-mc-auto-lr0.01, fp16-lrx:" in bad.stderr, bad.stderr
    assert not (tmp_path / "bad").exists()


def test_one_shot_sidco_lands_near_its_ratio_on_gradients_it_was_not_tuned_on():
    """SIDCo's count correction on real gradients of a seed the stage counts were not chosen on
    (scripts/one_shot_stages.py --seed 4: ResNet-18, a Transformer encoder and an LSTM, whole model
    and largest layer, every SIDCo variant, 0.01 and 0.001): every call within [0.5, 2] of the ratio,
    the median within [0.8, 1.25]."""
    r = script(
        "one_shot_stages.py",
        "--seed",
        "4",
        "--ratios",
        "0.01,0.001",
        "--stages",
        "2,3",
        "--check",
        "0.5,2",
        "--median",
        "0.8,1.25",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "outside [0.5, 2.0]: none" in r.stdout and "within [0.8, 1.25]" in r.stdout, r.stdout


def test_hook_model_gives_the_modelled_device_time_of_each_step_from_the_cuda_host_ledger(tmp_path):
    """scripts/hook_model.py on a small MLP (its claim: each step's modelled time is the cost model
    of the launches and elements the cuda-host backend counted, the first two steps left out)."""
    import gradscope

    out = tmp_path / "hook.json"
    r = script(
        "hook_model.py",
        "--width",
        "96",
        "--layers",
        "2",
        "--bucket-mb",
        "0.03",
        "--steps",
        "4",
        "--json",
        str(out),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert len(d["rows"]) == 2, d["rows"]
    for row in d["rows"]:
        assert row["buckets"] >= 1 and row["launches"] >= 10 * row["buckets"], row
        assert 1.0 <= row["passes"] < 20, row
        modelled = gradscope.modelled_device_ms(row["launches"], row["passes"] * row["n"])
        assert row["modelled_ms"] == pytest.approx(modelled)
    assert "bound 4 ms: met" in r.stdout, r.stdout
    assert d["rows"][0]["launches"] == d["rows"][1]["launches"], "steps after the first two queue the same"
    bad = script("hook_model.py", "--steps", "2")
    assert bad.returncode == 2 and "--steps must be at least 3" in bad.stderr, bad.stderr
