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

import ctypes
import datetime
import queue
import threading
import time
import weakref
from dataclasses import dataclass

import torch
import torch.distributed as dist

from . import _gradscope
from ._options import check_options_read, compressor_names, density_for, option_texts

_STATE_FORMAT = "gradscope.ddp.State/1"
_AT_FIRST_STEP = object()  # hook_group of an unpickled State: made at its first step
# What travels: float32 values whatever the bucket's dtype (docs/python.md, "dtypes").
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


@dataclass
class StepStats:
    """What one training step cost and achieved, over every bucket of this worker (computed by
    the C++ core)."""

    n: int = 0
    selected: int = 0
    target_density: float = 1.0
    density: float = 0.0
    quality: float = 0.0
    stages: int = 0
    bytes_sent: int = 0
    dense_bytes: int = 0
    gathered_bytes: int = 0  # what the all-gathers carried: whole encodings, padded to the longest
    host_device_bytes: int = 0  # device buckets: bytes that crossed between host and device
    host_device_gathered_bytes: int = 0  # of which other workers' selections, via a host gather
    compress_s: float = 0.0  # accumulating, selecting, encoding, decoding (the state's thread)
    comm_s: float = 0.0      # inside collectives
    hook_s: float = 0.0      # inside the hook calls, which DDP's backward waits for
    buckets: int = 0
    skipped: bool = False
    warmup: bool = False


def _tensor_at(address, n, dtype, device):
    """The n elements of dtype at address in device's memory, as a tensor that does not own them
    (the C++ core keeps them alive for the call)."""
    if device.type == "cuda":
        typestr = {torch.float32: "<f4", torch.int32: "<i4"}[dtype]

        class _Memory:  # the CUDA array interface: torch reads device memory through it
            __cuda_array_interface__ = {"shape": (n,), "typestr": typestr, "data": (address, False),
                                        "version": 2}

        return torch.as_tensor(_Memory(), device=device)
    ctype = {torch.float32: ctypes.c_float, torch.int32: ctypes.c_int32}[dtype]
    return torch.frombuffer((ctype * n).from_address(address), dtype=dtype) if n else torch.empty(0, dtype=dtype)


class TorchCollectives:
    """gs::compress::Collectives over torch.distributed: the C++ core hands NumPy views of its
    buffers; each call reduces in place (or returns every worker's bytes), synchronously. With
    device_collectives (NCCL, which reduces device memory), it also serves the core's
    DeviceCollectives: device memory at the addresses given, wrapped as tensors of `device`."""

    def __init__(self, group, device, device_collectives=None):
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        nccl = dist.get_backend(group) == "nccl"
        # Host buffers travel in host memory unless the backend reduces device memory only (NCCL):
        # Gloo would copy a CUDA tensor to the host for its own work anyway.
        self.device = device if nccl else torch.device("cpu")
        if device_collectives is None:
            device_collectives = device.type == "cuda" and nccl
        self.device_collectives = bool(device_collectives)

    def allgather_counts(self, mine):
        t = torch.tensor([mine], dtype=torch.int64, device=self.device)
        outs = [torch.empty_like(t) for _ in range(self.world_size)]
        dist.all_gather(outs, t, group=self.group)
        return torch.cat(outs).tolist()

    def allgather_pairs(self, indices, values, count, indices_all, values_all):
        for address, all_address, dtype in ((indices, indices_all, torch.int32), (values, values_all, torch.float32)):
            mine = _tensor_at(address, count, dtype, self.device)
            every = _tensor_at(all_address, count * self.world_size, dtype, self.device)
            dist.all_gather(list(every.chunk(self.world_size)), mine, group=self.group)

    def allreduce_sum_device(self, address, n):
        dist.all_reduce(_tensor_at(address, n, torch.float32, self.device), group=self.group)

    def _reduce(self, array, op):
        t = torch.from_numpy(array)
        if self.device.type == "cpu":
            dist.all_reduce(t, op=op, group=self.group)
        else:  # NCCL reduces device memory
            on_device = t.to(self.device)
            dist.all_reduce(on_device, op=op, group=self.group)
            t.copy_(on_device.cpu())

    def allreduce_max(self, array):
        self._reduce(array, dist.ReduceOp.MAX)

    def allreduce_min(self, array):
        self._reduce(array, dist.ReduceOp.MIN)

    def allreduce_sum(self, array):
        self._reduce(array, dist.ReduceOp.SUM)

    def allgather(self, array):
        """Every worker's bytes in rank order: their sizes first, then the bytes padded to the
        longest (Gloo gathers equal sizes only)."""
        mine = torch.tensor([array.size], dtype=torch.int64, device=self.device)
        sizes = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(sizes, mine, group=self.group)
        sizes = [int(s.item()) for s in sizes]
        longest = max(max(sizes), 1)  # Gloo wants non-empty buffers
        padded = torch.zeros(longest, dtype=torch.uint8, device=self.device)
        padded[: array.size] = torch.from_numpy(array).to(self.device)
        outs = [torch.empty(longest, dtype=torch.uint8, device=self.device) for _ in sizes]
        dist.all_gather(outs, padded, group=self.group)
        return [bytes(o[:s].cpu().numpy()) for o, s in zip(outs, sizes)]


class State:
    """A gradscope compressor for DDP's buckets: its residuals, warm-up, skip rule and statistics.
    One State serves one DDP model: the buckets of a second model it is registered on fail their
    backward() ("one State per DDP model").

    method: any name of `gradscope train --compressor` (gradscope.compressor_names()).
    ratio: the density, the fraction of elements to send, in (0, 1]; default None: 0.01. A method
        that is not density-based (none, the quantizers, variance) runs at 1 and refuses any other.
    process_group: the ranks to average over (default: the whole job). The hook's collectives run
        on a group of their own over the same ranks, made here; making it is a collective of the
        whole job (torch.distributed.new_group: every process makes its State at the same point, as
        it makes DDP), so with a subgroup pass hook_group=, a group you made for the hook alone.
    warmup_steps, warmup ("dense" | "exponential"), warmup_start_ratio: as `gradscope train
        --warmup-steps --warmup-schedule --warmup-start-ratio`.
    history: how many recent steps state.steps keeps (summary() covers every step).
    timeout: seconds any of the hook's collectives may wait for the other workers (default: torch's
        default for new groups, 30 minutes).
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
                 timeout=None, hook_group=None, device_timing=False, **options):
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
        if self._core.needs_gradient_variance and variance is None:
            raise ValueError(f"compressor {method!r} weighs elements by their gradient variance: "
                             "give State(variance=callable(bucket) -> tensor)")
        self._hook_group = None if hook_group is _AT_FIRST_STEP else hook_group or self._new_hook_group()
        self._comm = None
        self._device_collectives = None  # None: NCCL's own answer (tests force it over Gloo)
        self._streams = {}  # the hook's CUDA stream per device
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
        statistics), plus the settings it belongs to. Between steps; waits for queued buckets."""
        self._drain()
        return {"format": _STATE_FORMAT, "method": self.method, "ratio": self.ratio,
                "options": dict(self._options), "seed": self._seed, "warmup": self._warmup,
                "history": self._history, "rank": self.rank, "world_size": self.world_size,
                "core": self._core.save_state()}

    def load_state_dict(self, d):
        """Continues from state_dict() d, saved by the same rank of a run with the same settings."""
        self._drain()
        if not isinstance(d, dict) or d.get("format") != _STATE_FORMAT:
            raise _gradscope.Error("not a gradscope.ddp.State state_dict (or of another version)")
        mine = {"method": self.method, "ratio": self.ratio, "options": self._options,
                "seed": self._seed, "warmup": self._warmup, "rank": self.rank,
                "world_size": self.world_size}
        for key, value in mine.items():
            theirs = tuple(d[key]) if key == "warmup" else d.get(key)
            if theirs != value:
                raise _gradscope.Error(f"the state_dict was saved with {key}={theirs!r}, this State has "
                                       f"{key}={value!r}: load each rank's own state into a State made "
                                       "with the same settings")
        self._core.load_state(d["core"])

    def __getstate__(self):
        """Pickles the settings and the state; the process groups and the thread stay behind (the
        unpickled State binds the default group, as PowerSGDState does, and makes its own group at
        its first step, where every worker is)."""
        return {"state": self.state_dict(), "options": self._option_values, "variance": self.variance,
                "timeout": self.timeout}

    def __setstate__(self, pickled):
        s = pickled["state"]
        warmup_steps, warmup, start = s["warmup"]
        self.__init__(s["method"], s["ratio"], variance=pickled["variance"], warmup_steps=warmup_steps,
                      warmup=warmup, warmup_start_ratio=start, history=s["history"],
                      timeout=pickled["timeout"], hook_group=_AT_FIRST_STEP, seed=s["seed"],
                      **pickled["options"])
        self.load_state_dict(s)

    # ---- one bucket ----------------------------------------------------------------------

    def exchange(self, index, grad, parameters, last=True, bucket=None):
        """The compressed exchange of one bucket: a Future whose value is the mean update, in
        grad's dtype and on its device (wait() raises the bucket's error as it was raised).

        grad: the bucket's flat gradient (float32, float16, bfloat16 or float64); parameters: the
        parameters laid end to end in it. Returns at once; the state's thread does the work,
        bucket after bucket in call order; the last bucket's Future completes once the step is
        closed (state.steps updated). A bucket on a device (CUDA, or cuda-host's stand-in) gets its
        update written into grad itself, on the device."""
        t0 = time.perf_counter()
        if grad.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"bucket {index} has dtype {grad.dtype}: gradscope compresses float32, "
                            "float16, bfloat16 and float64 gradients")
        params = [(id(p), p.numel()) for p in parameters]
        comm = self._collectives(grad.device)
        device = self._bucket_device(grad)
        refused = self._another_model(index, params, last)
        if refused is not None:  # through the Future, in order with the buckets queued before
            task, result = (self._refuse, refused), torch.futures.Future()
        elif device is None:
            host = grad.detach()
            if host.device.type != "cpu" or host.dtype != torch.float32 or not host.is_contiguous():
                host = host.to(device="cpu", dtype=torch.float32).contiguous()  # values travel as float32
            task, result = (self._bucket, host), torch.futures.Future()
        else:
            ready = None
            if grad.is_cuda:  # the bucket is complete once DDP's stream gets here
                ready = torch.cuda.Event()
                ready.record(torch.cuda.current_stream(grad.device))
            task = (self._bucket_on_device, device, ready)
            result = torch.futures.Future(devices=[grad.device]) if grad.is_cuda else torch.futures.Future()
        self._start_thread()
        with self._busy:
            self._queued += 1
        hook_s = time.perf_counter() - t0
        self._tasks.put((self, task, result, index, params, comm, last, bucket, grad, hook_s))
        return result

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

    def _refuse(self, task, result, index, params, comm, last, bucket, grad, hook_s):
        """A bucket refused before the core saw it, on the state's thread: the step is abandoned."""
        _, error = task
        self._core.fail_bucket(last)
        self.last_error = error
        result.set_exception(error)

    def _bucket_device(self, grad):
        """(backend, device) where a bucket stays, or None for the host path."""
        if grad.is_cuda and _gradscope.cuda_built():
            return ("cuda", grad.device.index if grad.device.index is not None else torch.cuda.current_device())
        if not grad.is_cuda and self._options.get("backend") == "cuda-host":
            return ("cuda-host", self.rank)
        return None

    def _variance_on_host(self, bucket):
        if not self._core.needs_gradient_variance:
            return None, 0, 0
        v = self.variance(bucket).detach().to(device="cpu", dtype=torch.float32).contiguous()
        return v, v.data_ptr(), v.numel()

    def _bucket(self, task, result, index, params, comm, last, bucket, grad, hook_s):
        """One bucket on the host, on the state's thread."""
        _, host = task
        reached = False  # whether the core saw the bucket (it abandons a failed step itself)
        try:
            out = torch.empty(host.numel(), dtype=torch.float32)
            v, v_address, v_n = self._variance_on_host(bucket)
            reached = True
            self._core.exchange(index, host.data_ptr(), host.numel(), params, comm, out.data_ptr(), last,
                                v_address, v_n, hook_s, grad.element_size())  # dense bytes in grad's dtype
            result.set_result(out if out.dtype == grad.dtype and grad.device.type == "cpu"
                              else out.to(device=grad.device, dtype=grad.dtype))
        except Exception as e:  # noqa: BLE001 - every error reaches the caller through its Future
            if not reached:
                self._core.fail_bucket(last)
            self.last_error = e
            result.set_exception(e)

    def _bucket_on_device(self, task, result, index, params, comm, last, bucket, grad, hook_s):
        """One bucket left on its device, on the state's thread: worked on a stream of the hook's
        that waits for the bucket, the update written into grad there."""
        _, (backend, device), ready = task
        reached = False  # whether the core saw the bucket (it abandons a failed step itself)
        try:
            if backend == "cuda":
                with torch.cuda.device(device):  # this thread works on the bucket's device
                    stream = self._streams.get(device)
                    if stream is None:
                        stream = self._streams[device] = torch.cuda.Stream(device)
                    stream.wait_event(ready)
                    with torch.cuda.stream(stream):
                        start = self._start_timing(stream)
                        work, v, v_address, v_n = self._device_inputs(grad, bucket)
                        reached = True
                        self._core.exchange_resident(index, work.data_ptr(), work.numel(), params, comm, last,
                                                     v_address, v_n, hook_s, backend, device, stream.cuda_stream,
                                                     grad.element_size())
                        if work.data_ptr() != grad.data_ptr():
                            grad.copy_(work)
                        self._end_timing(stream, start, last)
                        result.set_result(grad)  # a CUDA Future: records an event on this stream
            else:  # cuda-host, with its stand-in for torch's current stream of the device
                work, v, v_address, v_n = self._device_inputs(grad, bucket)
                reached = True
                self._core.exchange_resident(index, work.data_ptr(), work.numel(), params, comm, last, v_address,
                                             v_n, hook_s, backend, device, _gradscope.cuda_host_caller_stream(device),
                                             grad.element_size())
                if work.data_ptr() != grad.data_ptr():
                    grad.copy_(work)
                result.set_result(grad)
        except Exception as e:  # noqa: BLE001 - every error reaches the caller through its Future
            if not reached:
                self._core.fail_bucket(last)
            self.last_error = e
            result.set_exception(e)

    def _device_inputs(self, grad, bucket):
        """The bucket as float32 where it lives (a copy only for other dtypes, made on the current
        stream), and its variance on the host when the compressor weighs by it."""
        work = grad.detach()
        if work.dtype != torch.float32 or not work.is_contiguous():
            work = work.to(torch.float32).contiguous()
        return (work, *self._variance_on_host(bucket))

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
        ranks = dist.get_process_group_ranks(self.process_group)
        kwargs = {} if self.timeout is None else {"timeout": datetime.timedelta(seconds=self.timeout)}
        return dist.new_group(ranks=ranks, backend=dist.get_backend(self.process_group), **kwargs)

    def _collectives(self, device):
        """The hook's own process group as the C++ core's Collectives (an unpickled state makes
        its group here, at the first bucket of its first step, where every worker is)."""
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
        if self._core.mid_step:
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
        state, task, *args = item
        try:
            run = task[0]  # the state's _bucket or _bucket_on_device
            run(task, *args)
        finally:
            state._done_one()
        del state, task, run, args, item


def _stop_tasks(tasks, thread, timeout_s=30.0):
    """Ends the state's thread once its queued buckets are done (waiting at most timeout_s: a
    collective stuck on a dead peer ends by its own timeout, not here)."""
    tasks.put(None)
    if thread is not threading.current_thread():
        thread.join(timeout_s)


def _value(fut):
    """The bucket's update, or its error raised: in a then() callback, which gives DDP a Future
    completed with an error (it re-raises it from backward() as a RuntimeError with this message)
    rather than a value it cannot use."""
    return fut.wait()


def hook(state, bucket):
    """DDP communication hook: model.register_comm_hook(gradscope.ddp.State(...), gradscope.ddp.hook)."""
    fut = state.exchange(bucket.index(), bucket.buffer(), bucket.parameters(), bucket.is_last(), bucket)
    return fut.then(_value)
