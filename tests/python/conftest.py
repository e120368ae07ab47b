"""Shared by the pytest suites of the gradscope package (run by ctest with PYTHONPATH=build/python
and GS_GRADSCOPE_BIN, the gradscope executable of the same build)."""

import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gradscope_bin():
    path = os.environ.get("GS_GRADSCOPE_BIN")
    if not path or not os.path.exists(path):
        pytest.fail("GS_GRADSCOPE_BIN must name the gradscope executable (ctest sets it)")
    return path


def run_workers(mode, world, tmp_path, *args, timeout=240):
    """Starts `world` ddp_worker.py processes (ranks 0..world-1) and waits for all of them;
    returns the output file of each rank."""
    return run_script("ddp_worker.py", mode, world, tmp_path, *args, timeout=timeout)


def run_script(script, mode, world, tmp_path, *args, timeout=240):
    """Starts `world` processes of `script` MODE RANK WORLD PORT OUT ARGS... (ranks 0..world-1)
    and waits for all of them, killing any still running after `timeout` seconds (a failure, not
    a hang); returns the output file of each rank."""
    port = free_port()
    outs = [str(tmp_path / f"{mode}-{world}-{r}.pt") for r in range(world)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, script), mode, str(r),
                               str(world), str(port), outs[r], *map(str, args)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
             for r in range(world)]
    logs = []
    try:
        for p in procs:
            try:
                logs.append(p.communicate(timeout=timeout)[0].decode(errors="replace"))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{script} {mode}: a worker ran past {timeout} s (hung?)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"worker {r} failed ({p.returncode}):\n{logs[r]}"
    return outs
