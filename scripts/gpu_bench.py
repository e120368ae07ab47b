"""The GPU benchmarks of scripts/gpu-check.sh, written as one JSON object (--out):

- copy: the device's copy bandwidth, a large device-to-device copy, bytes read plus written;
- kernels: gs_kernels_bench --backend cuda (its rows as it gives them) and its read pass against
  that bandwidth;
- topk: torch.topk(|g|, k, sorted=False) beside gradscope's sidco-topk (exact top-k, selection
  copied to the host as a compressor gets it), sidco-e (the threshold alone and with its
  selection, driven from the host stage by stage; and resident: Selector::select, every stage and
  the count correction decided on the device, the selection left there as torch.topk leaves its
  own), gradscope's own exact top-k and sidco-topk resident as the compressors now run it (every
  decision on the device, its bound from the sample included), at the same n and density;
- ddp: ms per training step (forward, backward, optimizer step; CUDA-synchronised) of torchvision's
  ResNet-18 under DDP over NCCL with world size 1: plain DDP, PowerSGD rank 4, and the gradscope
  hook (sidco-e at density 0.01 on backend cuda) with the bytes its state reports per step.

Each part is measured on its own: one that fails is reported in "errors" (exit status 1) and the
others still run. Usage: gpu_bench.py --kernels-bench PATH --out FILE [--sizes 1e7,1e8]
[--densities 0.01,0.001] [--steps 20]
"""

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback


def median_ms(fn, reps):
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth():
    import torch

    n = 1 << 29  # 2 GiB of float32 read and 2 GiB written
    src = torch.rand(n, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), 20)
    src = dst = None  # freed before the next part
    torch.cuda.empty_cache()
    moved = 2 * 4 * n
    return {"bytes_read_and_written": moved, "ms": ms, "gb_per_s": moved / (ms * 1e-3) / 1e9}


PROGRESS = re.compile(r"^(\S+) n=(\d+) d=(\S+): (\S+) ms$")


def progress_rows(stderr):
    """The rows gs_kernels_bench wrote to stderr as it measured them (method, n, density, median)."""
    return [
        {"method": m.group(1), "n": int(m.group(2)), "density": float(m.group(3)), "median_ms": float(m.group(4))}
        for m in map(PROGRESS.match, stderr.splitlines())
        if m
    ]


def kernels(bench, sizes, densities, copy, errors):
    """gs_kernels_bench's rows; where it dies midway, the rows it measured before, and its error in
    errors["kernels"]."""
    try:
        run = subprocess.run(
            [
                bench,
                "--backend",
                "cuda",
                "--sizes",
                ",".join(f"{n:g}" for n in sizes),
                "--densities",
                ",".join(f"{d:g}" for d in densities),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
        rc, out, err = run.returncode, run.stdout, run.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timed out after 90 s", ""
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    if rc == 0:
        rows = json.loads(out)["rows"]
    else:
        rows = progress_rows(err)
        errors["kernels"] = f"gs_kernels_bench failed ({rc}) after {len(rows)} rows: {err[-2000:]}"
        print(errors["kernels"], file=sys.stderr)
    reads = []
    for r in rows:
        if r["method"] == "read":
            gbs = 4 * r["n"] / (r["median_ms"] * 1e-3) / 1e9
            reads.append(
                {
                    "n": r["n"],
                    "ms": r["median_ms"],
                    "gb_per_s": gbs,
                    "of_copy_bandwidth": gbs / copy["gb_per_s"] if copy else None,
                }
            )
    return {"rows": rows, "read": reads}


def topk(sizes, densities, rows):
    import torch

    def row(method, n, d):
        return next(
            (
                r["median_ms"]
                for r in rows
                if r["method"] == method and r["n"] == n and abs(r["density"] - d) <= 1e-12 * max(1.0, d)
            ),
            None,
        )

    out = []
    for n in sizes:
        n = int(n)
        g = torch.distributions.Laplace(0.0, 1e-3).sample((n,)).to("cuda")  # the bench's law, not its bits
        for d in densities:
            k = max(1, math.floor(n * d))
            reps = 10 if n >= 10**8 else 30
            t = median_ms(lambda: torch.topk(g.abs(), k, sorted=False), reps)
            out.append(
                {
                    "n": n,
                    "density": d,
                    "k": k,
                    "torch_topk_ms": t,
                    "sidco_topk_ms": row("sidco-topk", n, d),
                    "sidco_e_threshold_ms": row("sidco-e", n, d),
                    "sidco_e_select_ms": row("sidco-e+compact:full", n, d),
                    "gradscope_topk_ms": row("topk", n, d),
                    "sidco_e_resident_ms": row("sidco-e:resident", n, d),
                    "gradscope_topk_resident_ms": row("topk:resident", n, d),
                    "sidco_topk_resident_ms": row("sidco-topk:resident", n, d),
                    "read_ms": row("read", n, 0.0),
                }
            )
        g = None
        torch.cuda.empty_cache()
    return out


def ddp(steps, warmup=5, batch=32, image=224, device="cuda"):
    """device "cpu" (Gloo, the hook on backend cpu) only checks this code on a machine without a GPU."""
    import torch
    import torch.distributed as dist

    torch.backends.cudnn.benchmark = True
    rendezvous = tempfile.mkdtemp(prefix="gs-bench-")
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{rendezvous}/store", rank=0, world_size=1)
    rows = []
    try:
        torch.manual_seed(0)
        x = torch.randn(batch, 3, image, image, device=device)
        y = torch.randint(0, 1000, (batch,), device=device)
        for name, hook in [
            ("plain DDP", None),
            ("PowerSGD rank 4", "powersgd"),
            ("gradscope sidco-e 0.01", "gradscope"),
        ]:
            try:
                rows.append(ddp_mode(name, hook, x, y, steps, warmup, device))
            except Exception:  # this mode's row says why; the others still run
                rows.append({"mode": name, "error": traceback.format_exc(limit=3)})
            if device == "cuda":
                torch.cuda.empty_cache()
    finally:
        dist.destroy_process_group()
    return {
        "model": "torchvision resnet18 (no weights)",
        "batch": batch,
        "input": f"3x{image}x{image}",
        "world_size": 1,
        "backend": backend,
        "optimizer": "SGD lr 0.01 momentum 0.9",
        "rows": rows,
    }


def ddp_mode(name, hook, x, y, steps, warmup, device):
    """One row of ddp(): a fresh ResNet-18 under DDP with `hook` (None: DDP's own all-reduce)."""
    import torch
    import torchvision
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).to(device)
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0] if device == "cuda" else None)
    state = None
    if hook == "powersgd":
        state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=4, start_powerSGD_iter=2)
        net.register_comm_hook(state, powerSGD.powerSGD_hook)
    elif hook == "gradscope":
        import gradscope.ddp

        state = gradscope.ddp.State("sidco-e", 0.01, backend=device)
        net.register_comm_hook(state, gradscope.ddp.hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    times = []
    for step in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        sync()
        if step >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    r = {
        "mode": name,
        "ms_per_step_median": statistics.median(times),
        "ms_per_step_mean": statistics.fmean(times),
        "steps": steps,
        "warmup_steps": warmup,
    }
    if hook == "gradscope":
        # host_device_* arrive with the state's PCIe accounting; absent before it, they read None.
        s = state.summary()
        r.update(
            {
                key: s.get(key)
                for key in (
                    "host_device_bytes_per_step",
                    "host_device_gathered_bytes_per_step",
                    "dense_bytes_per_step",
                    "bytes_per_step",
                    "density_mean",
                    "hook_ms_per_step",
                    "host_syncs_per_step",
                )
            }
        )
        later = state.steps[1:]  # the first step's settings agreement goes through the host
        r["buckets"] = later[-1].buckets if later else None
        r["host_syncs_per_bucket_after_step_0"] = max((x.host_syncs / x.buckets for x in later), default=None)
        if r["host_device_bytes_per_step"] is not None and r["dense_bytes_per_step"]:
            r["host_device_of_dense"] = r["host_device_bytes_per_step"] / r["dense_bytes_per_step"]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels-bench", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="1e7,1e8")
    ap.add_argument("--densities", default="0.01,0.001")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    sizes = [int(float(s)) for s in a.sizes.split(",")]
    densities = [float(d) for d in a.densities.split(",")]

    import torch

    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "errors": {}}

    def part(name, fn):
        t0 = time.time()
        try:
            out[name] = fn()
        except Exception:  # reported, and the other parts still run
            out["errors"][name] = traceback.format_exc(limit=3)
            print(out["errors"][name], file=sys.stderr)
        print(f"gpu_bench: {name}: {time.time() - t0:.1f} s", file=sys.stderr)

    part("copy", copy_bandwidth)
    part("kernels", lambda: kernels(a.kernels_bench, sizes, densities, out.get("copy"), out["errors"]))
    part("topk", lambda: topk(sizes, densities, out.get("kernels", {}).get("rows", [])))
    part("ddp", lambda: ddp(a.steps))
    for r in out.get("ddp", {}).get("rows", []):
        if "error" in r:
            out["errors"]["ddp: " + r["mode"]] = r["error"]
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
