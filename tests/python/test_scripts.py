"""scripts/frontier.py, the one command behind docs/RESULTS.md's accuracy-bytes frontier: a run of
its whole pipeline at a small size (the worker processes, the table, the figure), the reuse of
runs already made, and its errors for bad options."""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
FRONTIER = ROOT / "scripts" / "frontier.py"
POINTS = "dense,sidco-e-0.01-accordion-mc"


def frontier(*args):
    return subprocess.run([sys.executable, str(FRONTIER), *args], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


def small(out):
    return frontier("--workers", "2", "--steps", "6", "--seeds", "1", "--points", POINTS, "--long-steps", "0",
                    "--out", str(out))


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


def test_frontier_refuses_bad_options_before_it_starts_a_worker(tmp_path):
    out = tmp_path / "none"
    for args, message in [(["--steps", "3"], "--steps 3: at least 6 steps"),
                          (["--long-steps", "2"], "--long-steps 2: at least 6 steps"),
                          (["--workers", "0"], "--workers 0: at least 1"),
                          (["--points", "dense,sidco-x"], "unknown point(s) sidco-x")]:
        r = frontier(*args, "--out", str(out))
        assert r.returncode != 0
        assert message in r.stderr, r.stderr
    assert not out.exists()
