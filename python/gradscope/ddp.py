"""gradscope's compressors as a DistributedDataParallel communication hook.

    state = gradscope.ddp.State(method="sidco-e", ratio=0.01)
    model.register_comm_hook(state, gradscope.ddp.hook)

The hook returns at once: each bucket is queued to the state's own thread, which does its work in
DDP's bucket order (so every worker issues its collectives in the same order) while backward goes
on computing the next buckets' gradients, as PowerSGD's hook does its work in its futures'
callbacks. Each bucket goes through the same C++ compressor `gradscope train` uses, with error
feedback kept per parameter (what is not sent waits in a residual and joins the next step's
gradient: the residual invariant holds exactly, as in the C++ ModelCompressor), and is exchanged
with torch.distributed on the state's process group:
- sparse selections (sidco-*, topk, dgc, redsync, gaussianksgd, randomk, variance): each worker's
  encoded payload is all-gathered, asynchronously, so DDP overlaps it with the rest of backward;
  the mean is decoded by the C++ core, in rank order, as ModelCompressor::step decodes it;
- none: an asynchronous all-reduce of the bucket;
- the quantizers and fft: their own rounds (all-reduce MAX/MIN/SUM, all-gather of bytes) over
  torch.distributed (TorchCollectives), one after the other on the state's thread.
A NaN or Inf in any worker's bucket: every worker gets zeros for it, nothing enters the residual,
the step counts as skipped (state.step_skipped; skip the optimizer step), and 10 skipped steps in
a row raise gradscope.Error, as in `gradscope train`.
"""

import math
import queue
import threading
import time
import weakref
from dataclasses import dataclass

import torch
import torch.distributed as dist

from . import _gradscope
from ._options import compressor_names, option_texts
from ._tensors import check_density, compress_where_it_lives, float32_view

MAX_SKIPPED_IN_A_ROW = 10
_COUNTING = threading.Lock()  # one for every StepStats, which stay plain (picklable) values


@dataclass
class StepStats:
    """What one training step cost and achieved, over every bucket of this worker."""

    n: int = 0
    selected: int = 0
    target_density: float = 1.0
    bytes_sent: int = 0
    dense_bytes: int = 0
    gathered_bytes: int = 0  # what this worker's all-gather buffers carried: whole encodings,
                             # padded to the longest worker's (Gloo gathers equal sizes only)
    compress_s: float = 0.0  # accumulating, selecting, encoding, decoding (this worker's work)
    comm_s: float = 0.0      # inside collectives (until the asynchronous ones completed)
    hook_s: float = 0.0      # wall time of the hook calls, which DDP's backward waits for
    skipped: bool = False
    buckets: int = 0

    def add(self, **amounts):
        """Adds to counters; the state's thread and the collectives' callbacks both count."""
        with _COUNTING:
            for name, amount in amounts.items():
                setattr(self, name, getattr(self, name) + amount)

    @property
    def density(self):
        return self.selected / self.n if self.n else 0.0

    @property
    def quality(self):
        return self.density / self.target_density if self.target_density > 0 else 0.0


class TorchCollectives:
    """gs::compress::Collectives over torch.distributed, for the compressors with their own
    exchange rounds. The C++ core hands NumPy views of its buffers; each call reduces in place."""

    def __init__(self, group, device):
        self.group = group
        self.device = device
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)

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
        sizes = gather_ints([array.size], self.group, self.device)
        parts, work = gather_padded(torch.from_numpy(array.copy()), [s[0] for s in sizes], self.group,
                                    self.device)
        work.wait()
        return [bytes(p.cpu().numpy()) for p in parts]


def gather_ints(values, group, device):
    """Every worker's list of ints (the same length everywhere), in rank order: one small
    synchronous all-gather."""
    mine = torch.tensor(values, dtype=torch.int64, device=device)
    all_ = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(all_, mine, group=group)
    return [t.tolist() for t in all_]


def gather_padded(mine, sizes, group, device):
    """The asynchronous all-gather of every worker's uint8 tensor, padded to the longest (sizes:
    every worker's length, from gather_ints). Returns (each worker's bytes, as views into the
    output buffers, valid once the work is done; the work)."""
    longest = max(max(sizes), 1)  # Gloo wants non-empty buffers
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: mine.numel()] = mine.to(device)
    outs = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in sizes]
    work = dist.all_gather(outs, padded, group=group, async_op=True)
    return [o[:s] for o, s in zip(outs, sizes)], work


class State:
    """A gradscope compressor for DDP's buckets, with its per-parameter residuals and statistics.

    method: any name of `gradscope train --compressor` (gradscope.compressor_names()).
    ratio: the density, the fraction of elements to send, in (0, 1].
    options: the compressor options of the C++ table (stages, bits, variance_alpha, variance_zeta,
    fft_exponent_bits, fft_mantissa_bits, fft_chunk, backend, seed); the seed is made per worker.
    variance: for method "variance", a callable(bucket) returning the bucket's per-element sum of
    squared per-sample gradients / B^2 (a float32 tensor like bucket.buffer()).
    """

    def __init__(self, method="sidco-e", ratio=0.01, process_group=None, variance=None, **options):
        names = compressor_names()
        if method not in names:
            raise ValueError(f"unknown compressor {method!r}: use one of {', '.join(names)}")
        self.method = method
        self.ratio = check_density(ratio)
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.process_group)
        self.world_size = dist.get_world_size(self.process_group)
        seed = int(options.pop("seed", 1))
        texts = option_texts(options)
        texts["seed"] = str(seed * 1000003 + self.rank)  # as gradscope train: one stream per worker
        self.core = _gradscope.Compressor(method, self.ratio, texts)
        if self.core.needs_gradient_variance and variance is None:
            raise ValueError(f"compressor {method!r} weighs elements by their gradient variance: "
                             "give State(variance=callable(bucket) -> tensor)")
        self.variance = variance
        self.steps = []           # StepStats of every finished step
        self.skipped_steps = 0
        self._skipped_in_a_row = 0
        self._step = StepStats()
        self._residual = {}       # id(parameter) -> its flat residual (error feedback)
        self._flat_residual = {}  # ids of a bucket's parameters -> (their residuals' tensor, spare)
        self._pending = []        # this step's bucket Futures so far
        self._tasks = queue.SimpleQueue()
        self._thread = None

    @property
    def step_skipped(self):
        """Whether the last finished step met a NaN or Inf on some worker (skip its optimizer step)."""
        return bool(self.steps) and self.steps[-1].skipped

    def summary(self):
        """Per-step statistics over the finished, non-skipped steps, as gradscope train reports."""
        done = [s for s in self.steps if not s.skipped]
        out = {"method": self.method, "ratio": self.ratio, "workers": self.world_size,
               "steps": len(self.steps), "skipped_steps": self.skipped_steps}
        if not done:
            return out
        quality = sorted(s.quality for s in done)

        def mean(values):
            values = list(values)
            return sum(values) / len(values)

        def quantile(q):
            pos = q * (len(quality) - 1)
            lo = math.floor(pos)
            hi = min(lo + 1, len(quality) - 1)
            return quality[lo] + (pos - lo) * (quality[hi] - quality[lo])

        out.update({
            "density_mean": mean(s.density for s in done),
            "quality_mean": mean(quality), "quality_p5": quantile(0.05), "quality_p95": quantile(0.95),
            "bytes_per_step": mean(s.bytes_sent for s in done),
            "dense_bytes_per_step": mean(s.dense_bytes for s in done),
            "gathered_bytes_per_step": mean(s.gathered_bytes for s in done),
            "compress_ms_per_step": 1e3 * mean(s.compress_s for s in done),
            "comm_ms_per_step": 1e3 * mean(s.comm_s for s in done),
            "hook_ms_per_step": 1e3 * mean(s.hook_s for s in done),
        })
        return out

    # ---- one bucket ------------------------------------------------------------------------

    def exchange(self, index, grad, parameters, last=True, bucket=None):
        """The compressed exchange of one bucket: a Future whose value is the mean update.

        grad: the bucket's flat float32 gradient; parameters: the parameters laid end to end in it
        (their residuals are kept per parameter, so DDP rebuilding its buckets changes nothing).
        Returns at once; the state's thread does the work, bucket after bucket in call order, and
        the last bucket's Future completes once the whole step is done (state.steps updated)."""
        t0 = time.perf_counter()
        result = torch.futures.Future()
        if self._thread is None:
            self._thread = threading.Thread(target=_run_tasks, args=(self._tasks,), daemon=True,
                                            name="gradscope-ddp")
            self._thread.start()
            # Ended with the state, and at the latest at exit: a daemon thread still alive when
            # Python finalizes is unwound through C++ frames that cannot be, which aborts.
            weakref.finalize(self, _stop_tasks, self._tasks, self._thread)
        hook_s = time.perf_counter() - t0
        self._tasks.put((self._bucket, (result, index, grad, parameters, last, bucket, hook_s)))
        return result

    def _bucket(self, result, index, grad, parameters, last, bucket, hook_s):
        """One bucket, on the state's thread: starts its exchange; result gets the mean when it ends
        (the last bucket's once every bucket of the step has ended and the step is closed).
        hook_s: the time the hook call took, counted to the step."""
        stats = self._step
        stats.add(hook_s=hook_s)
        if stats.buckets == 0:
            stats.target_density = self.core.density if self.core.exchange_kind != "allreduce" else 1.0
        stats.buckets += 1
        try:
            kind = self.core.exchange_kind
            if kind == "allreduce":
                fut = self._allreduce(grad, stats)
            elif kind == "collective":
                fut = self._collective(index, grad, parameters, stats)
            else:
                fut = self._allgather(index, grad, parameters, stats, bucket)
        except Exception as e:  # noqa: BLE001 - every error reaches the caller through its Future
            fut = torch.futures.Future()
            fut.set_exception(e)
        self._pending.append(fut)
        if not last:
            fut.add_done_callback(lambda f: _forward(f, result))
            return
        pending, self._pending, self._step = self._pending, [], StepStats()

        def close_step(_):
            try:
                for f in pending:
                    f.wait()  # each bucket's error, if any, in bucket order
                self._end_step(stats)
                result.set_result(fut.value())
            except Exception as e:  # noqa: BLE001
                result.set_exception(e)

        torch.futures.collect_all(pending).add_done_callback(close_step)

    def _end_step(self, stats):
        self.core.end_step()
        self.steps.append(stats)
        if stats.skipped:
            self.skipped_steps += 1
            self._skipped_in_a_row += 1
            if self._skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
                raise _gradscope.Error(
                    f"gradients were NaN or Inf for {MAX_SKIPPED_IN_A_ROW} steps in a row (last at "
                    f"step {len(self.steps) - 1}); lower the learning rate or check the data")
        else:
            self._skipped_in_a_row = 0

    def _accumulate(self, grad, parameters):
        """acc = grad + the parameters' residuals (error feedback), or grad itself without it.
        With error feedback acc is the state's own tensor, never the residual it adds: into the
        bucket's spare buffer when its parameters are laid out as last time (no allocation)."""
        if not self.core.error_feedback:
            return grad
        entry = self._flat_residual.get(tuple(id(p) for p in parameters))
        if entry is not None:
            residual, spare = entry
            return grad + residual if spare is None else torch.add(grad, residual, out=spare)
        parts = [self._residual.get(id(p)) for p in parameters]
        if all(r is None for r in parts):
            return grad.clone()
        parts = [r if r is not None else torch.zeros(p.numel(), dtype=grad.dtype, device=grad.device)
                 for r, p in zip(parts, parameters)]
        return grad + torch.cat(parts)

    def _keep_residual(self, residual, parameters):
        """residual (a tensor the state owns) becomes the parameters' residuals, as views; the
        bucket's previous residual becomes its spare buffer."""
        key = tuple(id(p) for p in parameters)
        old = self._flat_residual.get(key)
        spare = old[0] if old is not None and old[0] is not residual else None
        ids = set(key)  # DDP rebuilt its buckets: forget the old layouts of these parameters
        self._flat_residual = {k: v for k, v in self._flat_residual.items() if k == key or not ids & set(k)}
        self._flat_residual[key] = (residual, spare)
        at = 0
        for p in parameters:
            self._residual[id(p)] = residual[at:at + p.numel()]
            at += p.numel()

    def _skip(self, grad, stats):
        stats.skipped = True
        fut = torch.futures.Future()
        fut.set_result(torch.zeros_like(grad))
        return fut

    def _allreduce(self, grad, stats):
        n = grad.numel()
        stats.add(n=n, selected=n, bytes_sent=4 * n, dense_bytes=4 * n)
        t_launch = time.perf_counter()
        work = dist.all_reduce(grad, group=self.process_group, async_op=True)
        inverse = 1.0 / self.world_size

        def mean(fut):
            stats.add(comm_s=time.perf_counter() - t_launch)
            total = fut.value()[0]
            if not bool(torch.isfinite(total).all()):  # the same sum on every worker: one decision
                stats.skipped = True
                return torch.zeros_like(total)
            return total.mul_(inverse)

        return work.get_future().then(mean)

    def _allgather(self, index, grad, parameters, stats, bucket):
        _, n, _ = float32_view(grad, f"bucket {index}", devices=("cpu", "cuda"))
        t0 = time.perf_counter()
        acc = self._accumulate(grad, parameters)
        name = f"bucket{index}"
        if self.core.needs_gradient_variance:
            v = self.variance(bucket).detach().cpu().contiguous()
            v_address, v_n, _ = float32_view(v, f"the gradient variance of bucket {index}")
            self.core.add_gradient_variance(name, v_address, v_n)
        # On the bucket's device where the backend reads it (cuda), else through the host.
        indices, values, wire, wire_bytes, info = compress_where_it_lives(self.core, acc, name,
                                                                           f"bucket {index}")
        stats.add(compress_s=time.perf_counter() - t0)
        # One small synchronous round gives every worker's payload size and agrees on skipping
        # (a NaN or Inf anywhere): every collective is issued on this thread, in bucket order.
        t_comm = time.perf_counter()
        meta = gather_ints([wire.size, 1 if info["nonfinite"] else 0], self.process_group, grad.device)
        stats.add(comm_s=time.perf_counter() - t_comm)
        if any(flag for _, flag in meta):
            return self._skip(grad, stats)  # the residual stays as it was
        t0 = time.perf_counter()
        if self.core.error_feedback:
            residual = acc  # acc is ours (a fresh tensor): the residual is acc with what was sent zeroed
            residual[torch.from_numpy(indices).to(residual.device)] = 0.0
            self._keep_residual(residual, parameters)
        stats.add(n=n, selected=int(info["selected"]), bytes_sent=int(wire_bytes), dense_bytes=4 * n,
                  compress_s=time.perf_counter() - t0)
        t_launch = time.perf_counter()
        sizes = [size for size, _ in meta]
        stats.add(gathered_bytes=max(sizes))
        parts, work = gather_padded(torch.from_numpy(wire), sizes, self.process_group, grad.device)

        def decode(fut):
            fut.wait()
            stats.add(comm_s=time.perf_counter() - t_launch)
            t1 = time.perf_counter()
            out = torch.empty(n, dtype=torch.float32)  # decoded on the host
            self.core.aggregate([p.cpu().numpy() for p in parts], out.data_ptr(), n)
            stats.add(compress_s=time.perf_counter() - t1)
            return out.to(grad.device)

        return work.get_future().then(decode)

    def _collective(self, index, grad, parameters, stats):
        _, n, _ = float32_view(grad, f"bucket {index}", devices=("cpu", "cuda"))
        t0 = time.perf_counter()
        # Agree on skipping before any round: one flag all-reduced.
        flag = torch.tensor([0 if bool(torch.isfinite(grad).all()) else 1], dtype=torch.int64,
                            device=grad.device)
        dist.all_reduce(flag, group=self.process_group)
        if int(flag.item()) > 0:
            stats.add(comm_s=time.perf_counter() - t0)
            return self._skip(grad, stats)
        acc = self._accumulate(grad, parameters).cpu()  # the quantizers' and fft's rounds code on the host
        sent = torch.empty_like(acc)
        mean = torch.empty_like(acc)
        comm = TorchCollectives(self.process_group, grad.device)
        wire_bytes, info = self.core.exchange(acc.data_ptr(), n, f"bucket{index}", comm,
                                              sent.data_ptr(), mean.data_ptr())
        if self.core.error_feedback:
            self._keep_residual((acc - sent).to(grad.device), parameters)
        # the rounds are interleaved with the coding: counted as exchange
        stats.add(n=n, selected=int(info["selected"]), bytes_sent=int(wire_bytes), dense_bytes=4 * n,
                  comm_s=time.perf_counter() - t0)
        fut = torch.futures.Future()
        fut.set_result(mean.to(grad.device))
        return fut


def _run_tasks(tasks):
    """The state's thread: runs each queued bucket in order. It holds the queue, not the state,
    so a state nobody uses any more is collected (its finalizer, _stop_tasks, ends the thread)."""
    while True:
        item = tasks.get()
        if item is None:
            return
        method, args = item
        result = args[0]
        try:
            method(*args)
        except BaseException as e:  # noqa: BLE001 - the bucket's Future reports it; the thread lives on
            if not result.done():
                result.set_exception(e)
        del method, args, result, item


def _stop_tasks(tasks, thread, timeout_s=30.0):
    """Ends the state's thread once its queued buckets are done (waiting at most timeout_s: a
    collective stuck on a dead peer ends by its own timeout, not here)."""
    tasks.put(None)
    if thread is not threading.current_thread():
        thread.join(timeout_s)


def _forward(done, result):
    """result takes done's value or error."""
    try:
        result.set_result(done.value())
    except Exception as e:  # noqa: BLE001
        result.set_exception(e)


def hook(state, bucket):
    """DDP communication hook: model.register_comm_hook(gradscope.ddp.State(...), gradscope.ddp.hook)."""
    grad = bucket.buffer()
    parameters = bucket.parameters()
    _check_layout(bucket, grad, parameters)
    return state.exchange(bucket.index(), grad, parameters, bucket.is_last(), bucket)


def _check_layout(bucket, grad, parameters):
    """The bucket's buffer must hold its parameters' gradients end to end, in parameters() order:
    the residuals are kept per parameter on that assumption."""
    if sum(p.numel() for p in parameters) != grad.numel():
        raise _gradscope.Error(f"bucket {bucket.index()}: {grad.numel()} elements for parameters of "
                               f"{sum(p.numel() for p in parameters)}")
