"""Shared by the pytest suites of the gradscope package (run by ctest with PYTHONPATH=build/python
and GS_GRADSCOPE_BIN, the gradscope executable of the same build)."""

import itertools
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


_rendezvous = itertools.count()


def rendezvous(tmp_path):
    """A new torch.distributed rendezvous (init_method) in tmp_path. A file, not a port found free
    and then released: another test running at the same time cannot take it between the two."""
    return f"file://{tmp_path / f'rendezvous-{next(_rendezvous)}'}"


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
    """Starts `world` processes of `script` MODE RANK WORLD RENDEZVOUS OUT ARGS... (ranks 0..world-1)
    and waits for all of them, killing any still running after `timeout` seconds (a failure, not
    a hang); returns the output file of each rank."""
    url = rendezvous(tmp_path)
    outs = [str(tmp_path / f"{mode}-{world}-{r}.pt") for r in range(world)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, script), mode, str(r),
                               str(world), url, outs[r], *map(str, args)],
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
