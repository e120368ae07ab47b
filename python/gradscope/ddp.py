"""gradscope's compressors as a DistributedDataParallel communication hook.

    state = gradscope.ddp.State(method="sidco-e", ratio=0.01)
    model.register_comm_hook(state, gradscope.ddp.hook)

Every rule of the hook is gradscope's C++ one (gs::compress::BucketCompressor, the code
`gradscope train` runs): error feedback kept per parameter, the warm-up schedules, the agreement on
skipping a NaN/Inf bucket and the ten-in-a-row limit, the statistics and the checkpointed state.
This module adds only what is Python's: torch.distributed collectives (TorchCollectives), the
Futures DDP waits for, the state's thread, and pickling. State's keywords are the rows of
_state_settings.SETTINGS; its parts (process groups, device streams, the thread, the model check,
the regrouping after a resume) are small classes of the private modules beside this one
(docs/architecture.md, "The Python hook").

The hook returns at once: each bucket is queued to the state's thread, which exchanges the
buckets one after the other in DDP's order while backward computes the next ones. Its collectives
run on a process group of the state's own (made with torch.distributed.new_group over the same
ranks when the State is made), so they never interleave with DDP's own collectives
(find_unused_parameters, static_graph) or with another model's on the same group. Read the
state's statistics after backward() returns (the state's thread updates them during it). The dense
steps of when="auto" go as DDP's own all-reduce goes instead, on the calling thread and the
model's group (_stock_dense.StockDenseStep).

A CUDA bucket stays on its GPU (BucketCompressor::exchange_resident): the state's thread works on
the bucket's device, on a stream of its own that waits for an event recorded when DDP handed the
bucket over; residuals, selection and the update live on the device, and only the selected
(index, value) pairs cross the bus (none with NCCL, whose collectives take device memory). The
Future is a CUDA Future of that device, so DDP's stream waits for the update without the host
waiting. backend="cuda-host" runs the same path on the host, with rank r's buckets standing on
fake device r (docs/gpu.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
import torch.distributed as dist

from . import _gradscope
from ._buckets import BucketExchange, momentum_advice, momentum_of
from ._collectives import TorchCollectives, _backend_for  # noqa: F401  (gradscope.ddp.TorchCollectives)
from ._device_streams import DeviceStreams
from ._hook_group import HookGroup
from ._state_settings import FORMAT, Settings, help_text


# What one training step cost and achieved, over every bucket of this worker: the C++ core's
# compress::StepStats, its fields and defaults as python/src/stats_fields.hpp maps them (n,
# selected, target_density, density, quality, stages, bytes_sent, dense_bytes, gathered_bytes: what
# the all-gathers carried, link_bytes: what this worker's link sent as the collectives' algorithms
# are modelled, host_device_bytes and host_device_gathered_bytes for device buckets,
# compress_s, compress_cpu_s (the same work in the thread's CPU time), comm_s and hook_s, buckets,
# skipped, warmup, critical: at density_high).
StepStats = dataclasses.make_dataclass(
    "StepStats",
    [
        (name, type(value), dataclasses.field(default=value))
        for name, value in _gradscope.BucketCompressor.step_stats_defaults().items()
    ],
)
StepStats.__doc__ = "What one training step cost and achieved, over every bucket of this worker (the C++ core's)."
StepStats.__module__ = __name__  # pickles as gradscope.ddp.StepStats


class State:
    """A gradscope compressor for DDP's buckets: its residuals, warm-up, skip rule and statistics.
    One State serves one DDP model: the buckets of a second model it is registered on fail their
    backward() ("one State per DDP model"). Every rank's settings are compared at the first
    bucket, and again after load_state_dict, in one collective: a rank made with another method,
    ratio, option, warm-up, schedule or momentum correction (or whose gradients have another
    dtype, or whose optimizer keeps another momentum) stops every rank with one line naming the
    setting and both values.

    The keywords (one row each of gradscope._state_settings.SETTINGS):
    """

    def __init__(
        self,
        method: str = "sidco-e",
        ratio: float | None = None,
        *,
        process_group: dist.ProcessGroup | None = None,
        variance: Callable[[dist.GradBucket], torch.Tensor] | None = None,
        warmup_steps: int = 0,
        warmup: str = "dense",
        warmup_start_ratio: float = 0.25,
        history: int = 1000,
        timeout: float | None = None,
        hook_group: dist.ProcessGroup | None = None,
        device_timing: bool = False,
        density_schedule: str = "constant",
        density_high: float = 0.1,
        density_interval: int = 20,
        density_eta: float = 0.5,
        momentum_correction: float = 0.0,
        optimizer_momentum_ok: bool = False,
        when: str = "always",
        when_interval: int = 50,
        exchange: str = "allgather",
        **options: Any,
    ) -> None:
        # The keywords are the rows of _state_settings.SETTINGS, in their order (a test checks it).
        keywords = {name: value for name, value in locals().items() if name not in ("self", "options", "__class__")}
        self._settings = settings = Settings(**keywords, **options)
        vars(self).update(settings.public())  # method, ratio, variance, timeout, exchange_mode, ...
        group = self._group = HookGroup(settings.process_group, settings.hook_group, settings.timeout)
        self.process_group, self.rank, self.world_size = group.process_group, group.rank, group.world_size
        self._core = settings.make_core(self.rank)
        if self._core.needs_gradient_variance and settings.variance is None:
            raise ValueError(
                f"compressor {settings.method!r} weighs elements by their gradient variance: "
                "give State(variance=callable(bucket) -> tensor)"
            )
        self._streams = DeviceStreams(settings.options.get("backend"), self.rank, settings.device_timing)
        self._buckets = BucketExchange(settings, self._core, self._group, self._streams)

    # ---- what users read -----------------------------------------------------------------

    @property
    def steps(self):
        """StepStats of the last `history` finished steps."""
        return [StepStats(**row) for row in self._core.history()]

    @property
    def step_skipped(self):
        """Whether the last finished step met a NaN or Inf on some worker (skip its optimizer step)."""
        return self._core.last_step_skipped

    @property
    def skipped_steps(self):
        return self._core.summary()["skipped_steps"]

    @property
    def last_error(self):
        """The last error a bucket met, as raised (gradscope.Error, ...), or None."""
        return self._buckets.last_error

    def summary(self):
        """Per-step statistics over every finished, non-skipped step, as gradscope train reports.
        The hook's cost is compress_ms_per_step + comm_ms_per_step (the state's thread);
        hook_ms_per_step is only the hook calls that hand the buckets over."""
        return dict({"method": self.method, "ratio": self.ratio, "workers": self.world_size}, **self._core.summary())

    def device_ms(self):
        """With device_timing: the milliseconds the last finished step's CUDA buckets spent in
        compress and exchange on the hook's stream, from each bucket being ready to its update being
        written (CUDA events; waits for them)."""
        return self._streams.device_ms()

    # ---- checkpoints ---------------------------------------------------------------------

    def state_dict(self):
        """Everything that carries from one step to the next (residuals, step count and so the
        warm-up's position, the stage controller, the sampling streams, the skip count and the
        statistics, the grouping of the last step's buckets), plus the settings it belongs to.
        Between steps; waits for queued buckets."""
        self._buckets.drain()
        return {
            "format": FORMAT,
            **self._settings.saved(),
            "rank": self.rank,
            "world_size": self.world_size,
            "core": self._core.save_state(),
            "layout": self._buckets.regrouping.saved(),
        }

    def load_state_dict(self, d):
        """Continues from state_dict() d, saved by the same rank of a run with the same settings.
        The next step goes exactly as it would have gone in the saved run: its buckets reach the
        compressor in the grouping of the saved run's last step, whatever grouping DDP hands them
        over in (a new DDP groups its first step by registration order and regroups after it)."""
        self._buckets.drain()
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise _gradscope.Error("not a gradscope.ddp.State state_dict (or of another version)")
        self._settings.check_saved(d, {"rank": self.rank, "world_size": self.world_size})
        self._core.load_state(d["core"])
        self._buckets.regrouping.restore(d["layout"])

    def __getstate__(self):
        """Pickles the settings and the state; the process groups and the thread stay behind (the
        unpickled State binds the default group, as PowerSGDState does, and makes its own group at
        its first bucket, where every worker is, as every State does)."""
        return {"state": self.state_dict(), **self._settings.pickled()}

    def __setstate__(self, pickled):
        self.__init__(**Settings.keywords(pickled["state"], pickled))
        self.load_state_dict(pickled["state"])

    # ---- one bucket ----------------------------------------------------------------------

    def exchange(self, index, grad, parameters, last=True, bucket=None):
        """The compressed exchange of one bucket: a Future whose value is the mean update, in
        grad's dtype and on its device (wait() raises the bucket's error as it was raised).

        grad: the bucket's flat gradient (float32, float16, bfloat16 or float64); parameters: the
        parameters laid end to end in it. Returns at once; the state's thread does the work,
        bucket after bucket in call order; the last bucket's Future completes once the step is
        closed (state.steps updated). A bucket on a device (CUDA, or cuda-host's stand-in) gets its
        update written into grad itself, on the device.

        The first step after load_state_dict hands its buckets to the core in the grouping the
        saved step had (DDP groups a new process's first step in registration order and regroups
        after it): where the groupings differ, this step's buckets wait for the last one."""
        return self._buckets.exchange(index, grad, parameters, last, bucket)


State.__doc__ = (State.__doc__ or "").rstrip() + "\n" + help_text()


def check_optimizer(optimizer, state):
    """Raises gradscope.Error when `state` applies momentum correction and `optimizer` keeps a
    momentum of its own: the momentum then lives in the hook, before sparsification, and a second
    one in the optimizer would apply it twice. Call it once, after making both."""
    if state.momentum_correction <= 0:
        return
    for i, group in enumerate(optimizer.param_groups):
        momentum = momentum_of(group)
        if momentum is None:
            continue
        raise _gradscope.Error(
            f"State(momentum_correction={state.momentum_correction:g}) keeps the momentum in the hook, and "
            f"{type(optimizer).__name__}'s parameter group {i} keeps one of its own ({momentum}): the momentum "
            f"would apply twice; {momentum_advice(type(optimizer).__name__, group)}, or drop "
            "momentum_correction and keep the optimizer's momentum"
        )


def _value(fut):
    """The bucket's update, or its error raised: in a then() callback, which gives DDP a Future
    completed with an error (it re-raises it from backward() as a RuntimeError with this message)
    rather than a value it cannot use."""
    return fut.wait()


def hook(state, bucket):
    """DDP communication hook: model.register_comm_hook(gradscope.ddp.State(...), gradscope.ddp.hook)."""
    fut = state.exchange(bucket.index(), bucket.buffer(), bucket.parameters(), bucket.is_last(), bucket)
    return fut.then(_value)
