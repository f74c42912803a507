"""Independent runs in worker processes give exactly what the same runs give one after another."""

from __future__ import annotations

import logging

import pytest

from common.data.mad import MADTaskConfig
from common.models.lm import LMConfig
from common.parallel import run_jobs
from common.training.mad import train_on_mad
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`

MODELS = {"attn": LMConfig(d_model=16, pattern="attn,swiglu", blocks={"attn": {"n_heads": 2}}),
          "mamba": LMConfig(d_model=16, pattern="mamba,swiglu")}


def train_job(model: str, seed: int, run_dir: str) -> dict:
    """One seed of one model on a small recall task (module level: workers import it by name)."""
    task = MADTaskConfig(task="in-context-recall", vocab_size=16, seq_len=32, num_train_examples=64,
                         num_test_examples=32, seed=seed)
    trainer = TrainerConfig(max_steps=5, val_every_n_steps=5, limit_val_batches=1, log_every_n_steps=1,
                            checkpoint_every_n_steps=5, progress_bar=False)
    return train_on_mad(MODELS[model], task, trainer, run_dir, OptimConfig(lr=1e-2, warmup_steps=0), batch_size=8,
                        seed=seed)


def test_parallel_runs_equal_serial_runs(tmp_path):
    jobs = [{"model": m, "seed": s} for m in MODELS for s in (0, 1, 2)]

    def placed(root: str) -> list[dict]:
        return [{**job, "run_dir": str(tmp_path / root / f"{job['model']}{job['seed']}")} for job in jobs]

    serial = run_jobs(train_job, placed("serial"), workers=1)
    parallel = run_jobs(train_job, placed("parallel"), workers=2)
    assert parallel == serial
    assert len({r["loss"] for r in serial}) == len(jobs)  # every job ran its own seed and model
    # Started in another order (seed 2's jobs first), the results still come back in job order.
    assert run_jobs(train_job, placed("costed"), workers=2, cost=lambda job: job["seed"]) == serial


def note_start(name: str, log: str) -> str:
    with open(log, "a") as f:
        f.write(name + "\n")
    return name.upper()


def test_the_costliest_jobs_start_first_and_results_keep_job_order(tmp_path):
    log = str(tmp_path / "started")
    costs = {"a": 1, "b": 5, "c": 3, "d": 5}
    jobs = [{"name": n, "log": log} for n in costs]
    assert run_jobs(note_start, jobs, workers=1, cost=lambda job: costs[job["name"]]) == ["A", "B", "C", "D"]
    assert (tmp_path / "started").read_text().split() == ["b", "d", "c", "a"]  # ties keep job order


def sleep_for(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@pytest.mark.parametrize("workers", [1, 2])
def test_each_jobs_seconds_are_logged_in_the_order_started(workers, caplog):
    """What `common.stage_times` reads back to estimate a stage's time on more cores."""
    import json

    from common.stage_times import JOBS

    with caplog.at_level(logging.INFO, logger="common.parallel"):
        run_jobs(sleep_for, [{"seconds": s} for s in (0.2, 1.0, 0.5)], workers=workers, cost=lambda job: job["seconds"])
    [call] = [found for record in caplog.records if (found := JOBS.search(record.getMessage()))]
    assert int(call["workers"]) == workers
    assert json.loads(call["seconds"]) == pytest.approx([1.0, 0.5, 0.2], abs=0.1)


def fail_first(index: int, marks: str) -> int:
    """Job 0 fails at once; the others leave a mark and take a while (module level, for the workers)."""
    import time
    from pathlib import Path

    if index == 0:
        raise RuntimeError("job 0 failed")
    Path(marks, str(index)).touch()
    time.sleep(60.0)
    return index


def test_a_failed_job_stops_every_other_job_at_once(tmp_path):
    """As Ctrl-C does in a worker: the stage stops now, not after the jobs running or queued."""
    import time

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="job 0 failed"):
        run_jobs(fail_first, [{"index": i, "marks": str(tmp_path)} for i in range(12)], workers=2)
    assert time.monotonic() - start < 45 and len(list(tmp_path.iterdir())) <= 2


def test_workers_report_every_step_to_one_bar_in_the_caller(tmp_path, caplog):
    """Runs in workers draw no bars of their own (they would overwrite one another); the caller counts
    the steps all of them trained: 4 jobs of 5 steps."""
    jobs = [{"model": "attn", "seed": s, "run_dir": str(tmp_path / f"run{s}")} for s in range(4)]
    with caplog.at_level(logging.INFO, logger="common.parallel"):
        run_jobs(train_job, jobs, workers=2)
    assert "4 of 4 jobs done, 20 training steps" in caplog.text


def sleep_and_note_pid(folder: str, seconds: float) -> None:
    import os
    import time
    from pathlib import Path

    Path(folder, str(os.getpid())).touch()
    time.sleep(seconds)


KILLED_CALLER = """
import sys
from common.parallel import run_jobs
from tests.test_parallel import sleep_and_note_pid
run_jobs(sleep_and_note_pid, [{"folder": sys.argv[1], "seconds": 120}] * 2, workers=2)
"""


def test_workers_exit_when_the_caller_is_killed(tmp_path):
    """A stage killed by a signal to its own process (not its group) must not leave its workers
    training on: they kept writing into the run directories a rerun was using."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    caller = subprocess.Popen([sys.executable, "-c", KILLED_CALLER, str(tmp_path)], cwd=ROOT)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    workers = [int(p.name) for p in tmp_path.iterdir()]
    assert len(workers) == 2, "the workers never started"
    caller.send_signal(signal.SIGKILL)
    caller.wait()

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as stat:  # a zombie no one reaps yet is gone for our purpose
            return stat.read().split(")")[-1].split()[0] != "Z"

    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in workers if alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {left} outlived their caller"


def test_the_parallel_benchmark_accounts_for_the_wall_it_measures():
    """`benchmarks.parallel_runs` splits the workers' shortfall from 2x; checked on hand-worked jobs."""
    from benchmarks.parallel_runs import best_split, where_time_goes

    assert best_split([3, 3, 2, 2, 2]) == 6  # {3, 3} against {2, 2, 2}; greedy longest-first gives 7
    assert best_split([5, 1, 1]) == 5  # one job longer than all the others together
    assert best_split([3, 3, 3]) == 6  # above half the sum (4.5) when no split is even
    serial = [{"seconds": s, "pid": 1} for s in (3, 3, 2, 2, 2)]
    parallel = [{"seconds": 1.25 * s, "pid": pid} for s, pid in zip((3, 3, 2, 2, 2), (10, 10, 11, 11, 11))]
    split = where_time_goes(8.5, serial, parallel)
    assert split["contention"] == 1.25
    assert split["best_split_over_half_sum"] == 1.0
    assert split["busiest_worker_training_s"] == 7.5  # worker 10: 3.75 + 3.75; worker 11: 7.5 too
    assert split["start_up_and_idle_s"] == 1.0
    assert split["speedup_without_start_up_and_idle"] == 12 / 7.5
    # Workers of unequal load: the busier one counts (worker 11: 3.75 + 2.5 + 2.5; worker 10: 3.75 + 2.5).
    uneven = [{"seconds": 1.25 * s, "pid": pid} for s, pid in zip((3, 3, 2, 2, 2), (10, 11, 11, 11, 10))]
    assert where_time_goes(11.0, serial, uneven)["busiest_worker_training_s"] == 1.25 * (3 + 2 + 2)
