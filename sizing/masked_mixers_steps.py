"""Sizing of the Masked Mixers comparisons' step count: learning curves of the compared models
(seed 0), at the clm and autoencoders sections' `tiny` recipes with a constant learning rate, so
that one run's validation losses read as the losses of shorter runs would be; the source of the
sizing table in `docs/masked_mixers/scale-and-time.md`:

    python -m sizing.masked_mixers_steps run     # sizing/records/masked_mixers_steps.json
    python -m sizing.masked_mixers_steps page    # the page's table, from the record and the clm stage's results

Reads the root pipeline's `data/tokenized/padded` and `data/tokenizer` (`dvc repro tokenize`). The
table sets each pair's gap at every validated step beside how far the clm stage's own runs still
move over their last fifth (the mean of its seeds' late movement): a gap smaller than that
movement does not rank two models still learning.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from common.config import load_yaml, stage_config
from common.errors import ArgumentParser, DataError, exit_on_user_error
from common.io import load_json, write_json
from common.stage_times import checkout, machine, write_between
from papers.masked_mixers.models import ModelsConfig
from papers.masked_mixers.runs import chance_loss, train_section
from papers.masked_mixers.shared import vocab_size
from papers.masked_mixers.train import CompareConfig

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "sizing" / "records" / "masked_mixers_steps.json"
PAGE = ROOT / "docs" / "masked_mixers" / "scale-and-time.md"
CLM_RESULTS = ROOT / "papers" / "masked_mixers" / "results" / "clm.json"
BEGIN, END = "<!-- sizing steps -->", "<!-- /sizing steps -->"
WHICH = "masked-mixers-steps"
SECTIONS = {"clm": ["mixer_flat", "gpt", "llama_h4"], "autoencoders": ["mixer_autoencoder", "transformer_autoencoder"]}
PAIRS = (("mixer_flat", "gpt"), ("mixer_flat", "llama_h4"))  # the claims' comparisons, as clm.json names them
STEPS, VAL_EVERY = 1500, 100
SHOWN = (100, 200, 300, 600, 1000, 1500)  # the steps the table shows


def sizing_recipe(params: dict, section: str) -> CompareConfig:
    """The section's `tiny` recipe with seed 0 only, a constant rate after its warmup, STEPS steps and
    a validation every VAL_EVERY."""
    cfg = stage_config(params, section, CompareConfig, "tiny")
    return replace(cfg, seeds=[0], extra_seeds={}, models=SECTIONS[section], workers=None,
                   optim=replace(cfg.optim, schedule="constant"),
                   trainer=replace(cfg.trainer, max_steps=STEPS, val_every_n_steps=VAL_EVERY,
                                   checkpoint_every_n_steps=STEPS))


def curve(run: dict) -> list[list[float]]:
    return [[row["step"], round(row["val/loss"], 4)] for row in run["history"] if "val/loss" in row]


def run(data: Path, tokenizer: Path, run_dir: Path, out: Path) -> None:
    params = load_yaml(ROOT / "papers" / "masked_mixers" / "params.yaml")
    sizes = stage_config(params, "models", ModelsConfig, "tiny")
    vocab = vocab_size(tokenizer)
    commit, clean = checkout()
    record = {"which": WHICH, "commit": commit, "tree_clean": clean, "machine": machine(),
              "steps": STEPS, "val_every": VAL_EVERY, "chance_loss": round(chance_loss(data, vocab, sizes.n_ctx), 4),
              "sections": {}}
    for section in SECTIONS:
        cfg = sizing_recipe(params, section)
        trained = train_section(cfg, sizes, vocab, data, run_dir / section)
        record["sections"][section] = {
            "optim": {"lr": cfg.optim.lr, "warmup_steps": cfg.optim.warmup_steps, "schedule": cfg.optim.schedule},
            "models": {name: {"curve": curve(runs["0"]), "train_seconds": runs["0"]["train_seconds"]}
                       for name, runs in trained.items()}}
    write_json(out, record)


def mean_late_movement(clm: dict, name: str) -> float:
    """The mean over the clm stage's seeds of how far a model's validation loss fell over the last fifth."""
    seeds = clm["models"][name]["seeds"].values()
    return sum(run["late_movement"] for run in seeds) / len(seeds)


def table(record: dict, clm: dict) -> str:
    cpu = record["machine"]
    minutes = sum(model["train_seconds"] for section in record["sections"].values()
                  for model in section["models"].values()) / 60
    losses = {name: dict((int(step), loss) for step, loss in model["curve"])
              for section in record["sections"].values() for name, model in section["models"].items()}
    shown = [step for step in SHOWN if all(step in curve for curve in losses.values())]
    header = "| model | " + " | ".join(f"step {step}" for step in shown) + " |\n|---|" + "---|" * len(shown) + "\n"
    rows = [f"| `{name}` | " + " | ".join(f"{curve[step]:.2f}" for step in shown) + " |"
            for name, curve in losses.items()]
    for first, second in PAIRS:
        rows.append(f"| `{first}` - `{second}` | " +
                    " | ".join(f"{losses[first][step] - losses[second][step]:+.2f}" for step in shown) + " |")
    movement = "; ".join(f"`{name}` {mean_late_movement(clm, name):.2f}" for name in dict.fromkeys(sum(PAIRS, ())))
    recipes = "; ".join(f"{section}: lr {s['optim']['lr']:g}, {s['optim']['warmup_steps']} warmup steps, then constant"
                        for section, s in record["sections"].items())
    return (f"_Generated by `python -m sizing.masked_mixers_steps page` from `sizing/records/masked_mixers_steps.json` "
            f"(`python -m sizing.masked_mixers_steps run` at commit {record['commit']}"
            f"{'' if record['tree_clean'] else ' with local changes'}; its runs trained {minutes:.1f} minutes in all, "
            f"on {cpu['cores']} cores of an {cpu['cpu']}) and `papers/masked_mixers/results/clm.json`._\n\n"
            f"Validation loss of one run per model (seed 0, the `tiny` recipes at a constant rate: {recipes}); "
            f"chance, the unigram loss, is {record['chance_loss']:.2f}. The clm stage's own {clm['steps']}-step runs "
            f"still fall over their last fifth by (mean over seeds) {movement}.\n\n" + header + "\n".join(rows) + "\n")


def page() -> None:
    hint = "`python -m sizing.masked_mixers_steps run`"
    if not RECORD.is_file():
        raise DataError(f"{RECORD}: no step-count sizing record; make it with {hint}")
    record = load_json(RECORD, hint)
    if record.get("which") != WHICH:
        raise DataError(f"{RECORD}: not a step-count sizing record; rewrite it with {hint}")
    write_between(PAGE, BEGIN, END, table(record, load_json(CLM_RESULTS, "dvc repro clm")))


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m sizing.masked_mixers_steps", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    runs = commands.add_parser("run", help="train the learning curves and write the record")
    runs.add_argument("--data", type=Path, default=Path("data/tokenized/padded"))
    runs.add_argument("--tokenizer", type=Path, default=Path("data/tokenizer"))
    runs.add_argument("--run-dir", type=Path, default=Path("data/masked_mixers/sizing"))
    runs.add_argument("--out", type=Path, default=RECORD)
    commands.add_parser("page", help="write the sizing table into docs/masked_mixers/scale-and-time.md")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.data, args.tokenizer, args.run_dir, args.out)
    else:
        page()
    return 0


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    sys.exit(main())
