"""A worker script run in a process forked from a server that has imported torch and gradscope
once (conftest.run_script): the same script, arguments and environment as a process of its own,
without each worker paying torch's import (about 1.6 s of CPU a process on the developers'
machine, most of a short multi-process test's time). Nothing here imports pytest."""

import os
import runpy
import sys


def run(script, argv, env, log):
    """In the forked child: stdout and stderr into LOG, the environment ENV, then SCRIPT as
    __main__ with ARGV. An exception or SystemExit sets the exit code as for `python SCRIPT`."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    # libgomp read OMP_NUM_THREADS when the server loaded it; the child's own setting is applied here.
    threads = env.get("OMP_NUM_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
