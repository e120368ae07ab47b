"""A torch.distributed worker that scripts/netlab.py starts in test_netlab.py: the user's own
script, unchanged by the lab. It joins the group from the environment torchrun would set
(init_process_group("gloo"), env://), all-reduces a tensor of its rank + 1 and a 1 MiB one; every
rank prints what it saw, rank 0 checks the sum and prints `netlab_worker: ok`."""

import datetime
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")


def main():
    env = {name: os.environ.get(name, "") for name in NAMES}
    missing = [name for name, value in env.items() if not value]
    if missing:
        sys.exit(f"netlab_worker: not set: {', '.join(missing)}")
    socket.if_nametoindex(env["GLOO_SOCKET_IFNAME"])  # the interface is in this namespace
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    if (rank, world) != (int(env["RANK"]), int(env["WORLD_SIZE"])):
        sys.exit(f"netlab_worker: the group says rank {rank} of {world}, the environment {env}")
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    big = torch.ones(1 << 18)
    start = time.monotonic()
    dist.all_reduce(big)
    elapsed = time.monotonic() - start
    print("netlab_worker: " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    if rank == 0:
        expected = world * (world + 1) / 2
        if not bool(torch.all(t == expected)) or not bool(torch.all(big == world)):
            sys.exit(f"netlab_worker: all_reduce gave {t.tolist()}, expected {expected}")
        print(
            f"netlab_worker: ok: sum {expected:g} over {world} workers; " f"1 MiB all_reduce {elapsed * 1000:.0f} ms",
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
