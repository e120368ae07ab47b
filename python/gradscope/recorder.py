"""gradscope.Recorder: the gradients of any torch.nn.Module, every K-th step, into a gradscope
snapshot (docs/snapshot-format.md), through the same writer thread and back-pressure as the C++
GradientRecorder. The file opens in `gradscope info`, `analyze` and `gradscope-gui` while it grows.

    with gradscope.Recorder(model, "run.h5", every=10) as rec:
        for step, (x, y) in enumerate(loader):
            rec.begin_step(step)
            loss = loss_fn(model(x), y)
            loss.backward()
            rec.end_step(loss, lr)
            opt.step(); opt.zero_grad()
"""

import os

import torch

from . import _gradscope

_FORGOT_BEGIN = (
    "Recorder: a gradient arrived outside a step: call rec.begin_step(step) before "
    "backward() and rec.end_step(loss, lr) after it"
)
_END_WITHOUT_BEGIN = (
    "Recorder: end_step() without begin_step(): call rec.begin_step(step) before "
    "each step's backward(), then rec.end_step(loss, lr) once after it"
)


class Recorder:
    """Records the gradients of `model`'s parameters (those that require one) at every `every`-th
    step into the snapshot `path`: one copy per parameter (a float32 gradient on the host is read
    in place), compressed and written on the writer thread.

    every: record the steps whose number is a multiple of it (1: every step).
    force: replace an existing file (refused otherwise).
    queue_depth: recorded steps that may wait for the writer before begin_step waits (each holds a
        model's worth of host memory).
    compression: how gradients are stored, one of Recorder.compressions() (None: the first, the
        default); lz4, blosc-lz4 and blosc-bitshuffle need HDF5's filter plugins (scripts/setup.sh).
    deflate: the level (1 to 9) of compression="deflate"; 0 stores raw floats whatever the codec.
    dataset, seed: written to the file's attributes, for the record.
    read_grad: False: record what each parameter's gradient hook sees during backward(); True: no
        hooks, end_step copies each parameter's .grad as it is then (under DDP: the averaged one).

    end_step of every step, recorded or not, stores its loss and learning rate (Snapshot.losses).
    gradscope.Error, in one line: a missing directory (MissingFileError), a path that is a
    directory, an existing file without force, a file this process still has open (a Snapshot or
    Recorder not closed), an unknown compression, a gradient outside begin_step ... end_step.
    """

    def __init__(
        self,
        model,
        path,
        every=10,
        force=False,
        queue_depth=4,
        compression=None,
        deflate=4,
        dataset="",
        seed=0,
        read_grad=False,
    ):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"Recorder records a torch.nn.Module, got {type(model).__name__}")
        params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        if not params:
            raise ValueError(f"{type(model).__name__} has no parameters that require gradients")
        layers = [(name, list(p.shape)) for name, p in params]
        if compression is None:
            compression = _gradscope.default_snapshot_codec()
        self._core = _gradscope.StepRecorder(
            os.fspath(path),
            layers,
            type(model).__name__,
            dataset,
            int(seed),
            int(every),
            int(queue_depth),
            bool(force),
            str(compression),
            int(deflate),
        )
        self.path = os.fspath(path)
        self._in_step = False  # between begin_step and end_step
        # read_grad: no hooks; end_step reads each .grad as it is then (under DDP, averaged).
        self._params = [p for _, p in params] if read_grad else []
        self._hooks = [] if read_grad else [p.register_hook(self._hook_for(i)) for i, (_, p) in enumerate(params)]

    def _hook_for(self, layer):
        def hook(grad):
            if not self._in_step:
                raise _gradscope.Error(_FORGOT_BEGIN)
            if self._core.capturing:
                self._put(layer, grad)

        return hook

    def _put(self, layer, grad):
        # A float32 tensor on the host is read in place: put() copies it once into the writer's
        # buffer. Anything else is converted first.
        host = grad.detach()
        if host.device.type != "cpu" or host.dtype != torch.float32 or not host.is_contiguous():
            host = host.to(device="cpu", dtype=torch.float32).contiguous()
        self._core.put(layer, host.data_ptr(), host.numel())

    def begin_step(self, step):
        """Before backward() of training step `step` (steps increase). Returns whether this step is
        recorded; waits while every buffer waits for the writer (a slow disk holds training back)."""
        recorded = self._core.begin_step(int(step))
        self._in_step = True
        return recorded

    def end_step(self, loss, lr):
        """After backward(): queues the step's gradients with its loss and learning rate. A
        parameter that got no gradient this step is recorded as zeros."""
        if not self._in_step:
            raise _gradscope.Error(_END_WITHOUT_BEGIN)
        self._in_step = False
        if self._core.capturing:
            for layer, p in enumerate(self._params):
                if p.grad is not None:
                    self._put(layer, p.grad)
        self._core.end_step(float(loss), float(lr))

    @staticmethod
    def compressions():
        """The names `compression=` takes (gs::data::snapshot_codecs), the default first."""
        names = _gradscope.snapshot_codec_names()
        default = _gradscope.default_snapshot_codec()
        return [default] + [n for n in names if n != default]

    @property
    def steps_recorded(self):
        return self._core.steps_recorded

    def close(self):
        """Writes what is queued, stops the writer and closes the file; removes the hooks."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._core.finish()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
