"""The statistics the study scripts report with (scripts/runs.py) and speedup.py's reading of a
time to a target accuracy: a short synthetic curve with one noisy evaluation."""

import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import runs  # noqa: E402
import speedup  # noqa: E402


@pytest.mark.parametrize("df,expected", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423)])
def test_t_quantiles_match_the_tables(df, expected):
    assert runs.t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_intervals_are_student_t_and_ratios_are_taken_on_the_logs():
    m, half = runs.mean_ci([1, 2, 3, 4, 5])
    assert m == 3 and half == pytest.approx(2.7764 * math.sqrt(2.5) / math.sqrt(5), rel=1e-4)
    assert runs.mean_ci([7.0]) == (7.0, None) and runs.mean_ci([]) == (None, None)
    g, lo, hi, n = runs.ratio_ci([2.0, 8.0])
    assert g == pytest.approx(4.0) and n == 2 and lo < 4.0 < hi
    assert lo * hi == pytest.approx(16.0)  # symmetric on the log scale
    assert runs.ratio_ci([]) == (None, None, None, 0)


# evaluations every 25 steps; the one at step 75 is noise above the run's level then
CURVE = [[25, 0.50], [50, 0.70], [75, 0.83], [100, 0.72], [125, 0.78], [150, 0.80], [175, 0.81], [200, 0.80]]


def test_one_noisy_evaluation_does_not_decide_the_time_to_the_target():
    target = 0.79
    raw = speedup.steps_to(CURVE, target)
    assert 50 < raw < 75  # the raw curve crosses on the noisy evaluation
    smooth = speedup.steps_to(speedup.smoothed(CURVE, 3), target)
    # the centred mean of 3: 0.683 at 50, 0.750 at 75, 0.777 at 100, 0.767 at 125, 0.797 at 150
    assert 125 < smooth < 150
    assert smooth == pytest.approx(125 + 25 * (target - 0.7667) / (0.7967 - 0.7667), abs=0.2)
    assert speedup.smoothed(CURVE, 1) == CURVE
    assert speedup.steps_to(speedup.smoothed(CURVE, 3), 0.9) is None  # never reached
    assert speedup.converged(CURVE, 3) == pytest.approx((0.81 + 0.80 + 0.80) / 3)


def test_the_fixed_target_is_dense_converged_accuracy_less_the_margin():
    acc = {
        "dense-lr0.05": {
            1: {"curve": CURVE, "test_accuracy": 0.80},
            2: {"curve": [[s, a + 0.02] for s, a in CURVE], "test_accuracy": 0.82},
        }
    }
    report = ["--phase", "report", "--models", "vit"]
    opts = speedup.parse(report + ["--target-margin", "0.5"])
    target, info = speedup.choose_target(acc, "dense-lr0.05", [1, 2], opts)
    converged = (speedup.converged(CURVE, 3) + speedup.converged(CURVE, 3) + 0.02) / 2
    assert info["target_pct"] == pytest.approx(100 * converged - 0.5)
    assert target == {1: pytest.approx(converged - 0.005), 2: pytest.approx(converged - 0.005)}
    assert info["rule"] == "fixed" and info["dense"] == "dense-lr0.05" and info["margin_points"] == 0.5
    earlier, _ = speedup.choose_target(acc, "dense-lr0.05", [1, 2], speedup.parse(report + ["--target", "dense-final"]))
    assert earlier == {1: 0.80, 2: 0.82}
    given, _ = speedup.choose_target(acc, "dense-lr0.05", [1, 2], speedup.parse(report + ["--target", "78.5"]))
    assert given == {1: pytest.approx(0.785), 2: pytest.approx(0.785)}


@pytest.mark.parametrize(
    "args,message",
    [
        (["--target", "best"], "--target best"),
        (["--target", "120"], "--target 120"),
        (["--smooth", "2"], "--smooth 2: an odd number"),
    ],
)
def test_bad_target_options_are_refused(args, message, capsys):
    with pytest.raises(SystemExit):
        speedup.parse(["--no-lab", "--rates", "none"] + args)
    assert message in capsys.readouterr().err
