"""compress-when auto's dense steps through DDP's own all-reduce (gs/compress/stock_dense.hpp).

A dense step through the state's thread costs more than DDP's own all-reduce: the bucket is
queued, all-reduced on the hook's own process group and comes back through a second Future. A
dense step of a state with when="auto" instead goes the way DDP's own all-reduce hook goes: on the
thread that calls the hook, each bucket is prepared by the core (its residual and momentum
correction's velocity added in), all-reduced with torch.distributed's stock Future on the model's
process group, and once the step's last all-reduce is done the core finishes every bucket in order
(the mean, the skip of a non-finite sum, the statistics and the gate's timing), in one callback."""

import time

import torch
import torch.distributed as dist


def _done_at(fut):
    """When the all-reduce finished (its error raised)."""
    fut.value()
    return time.perf_counter()


def busy_seconds(spans):
    """Each all-reduce's share of the time the all-reduces were running, for (issued, done) spans in
    issue order: the union of the spans, each counted to the all-reduce that covers it first."""
    shares, until = [], float("-inf")
    for issued, done in spans:
        start = max(issued, until)
        shares.append(max(0.0, done - start))
        until = max(until, done)
    return shares


class StockDenseStep:
    """Owns one dense step's buckets on DDP's own all-reduce: their values as float32 host tensors,
    the all-reduces' Futures and when each was issued, and the Futures DDP waits for."""

    def __init__(self, core, process_group, on_error):
        self._core, self._group, self._on_error = core, process_group, on_error
        self._buckets = []  # (Bucket, float32 values all-reduced, issued at, done-at Future, DDP's Future)
        self._error = None  # the first bucket's error; the core has abandoned the step by its end

    def bucket(self, b, hook_s):
        """Prepares bucket b and starts its all-reduce; its Future (the last bucket's completes
        after every bucket is finished)."""
        grad = b.grad.detach()
        values = grad if grad.dtype == torch.float32 and grad.is_contiguous() else grad.float().contiguous()
        if self._error is None:
            try:
                self._core.stock_prepare(
                    b.index, values.data_ptr(), values.numel(), b.params, b.comm, b.last, hook_s, b.grad.element_size()
                )
            except Exception as e:  # noqa: BLE001 - every error reaches the caller through its Future
                self._error = e
        # Every worker all-reduces every bucket, this one's values failed or not: no peer is left
        # waiting in a collective; the error stops this worker at its backward().
        issued = time.perf_counter()
        done = dist.all_reduce(values, group=self._group, async_op=True).get_future().then(_done_at)
        result = torch.futures.Future() if not b.last else None
        self._buckets.append((b, values, issued, done, result))
        return result if not b.last else self._closing(b)

    def refuse(self, b, error):
        """A bucket refused before the core saw it (another model's): its Future fails, and so does
        the step, once the all-reduces started are done."""
        if self._error is None:
            self._error = error
        if b.last:
            return self._closing(b)
        result = torch.futures.Future()
        result.set_exception(error)
        return result

    def _closing(self, last):
        """The last bucket's Future: the step closed once every all-reduce started is done."""
        return torch.futures.collect_all([d for _, _, _, d, _ in self._buckets]).then(lambda _: self._close(last))

    def _close(self, last):
        """At the last all-reduce: every bucket finished by the core, in order, and its Future set."""
        try:
            if self._error is not None:
                raise self._error
            spans = [(issued, d.value()) for (_, _, issued, d, _) in self._buckets]  # an all-reduce's error
            for (b, values, _, _, _), seconds in zip(self._buckets, busy_seconds(spans)):
                self._core.stock_finish(
                    b.index, values.data_ptr(), values.numel(), b.comm, b.last, seconds, b.grad.element_size()
                )
        except Exception as e:  # noqa: BLE001
            if self._core.mid_step:  # an all-reduce failed before the core closed the step
                self._core.fail_bucket(True)
            self._on_error(e)
            for _, _, _, _, result in self._buckets:
                if result is not None:
                    result.set_exception(e)
            raise
        for b, values, _, _, result in self._buckets:
            if values.data_ptr() != b.grad.data_ptr():
                b.grad.copy_(values)
            if result is not None:
                result.set_result(b.grad)
        return last.grad
