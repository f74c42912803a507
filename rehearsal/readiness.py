"""Paper-readiness tables: for every stage of a pipeline, what its `paper` run computes and what it
needs, written into the pipeline's page (`READMES`) between `<!-- readiness -->` and `<!-- /readiness -->`.

    python -m rehearsal.readiness [--records rehearsal/records.json] [--pipelines ...]

Per network a stage trains or runs (`rehearsal.paper_work`): its parameters and forward FLOPs,
both measured on the network itself, built at the paper's shapes with random weights (FLOPs by
`torch.utils.flop_counter` over one row, so attention's context and the MoE's routed expert are
what the code runs; elementwise work is not counted, as in `common.eval.counting`); tokens per
step; steps and runs; and the H100 hours of the whole `paper` run, at a stated utilisation of the
H100 SXM's dense bf16 peak. Training costs three forward passes (backward twice the forward). Where
`rehearsal.gpu_steps` trained the network on an H100 (`rehearsal/gpu_steps.json`), the measured
seconds per step, share of the peak and hours at that speed too.

Per stage: the peak memory (proportional set size of its process tree) and minutes of its last
passing rehearsal, from the records `rehearsal.run` writes, with the batch rows and precision it
ran at. A stage never rehearsed says so.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from common.errors import ArgumentParser, DataError, exit_on_user_error
from common.eval.counting import TRAIN_FACTOR
from common.eval.report import replace_between_markers
from common.io import atomic_file, load_json
from rehearsal.paper_work import PIPELINES, ROOT, Work

log = logging.getLogger(__name__)

H100_BF16_DENSE = 989.4e12  # FLOP/s, H100 SXM, dense bf16 (NVIDIA's datasheet)
UTILISATION = 0.4           # of that peak; stated, not measured
BEGIN, END = "<!-- readiness -->", "<!-- /readiness -->"
# Kept in git, as results are: the tables derive from them, and a fresh clone must regenerate the
# same tables (the work copy under data/ does not survive a new checkout).
RECORDS = Path(__file__).resolve().parent / "records.json"
# Training steps of some networks measured on an H100 (`rehearsal.gpu_steps`), keyed PIPELINE:STAGE:INDEX.
GPU_STEPS = Path(__file__).resolve().parent / "gpu_steps.json"
# Stages run on CUDA (`rehearsal.run` on a GPU machine); they feed no readiness table, only their own.
CUDA_RECORDS = Path(__file__).resolve().parent / "records_cuda.json"
CUDA_BEGIN, CUDA_END = "<!-- cuda-runs -->", "<!-- /cuda-runs -->"
READMES = {"root": "rehearsal/README.md", "blackmamba": "docs/blackmamba/scale-and-time.md",
           "masked_mixers": "docs/masked_mixers/scale-and-time.md", "manticore": "docs/manticore/scale-and-time.md"}


def _cpu_sdpa_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    # PyTorch's counter has formulas for the CUDA attention kernels only; on CPU, SDPA runs this op,
    # which it would count as zero. Counted as those kernels are: the full context, mask or not.
    return sdpa_flop_count(query, key, value)


CPU_ATTENTION = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa_flops}


def inputs(work: Work, rows: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Random inputs of `rows` rows for the network: token ids, or float features of its width."""
    if work.vocab is not None:
        return torch.randint(0, work.vocab, (rows, work.n_ctx), device=device)
    return torch.randn(rows, work.n_ctx, work.width, device=device)


def measure(work: Work, net: torch.nn.Module | None = None) -> tuple[int, float]:
    """(parameters, forward FLOPs per row) of the network at its paper shapes; `net`: the network,
    already built (on any device), instead of building it here."""
    if work.forward_flops_per_row is not None:
        return work.params, work.forward_flops_per_row
    if net is None:
        torch.manual_seed(0)
        net = work.build()
    was_training = net.training
    net.eval()
    x = inputs(work, 1, next(net.parameters()).device)
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION) as counter:
        net(x)
    net.train(was_training)
    return sum(p.numel() for p in net.parameters()), float(counter.get_total_flops())


def h100_hours(work: Work, flops_per_row: float) -> float:
    factor = TRAIN_FACTOR if work.train else 1
    total = factor * flops_per_row * work.rows_per_step * work.steps * work.runs
    return total / (H100_BF16_DENSE * UTILISATION) / 3600


def load_records(paths: list[Path]) -> dict[str, dict]:
    """The last passing record of each stage, over the record files in order."""
    records = {}
    for path in paths:
        if path.is_file():
            loaded = load_json(path, "pass record files `make rehearse` writes")
            for k, record in enumerate(loaded if isinstance(loaded, list) else [None]):
                if not isinstance(record, dict) or not isinstance(record.get("stage"), str) or any(
                        isinstance(record.get(key), bool) or not isinstance(record.get(key), (int, float))
                        for key in ("rc", "seconds", "peak_pss_mib")):
                    raise DataError(f"{path}: record {k} is not a rehearsal record (an object with a stage, rc, "
                                    "seconds and peak_pss_mib); pass record files `make rehearse` writes")
                if record["rc"] == 0:
                    records[record["stage"]] = record
    return records


def _count(n: float) -> str:
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"


def _hours(h: float) -> str:
    return f"{h:.3g}" if h >= 0.01 else "< 0.01"


def _rehearsed(record: dict | None) -> str:
    if record is None:
        return "not rehearsed yet"
    rows = "paper batches" if record.get("batch_rows") is None else f"batches of {record['batch_rows']}"
    return (f"{record['peak_pss_mib'] / 1024:.1f} GiB, {record['seconds'] / 60:.1f} min "
            f"({record.get('date', 'undated')}, {rows}, {record.get('precision') or 'paper precision'})")


def _span(values: list) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def _measured(works: list[tuple[Work, int, float, dict | None]]) -> tuple[str, float | None]:
    """The H100 cell of a row: seconds per step and share of the bf16 peak where measured, and the
    row's hours at that speed when every network of the row was measured."""
    measured = [(w, m) for w, _, _, m in works if m is not None and "seconds_per_step" in m]
    if not measured:
        return "", None
    first = measured[0][1]
    cell = f"{first['seconds_per_step']:.3g} s, {first['utilisation']:.1%}"
    if len(measured) < len(works):
        return f"{cell} (1 of {len(works)} shapes)", None
    hours = sum(w.steps * w.runs * m["seconds_per_step"] for w, m in measured) / 3600
    return f"{cell}, {_hours(hours)} h", hours


def _row(works: list[tuple[Work, int, float, dict | None]]) -> tuple[str, float, float | None]:
    """One table row for a network, over every run of it (MAD and LRA tasks differ in shapes)."""
    first = works[0][0]
    hours = sum(h100_hours(w, flops) for w, _, flops, _ in works)
    params = sorted({params for _, params, _, _ in works})
    params_text = _count(params[0]) if len(params) == 1 else f"{_count(params[0])}-{_count(params[-1])}"
    tokens = f"{_span([w.rows_per_step for w, *_ in works])} × {_span([w.n_ctx for w, *_ in works])}"
    steps = {w.steps for w, *_ in works}
    runs = sum(w.runs for w, *_ in works)
    steps_text = (f"{first.steps:,} × {runs}" if len(steps) == 1
                  else f"{sum(w.steps * w.runs for w, *_ in works):,} in all ({runs} runs)")
    kind = "" if first.train else " (forward only)"
    note = f" ({first.note})" if first.note else ""
    measured, measured_hours = _measured(works)
    row = f"{first.network}{kind}{note} | {params_text} | {tokens} | {steps_text} | {_hours(hours)} | {measured}"
    return row, hours, measured_hours


def load_gpu_steps(path: Path = GPU_STEPS) -> dict[str, dict]:
    return json.loads(path.read_text())["rows"] if path.is_file() else {}


def pipeline_table(pipeline: str, records: dict[str, dict],
                   gpu_steps: dict[str, dict] | None = None) -> tuple[str, float, tuple[float, float]]:
    """The markdown table of one pipeline, its total H100 hours at the stated utilisation, and
    (hours at the measured speed, hours at the stated utilisation) over the rows measured whole."""
    dvc_file, stages = PIPELINES[pipeline]
    # A measurement counts for every stage that trains the same network at the same shapes.
    same = {(key.split(":")[0], m["network"], m["n_ctx"], m["rows_per_step"], m["params"]): m
            for key, m in (gpu_steps or {}).items() if "seconds_per_step" in m}
    cache: dict = {}  # (builder, positions) -> counts: a network several stages train is counted once
    lines = ["| stage | network at `paper` | parameters | tokens per step | steps × runs | H100 hours at "
             f"{UTILISATION:.0%} | H100 measured: s/step, share of peak, hours | rehearsal: peak memory, time |",
             "|---|---|---|---|---|---|---|---|"]
    total, measured_total, stated_of_measured = 0.0, 0.0, 0.0
    for stage, work in stages.items():
        target = stage if pipeline == "root" else f"{dvc_file}:{stage}"
        rehearsed = _rehearsed(records.get(target))
        if isinstance(work, str):
            lines.append(f"| `{stage}` | none: {work} | | | | | | {rehearsed} |")
            continue
        networks: dict[str, list[tuple[Work, int, float, dict | None]]] = {}
        for w in work():
            key = (w.build, w.n_ctx)
            if key not in cache:
                log.info("%s: measuring %s at %d positions", stage, w.network, w.n_ctx)
                cache[key] = measure(w)
            params, flops = cache[key]
            measured = same.get((pipeline, w.network, w.n_ctx, w.rows_per_step, params))
            networks.setdefault(w.network, []).append((w, params, flops, measured))
        for i, works in enumerate(networks.values()):
            row, hours, measured_hours = _row(works)
            total += hours
            if measured_hours is not None:
                measured_total += measured_hours
                stated_of_measured += hours
            lines.append(f"| {f'`{stage}`' if i == 0 else ''} | {row} | {rehearsed if i == 0 else ''} |")
    return "\n".join(lines), total, (measured_total, stated_of_measured)


def rehearsal_totals(records: dict[str, dict]) -> str:
    """Per pipeline, its stages' last passing rehearsals added up: how far one `make rehearse` is
    from its 60-minute target (the runs may come from different days and work copies)."""
    lines = ["| pipeline | stages passed | minutes, added up | highest peak |", "|---|---|---|---|"]
    all_minutes = 0.0
    for pipeline, (dvc_file, stages) in PIPELINES.items():
        targets = [stage if pipeline == "root" else f"{dvc_file}:{stage}" for stage in stages]
        passed = [records[t] for t in targets if t in records]
        minutes = sum(r["seconds"] for r in passed) / 60
        all_minutes += minutes
        peak = max(passed, key=lambda r: r["peak_pss_mib"], default=None)
        peak_text = "" if peak is None else f"{peak['peak_pss_mib'] / 1024:.1f} GiB (`{peak['stage'].split(':')[-1]}`)"
        lines.append(f"| {pipeline} | {len(passed)} of {len(targets)} | {minutes:.1f} | {peak_text} |")
    lines.append(f"| all | | {all_minutes:.1f} | |")
    return "\n".join(lines)


def render(pipeline: str, records: dict[str, dict], gpu_steps: dict[str, dict] | None = None) -> str:
    table, total, (measured, stated) = pipeline_table(pipeline, records, gpu_steps)
    totals = ("" if pipeline != "root" else
              f"\n\nThe rehearsal of every pipeline, from the same records:\n\n{rehearsal_totals(records)}")
    measured_rows = [m for m in (gpu_steps or {}).values() if "utilisation" in m]
    shares = [m["utilisation"] for m in measured_rows]
    sizes = [m["params"] for m in measured_rows]
    measured_text = ("" if not stated else
                     f" The rows measured whole on the H100 take {_hours(measured)} hours at their measured speed, "
                     f"against {_hours(stated)} at {UTILISATION:.0%}.")
    gpu_text = ("" if not shares else
                f" H100 measured: {len(shares)} networks trained for a few steps on one H100 "
                f"(`python -m rehearsal.gpu_steps`, records in `rehearsal/gpu_steps.json`: bf16 autocast, AdamW, "
                f"the paper's rows per step; {_count(min(sizes))} to {_count(max(sizes))} parameters) reached "
                f"{min(shares):.1%} to {max(shares):.1%} of the peak, far below the stated {UTILISATION:.0%}, so for "
                f"networks of these sizes the hours at {UTILISATION:.0%} are lower bounds by a factor of about "
                f"{UTILISATION / max(shares):.0f} to {UTILISATION / min(shares):.0f}.")
    return (f"_Generated by `python -m rehearsal.readiness` (`make rehearse` runs it) from the `paper` configs and "
            f"the rehearsal's records. H100 hours: FLOPs counted on each network at its paper shapes, at "
            f"{UTILISATION:.0%} of the H100 SXM's {H100_BF16_DENSE / 1e12:.0f} dense bf16 TFLOP/s, training as "
            f"forward and backward.{gpu_text} Rehearsal: peak memory (proportional set size of the stage's "
            f"processes) and time of its last passing run, on 2 CPU cores._\n\n"
            f"{table}\n\nTotal: about {_hours(total)} H100 hours at {UTILISATION:.0%}.{measured_text}{totals}\n")


def _outcome(record: dict) -> str:
    return "passed" if record["rc"] == 0 else f"failed (rc {record['rc']})"


def cuda_runs(records: list[dict]) -> str:
    """Every stage run on CUDA, in the order run: device, date, time, peak memory and outcome."""
    rows = [f"| {r['device']} | {r['date']} | `{r['stage'].split(':')[-1]}` ({r['pipeline']}) | "
            f"{r['seconds']:.1f} s | {r['peak_pss_mib'] / 1024:.1f} GiB | {_outcome(r)} | {r.get('note', '')} |"
            for r in records]
    return ("_Generated by `python -m rehearsal.readiness` from `rehearsal/records_cuda.json`: each stage at the "
            "paper's full batches and `bf16-mixed`; peak memory is the proportional set size of the stage's "
            "processes on the host. A stage stopped by a device budget wrote no record._\n\n"
            "| device | date | stage | time | peak memory on the host | outcome | note |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipelines", nargs="+", choices=list(PIPELINES), default=list(PIPELINES))
    parser.add_argument("--records", nargs="+", type=Path, default=[RECORDS],
                        help="rehearsal record files, later ones winning")
    args = parser.parse_args(argv)
    if missing := [str(p) for p in args.records if not p.is_file()]:
        parser.error(f"--records: no such file {', '.join(missing)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(os.cpu_count() or 1)  # it runs alone, after the rehearsal's stages
    records, gpu_steps = load_records(args.records), load_gpu_steps()
    for pipeline in args.pipelines:
        readme = ROOT / READMES[pipeline]
        text = replace_between_markers(readme.read_text(), BEGIN, END, render(pipeline, records, gpu_steps))
        if pipeline == "root" and CUDA_RECORDS.is_file():  # the CUDA runs of every pipeline, on the rehearsal's page
            text = replace_between_markers(text, CUDA_BEGIN, CUDA_END,
                                           cuda_runs(load_json(CUDA_RECORDS, "`python -m rehearsal.run` on CUDA")))
        with atomic_file(readme, "w") as handle:
            handle.write(text)
        log.info("wrote the readiness table of %s", readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
