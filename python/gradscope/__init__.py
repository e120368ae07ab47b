"""gradscope for PyTorch users: how gradients are distributed, and how to compress them.

    gradscope.fit(t)                       every distribution fitted to |t|, every threshold method
    gradscope.select(t, "sidco-e", 0.01)   the elements a compressor sends: (indices, values, info)
    gradscope.Recorder(model, "run.h5")    gradients of any nn.Module into a gradscope snapshot
    gradscope.ddp.State / gradscope.ddp.hook   compressed DistributedDataParallel (a comm hook)
    gradscope.fashion_mnist("train")       Fashion-MNIST as normalized tensors (Debian's package)
    gradscope.open_snapshot("run.h5")      a snapshot's layers, steps and gradients (also while written)
    gradscope.analyze("run.h5", "a.h5")    `gradscope analyze` in this process, with a progress callback
    gradscope.load_analysis("a.h5")        an analysis store's tables as pandas DataFrames
    gradscope.fitted("gamma", row)         a fitted law's pdf, cdf and isf (C++ distributions)

The work is done by gradscope's C++ libraries (the _gradscope extension); errors from them arrive
as gradscope.Error (a RuntimeError and a ValueError) with the same message; a missing file as
gradscope.MissingFileError, a gradscope.Error that is also a FileNotFoundError.
"""

import json

import torch

from . import _gradscope
from ._gradscope import Error, MissingFileError, __version__, modelled_device_ms
from ._options import check_options_read, compressor_names, option_texts, sparse_selection_names
from ._tensors import check_density, compress_where_it_lives, describe, float32_view, on_host
from .analysis import Analysis, Law, fitted, load_analysis
from .datasets import fashion_mnist
from .readers import Layer, Snapshot, Step, analyze, layer_kinds, open_snapshot
from .recorder import Recorder

__all__ = [
    "Analysis",
    "Error",
    "Law",
    "Layer",
    "MissingFileError",
    "Recorder",
    "Snapshot",
    "Step",
    "__version__",
    "analyze",
    "compressor_names",
    "ddp",
    "default_sidco_stages",
    "fashion_mnist",
    "fit",
    "fitted",
    "layer_kinds",
    "load_analysis",
    "open_snapshot",
    "select",
]


def default_sidco_stages(ratio):
    """SIDCo's stage count at density `ratio` when a call (fit, select, a DDP state's start) gives
    none: round(log10(1/ratio)), at least 1 (1 at 0.1, 2 at 0.01, 3 at 0.001), from the C++ core;
    the evidence is in docs/python.md."""
    return _gradscope.default_sidco_stages(check_density(ratio))


def fit(t, ratios=(0.1, 0.01, 0.001), backend="auto"):
    """Fits the sparsity-inducing distributions to |t| and runs every threshold method at every
    density in `ratios`: the same keys and values as `gradscope fit --json` on the same values.
    The SIDCo methods run default_sidco_stages(ratio) stages, as select() does by default.

    t: a float32 tensor of any shape (read flattened) or NumPy array, contiguous; a CUDA tensor
    is copied to the host once (backend picks where the passes run).
    ratios: one density, a sequence of them or a comma list ("0.1,0.01"), each in (0, 1] as
    select() takes (default (0.1, 0.01, 0.001)); at 1 every method keeps every finite element
    (threshold 0).
    backend: where the passes run (default "auto"), "cpu", "cuda" or "cuda-host"."""
    host = on_host(t)
    address, n, _ = float32_view(host, "fit's input")
    return json.loads(_gradscope.fit_json(address, n, _densities(ratios), backend, describe(t)))


def _densities(ratios):
    """fit's ratios (a number, a sequence of numbers or a comma list "0.1,0.01", as analyze takes
    them) as a list of densities in (0, 1]; each error names the option."""
    if isinstance(ratios, bytes):
        raise TypeError(f"ratios: give a number, a sequence of numbers or a comma list, got {ratios!r}")
    if isinstance(ratios, str):
        try:
            items = [float(item) for item in ratios.split(",")]
        except ValueError:
            raise ValueError(f"ratios: {ratios!r} is not a comma list of numbers, e.g. '0.1,0.01'") from None
    else:
        try:
            items = list(ratios)
        except TypeError:  # one number
            items = [ratios]
    if not items:
        raise ValueError("ratios: none given; give a density in (0, 1] or a sequence of them, e.g. (0.1, 0.01)")
    densities = []
    for r in items:
        try:
            densities.append(check_density(r))
        except (TypeError, ValueError) as e:
            raise type(e)(f"ratios: {e}") from None
    return densities


def select(t, method="sidco-e", ratio=0.01, stages=None, seed=1, backend="auto", sidco_as_published=False):
    """The elements compressor `method` sends for t at density `ratio`: (indices, values, info).

    indices: int64 tensor (ascending positions in t flattened); values: t's values there (float32:
    select reads float32 tensors and arrays only, as fit does);
    info: threshold, selected, quality (achieved / target density), stages, density, n, nonfinite.
    NaN and Inf entries are never selected; info["nonfinite"] counts them.
    method: any compressor that sends a selection of its input (gradscope.sparse_selection_names();
    default "sidco-e").
    ratio: the density, in (0, 1] (default 0.01).
    stages: SIDCo's stage count, for the methods that read it (the SIDCo variants, sidco-topk's
    bound); default None: by density, default_sidco_stages(ratio) (1 at 0.1, 2 at 0.01, 3 at
    0.001: the one fit uses, the best one-shot quality on real gradients, docs/python.md); 0: the
    adaptive controller, which starts there too, as a DDP state does.
    seed: the random sample of the methods that draw one (dgc, randomk); default 1.
    backend: where the selection runs (default "auto": CUDA when the extension has it and a GPU
    is there), "cpu", "cuda", or "cuda-host" (the CUDA backend's code on the host, for checking).
    A CUDA tensor is read in place by the cuda backend; indices and values come back on the host.
    sidco_as_published: SIDCo as the paper's code places it, without the count correction that
    otherwise holds the selection within [0.8, 1.25] of the ratio (docs/algorithms.md); default
    False.
    An option the method does not read (stages for topk, seed for sidco-e, backend for randomk),
    set away from its default, is refused (gradscope.Error), as `gradscope train` refuses it."""
    names = sparse_selection_names()
    if method not in names:
        raise ValueError(f"unknown selection method {method!r}: use one of {', '.join(names)}")
    density = check_density(ratio)
    given = {"seed": seed}
    if stages is not None:
        given["stages"] = stages
    if backend != "auto":  # "auto" asks for nothing: a method with no backend runs where it runs
        given["backend"] = backend
    if sidco_as_published:
        given["sidco_as_published"] = True
    check_options_read(method, given)
    options = dict(given, stages=0 if stages is None else stages, backend=backend)
    core = _gradscope.Compressor(method, density, option_texts(options))
    indices, values, _, _, info = compress_where_it_lives(core, t, "tensor", "select's input")
    return torch.from_numpy(indices), torch.from_numpy(values), info


from . import ddp  # noqa: E402  (uses the names above)
