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


# The workers' processes fork from one server per pytest process that has imported torch and
# gradscope (multiprocessing's forkserver, single-threaded when it forks): a worker then starts in
# milliseconds instead of importing torch anew. GS_TEST_WORKER_EXEC=1 starts each as a process of
# its own (python SCRIPT ...), as before.
_WORKER_CONTEXT = None


def _worker_context():
    global _WORKER_CONTEXT
    if _WORKER_CONTEXT is None:
        import multiprocessing

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "torch.distributed", "gradscope", "gradscope.ddp", "forked_worker"])
        _WORKER_CONTEXT = ctx
    return _WORKER_CONTEXT


def _start(script, argv, env, log):
    """A running worker: (wait(timeout) -> exit code or None when still running, kill())."""
    if os.environ.get("GS_TEST_WORKER_EXEC") == "1":
        with open(log, "wb") as f:
            p = subprocess.Popen([sys.executable, script, *argv], stdout=f, stderr=subprocess.STDOUT, env=env)

        def wait(timeout):
            try:
                return p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return None

        return wait, p.kill
    import forked_worker

    p = _worker_context().Process(target=forked_worker.run, args=(script, argv, env, log))
    p.start()

    def wait(timeout):
        p.join(timeout)
        return p.exitcode

    return wait, p.kill


def run_script(script, mode, world, tmp_path, *args, timeout=240):
    """Starts `world` processes of `script` MODE RANK WORLD RENDEZVOUS OUT ARGS... (ranks 0..world-1)
    and waits for all of them, killing any still running after `timeout` seconds (a failure, not
    a hang); returns the output file of each rank."""
    url = rendezvous(tmp_path)
    outs = [str(tmp_path / f"{mode}-{world}-{r}.pt") for r in range(world)]
    logs = [str(tmp_path / f"{mode}-{world}-{r}.log") for r in range(world)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    workers = [
        _start(os.path.join(HERE, script), [mode, str(r), str(world), url, outs[r], *map(str, args)], env, logs[r])
        for r in range(world)
    ]
    codes = []
    try:
        for wait, _ in workers:
            code = wait(timeout)
            if code is None:
                pytest.fail(f"{script} {mode}: a worker ran past {timeout} s (hung?)")
            codes.append(code)
    finally:
        for wait, kill in workers:
            if wait(0) is None:
                kill()
    for r, code in enumerate(codes):
        if code != 0:
            with open(logs[r], errors="replace") as f:
                assert code == 0, f"worker {r} failed ({code}):\n{f.read()}"
    return outs
