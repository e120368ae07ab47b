"""The package as a user installs it: `pip install --no-build-isolation .` into a virtual
environment made with --system-site-packages (which sees Debian's torch), and `cmake --install`
into a prefix; each then imported, and trained with under DDP, from outside the source tree with
no PYTHONPATH. The pip build is a fresh CMake build of the extension, kept short: CUDA off and no
optimisation (CMAKE_BUILD_TYPE=None; the suite's main build compiles the CUDA sources and the
optimised code, and the smoke run's five steps of a small model do not need it)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import rendezvous

ROOT = Path(__file__).resolve().parents[2]

SMOKE = textwrap.dedent("""
    import sys
    import torch
    import torch.distributed as dist
    import gradscope
    import gradscope.ddp

    rank, world, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = gradscope.ddp.State("sidco-e", 0.05, timeout=60)
    ddp.register_comm_hook(state, gradscope.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(5):
        opt.zero_grad()
        ddp(torch.randn(16, 32, generator=gen)).pow(2).mean().backward()
        opt.step()
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    all_params = [torch.empty_like(params) for _ in range(world)]
    dist.all_gather(all_params, params)
    assert all(torch.equal(p, all_params[0]) for p in all_params), "replicas differ"
    if rank == 0:
        print("module", gradscope.__file__)
        print("steps", state.summary()["steps"])
    dist.barrier()
    dist.destroy_process_group()
""")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


def make_venv(path):
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(path)], check=True)
    return path / "bin" / "python"


def ddp_smoke(python, where):
    """Two processes of SMOKE, run in `where` (outside the tree); returns rank 0's output."""
    script = where / "smoke.py"
    script.write_text(SMOKE)
    url = rendezvous(where)
    procs = [subprocess.Popen([str(python), str(script), str(r), "2", url], cwd=where, env=clean_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    try:
        outs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    return outs[0]


def assert_no_testing_module(prefix):
    """The package installed under `prefix` has the extension and not the tests' module
    (gradscope._testing, which the build tree alone holds)."""
    package = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages" / "gradscope"
    assert list(package.glob("_gradscope*.so")), sorted(p.name for p in package.iterdir())
    assert not list(package.glob("_testing*")), sorted(p.name for p in package.iterdir())


def test_pip_install_into_a_venv_then_ddp_from_outside_the_tree(tmp_path):
    python = make_venv(tmp_path / "venv")
    env = clean_env(GS_CMAKE_ARGS="-DGS_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=None", GS_JOBS="2")
    subprocess.run([str(python), "-m", "pip", "install", "--no-build-isolation", "--no-index", "-q", str(ROOT)],
                   cwd=tmp_path, env=env, check=True, timeout=1800)
    out = ddp_smoke(python, tmp_path)
    assert f"module {tmp_path / 'venv'}" in out, out  # the venv's copy, not the tree's
    assert "steps 5" in out, out
    assert_no_testing_module(tmp_path / "venv")


def test_cmake_install_puts_the_package_in_the_prefix_site_packages(tmp_path):
    build = os.environ.get("GS_BUILD_DIR")
    assert build, "GS_BUILD_DIR must name the CMake build tree (ctest sets it)"
    python = make_venv(tmp_path / "prefix")
    subprocess.run(["cmake", "--install", build, "--prefix", str(tmp_path / "prefix")], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    assert (tmp_path / "prefix" / "lib" / version / "site-packages" / "gradscope" / "ddp.py").exists()
    out = ddp_smoke(python, tmp_path)
    assert f"module {tmp_path / 'prefix'}" in out, out
    assert_no_testing_module(tmp_path / "prefix")
