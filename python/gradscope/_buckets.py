"""A gradscope.ddp.State's buckets, from DDP's hook call to the Futures DDP waits for."""

import gc
import time
import warnings

import torch

from . import _gradscope
from ._hook_thread import HookThread
from ._model_identity import ModelIdentity
from ._options import density_based
from ._regroup import Regrouping, RegroupedStep
from ._stock_dense import StockDenseStep
from ._tensors import as_float32

ADVICE = "make every rank's gradscope.ddp.State with the same settings"
# What travels: float32 values whatever the bucket's dtype (docs/python.md, "dtypes").
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class Bucket:
    """One bucket as DDP handed it over, and what the state's thread needs of it."""

    __slots__ = (
        "index",
        "keys",
        "params",
        "grad",
        "bucket",
        "last",
        "where",
        "comm",
        "host",
        "ready",
        "result",
        "hook_s",
    )

    def __init__(self, index, keys, params, grad, bucket, last, where):
        self.index, self.keys, self.params, self.grad, self.bucket = index, keys, params, grad, bucket
        self.last, self.where = last, where  # where: (backend, device) of a bucket left there, or None
        self.comm = self.host = self.ready = self.result = None
        self.hook_s = 0.0


class BucketExchange:
    """Owns the way of a state's buckets: each bucket handed over is checked (dtype, the model it
    belongs to, at the first one the optimizers' momentum), staged where it is worked on and queued
    to the state's thread (HookThread), which hands it to the C++ core, in DDP's grouping or, after
    a load, the saved step's (Regrouping), and completes its Future with the update or the error.
    Holds the last error a bucket met."""

    def __init__(self, settings, core, group, streams):
        self._settings, self._core, self._group, self._streams = settings, core, group, streams
        self._thread = HookThread()
        self._model = ModelIdentity()
        self.regrouping = Regrouping()
        self._optimizer_checked = False
        # the tiny ratio's warning: given (or not to give: a method whose ratio does not set what it sends)
        self._ratio_checked = settings.ratio >= 1 or not density_based(settings.method)
        self.last_error = None  # as raised (gradscope.Error, ...)
        # DDP's buckets' host updates, one per bucket index, reused from step to step: DDP
        # copies a hook's result into the gradients before the next backward, and a fresh buffer
        # a step cost page faults on every page of it (3 ms of SIDCo-E's 48 a step on ResNet-18).
        self._outs = {}
        # compress-when auto's dense steps through DDP's own all-reduce (off: through the state's
        # thread, as every other step; the tests compare the two).
        self.stock_dense = True
        self._stock = None  # the current step's StockDenseStep, or None
        self.stock_steps = 0  # the steps that went that way

    def exchange(self, index, grad, parameters, last, bucket):
        """State.exchange: the bucket's Future, its work queued."""
        t0 = time.perf_counter()
        if grad.dtype not in _FLOAT_DTYPES:
            raise TypeError(
                f"bucket {index} has dtype {grad.dtype}: gradscope compresses float32, "
                "float16, bfloat16 and float64 gradients"
            )
        self._check_optimizer_once(parameters)
        self._check_ratio(index, grad.numel())
        refused = self._model.refusal(index, [id(p) for p in parameters], last)
        keys = [] if refused is not None else self.regrouping.keys(parameters)
        b = Bucket(
            index,
            keys,
            [(k, p.numel()) for k, p in zip(keys, parameters)],
            grad,
            bucket,
            last,
            self._streams.where(grad),
        )
        b.comm = self._group.collectives(grad.device)
        if self._stock_dense(b, bucket, refused):
            if refused is not None:
                return self._stock.refuse(b, refused)
            self.regrouping.arrive(b)  # no grouping to restore: as handed over
            self.regrouping.saw(b.index, b.keys, last)
            return self._stock.bucket(b, time.perf_counter() - t0)
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
        if refused is not None:
            task = (self._refuse, (b, refused))
        elif self.regrouping.arrive(b):
            task = (self._bucket_on_device if b.where else self._bucket), b
        else:  # held for the restored grouping until the step's last bucket
            task = (self._regrouped, self.regrouping.take_held()) if last else None
        b.hook_s = time.perf_counter() - t0
        if task is not None:
            self._thread.put(*task)
        return b.result

    def _check_ratio(self, index, n):
        """A warning, once, when the ratio asks less than one element of a bucket: every bucket sends
        at least one, so the bucket then sends more than the ratio says."""
        s = self._settings
        if not self._ratio_checked and 0 < s.ratio * n < 0.5:
            self._ratio_checked = True
            warnings.warn(
                f"gradscope.ddp.State({s.method!r}, ratio={s.ratio:g}) asks {s.ratio * n:.2g} elements of "
                f"bucket {index}'s {n}: a bucket sends at least one, {1 / (s.ratio * n):.3g} times the "
                f"ratio; a ratio of at least {1 / n:.2g} is kept as asked",
                RuntimeWarning,
                stacklevel=2,
            )

    def _stock_dense(self, b, bucket, refused):
        """Whether bucket b goes DDP's own all-reduce way (StockDenseStep): decided at a step's first
        bucket, where the core opens the step, for a state with when="auto" given DDP's host buckets
        (not a direct exchange() call, whose caller keeps grad) outside a restored grouping."""
        if not self.regrouping.mid_step:
            self._stock = None
            if (
                self.stock_dense
                and self._settings.when == "auto"
                and refused is None
                and bucket is not None
                and b.where is None
                and not self.regrouping.restoring
            ):
                self._thread.drain()  # the core is the caller's: the last step's tasks have ended
                try:
                    opened = self._core.stock_open(b.comm, b.grad.element_size())
                except Exception:  # noqa: BLE001 - the step starts on the state's thread, which raises it
                    opened = False
                if opened:
                    self._stock = StockDenseStep(self._core, self._group.process_group, self._stock_failed)
                    self.stock_steps += 1
        return self._stock is not None

    def _stock_failed(self, error):
        self.regrouping.failed()
        self.last_error = error

    def drain(self):
        """Waits for the queued buckets; gradscope.Error mid-step."""
        self._thread.drain()
        if self._core.mid_step or self.regrouping.mid_step:
            raise _gradscope.Error(
                "the state is mid-step (its last bucket has not come yet): take it "
                "between steps, after backward() returned"
            )

    def _check_optimizer_once(self, parameters):
        """At the first bucket: the optimizers holding its parameters (found among Python's live
        objects), their momentum as a shared setting, and momentum correction refused beside an
        optimizer that keeps momentum of its own unless optimizer_momentum_ok. The refusal comes
        from the core after the ranks agree on the settings, so every rank stops alike."""
        if self._optimizer_checked:
            return
        self._optimizer_checked = True
        found = optimizer_momenta(parameters)
        s = self._settings
        self._core.set_shared_settings(s.shared(", ".join(text for text, _ in found) or "none"), ADVICE)
        if s.momentum_correction > 0 and found and not s.optimizer_momentum_ok:
            text, advice = found[0]
            self._core.refuse_steps(
                f"gradscope.ddp.State(momentum_correction={s.momentum_correction:g}) keeps the momentum in the "
                f"hook, and the optimizer holding the model's parameters keeps one of its own ({text}): the "
                f"momentum would apply twice; {advice}, or give State(..., optimizer_momentum_ok=True) if you "
                "mean it (gradscope.ddp.check_optimizer says the same)"
            )

    # ---- on the state's thread ---------------------------------------------------------------

    def _fail(self, buckets, error, closed):
        """Every bucket's Future gets the error; the core abandons the step unless it saw the last
        bucket (it abandons a failed step itself)."""
        if not closed:
            self._core.fail_bucket(buckets[-1].last)
        self.regrouping.failed()
        self.last_error = error
        for b in buckets:
            b.result.set_exception(error)

    def _refuse(self, job):
        """A bucket refused before the core saw it: the step is abandoned."""
        b, error = job
        self._fail([b], error, False)

    def _bucket(self, b):
        """One bucket on the host."""
        reached = False  # whether the core saw the bucket
        try:
            variance = self._variance(b.bucket)
            reached = True
            out = self._core_exchange(b, b.index, b.host, b.params, b.last, variance, b.hook_s)
            b.result.set_result(
                out
                if out.dtype == b.grad.dtype and b.grad.device.type == "cpu"
                else out.to(device=b.grad.device, dtype=b.grad.dtype)
            )
        except Exception as e:  # noqa: BLE001 - every error reaches the caller through its Future
            self._fail([b], e, reached)

    def _bucket_on_device(self, b):
        """One bucket left on its device: worked on a stream of the hook's that waits for the
        bucket, the update written into grad there."""
        reached = False
        try:
            with self._streams.on_device(b.where, [b]) as stream:
                start = self._streams.start_timing(stream)
                work = as_float32(b.grad)
                variance = self._variance(b.bucket)
                reached = True
                self._core_exchange(b, b.index, work, b.params, b.last, variance, b.hook_s)
                if work.data_ptr() != b.grad.data_ptr():
                    b.grad.copy_(work)
                self._streams.end_timing(stream, start, b.last)
                b.result.set_result(b.grad)  # a CUDA Future: records an event on this stream
        except Exception as e:  # noqa: BLE001
            self._fail([b], e, reached)

    def _regrouped(self, job):
        """The rest of a step after a resume, in the grouping the saved step had (RegroupedStep),
        the core exchanging the saved buckets in their saved order."""
        step = RegroupedStep(*job)
        held = step.held
        closed = False
        try:
            for b in held:  # ordinals in the order DDP first handed the parameters over
                self._core.name_parameters(b.index, b.params)
            with self._streams.on_device(held[0].where, held) as stream:
                start = self._streams.start_timing(stream)
                values = {id(b): (b.host if b.where is None else b.grad.detach()) for b in held}
                variances = {id(b): self._variance(b.bucket) for b in held}
                hook_s = sum(b.hook_s for b in held)
                for index, work, variance, params, last in step.buckets(values, variances):
                    closed = last
                    step.take_update(
                        params,
                        self._core_exchange(held[0], index, work, params, last, variance, hook_s if last else 0.0),
                    )
                for b, mine in step.updates():
                    if b.where is None:
                        b.result.set_result(mine.to(device=b.grad.device, dtype=b.grad.dtype))
                    else:
                        b.grad.copy_(mine)
                        b.result.set_result(b.grad)
                self._streams.end_timing(stream, start, True)
        except Exception as e:  # noqa: BLE001
            self._fail(held, e, closed)

    def _variance(self, bucket):
        """The bucket's variance as a float32 host tensor, when the compressor weighs by it."""
        if not self._core.needs_gradient_variance:
            return None
        return self._settings.variance(bucket).detach().to(device="cpu", dtype=torch.float32).contiguous()

    def _host_out(self, b, index, n):
        """Where the core writes a host bucket's update: DDP's hook gets the buffer of the step
        before (DDP has copied it into the gradients by now); a direct State.exchange call, whose
        caller may keep the result, a new one."""
        if b.bucket is None:
            return torch.empty(n, dtype=torch.float32)
        out = self._outs.get(index)
        if out is None or out.numel() != n:  # a first step, or DDP's regrouping after it
            out = self._outs[index] = torch.empty(n, dtype=torch.float32)
        return out

    def _core_exchange(self, b, index, work, params, last, variance, hook_s):
        """The core's exchange of one bucket's float32 values `work` (host memory on the host path,
        updated in place on a device; the host path's update is returned)."""
        v_address, v_n = (0, 0) if variance is None else (variance.data_ptr(), variance.numel())
        self.regrouping.saw(index, [k for k, _ in params], last)
        if b.where is None:
            out = self._host_out(b, index, work.numel())
            self._core.exchange(
                index,
                work.data_ptr(),
                work.numel(),
                params,
                b.comm,
                out.data_ptr(),
                last,
                v_address,
                v_n,
                hook_s,
                b.grad.element_size(),
            )  # dense bytes in its dtype
        else:
            backend, device = b.where
            self._core.exchange_resident(
                index,
                work.data_ptr(),
                work.numel(),
                params,
                b.comm,
                last,
                v_address,
                v_n,
                hook_s,
                backend,
                device,
                self._streams.caller_stream(b.where),
                b.grad.element_size(),
            )
            out = work
        if last:
            warning = self._core.take_warning()
            if warning:
                s = self._settings
                warnings.warn(
                    f"gradscope.ddp.State({s.method!r}, ratio={s.ratio:g}): {warning} "
                    "(state.steps; docs/python.md, 'Density')",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return out


def momentum_of(group):
    """A parameter group's own momentum, as text ("momentum 0.9", "betas[0] 0.9"), or None."""
    if group.get("momentum", 0):
        return f"momentum {group['momentum']:g}"
    betas = group.get("betas")
    if betas is not None and betas[0]:
        return f"betas[0] {betas[0]:g}"
    return None


def momentum_advice(optimizer, group):
    """What to change in `optimizer` (its class name) so that parameter group `group` keeps no
    momentum of its own beside momentum correction's: the same words wherever it is refused."""
    betas = group.get("betas")
    if betas is not None and betas[0]:
        return (
            f"give {optimizer} betas=(0.0, {betas[1]:g}): Adam-like optimizers would average the hook's "
            "velocity again, so the update would lag twice; betas[0] = 0 keeps only their per-coordinate "
            "scaling of it"
        )
    return f"make it {optimizer}(..., momentum=0)"


def optimizer_momenta(parameters):
    """For each torch.optim.Optimizer alive that holds any of `parameters`: its class and the
    momentum of its own that the parameter groups holding them keep (SGD's momentum, Adam-like
    betas[0]), as texts; empty when none keeps any."""
    wanted = {id(p) for p in parameters}
    found = []
    for obj in gc.get_objects():
        if not issubclass(type(obj), torch.optim.Optimizer):  # type(): no attribute of obj is read
            continue
        for group in obj.param_groups:
            momentum = momentum_of(group)
            if momentum and any(id(p) in wanted for p in group["params"]):
                found.append((f"{type(obj).__name__} {momentum}", momentum_advice(type(obj).__name__, group)))
                break
    return sorted(found)
