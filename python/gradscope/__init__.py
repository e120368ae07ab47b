"""gradscope for PyTorch users: how gradients are distributed, and how to compress them.

    gradscope.fit(t)                       every distribution fitted to |t|, every threshold method
    gradscope.select(t, "sidco-e", 0.01)   the elements a compressor sends: (indices, values, info)
    gradscope.Recorder(model, "run.h5")    gradients of any nn.Module into a gradscope snapshot
    gradscope.ddp.State / gradscope.ddp.hook   compressed DistributedDataParallel (a comm hook)
    gradscope.fashion_mnist("train")       Fashion-MNIST as normalized tensors (Debian's package)
    gradscope.open_snapshot("run.h5")      a snapshot's layers, steps and gradients (also while written)
    gradscope.analyze("run.h5", "a.h5")    `gradscope analyze` in this process, with a progress callback
    gradscope.load_analysis("a.h5")        an analysis store's tables as pandas DataFrames

The work is done by gradscope's C++ libraries (the _gradscope extension); errors from them arrive
as gradscope.Error (a RuntimeError and a ValueError) with the same message.
"""

import json

import torch

from . import _gradscope
from ._gradscope import Error, __version__
from ._options import compressor_names, option_texts, sparse_selection_names
from ._tensors import check_density, compress_where_it_lives, describe, float32_view, on_host
from .datasets import fashion_mnist
from .readers import Analysis, Layer, Snapshot, Step, analyze, load_analysis, open_snapshot
from .recorder import Recorder

__all__ = ["DEFAULT_SIDCO_STAGES", "Analysis", "Error", "Layer", "Recorder", "Snapshot", "Step",
           "__version__", "analyze", "compressor_names", "ddp", "fashion_mnist", "fit", "load_analysis",
           "open_snapshot", "select"]

# SIDCo's stage count when a one-shot call (fit, select) gives none: fit's, from the C++ core.
DEFAULT_SIDCO_STAGES = _gradscope.default_sidco_stages


def fit(t, ratios=(0.1, 0.01, 0.001), backend="auto"):
    """Fits the sparsity-inducing distributions to |t| and runs every threshold method at every
    density in `ratios`: the same keys and values as `gradscope fit --json` on the same values.
    The SIDCo methods run DEFAULT_SIDCO_STAGES stages (3), as select() does by default.

    t: a float32 tensor of any shape (read flattened) or NumPy array, contiguous; a CUDA tensor
    is copied to the host once (backend picks where the passes run)."""
    host = on_host(t)
    address, n, _ = float32_view(host, "fit's input")
    densities = [float(r) for r in ratios]
    return json.loads(_gradscope.fit_json(address, n, densities, backend, describe(t)))


def select(t, method="sidco-e", ratio=0.01, stages=None, seed=1, backend="auto"):
    """The elements compressor `method` sends for t at density `ratio`: (indices, values, info).

    indices: int64 tensor (ascending positions in t flattened); values: t's values there;
    info: threshold, selected, quality (achieved / target density), stages, density, n, nonfinite.
    NaN and Inf entries are never selected; info["nonfinite"] counts them.
    method: any compressor that sends a selection of its input (gradscope.sparse_selection_names()).
    stages: SIDCo's stage count, for the SIDCo methods (default: the one fit uses,
    gradscope.DEFAULT_SIDCO_STAGES, 3: the best one-shot quality on real gradients, docs/python.md;
    0: the adaptive controller at its start, DEFAULT_SIDCO_STAGES, as a DDP state begins).
    backend: where the selection runs: "auto" (CUDA when the extension has it and a GPU is there),
    "cpu", "cuda", or "cuda-host" (the CUDA backend's code on the host, for checking). A CUDA
    tensor is read in place by the cuda backend; indices and values come back on the host."""
    names = sparse_selection_names()
    if method not in names:
        raise ValueError(f"unknown selection method {method!r}: use one of {', '.join(names)}")
    density = check_density(ratio)
    if stages is None:
        stages = DEFAULT_SIDCO_STAGES
    core = _gradscope.Compressor(method, density,
                                 option_texts({"stages": stages, "seed": seed, "backend": backend}))
    indices, values, _, _, info = compress_where_it_lives(core, t, "tensor", "select's input")
    return torch.from_numpy(indices), torch.from_numpy(values), info


from . import ddp  # noqa: E402  (uses the names above)
