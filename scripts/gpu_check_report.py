"""The verdict of scripts/gpu-check.sh: reads what its steps left in WORK (steps.jsonl, the suites'
gtest JSON, pytest's JUnit XML, the figures of tests/python/gpu, gpu_bench.py's JSON), writes
OUT/results.json and OUT/report.md (Markdown tables for docs/gpu.md, the device-side flow's targets
among them: met, missed or open), prints a table of the steps and their times, and exits 1 when
anything meant to run did not, or failed. Standard library only.

    gpu_check_report.py count-cases BINARY FILTER
prints how many cases of a GoogleTest binary a --gtest_filter selects, and exits 1 for none: the
check runs it for each filter it uses (a step whose filter matches nothing has checked nothing).

On the GPU (--mode gpu) every step but large-vectors must run and pass, the suites must run CUDA
cases and none may skip (a CUDA case skipping on a GPU machine is a failure), and tests/python/gpu
may skip only its two-GPU test, on a machine with one GPU. A step the check's budget stopped or left
no time for is cut, and a sanitizer that cannot use the device is unavailable: neither fails the
check, both make it incomplete (exit status 2). In a dry run (--mode dry, no GPU) the steps that ran
must pass; the CUDA cases skip there and are counted. --interim (after the timing phase): the steps
still to come are pending, and the verdict says so (exit status 0 unless a step failed)."""

import argparse
import fnmatch
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

# Steps in their order (phases setup, timing, tests, sanitizers); those a GPU run may leave out.
STEPS = [
    "bundle",
    "googletest",
    "configure",
    "build-timing",
    "benchmarks",
    "python-gpu-tests",
    "build-suites",
    "cuda-filters",
    "cpp-suites",
    "large-vectors",
    "memcheck",
    "racecheck",
]
PHASES = ["setup", "timing", "tests", "sanitizers"]
INCOMPLETE = ("cut", "unavailable")  # statuses that leave a step unchecked without failing it
OPTIONAL_ON_GPU = {"large-vectors"}
TWO_GPU_SKIP = re.compile(r"two (CUDA )?GPUs|2 GPUs", re.I)


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(python):
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    os_name = (
        next(
            (
                line.split("=", 1)[1].strip().strip('"')
                for line in open("/etc/os-release")
                if line.startswith("PRETTY_NAME=")
            ),
            "",
        )
        if os.path.exists("/etc/os-release")
        else ""
    )
    gpus = [
        g
        for g in sh(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
        ).splitlines()
        if g.strip()
    ]
    nvcc = sh(["nvcc", "--version"]).splitlines()
    torch = sh([python, "-c", "import torch; print(torch.__version__, 'CUDA', torch.version.cuda)"]) if python else ""
    return {
        "gpus": gpus,
        "cuda": nvcc[-1] if nvcc else "",
        "torch": torch,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": os_name,
    }


def gtest_filter_matches(flt, name):
    pos, _, neg = flt.partition("-")
    hit = lambda pats: any(fnmatch.fnmatchcase(name, p) for p in pats.split(":") if p)
    return hit(pos or "*") and not hit(neg)


def listed_cases(binary):
    """The cases a GoogleTest binary lists (--gtest_list_tests), as Suite.Case."""
    out = subprocess.run([binary, "--gtest_list_tests"], capture_output=True, text=True, timeout=120, check=True).stdout
    cases, suite = [], ""
    for line in out.splitlines():
        name = line.split("#", 1)[0].rstrip()
        if not name.strip():
            continue
        if line.startswith(" "):
            cases.append(suite + name.strip())
        else:
            suite = name.strip()
    return cases


def count_cases(binary, flt):
    """How many of a binary's cases a --gtest_filter selects."""
    return sum(1 for c in listed_cases(binary) if gtest_filter_matches(flt, c))


CPP_SUITES = ("gs_fitting_tests", "gs_kernels_tests", "test_compress")


def suites(work, filters, names):
    """Each suite the step ran (every one of CPP_SUITES, or those it names: a quick dry run's one),
    from its gtest JSON."""
    out = []
    for suite in names:
        path = os.path.join(work, f"gtest-{suite}.json")
        if not os.path.exists(path):
            out.append({"suite": suite, "ran": False})
            continue
        data = json.load(open(path))
        cases = [(f"{s['name']}.{t['name']}", t) for s in data["testsuites"] for t in s["testsuite"]]
        ran = [(n, t) for n, t in cases if t.get("status") == "RUN"]
        skipped = [n for n, t in ran if t.get("result") == "SKIPPED"]
        failed = [n for n, t in ran if t.get("failures")]
        cuda = [(n, t) for n, t in ran if suite in filters and gtest_filter_matches(filters[suite], n)]
        out.append(
            {
                "suite": suite,
                "ran": True,
                "cases": len(ran),
                "failed": len(failed),
                "skipped": len(skipped),
                "passed": len(ran) - len(failed) - len(skipped),
                "cuda_cases": len(cuda),
                "cuda_cases_run": sum(1 for n, t in cuda if t.get("result") == "COMPLETED"),
                "cuda_cases_skipped": sum(1 for n, t in cuda if t.get("result") == "SKIPPED"),
                "failed_cases": failed[:20],
                "skipped_cases": skipped[:20],
            }
        )
    return out


def pytest_results(work):
    path = os.path.join(work, "pytest.xml")
    if not os.path.exists(path):
        return None
    root = ET.parse(path).getroot()
    cases = root.iter("testcase")
    r = {"passed": 0, "failed": 0, "skipped": 0, "skips": [], "failures": []}
    for c in cases:
        name = f"{c.get('classname')}.{c.get('name')}"
        if c.find("failure") is not None or c.find("error") is not None:
            r["failed"] += 1
            r["failures"].append(name)
        elif c.find("skipped") is not None:
            r["skipped"] += 1
            r["skips"].append({"case": name, "reason": c.find("skipped").get("message", "")})
        else:
            r["passed"] += 1
    return r


def read_jsonl(path):
    return [json.loads(line) for line in open(path) if line.strip()] if os.path.exists(path) else []


def sanitizer_summary(work, step):
    path = os.path.join(work, f"{step}.log")
    text = open(path, errors="replace").read() if os.path.exists(path) else ""
    return {
        "error_summaries": [int(n) for n in re.findall(r"ERROR SUMMARY: (\d+) errors?", text)],
        "cases_passed": [int(n) for n in re.findall(r"\[  PASSED  \] (\d+) tests?", text)],
    }


# Lines of a failed step's log that say what went wrong (gpu-check.sh's own verdicts first).
TELLING = re.compile(
    r"NOT FROM THE BUNDLE|FROM OUTSIDE THE BUNDLE|DO NOT RESOLVE|FILTER MATCHES NO TEST|^prefix/\S+: "
    r"|stopped at the step's limit"
    r"|CMake Error|error:|FAILED|Error \d"
)


def telling_lines(work, step, most=6):
    path = os.path.join(work, f"{step}.log")
    lines = open(path, errors="replace").read().splitlines() if os.path.exists(path) else []
    return [line.strip()[:200] for line in lines if TELLING.search(line)][:most]


def judge(mode, steps, work, gpu_count, interim=False):
    """Fills each step's result and returns the list of problems (a cut or unavailable step is none:
    its result says so)."""
    problems = []
    by_name = {s["step"]: s for s in steps}
    for name in STEPS:
        if name not in by_name:
            by_name[name] = {"step": name, "status": "pending" if interim else "skipped: never reached", "seconds": 0}
            steps.append(by_name[name])
    for s in steps:
        name = s["step"]
        if s["status"].startswith(INCOMPLETE):
            s["result"] = s["status"].split(":", 1)[0]
            continue
        if s["status"] == "pending":
            continue
        if not s["status"].startswith("ran"):
            if mode == "gpu" and name not in OPTIONAL_ON_GPU:
                problems.append(f"{name}: {s['status']}")
            continue
        ok = s.get("rc", 1) == 0
        if s.get("rc") in (124, 137):
            problems.append(f"{name}: stopped at its limit of {s.get('limit_s')} s")
        if name == "build-timing" and s.get("extension", "built") != "built":
            s["note"] = f"extension {s['extension']}"
            if mode == "gpu":
                problems.append(f"build-timing: extension {s['extension']}")
        if name == "cpp-suites":
            s["suites"] = suites(work, s.get("cuda_filters", {}), s.get("suite_names", CPP_SUITES))
            for r in s["suites"]:
                if not r["ran"]:
                    ok = False
                    problems.append(f"cpp-suites: {r['suite']} did not run")
                elif r["failed"]:
                    ok = False
                    problems.append(
                        f"cpp-suites: {r['suite']}: {r['failed']} failed ({', '.join(r['failed_cases'][:5])})"
                    )
            run = sum(r.get("cuda_cases_run", 0) for r in s["suites"])
            skipped = sum(r.get("cuda_cases_skipped", 0) for r in s["suites"])
            s["cuda_cases_run"], s["cuda_cases_skipped"] = run, skipped
            if mode == "gpu" and run == 0:
                ok = False
                problems.append("cpp-suites: no CUDA case ran")
            if mode == "gpu" and skipped:
                ok = False
                problems.append(f"cpp-suites: {skipped} CUDA cases skipped on the GPU")
        if name in ("memcheck", "racecheck"):
            s.update(sanitizer_summary(work, name))
        if name == "python-gpu-tests":
            r = pytest_results(work)
            s["pytest"] = r
            s["figures"] = read_jsonl(os.path.join(work, "figures.jsonl"))
            if r is None:
                ok = False
                problems.append("python-gpu-tests: pytest wrote no results")
            else:
                bad_skips = [k for k in r["skips"] if not (gpu_count < 2 and TWO_GPU_SKIP.search(k["reason"]))]
                if r["failed"] or bad_skips or r["passed"] == 0:
                    ok = False
                    problems.append(
                        f"python-gpu-tests: {r['passed']} passed, {r['failed']} failed, "
                        f"skipped on the GPU: {[k['case'] for k in bad_skips]}"
                    )
        if name == "benchmarks":
            path = os.path.join(work, "bench.json")
            s["figures"] = json.load(open(path)) if os.path.exists(path) else None
            if s["figures"] is None or s["figures"].get("errors"):
                ok = False
                problems.append(
                    "benchmarks: "
                    + ("no results" if s["figures"] is None else f"failed parts {sorted(s['figures']['errors'])}")
                )
        s["result"] = "passed" if ok else "failed"
        if not ok and not any(p.startswith(name) for p in problems):
            problems.append(
                f"{name}: exit status {s.get('rc')} (check.log, section {name})"
                + "".join(f"\n    {line}" for line in telling_lines(work, name))
            )
    steps.sort(key=lambda s: STEPS.index(s["step"]) if s["step"] in STEPS else len(STEPS))
    return problems


def phase_seconds(steps):
    """Seconds spent in each phase, in the check's order (steps written before phases counted as setup)."""
    out = {p: 0 for p in PHASES}
    for s in steps:
        out[s.get("phase", "setup")] = out.get(s.get("phase", "setup"), 0) + s.get("seconds", 0)
    return out


def fmt(v, digits=3):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.0f}" if abs(v) >= 1e4 else f"{v:.{digits}f}"
    return str(v)


def sci(n):
    """1e+07 as 1e7."""
    return f"{n:.0e}".replace("e+0", "e").replace("e+", "e")


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def step_note(s):
    if s.get("note"):
        return s["note"]
    if s["step"] == "cpp-suites" and "suites" in s:
        return (
            f"{sum(r.get('cases', 0) for r in s['suites'])} cases, {s['cuda_cases_run']} CUDA cases run, "
            f"{s['cuda_cases_skipped']} skipped"
        )
    if s["step"] in ("memcheck", "racecheck") and "error_summaries" in s:
        return f"cases passed {s['cases_passed']}, ERROR SUMMARY {s['error_summaries']}"
    if s["step"] == "python-gpu-tests" and s.get("pytest"):
        p = s["pytest"]
        return f"{p['passed']} passed, {p['failed']} failed, {p['skipped']} skipped"
    return ""


# The targets of the device-side flow (docs/gpu.md, "Targets"): what a GPU run must show, read from
# the figures the GPU tests and benchmarks write. (name, what, the bound, how to read it, met). The
# figures of the last GPU run before this flow (commit cdd4df1) are quoted beside each.
def ratio_at(f, sizes, num, den="torch_topk_ms"):
    """The largest num / den over the selection rows at `sizes` (every density), or None unless each
    size has a row with both figures."""
    rows = [r for r in f.get("topk_rows", []) if r.get("n") in sizes and r.get(num) and r.get(den)]
    if {r["n"] for r in rows} != set(sizes):
        return None
    return max(r[num] / r[den] for r in rows)


def overlap_share(f):
    o = f.get("overlap", {})
    return o["overlap_ms"] / o["hook_device_ms_per_step"] if o.get("hook_device_ms_per_step") else None


TARGETS = [
    (
        "nccl-waits",
        "blocking synchronizations per bucket, device collectives (NCCL), after step 0",
        "0",
        lambda f: f.get("hook_nccl_world_1", {}).get("host_syncs_per_bucket_after_step_0"),
        lambda v: v == 0,
    ),
    (
        "gloo-waits",
        "blocking synchronizations per bucket, host all-gather (Gloo)",
        "<= 1",
        lambda f: max(
            (
                r["host_syncs_per_step"] / r["buckets"]
                for k, r in f.items()
                if k.startswith("hook_gloo_cuda") and r.get("buckets")
            ),
            default=None,
        ),
        lambda v: v <= 1,
    ),
    (
        "nccl-bus-bytes",
        "bytes across the bus per bucket, device collectives, after step 0 (its report)",
        "<= 64",
        lambda f: f.get("hook_nccl_world_1", {}).get("bus_bytes_per_bucket_after_step_0"),
        lambda v: v <= 64,
    ),
    (
        "sidco-e-reads",
        "SIDCo-E's threshold and selection (resident) at 1e8, in read-pass times, each density "
        "(cdd4df1, driven from the host: about 11)",
        "<= 4",
        lambda f: ratio_at(f, [10**8], "sidco_e_resident_ms", "read_ms"),
        lambda v: v <= 4,
    ),
    (
        "sidco-e-vs-topk",
        "SIDCo-E's threshold and selection (resident) over torch.topk, at 1e7 and 1e8, each "
        "density (cdd4df1: 1.85 at 1e7, 0.66 at 1e8)",
        "<= 0.5",
        lambda f: ratio_at(f, [10**7, 10**8], "sidco_e_resident_ms"),
        lambda v: v <= 0.5,
    ),
    (
        "sidco-topk",
        "sidco-topk (resident) over torch.topk, at 1e7 and 1e8, each density (cdd4df1, its bound "
        "placed on the host: 2.5 at 1e8, 0.01)",
        "<= 1",
        lambda f: ratio_at(f, [10**7, 10**8], "sidco_topk_resident_ms"),
        lambda v: v <= 1,
    ),
    (
        "hook-ms",
        "the hook's compress and exchange, device ms per step, 8 x Linear(2048, 2048) (cdd4df1: 21.14)",
        "<= 4",
        lambda f: f.get("overlap", {}).get("hook_device_ms_per_step"),
        lambda v: v <= 4,
    ),
    (
        "overlap",
        "share of that work hidden under the backward pass (cdd4df1: 1.56 of 21.14 ms, 0.07)",
        ">= 0.5",
        overlap_share,
        lambda v: v >= 0.5,
    ),
    (
        "resnet18",
        "ResNet-18 ms/step with the hook over plain DDP, NCCL, world size 1 (cdd4df1: 1.37)",
        "<= 1.1",
        lambda f: f.get("resnet18_ratio"),
        lambda v: v <= 1.1,
    ),
]


def target_figures(steps):
    """The figures TARGETS read: the GPU tests' by test name, the selection rows, the ResNet-18 ratio."""
    by = {s["step"]: s for s in steps}
    f = {r["test"]: r for r in by.get("python-gpu-tests", {}).get("figures") or [] if "test" in r}
    bench = by.get("benchmarks", {}).get("figures") or {}
    f["topk_rows"] = bench.get("topk") or []
    rows = (bench.get("ddp") or {}).get("rows", [])
    plain = next((r.get("ms_per_step_median") for r in rows if r["mode"] == "plain DDP"), None)
    hook = next((r.get("ms_per_step_median") for r in rows if str(r["mode"]).startswith("gradscope")), None)
    if plain and hook:
        f["resnet18_ratio"] = hook / plain
    return f


def targets(steps):
    """Each target with its measure and verdict: met, missed, or open (not measured: no GPU run)."""
    f = target_figures(steps)
    out = []
    for name, what, bound, read, ok in TARGETS:
        try:
            v = read(f)
        except (KeyError, TypeError, ZeroDivisionError):
            v = None
        out.append(
            {
                "target": name,
                "what": what,
                "bound": bound,
                "measured": v,
                "verdict": "open (not measured)" if v is None else ("met" if ok(v) else "missed"),
            }
        )
    return out


def over(a, b):
    return a / b if a and b else None


def figures_markdown(steps):
    out = []
    by = {s["step"]: s for s in steps}
    cpp = by.get("cpp-suites", {})
    if cpp.get("suites"):
        out += [
            "## C++ suites",
            "",
            table(
                ["suite", "cases", "passed", "failed", "skipped", "CUDA cases run", "CUDA cases skipped"],
                [
                    [
                        r["suite"],
                        r.get("cases"),
                        r.get("passed"),
                        r.get("failed"),
                        r.get("skipped"),
                        r.get("cuda_cases_run"),
                        r.get("cuda_cases_skipped"),
                    ]
                    for r in cpp["suites"]
                ],
            ),
            "",
        ]
    san = [by[t] for t in ("memcheck", "racecheck") if by.get(t, {}).get("status") == "ran"]
    if san:
        out += [
            "## compute-sanitizer",
            "",
            table(
                ["tool", "gtest filters", "cases passed", "ERROR SUMMARY", "result"],
                [
                    [
                        s["step"],
                        " ; ".join(f"`{f}`" for f in s.get("filters", [])),
                        s.get("cases_passed"),
                        s.get("error_summaries"),
                        s["result"],
                    ]
                    for s in san
                ],
            ),
            "",
        ]
    py = by.get("python-gpu-tests", {})
    if py.get("pytest"):
        p = py["pytest"]
        out += ["## tests/python/gpu", "", f"{p['passed']} passed, {p['failed']} failed, {p['skipped']} skipped"]
        out += [f"- skipped {k['case']}: {k['reason']}" for k in p["skips"]]
        for f in py.get("figures", []):
            out += ["", table(list(f), [list(f.values())])]
        out.append("")
    out += [
        "## Targets",
        "",
        table(
            ["target", "bound", "measured", "verdict"],
            [[t["what"], t["bound"], t["measured"], t["verdict"]] for t in targets(steps)],
        ),
        "",
    ]
    b = by.get("benchmarks", {}).get("figures") or {}
    if b.get("copy"):
        c = b["copy"]
        out += [
            "## GPU benchmarks",
            "",
            f"Device: {b.get('device')}; torch {b.get('torch')}. Copy bandwidth "
            f"(device-to-device, bytes read + written): **{c['gb_per_s']:.0f} GB/s** "
            f"({c['bytes_read_and_written'] / 2**30:.0f} GiB in {c['ms']:.3f} ms).",
            "",
        ]
    if b.get("kernels"):
        out += [
            "gs_kernels_bench --backend cuda, read pass (one float32 read of g):",
            "",
            table(
                ["n", "read ms", "GB/s", "of copy bandwidth"],
                [[sci(r["n"]), r["ms"], f"{r['gb_per_s']:.0f}", r["of_copy_bandwidth"]] for r in b["kernels"]["read"]],
            ),
            "",
        ]
    if b.get("topk"):
        out += [
            "Selection against torch.topk(|g|, k, sorted=False) (ms, medians; sidco-topk copies its selection to "
            "the host; the resident selections, like torch.topk, leave theirs on the device):",
            "",
            table(
                [
                    "n",
                    "density",
                    "torch.topk",
                    "sidco-topk",
                    "sidco-topk resident",
                    "sidco-e threshold",
                    "sidco-e + selection",
                    "sidco-e resident",
                    "gradscope topk",
                    "gradscope topk resident",
                    "sidco-topk resident / torch.topk",
                    "sidco-e resident / torch.topk",
                ],
                [
                    [
                        sci(r["n"]),
                        r["density"],
                        r["torch_topk_ms"],
                        r["sidco_topk_ms"],
                        r.get("sidco_topk_resident_ms"),
                        r["sidco_e_threshold_ms"],
                        r["sidco_e_select_ms"],
                        r.get("sidco_e_resident_ms"),
                        r["gradscope_topk_ms"],
                        r.get("gradscope_topk_resident_ms"),
                        over(r.get("sidco_topk_resident_ms"), r["torch_topk_ms"]),
                        over(r.get("sidco_e_resident_ms"), r["torch_topk_ms"]),
                    ]
                    for r in b["topk"]
                ],
            ),
            "",
        ]
    if b.get("ddp"):
        d = b["ddp"]
        timed = [r for r in d["rows"] if "ms_per_step_median" in r]
        plain = next((r["ms_per_step_median"] for r in timed if r["mode"] == "plain DDP"), None)
        out += [
            f"DDP on {d['model']}, batch {d['batch']} of {d['input']}, {d['backend']} world size {d['world_size']}, "
            f"{d['optimizer']}; ms per step (forward, backward, optimizer; CUDA-synchronised)"
            + (f" over {timed[0]['steps']} steps after {timed[0]['warmup_steps']} warm-up:" if timed else ":"),
            "",
            table(
                [
                    "mode",
                    "ms/step median",
                    "ms/step mean",
                    "x plain DDP",
                    "host-device bytes/step",
                    "dense bytes/step",
                    "host-device / dense",
                ],
                [
                    [
                        r["mode"],
                        r.get("ms_per_step_median"),
                        r.get("ms_per_step_mean"),
                        r["ms_per_step_median"] / plain if plain and "ms_per_step_median" in r else None,
                        r.get("host_device_bytes_per_step"),
                        r.get("dense_bytes_per_step"),
                        r.get("host_device_of_dense"),
                    ]
                    for r in d["rows"]
                ],
            ),
            "",
        ]
        out += [f"- {r['mode']}: failed: {r['error'].strip().splitlines()[-1]}" for r in d["rows"] if "error" in r]
    return out


def count_cases_main(argv):
    """count-cases BINARY FILTER: prints how many cases FILTER selects; exits 1, saying so, for none
    (a filter that matches nothing would make its step pass having checked nothing)."""
    binary, flt = argv
    n = count_cases(binary, flt)
    print(f"{n} case(s) of {os.path.basename(binary)} match --gtest_filter={flt}")
    if n == 0:
        print(f"FILTER MATCHES NO TEST: --gtest_filter={flt} selects no case of {binary}")
        return 1
    return 0


def main():
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == "count-cases":
        return count_cases_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for arg in ("--mode", "--work", "--out", "--root", "--build"):
        ap.add_argument(arg, required=True)
    ap.add_argument("--python", default="")
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--interim", action="store_true", help="after the timing phase: later steps pending")
    a = ap.parse_args()
    steps = read_jsonl(os.path.join(a.work, "steps.jsonl"))
    m = machine(a.python)
    problems = judge(a.mode, steps, a.work, len(m["gpus"]), a.interim)
    incomplete = [f"{s['step']}: {s['status']}" for s in steps if s["status"].startswith(INCOMPLETE)]
    # A copy of the tree without .git (as a GPU node may get) names its commit in GS_CHECK_COMMIT.
    commit = os.environ.get("GS_CHECK_COMMIT") or sh(["git", "-C", a.root, "rev-parse", "--short", "HEAD"]) or "unknown"
    if not os.environ.get("GS_CHECK_COMMIT") and sh(
        ["git", "-C", a.root, "status", "--porcelain", "--untracked-files=no"]
    ):
        commit += " (with local changes)"
    verdict = (
        "failed"
        if problems
        else "timings written, tests and sanitizers to come"
        if a.interim
        else "incomplete"
        if incomplete
        else "passed"
    )
    results = {
        "mode": a.mode,
        "verdict": verdict,
        "problems": problems,
        "incomplete": incomplete,
        "commit": commit,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "seconds": a.seconds,
        "phases": phase_seconds(steps),
        "machine": m,
        "steps": steps,
        "targets": targets(steps),
    }
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    md = [
        "# gpu-check report",
        "",
        f"- date: {results['date']}; commit {commit}; mode {a.mode}; {a.seconds} s in all; verdict **{verdict}**",
        f"- GPU: {'; '.join(m['gpus']) or 'none'}",
        f"- CUDA: {m['cuda'] or 'n/a'}; torch: {m['torch'] or 'n/a'}",
        f"- CPU: {m['cpu']}, {m['cores']} cores; OS: {m['os']}",
        f"- reproduce: scripts/gpu-bundle.sh DIR (Debian 12), then scripts/gpu-check.sh --bundle DIR --out RESULTS"
        f"{' --dry-run' if a.mode == 'dry' else ''}",
        "",
        "## What ran",
        "",
        table(
            ["phase", "step", "status", "result", "s", "notes"],
            [
                [s.get("phase", ""), s["step"], s["status"], s.get("result", ""), s["seconds"], step_note(s)]
                for s in steps
            ],
        ),
        "",
        "Seconds by phase: " + ", ".join(f"{k} {v}" for k, v in results["phases"].items()) + ".",
        "",
    ]
    if problems:
        md += ["## Problems", ""] + [f"- {p}" for p in problems] + [""]
    if incomplete:
        md += ["## Not checked (no failure)", ""] + [f"- {p}" for p in incomplete] + [""]
    md += figures_markdown(steps)
    text = "\n".join(md) + "\n"
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(text)

    # stdout's tail is what comes back from the node: the figures, then the steps and the verdict.
    print("\n".join(figures_markdown(steps)))
    print(f"{'step':18} {'status':40} {'result':8} {'s':>5}")
    for s in steps:
        print(f"{s['step']:18} {s['status'][:40]:40} {s.get('result', ''):8} {s['seconds']:>5}")
    print(f"{'total':18} {'':40} {'':8} {a.seconds:>5}")
    print("phases (s): " + ", ".join(f"{k} {v}" for k, v in results["phases"].items()))
    for p in problems:
        print(f"PROBLEM: {p}")
    for p in incomplete:
        print(f"NOT CHECKED: {p}")
    print(f"gpu-check ({a.mode}): {verdict}; {a.out}/results.json, report.md, check.log")
    return 1 if problems else 0 if a.interim or not incomplete else 2


if __name__ == "__main__":
    raise SystemExit(main())
