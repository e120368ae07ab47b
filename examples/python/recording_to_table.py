"""From recording to a table: record a small model's gradients, analyse them, load the results as
pandas tables and plot how well the gamma law fits each layer over training.

    PYTHONPATH=build/python python3 examples/python/recording_to_table.py   # files go to the current folder

docs/python.md quotes this file whole (tests/python/test_readers.py checks that, and runs it).
"""

import torch

import gradscope

# 1. Record every 2nd of 20 training steps of a small MLP (random data stands for a dataset).
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with gradscope.Recorder(model, "run.h5", every=2, force=True) as rec:
    for step in range(20):
        x, y = torch.randn(64, 32), torch.randint(0, 10, (64,))
        rec.begin_step(step)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        rec.end_step(loss, 0.1)
        opt.step()

# 2. Read it back: layers, steps, gradients as NumPy arrays (also while a run still writes).
snap = gradscope.open_snapshot("run.h5")
print(snap)
last = snap.steps[-1]
print(f"step {last.step}: loss {last.loss:.3f}, |g| of 0.weight {abs(snap.grad(last, '0.weight')).mean():.2e}")

# 3. Analyse, as `gradscope analyze run.h5 --out run.analysis.h5 --ratios 0.1,0.01` would.
def progress(done, total, note):
    print(f"\r{done}/{total} vectors {note:24}", end="", flush=True)


result = gradscope.analyze(snap, "run.analysis.h5", progress=progress, ratios=(0.1, 0.01), force=True)
print(f"\n{result['steps_analyzed']} steps, {result['vectors_analyzed']} vectors in {result['seconds']:.1f} s")

# 4. Load the tables: KS D of the gamma fit per step (rows) and layer (columns), and how close
#    each threshold method comes to the density asked for.
analysis = gradscope.load_analysis("run.analysis.h5")
fits = analysis["fits"]
ks = fits[fits.dist == "gamma"].pivot(index="step", columns="scope", values="ks_D")
print(ks.round(3))
print(analysis["thresholds"].groupby(["method", "ratio"]).quality.median().unstack().round(2))

# 5. Plot it (when matplotlib is there).
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
if plt is not None:
    ax = ks.plot(marker="o", title="KS D of the gamma fit per layer")
    ax.set_ylabel("KS D (lower fits better)")
    ax.figure.savefig("ks_gamma.png", dpi=100)
    print("wrote ks_gamma.png")
