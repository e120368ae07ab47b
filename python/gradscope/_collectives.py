"""torch.distributed as the C++ core's collectives (gs::compress::Collectives and
DeviceCollectives), for gradscope.ddp's hook: host buffers as NumPy views, device memory at the
addresses the core gives, and the copies torch makes between them counted."""

import ctypes

import torch
import torch.distributed as dist


def _tensor_at(address, n, dtype, device):
    """The n elements of dtype at address in device's memory, as a tensor that does not own them
    (the C++ core keeps them alive for the call)."""
    if device.type == "cuda":
        typestr = {torch.float32: "<f4", torch.int32: "<i4"}[dtype]

        class _Memory:  # the CUDA array interface: torch reads device memory through it
            __cuda_array_interface__ = {"shape": (n,), "typestr": typestr, "data": (address, False), "version": 2}

        return torch.as_tensor(_Memory(), device=device)
    ctype = {torch.float32: ctypes.c_float, torch.int32: ctypes.c_int32}[dtype]
    return torch.frombuffer((ctype * n).from_address(address), dtype=dtype) if n else torch.empty(0, dtype=dtype)


def _backend_for(backend, device_type):
    """The backend a group named `backend` uses for tensors of `device_type`: a single name serves
    every device ("gloo", "nccl"); a composite one names each ("cpu:gloo,cuda:nccl"). None when it
    serves no such device."""
    backend = str(backend)
    if ":" not in backend:
        return None if backend == "nccl" and device_type == "cpu" else backend
    for part in backend.split(","):
        kind, _, name = part.strip().partition(":")
        if kind == device_type:
            return name
    return None


class TorchCollectives:
    """gs::compress::Collectives over torch.distributed: the C++ core hands NumPy views of its
    buffers; each call reduces in place (or returns every worker's bytes), synchronously. With
    device_collectives (NCCL, which reduces device memory), it also serves the core's
    DeviceCollectives: device memory at the addresses given, wrapped as tensors of `device`.
    The copies torch makes between host and device for a group that cannot reduce host memory
    (NCCL alone) are counted (take_copies): the core adds them to the hook's bus bytes and
    blocking synchronizations."""

    def __init__(self, group, device, device_collectives=None):
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        backend = dist.get_backend(group)
        # Host buffers stay in host memory where the group reduces it (Gloo, or a composite group's
        # cpu part); a group over NCCL alone takes them to the device and back.
        self.device = torch.device("cpu") if _backend_for(backend, "cpu") else device
        if device_collectives is None:
            device_collectives = device.type == "cuda" and _backend_for(backend, "cuda") == "nccl"
        self.device_collectives = bool(device_collectives)
        self._copied_bytes = self._copy_syncs = 0

    def take_copies(self):
        """(bytes, blocking synchronizations) of the copies torch made between host and device in
        the collectives since the last call."""
        copies = (self._copied_bytes, self._copy_syncs)
        self._copied_bytes = self._copy_syncs = 0
        return copies

    def _to_device(self, t):
        """t on the collectives' device; a copy up, counted (from pageable memory torch waits)."""
        if self.device.type == "cpu":
            return t
        self._copied_bytes += t.numel() * t.element_size()
        self._copy_syncs += 1
        return t.to(self.device)

    def _to_host(self, t):
        """t in host memory; a copy down, counted (torch waits for it)."""
        if t.device.type == "cpu":
            return t
        self._copied_bytes += t.numel() * t.element_size()
        self._copy_syncs += 1
        return t.cpu()

    def allgather_pairs(self, indices, values, count, indices_all, values_all):
        for address, all_address, dtype in ((indices, indices_all, torch.int32), (values, values_all, torch.float32)):
            mine = _tensor_at(address, count, dtype, self.device)
            every = _tensor_at(all_address, count * self.world_size, dtype, self.device)
            dist.all_gather(list(every.chunk(self.world_size)), mine, group=self.group)

    def allreduce_sum_device(self, address, n):
        dist.all_reduce(_tensor_at(address, n, torch.float32, self.device), group=self.group)

    def _reduce(self, array, op):
        t = torch.from_numpy(array)
        on_device = self._to_device(t)
        dist.all_reduce(on_device, op=op, group=self.group)
        if on_device is not t:
            t.copy_(self._to_host(on_device))

    def allreduce_max(self, array):
        self._reduce(array, dist.ReduceOp.MAX)

    def allreduce_min(self, array):
        self._reduce(array, dist.ReduceOp.MIN)

    def allreduce_sum(self, array):
        self._reduce(array, dist.ReduceOp.SUM)

    def allgather(self, array):
        """Every worker's bytes in rank order: their sizes first, then the bytes padded to the
        longest (Gloo gathers equal sizes only)."""
        mine = self._to_device(torch.tensor([array.size], dtype=torch.int64))
        sizes = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(sizes, mine, group=self.group)
        return self.allgather_known(array, self._to_host(torch.cat(sizes)).tolist())

    def allgather_known(self, array, sizes):
        """allgather() where every worker knows every worker's size (sizes[r]): the bytes alone."""
        longest = max(max(sizes), 1)  # Gloo wants non-empty buffers
        padded = torch.zeros(longest, dtype=torch.uint8)
        padded[: array.size] = torch.from_numpy(array)
        padded = self._to_device(padded)
        outs = [torch.empty(longest, dtype=torch.uint8, device=self.device) for _ in sizes]
        dist.all_gather(outs, padded, group=self.group)
        every = self._to_host(torch.cat(outs))
        return [bytes(every[r * longest : r * longest + s].numpy()) for r, s in enumerate(sizes)]

    def alltoall(self, parts):
        """parts[r] (bytes) to worker r only; what every worker had for this one, in rank order:
        the part sizes first (each one byte longer: no empty part), then the bytes."""
        send = [len(p) + 1 for p in parts]
        sizes = self._to_device(torch.tensor(send, dtype=torch.int64))
        recv = torch.empty_like(sizes)
        dist.all_to_all_single(recv, sizes, group=self.group)
        recv = self._to_host(recv).tolist()
        flat = torch.zeros(sum(send), dtype=torch.uint8)
        at = 0
        for p, n in zip(parts, send):
            if n > 1:
                flat[at : at + n - 1] = torch.frombuffer(bytearray(p), dtype=torch.uint8)
            at += n
        out = torch.empty(sum(recv), dtype=torch.uint8, device=self.device)
        dist.all_to_all_single(out, self._to_device(flat), recv, send, group=self.group)
        out = self._to_host(out)
        got, at = [], 0
        for n in recv:
            got.append(bytes(out[at : at + n - 1].numpy()))
            at += n
        return got
