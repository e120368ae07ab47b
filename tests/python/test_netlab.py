"""scripts/netlab.py, the network lab: a torch.distributed Gloo run over shaped links, the
environment and placeholders each worker gets, failure propagation, and that every exit path (the
end, a failed or killed worker, SIGINT and SIGTERM to the lab, --timeout, an error while building)
leaves no namespace, link or process behind; --cleanup; the one-line refusal where it cannot run.
Each test that builds a lab skips with the lab's own one-line reason where it cannot run (not
root, no namespaces, no tbf)."""

import importlib.util
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NETLAB = ROOT / "scripts" / "netlab.py"
WORKER = pathlib.Path(__file__).resolve().parent / "netlab_worker.py"
_spec = importlib.util.spec_from_file_location("netlab", NETLAB)
netlab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(netlab)


def need_lab(rate="none"):
    reason = netlab.unavailable_reason(rate)
    if reason:
        pytest.skip(reason)


def host_state():
    """What a lab could leave behind on the host: the namespaces and the root namespace's links."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return sorted(ns.splitlines()), sorted(line.split("\\")[0].split(" <")[0] for line in links.splitlines())


def namespaces():
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in ns.splitlines()]


def alive(pid):
    """Whether process pid runs (a zombie, which only waits to be reaped, does not)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def assert_dead(pids):
    deadline = time.monotonic() + 5
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], "a worker process survived the lab"


def lab_argv(*args):
    return [sys.executable, str(NETLAB), *args]


def run_lab(*args, timeout=90, env=None):
    """Runs the lab to its end; checks that it left the host as it found it."""
    before = host_state()
    start = time.monotonic()
    r = subprocess.run(lab_argv(*args), capture_output=True, text=True, timeout=timeout, env=env)
    r.elapsed = time.monotonic() - start
    assert host_state() == before, f"the lab left something behind:\n{r.stderr}"
    return r


def pids_in(directory):
    return [int(p.read_text()) for p in pathlib.Path(directory).glob("pid-*")]


# A worker's shell: writes its own pid and those of two children (one in its process group, one
# in a session of its own, which only the namespace sweep reaches), then runs BODY.
def worker_sh(tmp_path, body):
    d = tmp_path
    return [
        "sh",
        "-c",
        f"echo $$ > {d}/pid-{{rank}}; sleep 60 & echo $! > {d}/pid-{{rank}}-child; "
        f"setsid sleep 60 & echo $! > {d}/pid-{{rank}}-session; {body}",
    ]


def test_torch_gloo_all_reduce_over_100mbit_links(tmp_path):
    pytest.importorskip("torch")
    need_lab("100mbit")
    stats = tmp_path / "stats.json"
    r = run_lab(
        "--rate", "100mbit", "--workers", "2", "--stats", str(stats), "--", sys.executable, str(WORKER), timeout=180
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # Each worker's link carried the 1 MiB all-reduce (a 2-worker ring: 1 MiB each way) and the
    # rendezvous, headers included: the kernel's counters, not the worker's own account.
    counted = json.loads(stats.read_text())
    for key in ("tx_bytes", "rx_bytes"):
        assert len(counted[key]) == 2 and all(2**20 <= b <= 2.2 * 2**20 for b in counted[key]), counted
    rates = re.findall(
        r"^netlab: worker (\d) link 100mbit: " r"measured ([\d.]+) Mbit/s up, ([\d.]+) Mbit/s down$", r.stderr, re.M
    )
    assert [w for w, _, _ in rates] == ["0", "1"], r.stderr
    for _, up, down in rates:
        assert 60 <= float(up) <= 110 and 60 <= float(down) <= 110, r.stderr
    assert re.search(r"^\[rank 0\] netlab_worker: ok: sum 3 over 2 workers", r.stdout, re.M), r.stdout
    for rank in (0, 1):
        seen = re.search(rf"^\[rank {rank}\] netlab_worker: (.*)$", r.stdout, re.M).group(1)
        assert (
            f"RANK={rank} WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=10.77.0.1 "
            f"MASTER_PORT=29500 GLOO_SOCKET_IFNAME=gsl" in seen
            and seen.endswith(f"w{rank}")
        ), seen


def test_environment_placeholders_and_output(tmp_path):
    need_lab()
    script = (
        "echo env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
        "$GLOO_SOCKET_IFNAME; "
        "echo args {rank} {world_size} {master_addr} {master_port} {ifname} {other}"
    )
    r = run_lab("--rate", "none", "--no-measure", "--workers", "3", "--port", "1234", "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    assert "measured" not in r.stderr
    lab = re.search(r"gsl(\d+)w0", r.stdout).group(1)
    for rank in range(3):
        ifname = f"gsl{lab}w{rank}"
        assert f"[rank {rank}] env {rank} 3 0 1 10.77.0.1 1234 {ifname}\n" in r.stdout, r.stdout
        assert f"[rank {rank}] args {rank} 3 10.77.0.1 1234 {ifname} {{other}}\n" in r.stdout, r.stdout

    logs = tmp_path / "logs"
    r = run_lab(
        "--rate",
        "none",
        "--no-measure",
        "--workers",
        "2",
        "--logs",
        str(logs),
        "--",
        "sh",
        "-c",
        "echo out {rank}; echo err {rank} >&2",
    )
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    for rank in (0, 1):
        assert (logs / f"rank-{rank}.log").read_text() == f"out {rank}\nerr {rank}\n"


# Above the rate means the shaping is missing; the lower bounds leave room for a loaded machine
# (1gbit competes with whatever else runs for the CPU).
@pytest.mark.parametrize("rate, low", [("10mbit", 0.6), ("1gbit", 0.3)])
def test_measures_and_reports_each_link(rate, low):
    need_lab(rate)
    r = run_lab("--rate", rate, "--workers", "1", "--", "true")
    assert r.returncode == 0, r.stderr
    line = re.search(
        rf"^netlab: worker 0 link {rate}: measured ([\d.]+) (Mbit|Gbit)/s up, " rf"([\d.]+) (Mbit|Gbit)/s down",
        r.stderr,
        re.M,
    )
    assert line, r.stderr
    asked = netlab.parse_rate(rate) / 1e6
    for value, unit in ((line.group(1), line.group(2)), (line.group(3), line.group(4))):
        mbit = float(value) * (1000 if unit == "Gbit" else 1)
        assert low * asked <= mbit <= 1.1 * asked, r.stderr


def test_a_failed_worker_stops_the_others(tmp_path):
    need_lab()
    body = "if [ {rank} = 1 ]; then sleep 1; exit 7; fi; wait"
    r = run_lab("--rate", "none", "--no-measure", "--workers", "3", "--", *worker_sh(tmp_path, body))
    assert r.returncode == 1
    assert "netlab: worker 1 failed (exit status 7); stopping the others" in r.stderr.splitlines(), r.stderr
    assert r.elapsed < 20, f"the others ran {r.elapsed:.0f} s (they sleep 60)"
    assert len(pids_in(tmp_path)) == 9
    assert_dead([int(p.read_text()) for p in tmp_path.iterdir()])


def test_a_killed_worker_stops_the_others_even_one_that_ignores_sigterm(tmp_path):
    need_lab()
    body = "if [ {rank} = 0 ]; then sleep 1; kill -KILL $$; fi; trap '' TERM; sleep 60"
    r = run_lab("--rate", "none", "--no-measure", "--workers", "2", "--", *worker_sh(tmp_path, body))
    assert r.returncode == 1
    assert "netlab: worker 0 failed (killed by signal 9 (SIGKILL)); stopping the others" in r.stderr, r.stderr
    assert r.elapsed < 20, f"the others ran {r.elapsed:.0f} s (they sleep 60)"
    assert_dead([int(p.read_text()) for p in tmp_path.iterdir()])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_lab_removes_it(tmp_path, sig):
    need_lab()
    before = host_state()
    lab = subprocess.Popen(
        lab_argv("--rate", "none", "--no-measure", "--workers", "2", "--", *worker_sh(tmp_path, "wait")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(tmp_path.iterdir())) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(tmp_path.iterdir())) == 6, "the workers did not start"
        assert host_state() != before
        lab.send_signal(sig)
        sent = time.monotonic()
        out, err = lab.communicate(timeout=30)
        assert time.monotonic() - sent < 10
    finally:
        lab.kill()
    assert lab.returncode == 128 + sig
    assert f"netlab: stopped by {sig.name}; removing the lab" in err.splitlines(), err
    assert host_state() == before
    assert_dead([int(p.read_text()) for p in tmp_path.iterdir()])


def test_timeout_kills_the_workers(tmp_path):
    need_lab()
    r = run_lab(
        "--rate", "none", "--no-measure", "--workers", "2", "--timeout", "2", "--", *worker_sh(tmp_path, "wait")
    )
    assert r.returncode == 124
    expired = "netlab: --timeout 2 s expired with worker(s) 0, 1 still running; stopping them"
    assert expired in r.stderr.splitlines(), r.stderr
    assert r.elapsed < 20
    assert_dead([int(p.read_text()) for p in tmp_path.iterdir()])


def test_an_error_while_building_removes_the_half_built_lab(tmp_path):
    need_lab("100mbit")
    # A tc that fails on worker 1's links, after the switch and worker 0 are built, and notes the
    # namespaces there were at that moment.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "tc").write_text(
        f'#!/bin/sh\ncase "$*" in *w1*) ip netns list > {tmp_path}/at-failure; '
        f"echo 'simulated failure' >&2; exit 2;; esac\n"
        f"exec {shutil.which('tc')} \"$@\"\n"
    )
    (fake / "tc").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    r = run_lab("--rate", "100mbit", "--workers", "2", "--", "true", env=env)
    assert r.returncode == 4, r.stderr
    assert re.search(r"^netlab: error: .*simulated failure; removing the lab$", r.stderr, re.M), r.stderr
    built = (tmp_path / "at-failure").read_text()
    assert all(re.search(rf"^gsl\d+-{n}\b", built, re.M) for n in ("sw", "w0", "w1")), built


def test_cleanup_and_a_second_lab_remove_only_their_own(tmp_path):
    need_lab()
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover, foreign = f"gsl{dead.pid}-w0", "netlabtest-foreign"
    live = None
    try:
        for ns in (leftover, foreign):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        stray = subprocess.Popen(["ip", "netns", "exec", leftover, "sleep", "60"], start_new_session=True)
        live = subprocess.Popen(
            lab_argv("--rate", "none", "--no-measure", "--workers", "1", "--", "sleep", "60"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        mine = f"gsl{live.pid}-w0"
        deadline = time.monotonic() + 30
        while mine not in namespaces() and time.monotonic() < deadline:
            time.sleep(0.05)
        r = subprocess.run(lab_argv("--cleanup"), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert f"netlab: removed {leftover} (lab pid {dead.pid} is gone)" in r.stderr.splitlines(), r.stderr
        names = namespaces()
        assert leftover not in names and foreign in names and mine in names, names
        stray.wait(timeout=5)
        # Another lab beside the live one removes only its own namespaces.
        other = run_lab("--rate", "none", "--no-measure", "--workers", "2", "--", "true")
        assert other.returncode == 0, other.stderr
        assert mine in namespaces() and live.poll() is None
    finally:
        if live:
            live.terminate()
            live.wait(timeout=30)
        subprocess.run(["ip", "netns", "del", foreign])
        subprocess.run(["ip", "netns", "del", leftover], capture_output=True)
    assert not any(n.startswith(f"gsl{live.pid}-") for n in namespaces())


def test_cannot_run_says_why_in_one_line(tmp_path):
    need_lab("100mbit")
    assert netlab.unavailable_reason("100mbit") is None
    # Not root: setpriv or runuser runs it as nobody.
    if shutil.which("setpriv"):
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    elif shutil.which("runuser"):
        as_nobody = ["runuser", "-u", "nobody", "--"]
    else:
        pytest.skip("neither setpriv nor runuser is installed")
    probe = subprocess.run([*as_nobody, sys.executable, "-c", f"open({str(NETLAB)!r}).close()"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"user nobody cannot run {sys.executable} on {NETLAB}")
    r = subprocess.run(
        [*as_nobody, *lab_argv("--rate", "100mbit", "--workers", "2", "--", "true")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert r.returncode == 3
    assert r.stderr.splitlines() == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith("netlab: needs root (uid 0)"), r.stderr
    # No tbf: a tc that cannot add one. The probe is removed.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "tc").write_text("#!/bin/sh\necho 'Error: Specified qdisc kind is unknown.' >&2\nexit 2\n")
    (fake / "tc").chmod(0o755)
    r = run_lab(
        "--rate", "100mbit", "--workers", "2", "--", "true", env=dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    )
    assert r.returncode == 3
    assert r.stderr.splitlines() == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith("netlab: the tbf qdisc is not available: ") and "kind is unknown" in r.stderr
