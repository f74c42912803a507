"""Wall time of a stage's independent runs (3 seeds x 2 models) through `common.parallel.run_jobs`:
two one-thread workers side by side, against the same runs one after another with two torch threads
(how stages ran them so far) and with one thread (the serial run whose results the workers match).

Each run trains a `tiny`-sized model (d_model 64, two blocks: attention + SwiGLU, or Mamba +
SwiGLU) on MAD in-context recall (vocabulary 16, length 64, 2,048 examples, batch 32). The ratio
says how much of the 2x that two cores allow the worker processes recover; process start-up
(importing torch and Lightning in each worker) is included, as a stage pays it.

What keeps the workers from 2x is split three ways, from each job's own training time (measured
inside the job, in both runs) and the process it ran in:
- contention: how much slower a job trains beside another than alone (shared caches, memory
  bandwidth, and whatever the host gives the second core); nothing the workers can change;
- split: the best wall two workers could reach with the serial job times (every way of splitting
  the six jobs between two workers), against half their sum;
- start-up and idle: the parallel wall minus the busiest worker's training time (spawning, imports,
  waiting for the last job).

    python -m benchmarks.parallel_runs [--steps 600]
"""

from __future__ import annotations

import itertools
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see benchmarks/moe_speed.py

import torch  # noqa: E402

from benchmarks import positive_int
from common.data.mad import MADTaskConfig  # noqa: E402
from common.errors import ArgumentParser, exit_on_user_error
from common.io import write_json  # noqa: E402
from common.models.lm import LMConfig  # noqa: E402
from common.parallel import run_jobs  # noqa: E402
from common.training.mad import train_on_mad  # noqa: E402
from common.training.optim import OptimConfig  # noqa: E402
from common.training.trainer import TrainerConfig  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "parallel_runs.json"
MODELS = {"attention": LMConfig(d_model=64, pattern="attn,swiglu", blocks={"attn": {"n_heads": 4}}),
          "mamba": LMConfig(d_model=64, pattern="mamba,swiglu")}


def train_job(model: str, seed: int, steps: int, run_dir: str) -> dict:
    """The run's results, with the seconds it trained and the process it trained in."""
    task = MADTaskConfig(task="in-context-recall", vocab_size=16, seq_len=64, num_train_examples=2048,
                         num_test_examples=256, seed=seed)
    trainer = TrainerConfig(max_steps=steps, val_every_n_steps=steps, limit_val_batches=2, log_every_n_steps=10,
                            checkpoint_every_n_steps=steps, progress_bar=False)
    start = time.perf_counter()
    result = train_on_mad(MODELS[model], task, trainer, run_dir, OptimConfig(lr=1e-3, warmup_steps=10),
                          batch_size=32, seed=seed)
    return {"result": result, "seconds": time.perf_counter() - start, "pid": os.getpid()}


def timed_jobs(steps: int, workers: int, threads: int) -> tuple[float, list[dict]]:
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as root:
        jobs = [{"model": m, "seed": s, "steps": steps, "run_dir": f"{root}/{m}_{s}"}
                for m in MODELS for s in (0, 1, 2)]
        start = time.perf_counter()
        if workers == 1 and threads > 1:  # the old way: in the stage's process, with its threads
            results = [train_job(**job) for job in jobs]
        else:
            results = run_jobs(train_job, jobs, workers=workers)
        return time.perf_counter() - start, results


def best_split(seconds: list[float]) -> float:
    """The shortest wall two workers reach with jobs of these lengths: the best of every split."""
    total = sum(seconds)
    firsts = (sum(t for t, first in zip(seconds, sides) if first)
              for sides in itertools.product((True, False), repeat=len(seconds)))
    return min(max(first, total - first) for first in firsts)


def where_time_goes(wall: float, serial: list[dict], parallel: list[dict]) -> dict:
    """The parallel run's wall against 2x of the serial one, split as the module docstring says."""
    alone = [job["seconds"] for job in serial]
    beside = [job["seconds"] for job in parallel]
    busiest = max(sum(job["seconds"] for job in parallel if job["pid"] == pid) for pid in {j["pid"] for j in parallel})
    return {"serial_job_seconds": alone, "parallel_job_seconds": beside,
            "contention": sum(beside) / sum(alone),
            "best_split_over_half_sum": best_split(alone) / (sum(alone) / 2),
            "busiest_worker_training_s": busiest,
            "start_up_and_idle_s": wall - busiest,
            "speedup_without_start_up_and_idle": sum(alone) / busiest}


@exit_on_user_error
def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=positive_int, default=600)
    args = parser.parse_args()
    serial_2, _ = timed_jobs(args.steps, workers=1, threads=2)
    serial_1, reference = timed_jobs(args.steps, workers=1, threads=1)
    parallel, results = timed_jobs(args.steps, workers=2, threads=1)
    split = where_time_goes(parallel, reference, results)
    out = {
        "config": {"steps": args.steps, "jobs": 6, "models": list(MODELS), "seeds": [0, 1, 2],
                   "d_model": {name: cfg.d_model for name, cfg in MODELS.items()},
                   "patterns": {name: cfg.pattern for name, cfg in MODELS.items()}},
        "environment": {"cpus": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version(),
                        "load_average_after": os.getloadavg()},
        "seconds": {"serial_two_threads": serial_2, "serial_one_thread": serial_1, "two_workers_one_thread": parallel},
        "speedup_over_serial_two_threads": serial_2 / parallel,
        "speedup_over_serial_one_thread": serial_1 / parallel,
        "parallel_equals_serial": [r["result"] for r in results] == [r["result"] for r in reference],
        "where_time_goes": split,
        "target": ">= 1.8x over serial (close to 2x on 2 cores)",
    }
    write_json(OUT, out)
    print(f"serial, 2 threads {serial_2:.1f} s; serial, 1 thread {serial_1:.1f} s; 2 workers x 1 thread "
          f"{parallel:.1f} s: {serial_2 / parallel:.2f}x and {serial_1 / parallel:.2f}x; identical results: "
          f"{out['parallel_equals_serial']}; a job trains {split['contention']:.2f}x as long beside another, "
          f"the best split is {split['best_split_over_half_sum']:.2f}x half the serial sum, start-up and idle "
          f"{split['start_up_and_idle_s']:.1f} s; wrote {OUT}")


if __name__ == "__main__":
    main()
