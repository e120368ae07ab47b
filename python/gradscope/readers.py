"""Reading back, for notebooks and scripts: a snapshot's gradients (also while it is still being
written), `gradscope analyze` in-process, and an analysis store's tables as pandas DataFrames.
Each is the C++ reader or pipeline the command line uses (gs::data::SnapshotReader,
gs::analyzer::analyze, gs::analyzer::AnalysisReader).

    with gradscope.open_snapshot("run.h5") as snap:
        for step in snap:                      # Step(step, loss, lr), as far as the file goes
            g = snap.grad(step, "fc.weight")   # NumPy, the parameter's shape (torch=True: a tensor)
        snap.losses                            # every training step's loss, recorded or not
    gradscope.analyze("run.h5", "run.analysis.h5", progress=print, ratios=(0.01,), steps=range(0, 100))
    fits = gradscope.load_analysis("run.analysis.h5")["fits"]    # a pandas DataFrame
"""

import collections
import json
import operator
import os

import numpy as np
import torch as _torch

from . import _gradscope
from ._options import table_texts, typed_default
from .analysis import columns_as_tables

Layer = collections.namedtuple("Layer", "name shape numel kind")
Layer.__doc__ = (
    "A parameter of the recorded model: name, shape (a tuple), numel, and kind (the layer kind "
    "the analysis groups by, docs/analysis-format.md: conv weight, linear weight, embedding, "
    "bias, norm weight, norm bias, 1-d weight, parameter, scalar)"
)
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

    def close(self):
        """Closes the file: a Recorder, or gradscope capture, may then write it again. Any other use
        raises gradscope.Error. Idempotent; `with gradscope.open_snapshot(path) as snap:` closes
        it at the end of the block."""
        self._core.close()

    @property
    def closed(self):
        return self._core.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def losses(self):
        """The loss curve: the step, loss and lr of every training step the recorder saw, recorded or
        not (read again on each use), as a pandas DataFrame (without pandas, a dict of NumPy arrays).
        A snapshot written before losses were stored gives its recorded steps'."""
        rows = self._core.losses()
        columns = {name: [r[i] for r in rows] for i, name in enumerate(Step._fields)}
        return columns_as_tables({"losses": [(n, _numpy_column(v, n)) for n, v in columns.items()]})["losses"]

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
        if self.closed:
            return f"<gradscope.Snapshot {self.path!r}: closed>"
        return (
            f"<gradscope.Snapshot {self.path!r}: model {self.model!r}, {len(self.layers)} layers, "
            f"{self.total_numel} values a step, {len(self)} steps>"
        )


def _numpy_column(values, name):
    return np.asarray(values, dtype=np.int64 if name == "step" else np.float64)


def open_snapshot(path):
    """Opens a gradscope snapshot for reading; it may still be being written (SWMR): `steps`,
    iteration and grad() see the steps its writer has flushed when they are called. Close it
    (snap.close(), or `with gradscope.open_snapshot(path) as snap:`) before recording to the same
    file again. gradscope.Error names the file and the problem: not HDF5, not a gradscope snapshot;
    a missing file is a gradscope.MissingFileError, also a FileNotFoundError."""
    return Snapshot(path)


def layer_kinds(model):
    """{name: kind} of a model's parameters (those that require gradients, as Recorder records
    them; or a list of (name, shape)): the layer kinds the analysis groups by, by the rules of
    docs/analysis-format.md ("Layer kinds"), decided by the C++ analyzer."""
    if isinstance(model, _torch.nn.Module):
        layers = [(name, list(p.shape)) for name, p in model.named_parameters() if p.requires_grad]
    else:
        layers = [(name, list(shape)) for name, shape in model]
    return dict(zip((name for name, _ in layers), _gradscope.layer_kinds(layers)))


def _steps_text(steps):
    """steps= as the analysis's step selection (gs::analyzer::StepSelection): training-step numbers
    as an int, a Step, a range, a slice or a list of those, or the command line's own text."""
    if isinstance(steps, str):
        return steps
    if isinstance(steps, Step):
        return str(steps.step)
    if isinstance(steps, (range, slice)):
        if steps.step is not None and steps.step <= 0:
            raise ValueError(f"steps: {steps!r} does not run forwards; give a positive stride")
        parts = [steps.start, steps.stop, steps.step]
        return ":".join("" if v is None else str(operator.index(v)) for v in parts)
    try:
        return str(operator.index(steps))
    except TypeError:
        pass
    try:
        items = list(steps)
    except TypeError:
        raise TypeError(
            f"steps: give training-step numbers (an int, a range, a slice or a list of them), "
            f"got {type(steps).__name__}"
        ) from None
    if not items:
        raise ValueError("steps: the list is empty; give the training steps to analyse (snap.steps lists them)")
    return ",".join(_steps_text(item) for item in items)


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

    steps: the training steps to analyse, by step number: an int (a step that must be recorded),
    a range or slice (the recorded steps in it: steps=range(100, 200)), or a list of those; ""
    (default): every recorded step. A selection of no recorded step is an error naming the steps
    the snapshot holds. A re-run with more steps adds the ones the file lacks.
    ratios, dists, methods: a list or a comma list ("0.1,0.01") alike.

    options: the command line's options, '-' as '_' (gradscope.Error or TypeError otherwise):
    """
    if "steps" in options:
        options = dict(options, steps=_steps_text(options["steps"]))
    texts = table_texts(_ANALYZE_ROWS, options, "analyze option")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable(done, total, note) or None, got {type(progress).__name__}")
    path = snapshot.path if isinstance(snapshot, Snapshot) else os.fspath(snapshot)
    return json.loads(_gradscope.analyze(path, os.fspath(out), texts, progress))


if analyze.__doc__:  # none under python -OO
    analyze.__doc__ += "".join(
        f"\n    {key}={typed_default(row)!r}: {row['help']}" for key, row in _ANALYZE_ROWS.items()
    )
