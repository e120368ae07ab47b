"""Where SIDCo's fit lands on the momentum-corrected accumulator (docs/algorithms.md, "SIDCo's
estimate on the momentum-corrected accumulator"). One process trains a model of
scripts/study_models.py with DGC's momentum correction and factor masking over the whole model
(u = m u + g, acc = e + u, exact top-k of acc sent, e and u zeroed where sent), and at every step
asks gradscope.select for SIDCo's threshold on acc as published (the fit alone, no correction):
its ratio to the k-th largest |acc| (the threshold of the target count) and the share of the
target count it selects.

    PYTHONPATH=build/python python3 scripts/accumulator_fit.py [--model vit] [--steps 300]
        [--method sidco-e] [--ratio 0.01] [--momentum 0.9] [--seed 1]

Prints the 5th, 50th and 95th percentiles of both over the steps past the first.
"""

import argparse
import os
import statistics
import sys

import torch

import gradscope

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_models  # noqa: E402
from controller import LR  # noqa: E402


def percentiles(values):
    v = sorted(values)
    return [v[min(len(v) - 1, int(q * len(v)))] for q in (0.05, 0.5, 0.95)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="vit", choices=list(study_models.TASKS))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--method", default="sidco-e", choices=("sidco-e", "sidco-p", "sidco-gp"))
    p.add_argument("--ratio", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    opts = p.parse_args()
    if opts.steps < 2:
        raise SystemExit(f"--steps {opts.steps}: at least 2 (the first step has no accumulator yet)")
    torch.manual_seed(opts.seed)
    task = study_models.task(opts.model, opts.seed, 0, 1)
    model = task.model()
    params = [q for q in model.parameters() if q.requires_grad]
    n = sum(q.numel() for q in params)
    k = max(1, int(n * opts.ratio))
    u, e = torch.zeros(n), torch.zeros(n)
    over_kth, quality = [], []
    for step in range(opts.steps):
        task.before_step(model, step)
        loss = task.loss(model, step)
        for q in params:
            q.grad = None
        loss.backward()
        g = torch.cat([(q.grad if q.grad is not None else torch.zeros_like(q)).reshape(-1) for q in params])
        u = opts.momentum * u + g
        acc = e + u
        top = acc.abs().topk(k)
        if step > 0:
            _, _, info = gradscope.select(acc, opts.method, opts.ratio, sidco_as_published=True)
            over_kth.append(info["threshold"] / float(top.values[-1]))
            quality.append(info["quality"])
        update = torch.zeros(n)
        update[top.indices] = acc[top.indices]
        e = acc.clone()
        e[top.indices] = 0
        u[top.indices] = 0
        with torch.no_grad():
            at = 0
            for q in params:
                q -= LR[opts.model] * update[at : at + q.numel()].view_as(q)
                at += q.numel()
    print(f"{opts.model}, {opts.method} at {opts.ratio}, momentum {opts.momentum}, {opts.steps} steps, n = {n}")
    print("fit threshold / k-th largest |acc|, p5 p50 p95: " + " ".join(f"{v:.3f}" for v in percentiles(over_kth)))
    print("fit's selection / target count,     p5 p50 p95: " + " ".join(f"{v:.3f}" for v in percentiles(quality)))
    print(
        f"steps within [0.8, 1.25]: {sum(0.8 <= x <= 1.25 for x in quality) / len(quality):.1%}; "
        f"median {statistics.median(quality):.3f}"
    )


if __name__ == "__main__":
    main()
