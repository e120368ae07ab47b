"""scripts/gpu-check.sh's filters and scripts/gpu_check_report.py's verdicts, without a GPU: the
CUDA cases it runs are CUDA cases (not their cuda-host twins), a filter that selects no case fails
its step, and the report reads the device-side flow's targets from the GPU tests' figures (open
when no GPU run measured them)."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPORT = ROOT / "scripts" / "gpu_check_report.py"


def report_module():
    spec = importlib.util.spec_from_file_location("gpu_check_report", REPORT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_filter(name):
    """A filter as scripts/gpu-check.sh sets it (the one place it is written)."""
    text = (ROOT / "scripts" / "gpu-check.sh").read_text()
    return re.search(rf"^{name}='([^']*)'", text, re.M).group(1)


def fake_suite(tmp_path, cases):
    """An executable that lists `cases` ({suite: [case, ...]}) as GoogleTest's --gtest_list_tests."""
    lines = []
    for suite, names in cases.items():
        lines.append(f"{suite}.")
        lines += [f"  {n}" + ("  # GetParam() = x" if "/" in suite else "") for n in names]
    path = tmp_path / "fake_suite"
    path.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
    path.chmod(0o755)
    return str(path)


def count_cases(binary, flt):
    return subprocess.run([sys.executable, str(REPORT), "count-cases", binary, flt], capture_output=True, text=True)


def test_the_compress_cuda_filter_selects_cuda_cases_only(tmp_path):
    suite = fake_suite(
        tmp_path,
        {
            "Methods/CudaHostBucket": ["UpdatesEqualTheHostPathToTheBit/topk"],
            "CudaHostBucketRules": ["OnlyTheSelectionCrossesTheBus"],
            "CudaBucket": ["ExchangeResidentOnTheGpuEqualsTheHostPath"],
            "Fft": ["CudaBackendMatchesCpu", "MatchesTheDirectDft"],
            "Backends": ["SelectionCompressorsSendTheSameOnTheCudaBackendsCode"],
        },
    )
    flt = check_filter("COMPRESS_CUDA")
    m = report_module()
    picked = [c for c in m.listed_cases(suite) if m.gtest_filter_matches(flt, c)]
    assert picked == ["CudaBucket.ExchangeResidentOnTheGpuEqualsTheHostPath", "Fft.CudaBackendMatchesCpu"], picked
    r = count_cases(suite, flt)
    assert r.returncode == 0 and r.stdout.startswith("2 case(s)"), r.stdout


def test_a_filter_that_selects_no_case_fails(tmp_path):
    suite = fake_suite(tmp_path, {"Selector/cuda_host": ["PlacesOnce"], "Cpu": ["Works"]})
    r = count_cases(suite, "*/cuda:Cuda.*")
    assert r.returncode == 1 and "FILTER MATCHES NO TEST" in r.stdout, r.stdout
    # The sanitizer step and the filters' step run every filter through it.
    text = (ROOT / "scripts" / "gpu-check.sh").read_text()
    assert 'cases_match "${run%%|*}" "${run#*|}" || { rc=1; continue; }' in text
    assert "run_step cuda-filters" in text


@pytest.mark.skipif(not os.environ.get("GS_BUILD_DIR"), reason="needs the build (GS_BUILD_DIR, set by ctest)")
def test_the_check_filters_select_cases_of_the_built_suites():
    build = pathlib.Path(os.environ["GS_BUILD_DIR"]) / "tests"
    m = report_module()
    compress = build / "compress" / "test_compress"
    assert m.count_cases(str(compress), check_filter("COMPRESS_CUDA")) >= 2
    assert not [
        c
        for c in m.listed_cases(str(compress))
        if "CudaHost" in c and m.gtest_filter_matches(check_filter("COMPRESS_CUDA"), c)
    ]
    kernels = build / "kernels" / "gs_kernels_tests"
    for name in ("KERNELS_CUDA", "RACECHECK_KERNELS", "RACECHECK_SELECTIONS"):
        assert m.count_cases(str(kernels), check_filter(name)) > 0, name


def test_the_report_reads_the_targets_and_leaves_them_open_without_a_gpu_run():
    m = report_module()
    assert all(t["verdict"] == "open (not measured)" for t in m.targets([]))
    figures = [
        {
            "test": "hook_nccl_world_1",
            "host_syncs_per_bucket_after_step_0": 0.0,
            "bus_bytes_per_bucket_after_step_0": 64.0,
        },
        {"test": "hook_gloo_cuda_rank0", "host_syncs_per_step": 3.0, "buckets": 3},
        {"test": "overlap", "overlap_ms": 0.5, "hook_device_ms_per_step": 4.0},
    ]
    selection = [  # sidco-e resident: 3.7 reads at 1e8, 0.37x torch.topk at most; sidco-topk 1.11x at 1e7
        {
            "n": 10**7,
            "density": 0.01,
            "torch_topk_ms": 0.27,
            "sidco_e_resident_ms": 0.1,
            "sidco_topk_resident_ms": 0.3,
            "sidco_topk_ms": 0.2,
            "read_ms": 0.02,
        },
        {
            "n": 10**8,
            "density": 0.01,
            "torch_topk_ms": 2.2,
            "sidco_e_resident_ms": 0.5,
            "sidco_topk_resident_ms": 2.0,
            "sidco_topk_ms": 1.0,
            "read_ms": 0.134,
        },
    ]
    steps = [
        {"step": "python-gpu-tests", "status": "ran", "figures": figures},
        {
            "step": "benchmarks",
            "status": "ran",
            "figures": {
                "topk": selection,
                "ddp": {
                    "rows": [
                        {"mode": "plain DDP", "ms_per_step_median": 10.0},
                        {"mode": "gradscope sidco-e 0.01", "ms_per_step_median": 12.0},
                    ]
                },
            },
        },
    ]
    verdicts = {t["target"]: t["verdict"] for t in m.targets(steps)}
    assert verdicts == {
        "nccl-waits": "met",
        "gloo-waits": "met",
        "nccl-bus-bytes": "met",
        "sidco-e-reads": "met",
        "sidco-e-vs-topk": "met",
        "sidco-topk": "missed",
        "hook-ms": "met",
        "overlap": "missed",
        "resnet18": "missed",
    }, verdicts
    measured = {t["target"]: t["measured"] for t in m.targets(steps)}
    assert measured["sidco-e-reads"] == pytest.approx(0.5 / 0.134) and measured["overlap"] == pytest.approx(0.125)
    # The bounds, not the last run's figures: 1.05x plain DDP is met, 1.2x is not.
    steps[1]["figures"]["ddp"]["rows"][1]["ms_per_step_median"] = 10.5
    assert {t["target"]: t["verdict"] for t in m.targets(steps)}["resnet18"] == "met"
    # A target over two sizes stays open while one of them has no row; a slower SIDCo-E is missed.
    steps[1]["figures"]["topk"] = [dict(selection[1], sidco_e_resident_ms=1.2)]
    verdicts = {t["target"]: t["verdict"] for t in m.targets(steps)}
    assert verdicts["sidco-e-vs-topk"] == "open (not measured)" and verdicts["sidco-topk"] == "open (not measured)"
    assert verdicts["sidco-e-reads"] == "missed", verdicts


def test_the_report_tables_the_resident_selections():
    m = report_module()
    row = {
        "n": 10**8,
        "density": 0.01,
        "k": 10**6,
        "torch_topk_ms": 2.0,
        "sidco_topk_ms": 3.0,
        "sidco_topk_resident_ms": 1.8,
        "sidco_e_threshold_ms": 1.0,
        "sidco_e_select_ms": 1.4,
        "gradscope_topk_ms": 2.5,
        "sidco_e_resident_ms": 0.5,
        "gradscope_topk_resident_ms": 1.5,
        "read_ms": 0.13,
    }
    text = "\n".join(m.figures_markdown([{"step": "benchmarks", "status": "ran", "figures": {"topk": [row]}}]))
    assert (
        "sidco-e resident / torch.topk" in text
        and "| 1.800 | 1.000 | 1.400 | 0.500 | 2.500 | 1.500 | 0.900 | 0.250 |" in text
    ), text


def run_report(tmp_path, steps, *extra, mode="dry"):
    """gpu_check_report.py over a steps.jsonl of `steps`: (exit status, results.json)."""
    import json

    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir(exist_ok=True)
    out.mkdir(exist_ok=True)
    (work / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    r = subprocess.run(
        [
            sys.executable,
            str(REPORT),
            "--mode",
            mode,
            "--work",
            str(work),
            "--out",
            str(out),
            "--root",
            str(ROOT),
            "--build",
            str(tmp_path),
            "--seconds",
            "42",
            *extra,
        ],
        capture_output=True,
        text=True,
    )
    return r.returncode, json.loads((out / "results.json").read_text()), r.stdout


def test_a_step_the_budget_cut_makes_the_check_incomplete_not_failed(tmp_path):
    steps = [
        {"step": "bundle", "phase": "setup", "status": "ran", "seconds": 3, "rc": 0},
        {"step": "build-timing", "phase": "timing", "status": "ran", "seconds": 10, "rc": 0},
        {
            "step": "build-suites",
            "phase": "tests",
            "status": "cut: stopped when the check's 360 s ran out",
            "seconds": 5,
            "rc": 124,
            "limit_s": 5,
        },
    ]
    rc, results, stdout = run_report(tmp_path, steps)
    assert rc == 2 and results["verdict"] == "incomplete" and not results["problems"], (rc, results["problems"])
    assert results["incomplete"] == ["build-suites: cut: stopped when the check's 360 s ran out"]
    assert results["phases"] == {"setup": 3, "timing": 10, "tests": 5, "sanitizers": 0}
    assert "NOT CHECKED: build-suites" in stdout
    # The same step failing on its own is a failure; after the timing phase, what is to come is pending.
    steps[2].update(status="ran", rc=1)
    assert run_report(tmp_path, steps)[0] == 1
    rc, results, _ = run_report(tmp_path, steps[:2], "--interim")
    assert rc == 0 and results["verdict"].startswith("timings written"), results["verdict"]
    assert {s["step"]: s["status"] for s in results["steps"]}["cpp-suites"] == "pending"


def test_a_sanitizer_that_cannot_use_the_device_is_no_failure_on_the_gpu(tmp_path):
    m = report_module()
    steps = [
        {"step": name, "phase": "setup", "status": "ran", "seconds": 1, "rc": 0}
        for name in ("bundle", "googletest", "configure", "cuda-filters")
    ]
    steps.append(
        {
            "step": "memcheck",
            "phase": "sanitizers",
            "status": "unavailable: compute-sanitizer cannot run " "a CUDA case on this device (Device not supported)",
            "seconds": 0,
        }
    )
    problems = m.judge("gpu", steps, str(tmp_path), 1)
    assert not [p for p in problems if p.startswith("memcheck")], problems
    assert {s["step"]: s.get("result") for s in steps}["memcheck"] == "unavailable"
    # A step never reached on the GPU is still a problem.
    assert any(p.startswith("racecheck: skipped: never reached") for p in problems), problems
