"""The `paper` networks trained for a few steps on a GPU: seconds per step, peak memory, and the
share of the GPU's dense bf16 peak they reach, which the readiness tables state (40%) instead.

    python -m rehearsal.gpu_steps [--only PIPELINE:STAGE:INDEX ...] [--steps 3] [--budget-s SECONDS]

Each network of `rehearsal.paper_work` (the readiness tables' rows; `--only` picks some by their
pipeline, stage and position in the stage's list) is built at its paper shapes on the GPU with
random weights, fed random inputs, and trained as `precision: bf16-mixed` trains: bf16 autocast
over fp32 weights, AdamW. One step is the row's `rows_per_step` rows, in micro-batches that divide
them, halved until they fit (gradient accumulation); one warm-up step, then `--steps` timed ones.
Forward-only rows time forward passes without gradients. FLOPs per row are counted as the tables
count them (`rehearsal.readiness.measure`), training as three forward passes. The CPU rehearsal cut
the depth of Pythia-410M and Mamba-370M to fit 24 GiB; here they run at their real depth. Writes
the records to `--out` after every network, so a run stopped at `--budget-s` keeps what it measured;
rows measured earlier on the same device stay, as do the file's `notes`.
"""

from __future__ import annotations

import gc
import json
import platform
import time
from datetime import date
from pathlib import Path

import torch

from benchmarks import positive_int
from common.blocks.mamba import _mamba_ssm_ops
from common.errors import ArgumentParser, UserError, exit_on_user_error
from common.eval.counting import TRAIN_FACTOR
from common.io import write_json
from common.training.modules import _unwrap
from rehearsal.paper_work import PIPELINES, Work
from rehearsal.readiness import H100_BF16_DENSE, UTILISATION, inputs, measure

OUT = Path(__file__).resolve().parent / "gpu_steps.json"


def works(only: list[str] | None) -> list[tuple[str, Work]]:
    """(key, work) of every readiness row, or of those in `only`, in `only`'s order. Only the stages
    named are listed: listing some builds their pretrained components."""
    wanted = None if only is None else {tuple(key.split(":")[:2]) for key in only}
    found = {}
    for pipeline, (_, stages) in PIPELINES.items():
        for stage, listed in stages.items():
            if not isinstance(listed, str) and (wanted is None or (pipeline, stage) in wanted):
                for i, work in enumerate(listed()):
                    found[f"{pipeline}:{stage}:{i}"] = work
    if only is None:
        return list(found.items())
    unknown = [key for key in only if key not in found]
    if unknown:
        raise UserError(f"--only: unknown rows {unknown}; a row is PIPELINE:STAGE:INDEX, e.g. "
                        f"blackmamba:train_compare:0; `python -m rehearsal.readiness` lists the stages")
    return [(key, found[key]) for key in only]


def step_fn(net: torch.nn.Module, work: Work, micro: int, optimizer: torch.optim.Optimizer | None):
    x = inputs(work, micro, "cuda")

    def step():
        if optimizer is None:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                for _ in range(work.rows_per_step // micro):
                    net(x)
            return
        for _ in range(work.rows_per_step // micro):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                # logsumexp over the last dim: the cost of a cross-entropy, for any output.
                loss = _unwrap(net(x)).float().logsumexp(-1).mean()
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def run_one(work: Work, steps: int) -> dict:
    torch.manual_seed(0)
    net = work.build().cuda().train(work.train)
    params, flops_per_row = measure(work, net)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-5, fused=True) if work.train else None
    micro = work.rows_per_step
    while True:
        try:
            step = step_fn(net, work, micro, optimizer)
            step()  # warm-up: kernels chosen, optimizer states allocated
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
            seconds = (time.perf_counter() - t0) / steps
            break
        except torch.OutOfMemoryError:
            if optimizer is not None:
                optimizer.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            if micro == 1:
                raise
            micro = max(m for m in range(1, micro) if work.rows_per_step % m == 0 and m <= micro // 2)
    factor = TRAIN_FACTOR if work.train else 1
    achieved = factor * flops_per_row * work.rows_per_step / seconds
    return {"params": params, "n_ctx": work.n_ctx, "rows_per_step": work.rows_per_step, "micro_batch": micro,
            "train": work.train, "seconds_per_step": seconds, "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
            "flops_per_row": flops_per_row, "utilisation": achieved / H100_BF16_DENSE,
            "hours_at_measured": work.steps * work.runs * seconds / 3600}


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", default=None, metavar="PIPELINE:STAGE:INDEX")
    parser.add_argument("--steps", type=positive_int, default=3)
    parser.add_argument("--budget-s", type=float, default=float("inf"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise UserError("no CUDA device: this measurement runs on a GPU machine only")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "python": platform.python_version(), "stated_utilisation": UTILISATION, "steps": args.steps,
              "rows": {}}
    # Rows of earlier runs on the same device stay (with the file's notes); the ones run now replace theirs.
    earlier = json.loads(args.out.read_text()) if args.out.is_file() else {}
    if earlier.get("device") == record["device"]:
        record = {**earlier, **record, "rows": earlier["rows"]}
    kernels = _mamba_ssm_ops() is not None
    start = time.perf_counter()
    for key, work in works(args.only):
        if time.perf_counter() - start > args.budget_s:
            record["rows"].setdefault(key, {"network": work.network,
                                            "skipped": f"past --budget-s {args.budget_s:.0f}"})
            continue
        t0 = time.perf_counter()
        try:
            row = run_one(work, args.steps)
        except (RuntimeError, ValueError) as err:  # torch.OutOfMemoryError is a RuntimeError
            row = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}
        record["rows"][key] = {"network": work.network, **row, "mamba_ssm_kernels": kernels,
                               "date": date.today().isoformat(), "wall_s": time.perf_counter() - t0}
        gc.collect()
        torch.cuda.empty_cache()
        write_json(args.out, record)
        print(key, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in record["rows"][key].items()},
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
