"""Reading back, for notebooks and scripts: a snapshot's gradients (also while it is still being
written), `gradscope analyze` in-process, and an analysis store's tables as pandas DataFrames.
Each is the C++ reader or pipeline the command line uses (gs::data::SnapshotReader,
gs::analyzer::analyze, gs::analyzer::AnalysisReader).

    snap = gradscope.open_snapshot("run.h5")
    for step in snap:                          # Step(step, loss, lr), as far as the file goes
        g = snap.grad(step, "fc.weight")       # NumPy, the parameter's shape (torch=True: a tensor)
    gradscope.analyze(snap, "run.analysis.h5", progress=print, ratios=(0.01,))
    fits = gradscope.load_analysis("run.analysis.h5")["fits"]    # a pandas DataFrame
"""

import collections
import importlib
import json
import operator
import os

import numpy as np
import torch as _torch

from . import _gradscope
from ._options import table_texts, typed_default

Layer = collections.namedtuple("Layer", "name shape numel kind")
Layer.__doc__ = ("A parameter of the recorded model: name, shape (a tuple), numel, and kind (the "
                 "layer kind the analysis groups by: conv weight, linear weight, bias, 1-d weight, scalar)")
Step = collections.namedtuple("Step", "step loss lr")
Step.__doc__ = "A recorded training step: its number, loss and learning rate"


class Snapshot:
    """A gradscope snapshot (docs/snapshot-format.md) open for reading: gradscope.open_snapshot."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._core = _gradscope.SnapshotReader(self.path)
        meta = self._core.meta
        self.model = meta["model"]
        self.dataset = meta["dataset"]
        self.seed = meta["seed"]
        self.created = meta["created"]
        self.gradscope_version = meta["gradscope_version"]
        self.layers = [Layer(name, tuple(shape), numel, kind) for name, shape, numel, kind in self._core.layers()]
        self.total_numel = self._core.total_numel
        self._shapes = {layer.name: layer.shape for layer in self.layers}

    def refresh(self):
        """Reads the step list again (a live writer's new steps); returns the number of steps."""
        return self._core.refresh()

    @property
    def steps(self):
        """Every recorded step as Step(step, loss, lr), read again from the file on each use: while
        a writer (gradscope.Recorder, `gradscope capture`) still appends, the steps it has flushed."""
        self._core.refresh()
        return [Step(*s) for s in self._core.steps()]

    def __iter__(self):
        return iter(self.steps)

    def __len__(self):
        return len(self.steps)

    def grad(self, step=None, layer=None, torch=False):
        """The gradient recorded at training step `step` (a number or a Step; None: the last one).

        layer: a layer's name: that parameter's gradient, in its shape; None: the whole model
        flattened, every layer's values in layer order (self.layers), as `gradscope analyze` and
        `gradscope fit --whole-model` read it. A float32 NumPy array, or with torch=True a torch
        tensor sharing its memory. gradscope.Error for a step not recorded (naming the recorded
        range) or a layer name that is not there (naming the layers)."""
        if isinstance(step, Step):
            step = step.step
        values = self._core.grad(None if step is None else operator.index(step), layer)
        if layer is not None:
            values = values.reshape(self._shapes[layer])
        return _torch.from_numpy(values) if torch else values

    def __repr__(self):
        return (f"<gradscope.Snapshot {self.path!r}: model {self.model!r}, {len(self.layers)} layers, "
                f"{self.total_numel} values a step, {len(self)} steps>")


def open_snapshot(path):
    """Opens a gradscope snapshot for reading; it may still be being written (SWMR): `steps`,
    iteration and grad() see the steps its writer has flushed when they are called.
    gradscope.Error names the file and the problem: missing, not HDF5, not a gradscope snapshot."""
    return Snapshot(path)


_ANALYZE_ROWS = {row["key"]: row for row in _gradscope.analyze_options()}


def analyze(snapshot, out, progress=None, **options):
    """`gradscope analyze SNAPSHOT --out OUT` in this process: fits, goodness of fit and thresholds
    against exact top-k for every selected step, into the analysis store `out`; returns what
    `gradscope analyze --json` prints (steps_analyzed, vectors_analyzed, backend, summary, ...).

    snapshot: a path or a Snapshot. An existing `out` is extended with the steps it lacks when it
    holds the same snapshot's analysis with the same options, and refused otherwise; force=True
    recomputes it from scratch (the command line's --force). progress(done, total, note) is called
    as vectors are done (note names the step and the vector); an exception it raises stops the
    analysis, and the steps written before stay. The work runs without the GIL.

    options: the command line's options, '-' as '_' (gradscope.Error or TypeError otherwise):
    """
    texts = table_texts(_ANALYZE_ROWS, options, "analyze option")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable(done, total, note) or None, got {type(progress).__name__}")
    path = snapshot.path if isinstance(snapshot, Snapshot) else os.fspath(snapshot)
    return json.loads(_gradscope.analyze(path, os.fspath(out), texts, progress))


if analyze.__doc__:  # none under python -OO
    analyze.__doc__ += "".join(f"\n    {key}={typed_default(row)!r}: {row['help']}" for key, row in _ANALYZE_ROWS.items())


class Analysis:
    """An analysis store's tables (docs/analysis-format.md), by name (analysis["fits"] or
    analysis.fits): steps, vectors, fits, tails, qq, thresholds, each a pandas DataFrame, or without
    pandas a dict of NumPy arrays, with the store's column names; attrs: the store's root attributes
    (source_path, ratios, dists, ...)."""

    def __init__(self, path, attrs, tables):
        self.path = path
        self.attrs = attrs
        self.tables = tables

    def __getitem__(self, name):
        if name not in self.tables:
            raise KeyError(f"no table {name!r} in {self.path}: the tables are {', '.join(self.tables)}")
        return self.tables[name]

    def __getattr__(self, name):
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (tables: {', '.join(tables)})")

    def keys(self):
        return self.tables.keys()

    def __repr__(self):
        rows = ", ".join(f"{name} ({_row_count(t)} rows)" for name, t in self.tables.items())
        return f"<gradscope.Analysis {self.path!r} of {self.attrs.get('source_path')!r}: {rows}>"


def _row_count(table):
    if isinstance(table, dict):  # columns of equal length
        return len(next(iter(table.values()), ()))
    return len(table)


def load_analysis(path):
    """Every table of an analysis store (`gradscope analyze --out`, gradscope.analyze) with the
    store's column names and types: pandas DataFrames when pandas imports, else dicts of NumPy
    arrays (strings as object arrays of str). Only committed rows (of the steps in the steps table).
    gradscope.Error names the file and the problem: missing, not HDF5, not an analysis file."""
    path = os.fspath(path)
    attrs, tables = _gradscope.read_analysis(path)
    columns = {name: {column: values if isinstance(values, np.ndarray) else np.array(values, dtype=object)
                      for column, values in cols}
               for name, cols in tables.items()}
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        pandas = None
    if pandas is not None:
        columns = {name: pandas.DataFrame(cols) for name, cols in columns.items()}
    return Analysis(path, attrs, columns)
