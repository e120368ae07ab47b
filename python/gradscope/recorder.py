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


class Recorder:
    def __init__(self, model, path, every=10, force=False, queue_depth=4, deflate=4, dataset="", seed=0):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"Recorder records a torch.nn.Module, got {type(model).__name__}")
        params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        if not params:
            raise ValueError(f"{type(model).__name__} has no parameters that require gradients")
        layers = [(name, list(p.shape)) for name, p in params]
        self._core = _gradscope.StepRecorder(os.fspath(path), layers, type(model).__name__, dataset,
                                             int(seed), int(every), int(queue_depth), bool(force),
                                             int(deflate))
        self.path = os.fspath(path)
        self._hooks = [p.register_hook(self._hook_for(i)) for i, (_, p) in enumerate(params)]

    def _hook_for(self, layer):
        def hook(grad):
            if self._core.capturing:
                host = grad.detach().to(device="cpu", dtype=torch.float32).contiguous()
                self._core.put(layer, host.data_ptr(), host.numel())
        return hook

    def begin_step(self, step):
        """Before backward() of training step `step` (steps increase). Returns whether this step is
        recorded; waits while every buffer waits for the writer (a slow disk holds training back)."""
        return self._core.begin_step(int(step))

    def end_step(self, loss, lr):
        """After backward(): queues the step's gradients with its loss and learning rate. A
        parameter that got no gradient this step is recorded as zeros."""
        self._core.end_step(float(loss), float(lr))

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
