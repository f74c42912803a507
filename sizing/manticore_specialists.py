"""Sizing runs for Manticore's `specialists` stage (one seed, 0 unless `--seed`; the `tiny` profile's
settings), the source of the sizing tables in `docs/manticore/specialists.md`:

    python -m sizing.manticore_specialists budgets --out sizing/records/budgets_encyclopedia_seed0.json
    python -m sizing.manticore_specialists same-text --out sizing/records/same_text_encyclopedia_seed0.json
    python -m sizing.specialists_page   # the page's tables, from every record in sizing/records

Each took 8 to 10 minutes on 2 cores (the page's captions give each record's minutes of runs). A
record holds the design it ran (`projector_text`, `carry_embeddings`), its seed, the machine and the
commit, and its runs; the page groups the records by design. Its earlier-design section uses the
stage's design before 2026-11-27: projector text of the two fine-tuning genres, and fine-tuning from
the embeddings projector pretraining trained; `--projector-text genres --carry-embeddings` runs them
so. Without these flags the runs follow the stage's `projector_text` and `carry_embeddings`
(params.yaml). Give each record its own `--run-dir`, so that it resumes no run of another.

`budgets`: the specialist pair's sweep after each projector-pretraining budget (0 to 3,200 steps), the
same 51,200 projector documents for every budget (one pass at 3,200 steps).
`same-text`: each component alone trained on the projector mix, then fine-tuned on the fine-tuning mix,
for the hybrid's steps (1,600 + 100) and for its compute (steps x hybrid / component parameters).
Both read the `components` and `stories` outputs of the pipelines (`dvc repro` them first).
"""

from __future__ import annotations

import argparse
import copy
import time
from dataclasses import replace
from pathlib import Path

from common.config import load_yaml, stage_config
from common.errors import ArgumentParser, exit_on_user_error
from common.io import write_json
from common.parallel import run_jobs
from common.stage_times import git, machine
from common.stages import file_in_the_way
from common.training.modules import CausalLMModule
from papers.manticore.alphas import sweep_grid
from papers.manticore.finetune import Runner
from papers.manticore.instructions import InstructionTextConfig, pretraining_documents
from papers.manticore.specialists import SpecialistsConfig, curve, genre_losses, with_own_embeddings, write_genre_data
from papers.manticore.vocabulary import components_for_hybrid

PAIR = "specialists"
COMPONENTS, STORIES = Path("data/manticore/components"), Path("data/stories")


def stage_tiny() -> tuple[dict, SpecialistsConfig]:
    params = load_yaml(Path("papers/manticore/params.yaml"))
    return params, stage_config(params, "specialists", SpecialistsConfig, "tiny")


def setup(run_dir: Path, design: dict, seed: int, n_projector: int | None = None):
    """The stage's `tiny` config (validations every 100 steps) with `design`'s `projector_text` and
    `carry_embeddings` where not None, the pair's components and one seed's data."""
    params, cfg = stage_tiny()
    pretrained = frozenset(pretraining_documents(stage_config(params, "instruction_text", InstructionTextConfig,
                                                              "tiny"))["train"])
    cfg = replace(cfg, n_projector=n_projector or cfg.n_projector, trainer=replace(cfg.trainer, val_every_n_steps=100),
                  **{key: value for key, value in design.items() if value is not None})
    pair = cfg.pairs[PAIR]
    components, tokenizer = components_for_hybrid(COMPONENTS, pair.components)
    data = write_genre_data(cfg, seed, tokenizer, STORIES, run_dir / "data", pretrained=pretrained)
    return cfg, pair, components, tokenizer, data


def budget_job(budget: int, run_root: Path, design: dict, seed: int) -> dict:
    cfg, pair, components, tokenizer, data = setup(run_root / f"budget{budget}", design, seed, n_projector=51_200)
    runner = Runner(replace(cfg.tuning(pair, seed), projector_steps=budget), components, len(tokenizer),
                    run_root / f"budget{budget}")
    start_time = time.time()
    start, history = runner.pretrain_projectors(data["projector"], budget)
    if not cfg.carry_embeddings:  # as the stage: only the projectors carry over into fine-tuning
        start = with_own_embeddings(runner, start)
    sweep = []
    for k, alphas in enumerate(sweep_grid(cfg.n_blocks, cfg.sweep_points)):
        run = runner.fixed_run(f"sweep_{k}", alphas, start, data["finetune"])
        sweep.append({"alpha": float(alphas[0, 1]), "loss": genre_losses(run.module.net, data["finetune"], cfg),
                      "curve": curve(run)})
    return {"budget": budget, "projector_curve": [[r["step"], r["val/loss"]] for r in history],
            "seconds": time.time() - start_time, "sweep": sweep}


def same_text_job(index: int, variant: str, run_root: Path, design: dict, seed: int) -> dict:
    run_dir = run_root / f"{index}_{variant}"
    cfg, pair, components, tokenizer, data = setup(run_dir, design, seed)
    runner = Runner(cfg.tuning(pair, seed), components, len(tokenizer), run_dir)
    component = components[index]
    ratio = 1.0
    if variant == "same_compute":
        hybrid_params = sum(p.numel() for p in runner.hybrid("fixed", None).parameters())
        ratio = hybrid_params / sum(p.numel() for p in component.parameters())
    steps = [round(cfg.projector_steps * ratio), round(cfg.train_steps * ratio)]
    start_time = time.time()
    first = runner.fit("projector_mix", lambda: CausalLMModule(copy.deepcopy(component), len(tokenizer), cfg.optim),
                       data["projector"], steps[0])
    second = runner.fit("finetune", lambda: CausalLMModule(copy.deepcopy(first.module.net), len(tokenizer), cfg.optim),
                        data["finetune"], steps[1])
    return {"component": pair.components[index], "variant": variant, "steps": steps,
            "seconds": time.time() - start_time, "projector_mix_curve": curve(first),
            "loss": genre_losses(second.module.net, data["finetune"], cfg)}


@exit_on_user_error
def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=("budgets", "same-text"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, default=Path("data/manticore/sizing"))
    parser.add_argument("--seed", type=int, default=0, help="the seed of the data and every run (default 0)")
    parser.add_argument("--projector-text", choices=("encyclopedia", "genres"), default=None,
                        help="what projectors pretrain on (default: the stage's projector_text)")
    parser.add_argument("--carry-embeddings", action=argparse.BooleanOptionalAction, default=None,
                        help="fine-tune from the embeddings projector pretraining trained (default: the stage's "
                             "carry_embeddings)")
    args = parser.parse_args()
    for flag, path in (("--out", args.out), ("--run-dir", args.run_dir)):
        if (blocker := file_in_the_way(path)) is not None:
            parser.error(f"{flag} {path}: {blocker} is a file, not a directory")
    design = {"projector_text": args.projector_text, "carry_embeddings": args.carry_embeddings}
    if args.which == "budgets":
        jobs = [{"budget": b, "run_root": args.run_dir / "budgets", "design": design, "seed": args.seed}
                for b in (3200, 1600, 800, 400, 200, 0)]
        results = run_jobs(budget_job, jobs)
    else:
        jobs = [{"index": i, "variant": v, "run_root": args.run_dir / "same_text", "design": design, "seed": args.seed}
                for v in ("same_compute", "same_steps") for i in (1, 0)]
        results = run_jobs(same_text_job, jobs)
    stage = stage_tiny()[1]
    resolved = {key: getattr(stage, key) if value is None else value for key, value in design.items()}
    write_json(args.out, {"which": args.which, "seed": args.seed, "design": resolved,
                          "components": list(stage.pairs[PAIR].components), "machine": machine(),
                          "commit": git("rev-parse", "HEAD"), "runs": results})


if __name__ == "__main__":
    main()
