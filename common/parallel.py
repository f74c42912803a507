"""Independent runs of a stage (seeds, models) in worker processes, one torch thread each.

    results = run_jobs(train_one, [{"model": m, "seed": s} for m in models for s in seeds])

`run_jobs` calls `fn(**job)` for every job and returns the results in job order. With more than one
worker the jobs run in fresh ("spawn") processes, each limited to one torch thread: on a 2-core
machine two one-thread runs side by side finish in about half the time of two runs in a row,
while two-thread runs side by side oversubscribe the cores and spin-wait. A serial run (one worker)
also runs each job with one thread, so parallel and serial results are identical: thread count
changes the order of floating-point reductions, and with it the last bits of every loss.

`fn` and the jobs must be picklable: a module-level function and plain data. A job's exception
(a `UserError` included) is raised again in the caller. A `TrainerConfig`'s `threads` is a
ceiling, so a job's training stays at the one thread set here.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

import torch

T = TypeVar("T")
log = logging.getLogger(__name__)


def default_workers() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_jobs(fn: Callable[..., T], jobs: Sequence[dict[str, Any]], workers: int | None = None) -> list[T]:
    """`[fn(**job) for job in jobs]`, spread over `workers` processes (default: the core count)."""
    workers = max(1, min(len(jobs), workers or default_workers()))
    if workers == 1:
        return [_one_thread(fn, job) for job in jobs]
    log.info("%d jobs on %d worker processes, one torch thread each", len(jobs), workers)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker) as pool:
        futures = [pool.submit(fn, **job) for job in jobs]
        return [future.result() for future in futures]


def _one_thread(fn: Callable[..., T], job: dict[str, Any]) -> T:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(**job)
    finally:
        torch.set_num_threads(threads)


def _init_worker() -> None:
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
