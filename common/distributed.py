"""Which process of a distributed run this is, and sums over all of its processes.

Lightning's DDP and FSDP launchers start ranks 1..N-1 by running the stage's command again, so every
rank runs the whole stage: the same data preparation, the same runs in the same order (a stage
whose trainer spans several processes runs its jobs one after another, `TrainerConfig.job_workers`),
and the same evaluations on the trained weights. Exactly one process writes: `common.io`'s atomic
writers keep the writes of global rank zero and discard those of the others, so no two processes
ever write the same file.

Before its first fit, rank zero is an ordinary process with no rank in its environment; the others
are started with `LOCAL_RANK` (and `NODE_RANK` on several nodes) set, and `torchrun` sets `RANK`.
"""

from __future__ import annotations

import os
import sys

RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")


def _group_is_up() -> bool:
    # Without torch imported there is no process group; reports and data stages need not import it.
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def initialized() -> bool:
    """Whether a process group with more than one process is up."""
    return _group_is_up() and sys.modules["torch.distributed"].get_world_size() > 1


def is_global_zero() -> bool:
    """Whether this process is the one that writes: rank zero of the process group, or, before the
    group is up, a process whose environment names no other rank."""
    if _group_is_up():
        return sys.modules["torch.distributed"].get_rank() == 0
    return all(os.environ.get(name, "0") in ("", "0") for name in RANK_VARIABLES)


def global_sum(tensor):
    """`tensor` summed over every process of the group (itself when there is none); every process
    gets the same, bit for bit, so decisions taken on it agree everywhere."""
    return _all_reduce(tensor, "SUM")


def global_max(tensor):
    """`tensor`'s elementwise maximum over every process of the group."""
    return _all_reduce(tensor, "MAX")


def _all_reduce(tensor, op: str):
    if not initialized():
        return tensor
    dist = sys.modules["torch.distributed"]
    reduced = tensor.clone()
    dist.all_reduce(reduced, op=getattr(dist.ReduceOp, op))
    return reduced
