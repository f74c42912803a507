"""Independent runs of a stage (seeds, models) in worker processes, one torch thread each.

    results = run_jobs(train_one, [{"model": m, "seed": s} for m in models for s in seeds])

`run_jobs` calls `fn(**job)` for every job and returns the results in job order. With more than one
worker the jobs run in fresh ("spawn") processes, each limited to one torch thread: on a 2-core
machine two one-thread runs side by side finish in about half the time of two runs in a row,
while two-thread runs side by side oversubscribe the cores and spin-wait. A serial run (one worker)
also runs each job with one thread, so parallel and serial results are identical: thread count
changes the order of floating-point reductions, and with it the last bits of every loss.

`fn` and the jobs must be picklable: a module-level function and plain data. A job's exception
(a `UserError` included) is raised again in the caller. A worker exits when its caller is gone, so
a killed stage leaves no run training on. A `TrainerConfig`'s `threads` is a
ceiling, so a job's training stays at the one thread set here.

Progress: the workers' training runs report their steps to the caller (`progress_queue`), which
draws one bar for the whole stage (jobs done, and the step of every run in training) on a
terminal, and logs the steps trained when the jobs are done. Per-run bars from several processes
would overwrite one another, so runs in workers draw none.
"""

from __future__ import annotations

import functools
import json
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

import torch
from tqdm import tqdm

from common.logs import configure_logging

T = TypeVar("T")
log = logging.getLogger(__name__)
_progress = None  # in a worker process: the queue its training runs report their steps to


def progress_queue():
    """In a `run_jobs` worker, where its training runs report progress; None in any other process."""
    return _progress


def default_workers() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_jobs(fn: Callable[..., T], jobs: Sequence[dict[str, Any]], workers: int | None = None,
             cost: Callable[[dict[str, Any]], float] | None = None) -> list[T]:
    """`[fn(**job) for job in jobs]`, spread over `workers` processes (default: the core count).

    `cost`, an estimate of a job's run time, starts the costliest jobs first, so that no worker is
    left alone with one long job at the end while the others idle. Results come back in job order
    whatever the order they ran in (each job seeds itself, so the order changes no result)."""
    order = sorted(range(len(jobs)), key=lambda i: -cost(jobs[i])) if cost else list(range(len(jobs)))
    workers = max(1, min(len(jobs), workers or default_workers()))
    if workers == 1:
        done = [_one_thread(functools.partial(_timed, fn), jobs[i]) for i in order]
    else:
        log.info("%d jobs on %d worker processes, one torch thread each", len(jobs), workers)
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        with JobProgress(queue, len(jobs)) as progress, \
                ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(queue,)) as pool:
            futures = [pool.submit(_timed, fn, **jobs[i]) for i in order]
            for future in futures:
                future.add_done_callback(progress.job_done)
            try:
                done = [future.result() for future in futures]
            except BaseException:
                # Ctrl-C (which reaches the workers too) or a failed job: stop now. Left to itself the
                # pool would run every job already handed to it first. A run stopped here resumes
                # from its last checkpoint next time.
                processes = list(pool._processes.values())
                pool.shutdown(wait=False, cancel_futures=True)
                for process in processes:
                    process.terminate()
                raise
    log.info(JOB_SECONDS, workers, json.dumps([round(seconds, 1) for seconds, _ in done]))
    results: list[T] = [None] * len(jobs)  # type: ignore[list-item]
    for i, (_, result) in zip(order, done):
        results[i] = result
    return results


# Read back from a stage's output by `common.stage_times`, which estimates the stage's time on more
# cores from it: each job's seconds, in the order the jobs were handed to the workers.
JOB_SECONDS = "each job's seconds in the order started, %d worker(s): %s"


def _timed(fn: Callable[..., T], /, **job: Any) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn(**job)
    return time.perf_counter() - start, result


def _one_thread(fn: Callable[..., T], job: dict[str, Any]) -> T:
    # On the CPU one thread makes a job's numbers independent of the worker count; a GPU process
    # keeps its threads to feed the GPU.
    if torch.cuda.is_available():
        return fn(**job)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(**job)
    finally:
        torch.set_num_threads(threads)


def _init_worker(queue) -> None:
    global _progress
    _progress = queue
    torch.set_num_threads(1)
    configure_logging()
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """Exit once the caller is gone. A stage killed by a signal to its own process (`kill PID`, as
    opposed to Ctrl-C, which reaches the whole group) left its workers training on, into the run
    directories a rerun then used too. An orphan is adopted by another process: its parent id changes."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


class JobProgress:
    """The caller's side of the workers' progress: a thread that reads their runs' reports
    (`("start", run, max_steps, step)`, `("step", run, step)`, `("end", run)`) into one bar."""

    def __init__(self, queue, jobs: int):
        self.queue, self.jobs = queue, jobs
        self.running: dict[str, tuple[int, int]] = {}  # run -> (step, max_steps)
        self.steps, self.done = 0, 0  # steps trained by every run so far; jobs finished
        self.lock = threading.Lock()
        self.bar = tqdm(total=jobs, desc="jobs", unit="job", disable=None, mininterval=1.0, dynamic_ncols=True)
        self.reader = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> JobProgress:
        self.reader.start()
        return self

    def __exit__(self, *exc) -> None:
        self.queue.put(None)
        self.reader.join()
        self.bar.close()
        log.info("%d of %d jobs done, %d training steps", self.done, self.jobs, self.steps)

    def job_done(self, _future) -> None:
        with self.lock:
            self.done += 1
            self.bar.update(1)

    def _read(self) -> None:
        while (message := self.queue.get()) is not None:
            kind, run, *values = message
            with self.lock:
                if kind == "start":
                    max_steps, step = values
                    self.running[run] = (step, max_steps)
                elif kind == "step" and run in self.running:
                    step, max_steps = self.running[run]
                    self.steps += values[0] - step
                    self.running[run] = (values[0], max_steps)
                elif kind == "end":
                    self.running.pop(run, None)
                steps = ", ".join(f"{s}/{m}" for s, m in self.running.values())
                self.bar.set_postfix_str(f"steps of the runs in training: {steps or '-'}", refresh=False)
                self.bar.refresh()
