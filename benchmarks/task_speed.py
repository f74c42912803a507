"""Generation speed of the synthetic task suites (common/data/mad.py, listops.py, pathfinder.py).

- fuzzy in-context recall at vocabulary 128, length 128: instances per second on one core
  (target >= 1000/s). Peer: mad-lab's method, written here from its description (spec §2.8): every
  instance enumerates all key and value motif permutations of sizes 1..3 and shuffles them, which
  at vocabulary 128 is about 0.5 million tuples per instance; only that enumeration is timed, on a
  few instances, so the peer's rate is an upper bound on mad-lab's.
- Pathfinder-32: 1,000 images.
- the whole `tiny` suite: the six MAD tasks at the `tiny` settings of `params.yaml` (section
  `mad_suite`), ListOps and Pathfinder-32 at the `tiny` settings of section `lra_generate`
  (train + validation); target
  <= 120 s on 2 cores. The generators are single-threaded numpy, so the suite runs in one process
  (one core); the second core is left to the rest of the machine.

The machine may be shared: the 1-minute load average is recorded before and after each part.

    python -m benchmarks.task_speed [--reps 3] [--quick]
"""

from __future__ import annotations

import itertools
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # numpy only; keep BLAS from spinning on a shared machine

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import positive_int  # noqa: E402
from common.config import load_yaml, stage_config  # noqa: E402
from common.data import mad, pathfinder  # noqa: E402
from common.data.lra import lra_splits  # noqa: E402
from common.errors import ArgumentParser, exit_on_user_error  # noqa: E402
from common.io import write_json  # noqa: E402
from common.stages.lra_generate import LRAGenerateConfig  # noqa: E402
from common.stages.mad_suite import MADSuiteConfig  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "task_speed.json"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def enumerate_motifs(rng: np.random.Generator, n_tokens: int, max_size: int) -> list:
    """mad-lab's per-instance step: all permutations of sizes 1..max_size, shuffled."""
    motifs = [m for size in range(1, max_size + 1) for m in itertools.permutations(range(n_tokens), size)]
    rng.shuffle(motifs)
    return motifs


def fuzzy_recall(reps: int, n: int, peer_instances: int) -> dict:
    cfg = mad.MADTaskConfig("fuzzy-in-context-recall", 128, 128, num_train_examples=n, num_test_examples=0,
                            dedupe=False)
    before = load()
    times = [timed(lambda: mad.generate(cfg)) for _ in range(reps)]
    ours = n / statistics.median(times)
    # Vocabulary 128, multi-query: 127 non-special tokens, keys [0, 63), values [63, 127).
    rng = np.random.default_rng(0)
    peer_times = [timed(lambda: (enumerate_motifs(rng, 63, 3), enumerate_motifs(rng, 64, 3)))
                  for _ in range(peer_instances)]
    peer = 1 / statistics.median(peer_times)
    return {"instances": n, "all_s": times, "ours_instances_per_s": ours, "target_instances_per_s": 1000,
            "met": ours >= 1000, "peer": "mad-lab method (enumerate + shuffle all motifs per instance)",
            "peer_all_s_per_instance": peer_times, "peer_instances_per_s": peer, "speedup": ours / peer,
            "load_before": before, "load_after": load()}


def pathfinder_1000(reps: int, n: int) -> dict:
    before = load()
    times = [timed(lambda: pathfinder.generate_pathfinder(n, seed=0, size=32)) for _ in range(reps)]
    return {"images": n, "size": 32, "path_length": pathfinder.DIFFICULTY["hard"], "all_s": times,
            "median_s": statistics.median(times), "load_before": before, "load_after": load()}


def tiny_suite(scale: float) -> dict:
    params = load_yaml(ROOT / "params.yaml")
    mad_tasks = stage_config(params, "mad_suite", MADSuiteConfig, profile="tiny").tasks()
    before = load()
    parts = {}
    for name, task in mad_tasks.items():
        if scale != 1:
            task = replace(task, num_train_examples=max(1, int(task.num_train_examples * scale)))
        parts[name] = timed(lambda task=task: mad.generate(task))
    for name, task in stage_config(params, "lra_generate", LRAGenerateConfig, profile="tiny").tasks.items():
        if scale != 1:
            task = replace(task, n_train=max(2, int(task.n_train * scale)), n_val=max(2, int(task.n_val * scale)))
        parts[f"lra/{name}"] = timed(lambda task=task: lra_splits(task))
    total = sum(parts.values())
    return {"parts_s": parts, "total_s": total, "target_s": 120, "met": total <= 120, "scale": scale,
            "load_before": before, "load_after": load()}


@exit_on_user_error
def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=positive_int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the script runs; writes nothing")
    args = parser.parse_args()
    quick = args.quick
    result = {
        "benchmark": "task_speed",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "fuzzy_recall_v128_l128": fuzzy_recall(args.reps, 200 if quick else 5000, 1 if quick else 3),
        "pathfinder32_1000": pathfinder_1000(1 if quick else args.reps, 50 if quick else 1000),
        "tiny_suite": tiny_suite(0.05 if quick else 1.0),
    }
    out = "nothing (--quick)" if quick else OUT
    if not quick:
        write_json(OUT, result)
    f, p, s = result["fuzzy_recall_v128_l128"], result["pathfinder32_1000"], result["tiny_suite"]
    print(f"fuzzy recall V128 L128: {f['ours_instances_per_s']:.0f}/s (peer method {f['peer_instances_per_s']:.2f}/s, "
          f"{f['speedup']:.0f}x); pathfinder-32 x{p['images']}: {p['median_s']:.1f} s; "
          f"tiny suite: {s['total_s']:.1f} s; load {s['load_before']} -> {s['load_after']}; wrote {out}")


if __name__ == "__main__":
    main()
