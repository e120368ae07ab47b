"""From recording to a table: record a small CNN's gradients, analyse them, load the results as
pandas tables, aggregate them as the summary does, and plot a gradient histogram with its fitted law.

    PYTHONPATH=build/python python3 examples/python/recording_to_table.py   # files go to the current folder

docs/python.md quotes this file whole (tests/python/test_readers.py checks that, and runs it).
"""

import numpy as np
import pandas as pd
import torch

import gradscope

# 1. Record every 2nd of 20 training steps of a small CNN with BatchNorm (random data stands for a dataset).
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(1, 16, 3, padding=1, bias=False),
    torch.nn.BatchNorm2d(16),
    torch.nn.ReLU(),
    torch.nn.Conv2d(16, 32, 3, padding=1, bias=False),
    torch.nn.BatchNorm2d(32),
    torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(4),
    torch.nn.Flatten(),
    torch.nn.Linear(512, 64),
    torch.nn.ReLU(),
    torch.nn.Linear(64, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
with gradscope.Recorder(model, "run.h5", every=2, force=True) as rec:
    for step in range(20):
        x, y = torch.randn(32, 1, 16, 16), torch.randint(0, 10, (32,))
        rec.begin_step(step)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        rec.end_step(loss, 0.05)
        opt.step()

# 2. Read it back: the layers and their kinds, the loss of every step (recorded or not).
with gradscope.open_snapshot("run.h5") as snap:
    print(snap)
    for layer in snap.layers:
        print(f"  {layer.name:9} {str(layer.shape):15} {layer.kind}")
    print("loss:", snap.losses.loss.round(2).tolist())

# 3. Analyse, as `gradscope analyze run.h5 --out run.analysis.h5 --ratios 0.1,0.01` would.
result = gradscope.analyze("run.h5", "run.analysis.h5", ratios="0.1,0.01", force=True)
print(f"{result['steps_analyzed']} steps, {result['vectors_analyzed']} vectors")

# 4. Load the tables. Which law fits each layer kind best (median KS D, lower fits better):
analysis = gradscope.load_analysis("run.analysis.h5")
fits = analysis.fits
print(fits.pivot_table(index="kind", columns="dist", values="ks_D", aggfunc="median").round(3))

# How close each method comes to the density asked for (achieved/target), over the vectors large
# enough to say (too_small: n*ratio < 100, where keeping at least one value alone moves the
# density): the median the summary prints, and the table aggregated the same way.
th = analysis.thresholds
print(th[~th.too_small].groupby(["method", "ratio"]).quality.median().unstack().round(3))
summary = pd.DataFrame(result["summary"]["quality"])
print(summary.pivot(index="method", columns="ratio", values="median").round(3))

# The fitted parameters by name: the gamma shape per layer kind.
params = analysis.fit_params
print(params[(params.dist == "gamma") & (params.name == "alpha")].groupby("kind").value.median().round(3))

# 5. The whole model's |g| at the last step with its fitted gamma law and the law's threshold for
#    ratio 0.01 (the tails table's: isf(ratio * n / non-zero count)); plotted when matplotlib is there.
last = analysis.steps.step.max()
row = fits[(fits.step == last) & (fits.scope == "(model)") & (fits.dist == "gamma")].iloc[0]
law = gradscope.fitted("gamma", row)
with gradscope.open_snapshot("run.h5") as snap:
    g = np.abs(snap.grad(last))
x = g[g > 0]
tail = analysis.tails.query("step == @last and scope == '(model)' and dist == 'gamma' and ratio == 0.01")
print(f"gamma threshold at 0.01: {law.isf(0.01 * g.size / x.size):.4g} (tails: {tail.threshold.iloc[0]:.4g})")
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
if plt is not None:
    fig, ax = plt.subplots()
    top = np.quantile(x, 0.999)
    ax.hist(x, bins=80, range=(0, top), density=True, alpha=0.5, label=f"|g| at step {last}")
    grid = np.linspace(top / 400, top, 400)
    ax.plot(grid, law.pdf(grid), label="gamma, alpha %.2f" % law.params["alpha"])
    ax.axvline(law.isf(0.01 * g.size / x.size), color="k", ls="--", label="its threshold at 0.01")
    ax.set(yscale="log", ylim=(1, None), xlabel="|g|", ylabel="density")
    ax.legend()
    fig.savefig("histogram_gamma.png", dpi=100)
    print("wrote histogram_gamma.png")
