"""How tensors and arrays reach the C++ core: as the address and length of their float32 data,
never copied. Only what allows that is accepted; anything else gets a TypeError or ValueError
that names the problem and the fix."""

import numbers

import numpy as np
import torch

from . import _gradscope


def describe(x):
    """A short text naming what x is, for messages and the fit report's "input"."""
    if isinstance(x, torch.Tensor):
        return f"tensor{tuple(x.shape)} {x.dtype} on {x.device}"
    if isinstance(x, np.ndarray):
        return f"array{x.shape} {x.dtype}"
    return type(x).__name__


def float32_view(x, what="the input", devices=("cpu",)):
    """(address, element count, device type) of x's float32 data, flattened in memory order.

    x is a torch.Tensor (contiguous, strided, float32, on one of `devices`) or a NumPy array
    (C-contiguous float32). The caller keeps x alive while the address is used."""
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            raise ValueError(
                f"{what} is a {x.layout} tensor: gradscope reads dense (strided) tensors; "
                "convert it with .to_dense()"
            )
        if x.device.type not in devices:
            where = " or ".join(devices)
            raise ValueError(f"{what} is on {x.device}: gradscope reads it on {where} here")
        if x.dtype != torch.float32:
            raise TypeError(f"{what} has dtype {x.dtype}: gradscope reads float32 tensors; " "convert it with .float()")
        if not x.is_contiguous():
            raise ValueError(
                f"{what} is not contiguous (strides {x.stride()} for shape "
                f"{tuple(x.shape)}): pass .contiguous() (a copy)"
            )
        return x.data_ptr(), x.numel(), x.device.type
    if isinstance(x, np.ndarray):
        if x.dtype != np.float32:
            raise TypeError(
                f"{what} has dtype {x.dtype}: gradscope reads float32 arrays; " "convert it with .astype(numpy.float32)"
            )
        if not x.flags["C_CONTIGUOUS"]:
            raise ValueError(f"{what} is not C-contiguous: pass numpy.ascontiguousarray(...) (a copy)")
        return x.ctypes.data, x.size, "cpu"
    raise TypeError(f"{what} is a {type(x).__name__}: give a torch.Tensor or a numpy.ndarray of float32")


def stream_of(x, stream=None):
    """(device index, stream as an integer cudaStream_t) for a CUDA tensor: `stream` (a
    torch.cuda.Stream of x's device) or else torch's current stream of x's device. gradscope's work
    on x is ordered after that stream, and that stream after the work."""
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    if stream is None:
        stream = torch.cuda.current_stream(index)
    elif stream.device.index != index:
        raise ValueError(
            f"the stream is on {stream.device} but the tensor on {x.device}: " "pass a stream of the tensor's device"
        )
    return index, stream.cuda_stream


def compress_where_it_lives(core, x, name, what, stream=None):
    """core.compress on x without copying it where the compressor's backend can read it there: a
    CUDA tensor on the cuda backend (on x's device, ordered after `stream`, by default torch's
    current stream there: a thread of its own passes the stream x was written on), a host tensor
    on cpu or cuda-host (core.compress_resident). A CUDA tensor given to a host backend goes to the
    host once; a host tensor given to the cuda backend is uploaded once by the core. Returns
    core.compress's tuple."""
    address, n, device = float32_view(x, what, devices=("cpu", "cuda"))
    resident = core.resident_backend
    if device == "cuda":
        if resident == "cuda":
            index, handle = stream_of(x, stream)
            return core.compress_resident(address, n, name, device=index, stream=handle)
        host = x.detach().cpu()  # kept alive for the call
        return core.compress(host.data_ptr(), n, name)
    if resident in ("cpu", "cuda-host"):
        return core.compress_resident(address, n, name)
    return core.compress(address, n, name)


def as_float32(t):
    """t's values as a contiguous float32 tensor where t lives (t itself, detached, when it is one)."""
    t = t.detach()
    return t if t.dtype == torch.float32 and t.is_contiguous() else t.to(torch.float32).contiguous()


def on_host(x):
    """x itself when it is in host memory, else a host copy (CUDA tensors)."""
    if isinstance(x, torch.Tensor) and x.device.type == "cuda":
        return x.detach().cpu()
    return x


def real_ratio(ratio):
    """A ratio as a float: a real number (Python's, NumPy's, a 0-d tensor); a TypeError for anything
    else (a string, a bool)."""
    if isinstance(ratio, torch.Tensor) and ratio.dim() == 0 and ratio.is_floating_point():
        ratio = ratio.item()
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real):
        raise TypeError(f"ratio must be a real number in (0, 1], got {type(ratio).__name__} {ratio!r}")
    return float(ratio)


def check_density(ratio):
    """The density (the fraction of elements kept) as a float in (0, 1]: a real number (real_ratio);
    a gradscope.Error (a ValueError) outside (0, 1], the C++ rule (gs::fitting::check_density)."""
    return _gradscope.check_density(real_ratio(ratio))
