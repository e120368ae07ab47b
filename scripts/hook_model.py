"""The DDP hook's device time per step by the cost model (docs/gpu.md, "The cost model"), from
what the cuda-host backend counts the CUDA path queues for the same calls: launches and elements
passed per step (StepStats), modelled as gradscope.modelled_device_ms(launches, elements), against
the bound of 4 ms a step. The model is tests/python/gpu/test_overlap.py's (LAYERS x Linear(WIDTH,
WIDTH), ReLU between, and a Linear(WIDTH, 10)) under DDP with 8 MiB buckets at world size 1, the
hook (METHOD at DENSITY) on backend cuda-host with device collectives, as NCCL runs it on a GPU.
The batch changes nothing the hook does (its gradients have the parameters' sizes): a small one
keeps the CPU's backward pass short. The first two steps are left out (the first makes what later
steps reuse; DDP regroups its buckets after it, and the second makes the new groups' own). Prints
one row per later step and the median; --json FILE writes them.

Usage: hook_model.py [--width 2048] [--layers 8] [--bucket-mb 8] [--method sidco-e] [--density 0.01]
                     [--steps 5] [--batch 16] [--json FILE]
"""

import argparse
import json
import statistics
import sys
import tempfile

BOUND_MS = 4.0  # issue 57's bound on the hook's compress and exchange a step on the overlap model


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--bucket-mb", type=float, default=8.0)
    ap.add_argument("--method", default="sidco-e")
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.width < 1 or a.layers < 1 or a.batch < 1 or a.bucket_mb <= 0:
        ap.error("--width, --layers, --batch must be at least 1 and --bucket-mb above 0")
    if a.steps < 3:
        ap.error("--steps must be at least 3: the first two make what later steps reuse, and are left out")
    return a


def run(a):
    import torch
    import torch.distributed as dist

    import gradscope
    import gradscope.ddp as gddp

    torch.manual_seed(0)
    layers = []
    for _ in range(a.layers):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(a.width, 10))
    rendezvous = tempfile.mkdtemp(prefix="gs-hook-model-")
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}/store", rank=0, world_size=1)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
        state = gddp.State(a.method, a.density, backend="cuda-host")
        state._group.device_collectives = True  # as NCCL's: the pairs gathered in device memory
        ddp.register_comm_hook(state, gddp.hook)
        x, y = torch.randn(a.batch, a.width), torch.randint(0, 10, (a.batch,))
        for _ in range(a.steps):
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            ddp.zero_grad(set_to_none=True)
        rows = []
        for s in state.steps[2:]:
            ms = gradscope.modelled_device_ms(s.launches, float(s.elements_passed))
            rows.append(
                {
                    "buckets": s.buckets,
                    "n": s.n,
                    "launches": s.launches,
                    "launches_per_bucket": s.launches / s.buckets,
                    "passes": s.elements_passed / s.n,
                    "modelled_ms": ms,
                }
            )
    finally:
        dist.destroy_process_group()
    params = sum(p.numel() for p in model.parameters())
    return {
        "model": f"{a.layers} x Linear({a.width}, {a.width}) + Linear({a.width}, 10)",
        "parameters": params,
        "bucket_mb": a.bucket_mb,
        "method": a.method,
        "density": a.density,
        "rows": rows,
        "modelled_ms_median": statistics.median(r["modelled_ms"] for r in rows),
        "bound_ms": BOUND_MS,
    }


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    out = run(a)
    print(
        f"{out['model']}: {out['parameters']} parameters, {out['bucket_mb']:g} MiB buckets, "
        f"{out['method']} at {out['density']:g}, cuda-host with device collectives"
    )
    print("| step | buckets | launches | per bucket | passes over the gradients | modelled ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for i, r in enumerate(out["rows"], start=2):
        print(
            f"| {i} | {r['buckets']} | {r['launches']} | {r['launches_per_bucket']:.1f} | {r['passes']:.2f} "
            f"| {r['modelled_ms']:.3f} |"
        )
    m = out["modelled_ms_median"]
    print(f"modelled: {m:.3f} ms a step (median), bound {BOUND_MS:g} ms: {'met' if m <= BOUND_MS else 'missed'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
