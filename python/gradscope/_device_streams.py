"""Where a gradscope.ddp.State works on a bucket: the host, a CUDA device, or cuda-host's fake one."""

import contextlib

import torch

from . import _gradscope


class DeviceStreams:
    """Owns where a state's buckets stay (the host; the CUDA device of a CUDA bucket; with
    backend cuda-host, fake device `rank`), the hook's CUDA stream per device, which waits for
    each bucket to be ready, and with device_timing the CUDA events that time each bucket's
    compress and exchange on it."""

    def __init__(self, backend, rank, timing):
        self._backend, self._rank, self.timing = backend, rank, timing
        self._streams = {}
        self._step_events, self._last_step_events = [], []

    def where(self, grad):
        """(backend, device) where a bucket stays, or None for the host path."""
        if grad.is_cuda and _gradscope.cuda_built():
            return ("cuda", grad.device.index if grad.device.index is not None else torch.cuda.current_device())
        if not grad.is_cuda and self._backend == "cuda-host":
            return ("cuda-host", self._rank)
        return None

    @staticmethod
    def caller_stream(where):
        """The stream (an integer cudaStream_t) the core's work on a bucket at `where` is ordered
        after: this thread's current one on a CUDA device, the stand-in for it on cuda-host's."""
        backend, device = where
        return (
            torch.cuda.current_stream(device).cuda_stream
            if backend == "cuda"
            else _gradscope.cuda_host_caller_stream(device)
        )

    @contextlib.contextmanager
    def on_device(self, where, buckets):
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

    def start_timing(self, stream):
        if not self.timing:
            return None
        start = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        return start

    def end_timing(self, stream, start, last):
        if start is None:
            return
        end = torch.cuda.Event(enable_timing=True)
        end.record(stream)
        self._step_events.append((start, end))
        if last:
            self._last_step_events, self._step_events = self._step_events, []

    def device_ms(self):
        """The milliseconds the last finished step's CUDA buckets spent on the hook's stream, from
        each bucket being ready to its update being written (waits for the events)."""
        if not self.timing:
            raise _gradscope.Error("device_ms() needs State(..., device_timing=True)")
        total = 0.0
        for start, end in self._last_step_events:
            end.synchronize()
            total += start.elapsed_time(end)
        return total
