"""SIDCo's one-shot quality (achieved / target density) against its stage count, on real gradients
of models gradscope did not write: torchvision's ResNet-18, a Transformer encoder and an LSTM, each
trained a few steps on Fashion-MNIST, then one whole-model gradient (and its largest layer) read
by gradscope.select at densities 0.01 and 0.001 with 1 to 5 stages. It is the evidence behind the
default stage count of gradscope.select and gradscope.fit (docs/python.md).

    PYTHONPATH=build/python python3 scripts/one_shot_stages.py [--steps 5] [--seed 1]
        [--ratios 0.01,0.001] [--stages 1,2,3,4,5] [--check 0.4,2.5]

--seed makes other weights and batches (the table in docs/python.md used seed 1; a check of the
default on data it was not chosen on uses another); --check LO,HI exits 1 unless the default stage
count's quality lies in [LO, HI] everywhere, --median LO,HI unless its median does; --published runs
SIDCo as published (without the count correction, docs/algorithms.md).
"""

import sys

import argparse
import math
import statistics

import torch
import torchvision

import gradscope


class Encoder(torch.nn.Module):
    """Each image as 28 tokens (its rows) through a 2-layer Transformer encoder."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(28, 64)
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x.squeeze(1))).mean(1))


class Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(28, 128, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.lstm(x.squeeze(1))[0][:, -1])


def resnet18():
    m = torchvision.models.resnet18(num_classes=10)
    m.conv1 = torch.nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    return m


def gradients(model, x, y, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for s in range(steps + 1):
        idx = torch.arange(s * 32, (s + 1) * 32)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        if s < steps:
            opt.step()
    grads = [p.grad.flatten() for p in model.parameters() if p.grad is not None]
    return {"whole model": torch.cat(grads), "largest layer": max(grads, key=lambda g: g.numel())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ratios", default="0.01,0.001")
    ap.add_argument("--stages", default="1,2,3,4,5")
    ap.add_argument("--check", default=None, help="LO,HI: the default stage count's quality bounds")
    ap.add_argument("--median", default=None, help="LO,HI: bounds of the default stage count's median quality")
    ap.add_argument("--published", action="store_true", help="SIDCo as published (no count correction)")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    x, y = gradscope.fashion_mnist("train", 32 * (args.steps + 1) * args.seed)
    x, y = x[-32 * (args.steps + 1) :], y[-32 * (args.steps + 1) :]  # other batches for another seed
    models = {"resnet18": resnet18, "transformer": Encoder, "lstm": Lstm}
    methods = ["sidco-e", "sidco-p", "sidco-gp"]
    ratios = [float(r) for r in args.ratios.split(",")]
    stage_counts = [int(m) for m in args.stages.split(",")]
    default = None  # by ratio: gradscope.default_sidco_stages
    lo, hi = (float(v) for v in args.check.split(",")) if args.check else (0.0, math.inf)
    outside, defaults = [], []
    print("| model | vector | n | method | ratio | " + " | ".join(f"{m} stages" for m in stage_counts) + " |")
    print("| --- " * (5 + len(stage_counts)) + "|")
    worst = {m: 0.0 for m in stage_counts}
    for name, make in models.items():
        for vec, g in gradients(make(), x, y, args.steps).items():
            for method in methods:
                for ratio in ratios:
                    q = [
                        gradscope.select(g, method, ratio, stages=m, backend="cpu", sidco_as_published=args.published)[
                            2
                        ]["quality"]
                        for m in stage_counts
                    ]
                    for m, v in zip(stage_counts, q):
                        worst[m] = max(worst[m], abs(math.log(v)) if v > 0 else math.inf)
                        if m == gradscope.default_sidco_stages(ratio):
                            defaults.append(v)
                            if args.check and not (lo <= v <= hi):
                                outside.append(f"{name} {vec} {method} {ratio}: {v:.2f}")
                    print(
                        f"| {name} | {vec} | {g.numel()} | {method} | {ratio} | "
                        + " | ".join(f"{v:.2f}" for v in q)
                        + " |"
                    )
    print("\nworst |ln quality| per stage count (0 is exact; ln 1.25 = 0.22):")
    for m in stage_counts:
        print(f"  {m} stages: {worst[m]:.2f}")
    median = statistics.median(defaults)
    print(f"\nthe default stage count's median quality: {median:.3f} over {len(defaults)} calls")
    failed = False
    if args.median:
        mlo, mhi = (float(v) for v in args.median.split(","))
        failed = not (mlo <= median <= mhi)
        print(f"  {'outside' if failed else 'within'} [{mlo}, {mhi}]")
    if args.check:
        print(
            f"the default stage count (gradscope.default_sidco_stages) outside [{lo}, {hi}]: "
            + ("; ".join(outside) or "none")
        )
        failed = failed or bool(outside)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
