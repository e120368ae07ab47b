"""The package as a user installs it: `pip install --no-build-isolation .` into a virtual
environment made with --system-site-packages (which sees Debian's torch), and `cmake --install`
into a prefix; each then imported, and trained with under DDP, from outside the source tree with
no PYTHONPATH. The pip build is a CMake build of its own (configured, built and installed by
setup.py), kept short: where the suite's build compiles through ccache, pip's is configured as that
one (generator, CUDA, its architectures, GS_CCACHE), so that ccache hands it the objects the
suite's build compiled from the same sources with the same flags; otherwise CUDA off and no
optimisation (the smoke run's five steps of a small model need neither)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import rendezvous

ROOT = Path(__file__).resolve().parents[2]

SMOKE = textwrap.dedent(
    """
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
"""
)


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
    procs = [
        subprocess.Popen(
            [str(python), str(script), str(r), "2", url],
            cwd=where,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
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


def cmake_cache(build):
    """{name: value} of BUILD's CMakeCache.txt."""
    entries = {}
    for line in (Path(build) / "CMakeCache.txt").read_text().splitlines():
        if line and line[0] not in "#/" and "=" in line and ":" in line.split("=", 1)[0]:
            key, value = line.split("=", 1)
            entries[key.split(":", 1)[0]] = value
    return entries


def pip_cmake_args(build):
    """GS_CMAKE_ARGS for pip's build: the suite's build's settings where that one compiles through
    ccache (GS_CCACHE: its objects are then pip's too), else the least that builds the extension."""
    cache = cmake_cache(build) if build else {}
    if cache.get("GS_CCACHE") != "ON":
        return "-DGS_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=None"
    # The same generator too: ccache's base_dir makes the paths relative to where the compiler
    # runs, the build folder with Ninja and each target's folder with Makefiles.
    args = [
        "-G",
        f"'{cache['CMAKE_GENERATOR']}'",
        "-DGS_CCACHE=ON",
        f"-DCMAKE_BUILD_TYPE={cache['CMAKE_BUILD_TYPE']}",
        f"-DGS_ENABLE_CUDA={cache['GS_ENABLE_CUDA']}",
    ]
    if cache["GS_ENABLE_CUDA"] == "ON":
        args.append(f"-DCMAKE_CUDA_ARCHITECTURES={cache['CMAKE_CUDA_ARCHITECTURES']}")
    return " ".join(args)


def test_pip_install_into_a_venv_then_ddp_from_outside_the_tree(tmp_path):
    python = make_venv(tmp_path / "venv")
    env = clean_env(GS_CMAKE_ARGS=pip_cmake_args(os.environ.get("GS_BUILD_DIR")), GS_JOBS="2")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-build-isolation", "--no-index", "-q", str(ROOT)],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=1800,
    )
    out = ddp_smoke(python, tmp_path)
    assert f"module {tmp_path / 'venv'}" in out, out  # the venv's copy, not the tree's
    assert "steps 5" in out, out
    assert_no_testing_module(tmp_path / "venv")


def test_cmake_install_puts_the_package_in_the_prefix_site_packages(tmp_path):
    build = os.environ.get("GS_BUILD_DIR")
    assert build, "GS_BUILD_DIR must name the CMake build tree (ctest sets it)"
    python = make_venv(tmp_path / "prefix")
    subprocess.run(
        ["cmake", "--install", build, "--prefix", str(tmp_path / "prefix")],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    assert (tmp_path / "prefix" / "lib" / version / "site-packages" / "gradscope" / "ddp.py").exists()
    out = ddp_smoke(python, tmp_path)
    assert f"module {tmp_path / 'prefix'}" in out, out
    assert_no_testing_module(tmp_path / "prefix")
