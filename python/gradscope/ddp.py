"""gradscope's compressors as a DistributedDataParallel communication hook.

    state = gradscope.ddp.State(method="sidco-e", ratio=0.01)
    model.register_comm_hook(state, gradscope.ddp.hook)

Every rule of the hook is gradscope's C++ one (gs::compress::BucketCompressor, the code
`gradscope train` runs): error feedback kept per parameter, the warm-up schedules, the agreement on
skipping a NaN/Inf bucket and the ten-in-a-row limit, the statistics and the checkpointed state.
This module adds only what is Python's: torch.distributed collectives (TorchCollectives), the
Futures DDP waits for, the state's thread, and pickling.

The hook returns at once: each bucket is queued to the state's thread, which exchanges the
buckets one after the other in DDP's order while backward computes the next ones. Its collectives
run on a process group of the state's own (made with torch.distributed.new_group over the same
ranks when the State is made), so they never interleave with DDP's own collectives
(find_unused_parameters, static_graph) or with another model's on the same group. Read the
state's statistics after backward() returns (the state's thread updates them during it).

A CUDA bucket stays on its GPU (BucketCompressor::exchange_resident): the state's thread works on
the bucket's device, on a stream of its own that waits for an event recorded when DDP handed the
bucket over; residuals, selection and the update live on the device, and only the selected
(index, value) pairs cross the bus (none with NCCL, whose collectives take device memory). The
Future is a CUDA Future of that device, so DDP's stream waits for the update without the host
waiting. backend="cuda-host" runs the same path on the host, with rank r's buckets standing on
fake device r (docs/gpu.md).
"""

import contextlib
import dataclasses
import datetime
import gc
import queue
import threading
import time
import warnings
import weakref

import torch
import torch.distributed as dist

from . import _gradscope
from ._collectives import TorchCollectives, _backend_for  # noqa: F401  (gradscope.ddp.TorchCollectives)
from ._options import check_options_read, compressor_names, density_for, option_texts

_STATE_FORMAT = "gradscope.ddp.State/3"
_ADVICE = "make every rank's gradscope.ddp.State with the same settings"
# What travels: float32 values whatever the bucket's dtype (docs/python.md, "dtypes").
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


# What one training step cost and achieved, over every bucket of this worker: the C++ core's
# compress::StepStats, its fields and defaults as python/src/stats_fields.hpp maps them (n,
# selected, target_density, density, quality, stages, bytes_sent, dense_bytes, gathered_bytes: what
# the all-gathers carried, host_device_bytes and host_device_gathered_bytes for device buckets,
# compress_s, comm_s and hook_s, buckets, skipped, warmup, critical: at density_high).
StepStats = dataclasses.make_dataclass(
    "StepStats", [(name, type(value), dataclasses.field(default=value))
                  for name, value in _gradscope.BucketCompressor.step_stats_defaults().items()])
StepStats.__doc__ = "What one training step cost and achieved, over every bucket of this worker (the C++ core's)."
StepStats.__module__ = __name__  # pickles as gradscope.ddp.StepStats


def _float32(t):
    """t's values as a contiguous float32 tensor where t lives (t itself when it is one)."""
    t = t.detach()
    return t if t.dtype == torch.float32 and t.is_contiguous() else t.to(torch.float32).contiguous()


class _Bucket:
    """One bucket as DDP handed it over, and what the state's thread needs of it."""

    __slots__ = ("index", "keys", "params", "grad", "bucket", "last", "where", "comm", "host", "ready", "result",
                 "hook_s")

    def __init__(self, index, keys, params, grad, bucket, last, where):
        self.index, self.keys, self.params, self.grad, self.bucket = index, keys, params, grad, bucket
        self.last, self.where = last, where  # where: (backend, device) of a bucket left there, or None
        self.comm = self.host = self.ready = self.result = None
        self.hook_s = 0.0


class State:
    """A gradscope compressor for DDP's buckets: its residuals, warm-up, skip rule and statistics.
    One State serves one DDP model: the buckets of a second model it is registered on fail their
    backward() ("one State per DDP model").

    method: any name of `gradscope train --compressor` (gradscope.compressor_names()).
    ratio: the density, the fraction of elements to send, in (0, 1]; default None: 0.01. A method
        that is not density-based (none, the quantizers, variance) runs at 1 and refuses any other.
    process_group: the ranks to average over (default: the whole job). The hook's collectives run
        on a group of their own over the same ranks, made at the first bucket, where every worker
        is: making a State does no communication, so workers may make it wherever they like. A
        group is made by the whole job (torch.distributed.new_group), so with a subgroup pass
        hook_group=, a group you made for the hook alone.
    warmup_steps, warmup ("dense" | "exponential"), warmup_start_ratio: as `gradscope train
        --warmup-steps --warmup-schedule --warmup-start-ratio`.
    density_schedule ("constant" | "accordion"), density_high, density_interval, density_eta: as
        `gradscope train --density-schedule --density-high --density-interval --density-eta`:
        after the warm-up, Accordion's density_high in critical regimes, `ratio` otherwise.
    momentum_correction: DGC's momentum correction (as `gradscope train --momentum-correction`):
        the momentum each worker keeps before sparsification, per parameter (0: off). The
        optimizer must then have no momentum of its own: at its first bucket the State looks for
        the optimizers holding the bucket's parameters and refuses the step when one keeps a
        momentum (SGD's momentum, Adam-like betas[0]), unless optimizer_momentum_ok=True
        (check_optimizer says why, and what to do with Adam).
    history: how many recent steps state.steps keeps (summary() covers every step).
    when ("always" | "auto"), when_interval: as `gradscope train --compress-when --compress-when-interval`:
        with "auto" a step sends dense while dense is the faster exchange (both timed, the choice
        the same on every rank), and looks at the other mode from time to time (every
        when_interval steps, times the ratio of the two times).
    exchange ("allgather" | "shared"): as `gradscope train --exchange`: "shared" all-reduces every
        rank's values at one set of indices per bucket (a rotating leader's selection) instead of
        all-gathering every rank's pairs, so a rank's bytes stay at about k whatever the ranks.
    timeout: seconds any of the hook's collectives may wait for the other workers (default: the
        default process group's, init_process_group(timeout=...)).
    Every rank's settings are compared at the first bucket, and again after load_state_dict, in one
    collective: a rank made with another method, ratio, option, warm-up, schedule or momentum
    correction (or whose gradients have another dtype, or whose optimizer keeps another momentum)
    stops every rank with one line naming the setting and both values.
    variance: for method "variance", a callable(bucket) returning the bucket's per-element sum of
        squared per-sample gradients / B^2 (a tensor like bucket.buffer()).
    options: the compressor options of the C++ table (stages, bits, variance_alpha, variance_zeta,
        fft_exponent_bits, fft_mantissa_bits, fft_chunk, backend, seed); the seed is made per worker.
        An option the method does not read (bits for sidco-e; the registry's row says which it
        reads) is refused, as `gradscope train` refuses its flag; backend is read for every method.
        backend: where the selection runs, "auto" (the default: the GPU when there is a usable
        one), "cuda", "cpu" (a CUDA bucket is then copied to the host and its update back) or
        "cuda-host" (the CUDA path's code on the host, rank r's buckets on fake device r: for
        checking that path without a GPU).
    device_timing: time each CUDA bucket's compress and exchange with CUDA events on the hook's
        stream (device_ms()).
    """

    def __init__(self, method="sidco-e", ratio=None, process_group=None, variance=None,
                 warmup_steps=0, warmup="dense", warmup_start_ratio=0.25, history=1000,
                 timeout=None, hook_group=None, device_timing=False, density_schedule="constant",
                 density_high=0.1, density_interval=20, density_eta=0.5, momentum_correction=0.0,
                 optimizer_momentum_ok=False, when="always", when_interval=50, exchange="allgather", **options):
        names = compressor_names()
        if method not in names:
            raise ValueError(f"unknown compressor {method!r}: use one of {', '.join(names)}")
        check_options_read(method, options, also=("backend",))  # backend: where buckets stay
        density = density_for(method, ratio, default=0.01)
        if not dist.is_initialized():
            raise _gradscope.Error("gradscope.ddp.State needs torch.distributed: call "
                                   "torch.distributed.init_process_group first")
        if timeout is not None and not float(timeout) > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        if int(history) < 1:
            raise ValueError(f"history must be >= 1 (steps kept in state.steps), got {history!r}")
        self.method = method
        self.ratio = density
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.process_group)
        self.world_size = dist.get_world_size(self.process_group)
        self.variance = variance
        self.timeout = None if timeout is None else float(timeout)
        self._seed = int(options.pop("seed", 1))
        options.setdefault("backend", "auto")
        self._option_values = dict(options)  # as given, for pickling
        self._options = option_texts(options)  # as the C++ table reads them
        self._warmup = (int(warmup_steps), str(warmup), float(warmup_start_ratio))
        self._history = int(history)
        texts = dict(self._options, seed=str(self._seed * 1000003 + self.rank))  # one stream a worker
        self._core = _gradscope.BucketCompressor(method, self.ratio, texts, *self._warmup, self._history)
        self._schedule = (str(density_schedule), float(density_high), int(density_interval), float(density_eta))
        self._core.set_density_schedule(*self._schedule)
        self.momentum_correction = float(momentum_correction)
        self._core.set_momentum_correction(self.momentum_correction)
        self.optimizer_momentum_ok = bool(optimizer_momentum_ok)
        self._optimizer_checked = False
        self._when = (str(when), int(when_interval))
        self._core.set_compress_when(*self._when)
        self.exchange_mode = str(exchange)
        self._core.set_exchange(self.exchange_mode)
        if self._core.needs_gradient_variance and variance is None:
            raise ValueError(f"compressor {method!r} weighs elements by their gradient variance: "
                             "give State(variance=callable(bucket) -> tensor)")
        if hook_group is None and self.process_group is not dist.group.WORLD:
            raise ValueError("a State over a subgroup needs hook_group=: a group made for the hook alone "
                             "(torch.distributed.new_group over the subgroup's ranks, made by every process)")
        self._hook_group = hook_group  # None: made at the first bucket
        self._comm = None
        self._device_collectives = None  # None: NCCL's own answer (tests force it over Gloo)
        self._streams = {}  # the hook's CUDA stream per device
        # Parameters by ordinal, in the order DDP first handed them over (every new process of the
        # model numbers them alike, so checkpoints can name them); the groupings of buckets as
        # they came this step (_arrived), as the core saw them (_seen) and the last step's (_layout);
        # after a load, the grouping to restore and the buckets held for it.
        self._ordinals = {}
        self._arrived, self._seen, self._layout = [], [], None
        self._restore, self._held, self._held_layout = None, None, None
        self.device_timing = bool(device_timing)
        self._step_events, self._last_step_events = [], []
        self._tasks = queue.SimpleQueue()
        self._thread = None
        self._busy = threading.Condition()
        self._queued = 0
        self.last_error = None  # the last error a bucket met, as raised (gradscope.Error, ...)
        self._model = set()  # the parameters of the first step's buckets: one State, one model
        self._model_state = "learning"  # until the first step's last bucket: then "known"

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

    def summary(self):
        """Per-step statistics over every finished, non-skipped step, as gradscope train reports."""
        return dict({"method": self.method, "ratio": self.ratio, "workers": self.world_size},
                    **self._core.summary())

    # ---- checkpoints ---------------------------------------------------------------------

    def state_dict(self):
        """Everything that carries from one step to the next (residuals, step count and so the
        warm-up's position, the stage controller, the sampling streams, the skip count and the
        statistics, the grouping of the last step's buckets), plus the settings it belongs to.
        Between steps; waits for queued buckets."""
        self._drain()
        layout = [[index, list(keys)] for index, keys in self._layout or []]
        return {"format": _STATE_FORMAT, "method": self.method, "ratio": self.ratio,
                "options": dict(self._options), "seed": self._seed, "warmup": self._warmup,
                "density_schedule": self._schedule, "momentum_correction": self.momentum_correction,
                "when": self._when, "exchange": self.exchange_mode,
                "history": self._history, "rank": self.rank, "world_size": self.world_size,
                "core": self._core.save_state(), "layout": layout}

    def load_state_dict(self, d):
        """Continues from state_dict() d, saved by the same rank of a run with the same settings.
        The next step goes exactly as it would have gone in the saved run: its buckets reach the
        compressor in the grouping of the saved run's last step, whatever grouping DDP hands them
        over in (a new DDP groups its first step by registration order and regroups after it)."""
        self._drain()
        if not isinstance(d, dict) or d.get("format") != _STATE_FORMAT:
            raise _gradscope.Error("not a gradscope.ddp.State state_dict (or of another version)")
        mine = {"method": self.method, "ratio": self.ratio, "options": self._options,
                "seed": self._seed, "warmup": self._warmup, "density_schedule": self._schedule,
                "momentum_correction": self.momentum_correction, "when": self._when,
                "exchange": self.exchange_mode, "rank": self.rank, "world_size": self.world_size}
        older = {"when": ("always", 50), "exchange": "allgather"}  # state_dicts from before these settings
        for key, value in mine.items():
            theirs = d.get(key, older.get(key))
            theirs = tuple(theirs) if key in ("warmup", "density_schedule", "when") else theirs
            if theirs != value:
                raise _gradscope.Error(f"the state_dict was saved with {key}={theirs!r}, this State has "
                                       f"{key}={value!r}: load each rank's own state into a State made "
                                       "with the same settings")
        layout = [(int(index), tuple(int(k) for k in keys)) for index, keys in d["layout"]]
        self._core.load_state(d["core"])
        self._restore = layout or None

    def __getstate__(self):
        """Pickles the settings and the state; the process groups and the thread stay behind (the
        unpickled State binds the default group, as PowerSGDState does, and makes its own group at
        its first bucket, where every worker is, as every State does)."""
        return {"state": self.state_dict(), "options": self._option_values, "variance": self.variance,
                "timeout": self.timeout, "optimizer_momentum_ok": self.optimizer_momentum_ok}

    def __setstate__(self, pickled):
        s = pickled["state"]
        warmup_steps, warmup, start = s["warmup"]
        schedule, high, interval, eta = s["density_schedule"]
        self.__init__(s["method"], s["ratio"], variance=pickled["variance"], warmup_steps=warmup_steps,
                      warmup=warmup, warmup_start_ratio=start, history=s["history"],
                      timeout=pickled["timeout"], seed=s["seed"], density_schedule=schedule, density_high=high,
                      density_interval=interval, density_eta=eta,
                      momentum_correction=s["momentum_correction"],
                      optimizer_momentum_ok=pickled.get("optimizer_momentum_ok", False),
                      when=s.get("when", ("always", 50))[0], when_interval=s.get("when", ("always", 50))[1],
                      exchange=s.get("exchange", "allgather"), **pickled["options"])
        self.load_state_dict(s)

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
        t0 = time.perf_counter()
        if grad.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"bucket {index} has dtype {grad.dtype}: gradscope compresses float32, "
                            "float16, bfloat16 and float64 gradients")
        self._check_optimizer_once(parameters)
        refused = self._another_model(index, [(id(p), p.numel()) for p in parameters], last)
        keys = [] if refused is not None else [self._ordinals.setdefault(id(p), len(self._ordinals)) for p in parameters]
        b = _Bucket(index, keys, [(k, p.numel()) for k, p in zip(keys, parameters)], grad, bucket, last,
                    self._bucket_device(grad))
        b.comm = self._collectives(grad.device)
        if refused is not None:  # through the Future, in order with the buckets queued before
            b.result = torch.futures.Future()
        elif b.where is None:
            host = grad.detach()
            if host.device.type != "cpu" or host.dtype != torch.float32 or not host.is_contiguous():
                host = host.to(device="cpu", dtype=torch.float32).contiguous()  # values travel as float32
            b.host, b.result = host, torch.futures.Future()
        else:
            if grad.is_cuda:  # the bucket is complete once DDP's stream gets here
                b.ready = torch.cuda.Event()
                b.ready.record(torch.cuda.current_stream(grad.device))
            b.result = torch.futures.Future(devices=[grad.device]) if grad.is_cuda else torch.futures.Future()
        task = (self._refuse, (b, refused)) if refused is not None else self._task_for(b)
        b.hook_s = time.perf_counter() - t0
        if task is not None:
            self._start_thread()
            with self._busy:
                self._queued += 1
            self._tasks.put((self, *task))
        return b.result

    def _task_for(self, b):
        """What the state's thread does with bucket b: (method, argument), or None while b waits
        for the rest of a step regrouped into the restored grouping."""
        self._arrived.append((b.index, tuple(b.keys)))
        at = len(self._arrived) - 1
        if self._restore is not None and self._held is None:
            if at >= len(self._restore) or self._restore[at] != self._arrived[at]:
                self._held, self._held_layout = [], self._restore[at:]
        if b.last:
            self._arrived, self._restore = [], None
        if self._held is None:
            return (self._bucket_on_device if b.where else self._bucket), b
        self._held.append(b)
        if not b.last:
            return None
        held, self._held = self._held, None
        return self._regrouped, (held, self._held_layout)

    def _another_model(self, index, params, last):
        """The error for a bucket of a second DDP model this State is registered on, else None.
        The first step's buckets name the model's parameters; later, a bucket holding another
        parameter is another model's, and so is, in the first step, a second bucket 0 of
        parameters not seen yet (DDP hands a model's buckets over from bucket 0 on)."""
        keys = {key for key, _ in params}
        if self._model_state == "known":
            unseen = not keys <= self._model
        elif self._model_state == "abandoned":  # the rest of a first step another model joined
            self._model_state = "learning" if last else "abandoned"
            return None  # the core refuses it: the step failed
        else:
            unseen = index == 0 and bool(self._model) and keys.isdisjoint(self._model)
            if unseen:  # learn again from the next step, without the other model's buckets
                self._model, self._model_state = set(), "learning" if last else "abandoned"
            else:
                self._model |= keys
                self._model_state = "known" if last else "learning"
        if not unseen:
            return None
        return _gradscope.Error(f"bucket {index} holds parameters this State did not see in its first "
                                "step: one State per DDP model (it is registered on a second model); "
                                "make a gradscope.ddp.State for each model")

    def _refuse(self, job):
        """A bucket refused before the core saw it, on the state's thread: the step is abandoned."""
        b, error = job
        self._fail([b], error, False)

    def _bucket_device(self, grad):
        """(backend, device) where a bucket stays, or None for the host path."""
        if grad.is_cuda and _gradscope.cuda_built():
            return ("cuda", grad.device.index if grad.device.index is not None else torch.cuda.current_device())
        if not grad.is_cuda and self._options.get("backend") == "cuda-host":
            return ("cuda-host", self.rank)
        return None

    def _variance(self, bucket):
        """The bucket's variance as a float32 host tensor, when the compressor weighs by it."""
        if not self._core.needs_gradient_variance:
            return None
        return self.variance(bucket).detach().to(device="cpu", dtype=torch.float32).contiguous()

    def _core_exchange(self, b, index, work, params, last, variance, hook_s):
        """The core's exchange of one bucket's float32 values `work` (host memory on the host path,
        updated in place on a device; the host path's update is returned)."""
        v_address, v_n = (0, 0) if variance is None else (variance.data_ptr(), variance.numel())
        self._seen.append((index, tuple(k for k, _ in params)))
        if last:
            self._layout, self._seen = self._seen, []
        if b.where is None:
            out = torch.empty(work.numel(), dtype=torch.float32)
            self._core.exchange(index, work.data_ptr(), work.numel(), params, b.comm, out.data_ptr(), last,
                                v_address, v_n, hook_s, b.grad.element_size())  # dense bytes in its dtype
        else:
            backend, device = b.where
            stream = (torch.cuda.current_stream(device).cuda_stream if backend == "cuda"
                      else _gradscope.cuda_host_caller_stream(device))
            self._core.exchange_resident(index, work.data_ptr(), work.numel(), params, b.comm, last, v_address,
                                         v_n, hook_s, backend, device, stream, b.grad.element_size())
            out = work
        if last:
            warning = self._core.take_warning()
            if warning:
                warnings.warn(f"gradscope.ddp.State({self.method!r}, ratio={self.ratio:g}): {warning} "
                              "(state.steps; docs/python.md, 'Density')", RuntimeWarning, stacklevel=2)
        return out

    def _shared_settings(self, optimizer_momentum):
        """What every rank's State must share, as (keyword, value) texts: compared across the ranks
        by the core at the first bucket and after load_state_dict (the kernels backend may differ
        between ranks; the seed is compared as given, before each rank's own is made from it)."""
        rows = {row["key"]: row for row in _gradscope.compressor_options()}
        options = [(key, self._options.get(key, row["default"])) for key, row in rows.items()
                   if key not in ("backend", "seed")]
        warmup_steps, warmup, start = self._warmup
        schedule, high, interval, eta = self._schedule
        return [("method", self.method), ("ratio", repr(self.ratio)), *options, ("seed", str(self._seed)),
                ("warmup_steps", str(warmup_steps)), ("warmup", warmup), ("warmup_start_ratio", repr(start)),
                ("density_schedule", schedule), ("density_high", repr(high)), ("density_interval", str(interval)),
                ("density_eta", repr(eta)), ("momentum_correction", repr(self.momentum_correction)),
                ("when", self._when[0]), ("when_interval", str(self._when[1])), ("exchange", self.exchange_mode),
                ("the optimizer's momentum", optimizer_momentum)]

    def _check_optimizer_once(self, parameters):
        """At the first bucket: the optimizers holding its parameters (found among Python's live
        objects), their momentum as a shared setting, and momentum correction refused beside an
        optimizer that keeps momentum of its own unless optimizer_momentum_ok. The refusal comes
        from the core after the ranks agree on the settings, so every rank stops alike."""
        if self._optimizer_checked:
            return
        self._optimizer_checked = True
        found = _optimizer_momenta(parameters)
        self._core.set_shared_settings(self._shared_settings(", ".join(found) or "none"), _ADVICE)
        if self.momentum_correction > 0 and found and not self.optimizer_momentum_ok:
            self._core.refuse_steps(
                f"gradscope.ddp.State(momentum_correction={self.momentum_correction:g}) keeps the momentum in the "
                f"hook, and the optimizer holding the model's parameters keeps one of its own ({found[0]}): the "
                "momentum would apply twice; make it torch.optim.SGD(..., momentum=0), or give "
                "State(..., optimizer_momentum_ok=True) if you mean it (gradscope.ddp.check_optimizer explains)")

    def _fail(self, buckets, error, closed):
        """Every bucket's Future gets the error; the core abandons the step unless it saw the last
        bucket (it abandons a failed step itself)."""
        if not closed:
            self._core.fail_bucket(buckets[-1].last)
        self._seen = []
        self.last_error = error
        for b in buckets:
            b.result.set_exception(error)

    def _bucket(self, b):
        """One bucket on the host, on the state's thread."""
        reached = False  # whether the core saw the bucket
        try:
            variance = self._variance(b.bucket)
            reached = True
            out = self._core_exchange(b, b.index, b.host, b.params, b.last, variance, b.hook_s)
            b.result.set_result(out if out.dtype == b.grad.dtype and b.grad.device.type == "cpu"
                                else out.to(device=b.grad.device, dtype=b.grad.dtype))
        except Exception as e:  # noqa: BLE001 - every error reaches the caller through its Future
            self._fail([b], e, reached)

    def _bucket_on_device(self, b):
        """One bucket left on its device, on the state's thread: worked on a stream of the hook's
        that waits for the bucket, the update written into grad there."""
        reached = False
        try:
            with self._on_device(b.where, [b]) as stream:
                start = self._start_timing(stream)
                work = _float32(b.grad)
                variance = self._variance(b.bucket)
                reached = True
                self._core_exchange(b, b.index, work, b.params, b.last, variance, b.hook_s)
                if work.data_ptr() != b.grad.data_ptr():
                    b.grad.copy_(work)
                self._end_timing(stream, start, b.last)
                b.result.set_result(b.grad)  # a CUDA Future: records an event on this stream
        except Exception as e:  # noqa: BLE001
            self._fail([b], e, reached)

    @contextlib.contextmanager
    def _on_device(self, where, buckets):
        """For a CUDA bucket: this thread on its device, on the hook's stream of that device, which
        waits for the buckets to be ready (yields the stream; None for cuda-host and the host)."""
        if where is None or where[0] != "cuda":
            yield None
            return
        device = where[1]
        with torch.cuda.device(device):
            stream = self._streams.get(device)
            if stream is None:
                stream = self._streams[device] = torch.cuda.Stream(device)
            for b in buckets:
                stream.wait_event(b.ready)
            with torch.cuda.stream(stream):
                yield stream

    def _regrouped(self, job):
        """The rest of a step after a resume, in the grouping the saved step had: each parameter's
        values gathered from the buckets DDP handed over into the saved buckets, which the core
        exchanges in their saved order, and each handed bucket's update gathered back. When the
        parameters differ from the saved step's (another model), the buckets go as handed over."""
        held, layout = job
        pieces = {}  # ordinal -> (bucket, offset, numel)
        for b in held:
            offset = 0
            for k, n in b.params:
                pieces[k] = (b, offset, n)
                offset += n
        if sorted(k for _, keys in layout for k in keys) != sorted(pieces):
            layout = [(b.index, tuple(b.keys)) for b in held]
        closed = False
        try:
            for b in held:  # ordinals in the order DDP first handed the parameters over
                self._core.name_parameters(b.index, b.params)
            with self._on_device(held[0].where, held) as stream:
                start = self._start_timing(stream)
                values = {id(b): (b.host if b.where is None else b.grad.detach()) for b in held}
                variances = {id(b): self._variance(b.bucket) for b in held}
                hook_s = sum(b.hook_s for b in held)
                update = {}
                for j, (index, keys) in enumerate(layout):
                    part = [pieces[k] for k in keys]
                    work = _float32(torch.cat([values[id(b)][o:o + n] for b, o, n in part]))
                    variance = (None if variances[id(held[0])] is None
                                else torch.cat([variances[id(b)][o:o + n] for b, o, n in part]))
                    last = j == len(layout) - 1
                    closed = last
                    out = self._core_exchange(held[0], index, work, [(k, n) for k, (_, _, n) in zip(keys, part)],
                                              last, variance, hook_s if last else 0.0)
                    offset = 0
                    for k, (_, _, n) in zip(keys, part):
                        update[k] = out[offset:offset + n]
                        offset += n
                for b in held:
                    mine = torch.cat([update[k] for k in b.keys])
                    if b.where is None:
                        b.result.set_result(mine.to(device=b.grad.device, dtype=b.grad.dtype))
                    else:
                        b.grad.copy_(mine)
                        b.result.set_result(b.grad)
                self._end_timing(stream, start, True)
        except Exception as e:  # noqa: BLE001
            self._fail(held, e, closed)

    def _start_timing(self, stream):
        if not self.device_timing:
            return None
        start = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        return start

    def _end_timing(self, stream, start, last):
        if start is None:
            return
        end = torch.cuda.Event(enable_timing=True)
        end.record(stream)
        self._step_events.append((start, end))
        if last:
            self._last_step_events, self._step_events = self._step_events, []

    def device_ms(self):
        """With device_timing: the milliseconds the last finished step's CUDA buckets spent in
        compress and exchange on the hook's stream, from each bucket being ready to its update being
        written (CUDA events; waits for them)."""
        if not self.device_timing:
            raise _gradscope.Error("device_ms() needs State(..., device_timing=True)")
        total = 0.0
        for start, end in self._last_step_events:
            end.synchronize()
            total += start.elapsed_time(end)
        return total

    def _new_hook_group(self):
        """The hook's own group over the state's ranks, with `timeout` or else the default group's."""
        ranks = dist.get_process_group_ranks(self.process_group)
        timeout = datetime.timedelta(seconds=self.timeout) if self.timeout is not None else _default_timeout()
        return dist.new_group(ranks=ranks, backend=dist.get_backend(self.process_group), timeout=timeout)

    def _collectives(self, device):
        """The hook's own process group as the C++ core's Collectives (made here, at the first
        bucket of the first step, where every worker is)."""
        if self._comm is None:
            if self._hook_group is None:
                self._hook_group = self._new_hook_group()
            self._comm = TorchCollectives(self._hook_group, device, self._device_collectives)
        return self._comm

    def _start_thread(self):
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=_run_tasks, args=(self._tasks,), daemon=True,
                                        name="gradscope-ddp")
        self._thread.start()
        # Ended with the state, and at the latest at exit: a daemon thread still alive when Python
        # finalizes is unwound through C++ frames that cannot be, which aborts.
        weakref.finalize(self, _stop_tasks, self._tasks, self._thread)

    def _done_one(self):
        with self._busy:
            self._queued -= 1
            self._busy.notify_all()

    def _drain(self, timeout_s=600.0):
        """Waits until every queued bucket is done (a checkpoint is taken between steps)."""
        with self._busy:
            if not self._busy.wait_for(lambda: self._queued == 0, timeout=timeout_s):
                raise _gradscope.Error(f"{self._queued} bucket(s) still queued after {timeout_s:g} s: "
                                       "take the state between steps")
        if self._core.mid_step or self._arrived:
            raise _gradscope.Error("the state is mid-step (its last bucket has not come yet): take it "
                                   "between steps, after backward() returned")


def _run_tasks(tasks):
    """The state's thread: runs each queued bucket in order. It holds the queue and, per task, a
    strong reference to the state only while the task runs, so a state nobody uses any more is
    collected (its finalizer, _stop_tasks, ends the thread)."""
    while True:
        item = tasks.get()
        if item is None:
            return
        state, run, arg = item  # run: the state's _bucket, _bucket_on_device or _regrouped
        try:
            run(arg)
        finally:
            state._done_one()
        del state, run, arg, item


def _stop_tasks(tasks, thread, timeout_s=30.0):
    """Ends the state's thread once its queued buckets are done (waiting at most timeout_s: a
    collective stuck on a dead peer ends by its own timeout, not here)."""
    tasks.put(None)
    if thread is not threading.current_thread():
        thread.join(timeout_s)


def _default_timeout():
    """The timeout the default process group was made with (init_process_group(timeout=...)), or
    torch's default when this torch does not say."""
    group = dist.distributed_c10d._get_default_group()
    for get in (lambda: group.options._timeout,
                lambda: group._get_backend(torch.device("cpu")).options._timeout):
        try:
            return get()
        except (AttributeError, RuntimeError, TypeError):
            continue
    return dist.distributed_c10d.default_pg_timeout


def _momentum_of(group):
    """A parameter group's own momentum, as text ("SGD momentum 0.9", "betas[0] 0.9"), or None."""
    if group.get("momentum", 0):
        return f"momentum {group['momentum']:g}"
    betas = group.get("betas")
    if betas is not None and betas[0]:
        return f"betas[0] {betas[0]:g}"
    return None


def _optimizer_momenta(parameters):
    """For each torch.optim.Optimizer alive that holds any of `parameters`: its class and the
    momentum of its own that the parameter groups holding them keep (SGD's momentum, Adam-like
    betas[0]), as texts; empty when none keeps any."""
    wanted = {id(p) for p in parameters}
    found = []
    for obj in gc.get_objects():
        if not issubclass(type(obj), torch.optim.Optimizer):  # type(): no attribute of obj is read
            continue
        for group in obj.param_groups:
            momentum = _momentum_of(group)
            if momentum and any(id(p) in wanted for p in group["params"]):
                found.append(f"{type(obj).__name__} {momentum}")
                break
    return sorted(found)


def check_optimizer(optimizer, state):
    """Raises gradscope.Error when `state` applies momentum correction and `optimizer` keeps a
    momentum of its own: the momentum then lives in the hook, before sparsification, and a second
    one in the optimizer would apply it twice. Call it once, after making both."""
    if state.momentum_correction <= 0:
        return
    for i, group in enumerate(optimizer.param_groups):
        momentum = _momentum_of(group)
        if momentum is None:
            continue
        if group.get("betas") is not None:
            raise _gradscope.Error(
                f"State(momentum_correction={state.momentum_correction:g}) keeps a momentum (a running sum of the "
                f"gradient) in the hook, and {type(optimizer).__name__}'s parameter group {i} keeps its own first "
                f"moment ({momentum}): Adam-like optimizers average the hook's velocity again, so the update "
                "lags twice. Give the optimizer betas=(0.0, beta2) to keep only its per-coordinate scaling of the "
                "hook's velocity, or drop momentum_correction (error feedback alone works with Adam as it is)")
        raise _gradscope.Error(
            f"State(momentum_correction={state.momentum_correction:g}) keeps the momentum in the hook, and "
            f"the optimizer's parameter group {i} has one of its own ({momentum}): make it torch.optim.SGD(..., "
            "momentum=0) (or drop momentum_correction and keep the optimizer's momentum)")


def _value(fut):
    """The bucket's update, or its error raised: in a then() callback, which gives DDP a Future
    completed with an error (it re-raises it from backward() as a RuntimeError with this message)
    rather than a value it cannot use."""
    return fut.wait()


def hook(state, bucket):
    """DDP communication hook: model.register_comm_hook(gradscope.ddp.State(...), gradscope.ddp.hook)."""
    fut = state.exchange(bucket.index(), bucket.buffer(), bucket.parameters(), bucket.is_last(), bucket)
    return fut.then(_value)
