"""The process groups of a gradscope.ddp.State and the collectives its C++ core runs on them."""

import datetime

import torch
import torch.distributed as dist

from . import _gradscope
from ._collectives import TorchCollectives


class HookGroup:
    """Owns the ranks a state averages over (`process_group`, default the whole job), the process
    group of the hook's own its collectives run on, so that they never interleave with DDP's or
    another model's (given as hook_group, or made over the same ranks at the first bucket, where
    every worker is, with the state's timeout or else the default group's), and the C++ core's
    Collectives over it (TorchCollectives). device_collectives: None lets TorchCollectives decide
    (NCCL's own answer); tests force it over Gloo."""

    def __init__(self, process_group, hook_group, timeout):
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.process_group)
        self.world_size = dist.get_world_size(self.process_group)
        if hook_group is None and self.process_group is not dist.group.WORLD:
            raise ValueError(
                "a State over a subgroup needs hook_group=: a group made for the hook alone "
                "(torch.distributed.new_group over the subgroup's ranks, made by every process)"
            )
        self.hook_group = hook_group  # None: made at the first bucket
        self.timeout = timeout
        self.device_collectives = None
        self.comm = None

    def collectives(self, device):
        """The hook's own process group as the C++ core's Collectives (made at the first bucket of
        the first step, where every worker is)."""
        if self.comm is None:
            if self.hook_group is None:
                ranks = dist.get_process_group_ranks(self.process_group)
                timeout = datetime.timedelta(seconds=self.timeout) if self.timeout is not None else default_timeout()
                try:
                    self.hook_group = dist.new_group(
                        ranks=ranks, backend=dist.get_backend(self.process_group), timeout=timeout
                    )
                except RuntimeError as e:
                    raise _gradscope.Error(
                        f"gradscope.ddp: the ranks {ranks} did not all reach their first bucket within {timeout} "
                        "(the hook's process group is made there): every rank must register the hook, "
                        "model.register_comm_hook(gradscope.ddp.State(...), gradscope.ddp.hook); a rank "
                        f"without it waits in DDP's own all-reduce instead ({e})"
                    ) from e
            self.comm = TorchCollectives(self.hook_group, device, self.device_collectives)
        return self.comm


def default_timeout():
    """The timeout the default process group was made with (init_process_group(timeout=...)), or
    torch's default when this torch does not say."""
    group = dist.distributed_c10d._get_default_group()
    for get in (lambda: group.options._timeout, lambda: group._get_backend(torch.device("cpu")).options._timeout):
        try:
            return get()
        except (AttributeError, RuntimeError, TypeError):
            continue
    return dist.distributed_c10d.default_pg_timeout
