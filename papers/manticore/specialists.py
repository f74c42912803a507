"""Stage `specialists`: the paper's central claim (Figure 2 left, Tables 4 and 8) on components that
differ in skill, over seeds, with controls.

Two components pretrained on the same text do not differ in skill, so one of them is the best point
of every landscape and no hybrid can beat both. Here each pair (`pairs`) joins components that the
`components` stage pretrained on different genres (stories, generated instructions) and checked to
be specialists:

- `specialists`: GPT-Neo on stories, Mamba on instructions: the experiment;
- `swapped`: the same architectures with the genres swapped;
- `same_architecture`: two GPT-Neos, one per genre: what data complementarity alone gives.

For each pair and seed (jobs in parallel worker processes):

1. Data: `n_train` fine-tuning documents, `fraction_instructions` of them instructions and the
   rest held-out stories (the story corpus's validation split), padded to `n_ctx` tokens, drawn and
   ordered by the seed; `n_validation` held-out documents per genre, the same for every seed; and
   `n_projector` documents for projector pretraining: encyclopedia entries (`encyclopedia.py`), a
   third genre that stands in for the paper's general text, with `n_validation` held-out entries
   to score it (`projector_text: encyclopedia`), or a mix of training stories and other
   instructions scored on the fine-tuning genres (`projector_text: genres`, text the components
   alone never read, which favours the hybrid; the README's same-text control).
2. Projectors and embeddings pretrained on the projector text (components frozen, uniform alphas)
   for `projector_steps`, the validation curve recorded to show where it flattens. Every later run
   starts from the pretrained projectors and, unless `carry_embeddings`, the components' own
   embeddings, so that a corner of the sweep starts as exactly its component.
3. The fixed-alpha sweep, then each method and update rule searched, rewound and retrained (as
   `nl_experiments`), and the learned output ensemble, all fine-tuned on the mix for `train_steps`.
4. With `alone`: each component alone fine-tuned on the mix for the hybrid's compute, `train_steps`
   times (parameters of the hybrid / of the component), a control for "the hybrid had more compute".
5. With `tasks`: the stand-in for Table 1, three fine-tuning tasks (each genre alone, then the mix):
   each component alone (its own embedding and head) and Manticore (DARTS, simultaneous updates as
   the paper's appendix E.1, searched, rewound and retrained) fine-tuned on the task for
   `train_steps`, from the same pretrained projectors. On the mix, Manticore is step 3's
   `darts_simultaneous` run when the pair searched it.
6. With `figure4`, Figure 4 (appendix A) on one pair: the fixed-alpha sweep again from the pair's
   projector weights after `figure4.steps` of its projector pretraining (kept by that one run, so a
   budget is the text read so far, not a run of its own), for `figure4.seeds`; a seed that is not
   one of `seeds` runs only its projector pretraining and these sweeps. The corners of the sweep are
   not trained again: a one-hot alpha computes exactly its component whatever the projectors (with
   the components' own embeddings), so each budget's corners are the final sweep's.

Every trained model is scored on each genre's held-out documents; `mix` is the mean of the genre
losses (the fine-tuning mix is even at `tiny`). Writes `results/specialists.json`; the report
stage turns it into verdicts.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "stories", "run-dir", "out")

import copy
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import datasets

from common.config import bounded, check_distinct, seeds_field
from common.data.manifest import load_dataset_dir, write_manifest
from common.data.tokenized import load_tokenized, tokenize_padded
from common.data.tokenizer import tokenizer_fingerprint
from common.errors import ConfigError, DataError, exit_on_user_error
from common.eval.chance import scored_unigram_loss
from common.eval.heldout import heldout_loss
from common.io import atomic_dir, write_json
from common.parallel import run_jobs
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.manticore.alphas import sweep_grid
from papers.manticore.encyclopedia import generate_entries
from papers.manticore.ensemble import LearnedEnsemble
from papers.manticore.finetune import METHODS, FineTuneConfig, Runner
from papers.manticore.instructions import (
    InstructionTextConfig,
    distinct_instructions,
    mix_genres,
    pretraining_documents,
)
from papers.manticore.landscape import search_alphas
from papers.manticore.search import SearchConfig, alpha_trajectory, snapshot
from papers.manticore.vocabulary import check_component_names, components_for_hybrid

log = logging.getLogger("specialists")
GENRES = ("stories", "instructions")
TASKS = (*GENRES, "mix")  # Table 1's stand-in: fine-tuning on each genre alone, then on the mix
TASK_SEARCH = ("darts", "simultaneous")  # how Table 1 searches (appendix E.1)
# Generator ids of the instructions read here: apart from each other and from `instruction_text`'s.
FINE_TUNING_IDS, PROJECTOR_IDS = 0, 500_000


@dataclass
class PairSpec:
    components: list[str] = field(default_factory=lambda: ["gpt_neo", "mamba_instructions"])
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    updates: list[str] = field(default_factory=lambda: ["alternating", "simultaneous"])
    ensemble: bool = True
    alone: bool = False  # each component alone at the hybrid's compute
    tasks: bool = False  # Table 1's stand-in: each genre alone and the mix as fine-tuning tasks


@dataclass
class Figure4Config:
    """Figure 4 on one pair: the sweep after each of `steps` of projector pretraining, for `seeds`."""
    pair: str | None = None  # None: not run
    steps: list[int] = field(default_factory=list)  # below projector_steps, whose sweep is step 3's
    seeds: list[int] = seeds_field()


@dataclass
class SpecialistsConfig:
    seeds: list[int] = seeds_field(0, 1, 2)
    pairs: dict[str, PairSpec] = field(default_factory=dict)
    n_blocks: int = bounded(1, ge=1)
    n_train: int = bounded(1600, ge=1)
    n_projector: int = bounded(1600, ge=1)
    n_validation: int = bounded(200, ge=1)  # per genre
    fraction_instructions: float = bounded(0.5, ge=0, le=1)
    n_ctx: int = bounded(64, ge=8)
    # What projectors and embeddings pretrain on: encyclopedia entries, a genre neither component nor
    # task has (as the paper's general text), or a mix of the two fine-tuning genres ("genres", the
    # design before 2026-11-27: text the components alone never read, which favours the hybrid).
    projector_text: Literal["encyclopedia", "genres"] = "encyclopedia"
    # Whether fine-tuning starts from the embeddings projector pretraining trained, or (False) from the
    # components' own with only the projectors carried over, so that a corner starts as its component.
    carry_embeddings: bool = False
    projector_steps: int = bounded(100, ge=0)
    sweep_points: list[float] = field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])
    search_steps: int = bounded(100, ge=1)
    train_steps: int = bounded(100, ge=1)
    batch_size: int = bounded(16, ge=1)
    search: SearchConfig = field(default_factory=SearchConfig)
    arch_lr: dict[str, float] = field(default_factory=dict)  # per method, over search.arch_lr
    figure4: Figure4Config = field(default_factory=Figure4Config)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    workers: int | None = bounded(None, ge=1)  # None: one per core

    def check(self) -> None:
        if not self.pairs:
            raise ConfigError("pairs: name at least one pair of components")
        check_distinct(self.seeds, "seeds")
        for name, pair in self.pairs.items():
            if len(pair.components) != 2:
                raise ConfigError(f"pairs.{name}.components: a pair joins exactly two, got {pair.components}")
            for key in ("components", "methods", "updates"):
                check_distinct(getattr(pair, key), f"pairs.{name}.{key}", at_least=0)
            for m in pair.methods:
                if m not in METHODS:
                    raise ConfigError(f"pairs.{name}.methods: {m!r} unknown; allowed: {', '.join(METHODS)}")
            for u in pair.updates:
                if u not in ("alternating", "simultaneous"):
                    raise ConfigError(f"pairs.{name}.updates: {u!r} unknown; allowed: alternating, simultaneous")
        for m, lr in self.arch_lr.items():
            if m not in METHODS or lr <= 0:
                raise ConfigError(f"arch_lr.{m}: must name a method ({', '.join(METHODS)}) with a positive rate, "
                                  f"got {lr}")
        fig4 = self.figure4
        if fig4.pair is not None:
            if fig4.pair not in self.pairs:
                raise ConfigError(f"figure4.pair: {fig4.pair!r} is not one of pairs ({', '.join(self.pairs)})")
            check_distinct(fig4.steps, "figure4.steps")
            check_distinct(fig4.seeds, "figure4.seeds")
            if bad := [s for s in fig4.steps if not 0 <= s < self.projector_steps]:
                raise ConfigError(f"figure4.steps: {bad} not in [0, projector_steps = {self.projector_steps}); "
                                  "the last budget is projector_steps itself, the pair's own sweep")

    def figure4_seed(self, pair_name: str, seed: int) -> bool:
        return self.figure4.pair == pair_name and seed in self.figure4.seeds

    def tuning(self, pair: PairSpec, seed: int) -> FineTuneConfig:
        """The `Runner` settings of one pair and seed."""
        return FineTuneConfig(seed=seed, n_blocks=self.n_blocks, components=pair.components,
                              projector_steps=self.projector_steps, train_steps=self.train_steps,
                              batch_size=self.batch_size, optim=self.optim, trainer=self.trainer)


def distinct_entries(n: int) -> list[str]:
    """`n` distinct encyclopedia entries (seed 0; made-up names could repeat an entry)."""
    entries = list(dict.fromkeys(generate_entries(n + n // 100 + 10, 0)))
    if len(entries) < n:
        raise DataError(f"the encyclopedia generator gives only {len(entries)} distinct entries; {n} are needed")
    return entries[:n]


def genre_documents(cfg: SpecialistsConfig, seed: int, stories: Path, single_genre: bool = False,
                    pretrained: set[str] = frozenset()) -> dict[str, list[str]]:
    """The text of one seed's runs: fine-tuning and projector mixes, held-out documents per genre;
    with `single_genre`, also `n_train` documents of each genre alone (`train_<genre>`). No
    instruction is one of `pretrained`, the documents the instruction components pretrained on:
    short templated tasks repeat, and a held-out one they saw would flatter them."""
    n_instr = round(cfg.n_train * cfg.fraction_instructions)
    story_split = load_dataset_dir(stories, splits=("train", "validation"), columns=("text",),
                                   hint="run `dvc repro generate_stories` first")
    held_out = list(dict.fromkeys(story_split["validation"]["text"]))
    need = cfg.n_validation + (cfg.n_train if single_genre else cfg.n_train - n_instr)
    if len(held_out) < need:
        raise DataError(f"n_validation + the stories of n_train = {need}, but the story corpus holds "
                        f"{len(held_out)} distinct validation stories")
    instructions = distinct_instructions(cfg.n_validation + (cfg.n_train if single_genre else n_instr), FINE_TUNING_IDS,
                                         exclude=pretrained)
    story_pool = held_out[cfg.n_validation:need]
    instruction_pool = instructions[cfg.n_validation:]
    docs = {"validation_stories": held_out[:cfg.n_validation],
            "validation_instructions": instructions[:cfg.n_validation],
            "train": mix_genres(story_pool[:cfg.n_train - n_instr], instruction_pool[:n_instr],
                                cfg.fraction_instructions, cfg.n_train, seed)}
    if single_genre:
        docs["train_stories"] = mix_genres(story_pool, [], 0.0, cfg.n_train, seed)
        docs["train_instructions"] = mix_genres([], instruction_pool, 1.0, cfg.n_train, seed)
    if cfg.projector_text == "encyclopedia":
        # Scored on held-out entries: the projectors' loss on their own text is what flattens.
        entries = distinct_entries(cfg.n_projector + cfg.n_validation)
        docs["projector"] = mix_genres(entries[:cfg.n_projector], [], 0.0, cfg.n_projector, seed)
        docs["validation_projector"] = entries[cfg.n_projector:]
    else:
        n_proj_instr = round(cfg.n_projector * cfg.fraction_instructions)
        docs["projector"] = mix_genres(list(story_split["train"]["text"][:cfg.n_projector - n_proj_instr]),
                                       distinct_instructions(n_proj_instr, PROJECTOR_IDS,
                                                             exclude=pretrained | set(instructions)),
                                       cfg.fraction_instructions, cfg.n_projector, seed)
    return docs


def write_genre_data(cfg: SpecialistsConfig, seed: int, tokenizer, stories: Path, out: Path,
                     single_genre: bool = False, pretrained: set[str] = frozenset()) -> dict[str, Path]:
    """Tokenized data sets: `finetune` (train: the mix, validation: both genres' held-out
    documents) and `projector` (train: the projector text, validation: its own held-out entries, or
    with projector text of the two genres the same held-out documents);
    with `single_genre`, `finetune_<genre>` (train: that genre alone, validation: that genre's
    held-out documents, so that a run's curve, which the report's settling rule reads, is the
    task's own loss)."""
    docs = genre_documents(cfg, seed, stories, single_genre, pretrained)
    # Interleaved, so that the validation batches a run reads (`limit_val_batches`) hold both genres.
    validation = [doc for pair in zip(docs["validation_stories"], docs["validation_instructions"]) for doc in pair]
    sets = {"finetune": docs["train"], "projector": docs["projector"],
            **{f"finetune_{g}": docs[f"train_{g}"] for g in GENRES if f"train_{g}" in docs}}
    paths = {}
    for name, train in sets.items():
        own = docs.get("validation_projector", validation) if name == "projector" else \
            docs.get(f"validation_{name.removeprefix('finetune_')}", validation)
        splits = {"train": train, "validation": own,
                  **{f"validation_{g}": docs[f"validation_{g}"] for g in GENRES}}
        with atomic_dir(out / name) as tmp:
            datasets.DatasetDict({s: tokenize_padded(datasets.Dataset.from_dict({"text": rows}), tokenizer, cfg.n_ctx)
                                  for s, rows in splits.items()}).save_to_disk(str(tmp))
            write_manifest(tmp, stage="specialists", seed=seed, counts={s: len(r) for s, r in splits.items()},
                           params={"data": name, "n_ctx": cfg.n_ctx, "fraction": cfg.fraction_instructions,
                                   "tokenizer": tokenizer_fingerprint(tokenizer)})
        paths[name] = out / name
    return paths


def genre_losses(net, data: Path, cfg: SpecialistsConfig) -> dict[str, float]:
    rows = load_tokenized(data, splits=tuple(f"validation_{g}" for g in GENRES))
    losses = {g: heldout_loss(net, rows[f"validation_{g}"], cfg.batch_size) for g in GENRES}
    return {**losses, "mix": sum(losses.values()) / len(losses)}


def genre_chance(data: Path, vocab_size: int) -> dict[str, float]:
    """Each genre's unigram loss (the fine-tuning mix's token frequencies, scored on the labels the
    models are scored on: every non-padding token but a row's first), and their mean."""
    rows = load_tokenized(data, splits=("train", *(f"validation_{g}" for g in GENRES)))
    chance = {g: scored_unigram_loss(rows["train"], rows[f"validation_{g}"], vocab_size) for g in GENRES}
    return {**chance, "mix": sum(chance.values()) / len(chance)}


def with_own_embeddings(runner: Runner, start: dict) -> dict:
    """`start` with the embeddings the hybrid is built with, the components' own, in place of those
    projector pretraining trained: only the projectors carry over (as the official code's
    `load_projectors`), and a one-hot alpha starts as exactly its component."""
    built = snapshot(runner.hybrid("fixed", None))
    return {**start, **{key: value for key, value in built.items() if key.startswith("embeddings.")}}


def curve(run) -> list[list[float]]:
    """(step, validation loss on the run's held-out documents: both genres', or on a single-genre task
    that genre's) over a run: how far it still moved at the end."""
    return [[r["step"], r["val/loss"]] for r in run.history if "val/loss" in r]


def projector_free(alphas: list[list[float]], cfg: SpecialistsConfig) -> bool:
    """Whether a fixed alpha's run does not depend on the projectors' weights: every weight 0 or 1
    gates every projector out (hybrid.py), and the embeddings are the components' own."""
    return not cfg.carry_embeddings and all(a in (0.0, 1.0) for row in alphas for a in row)


def run_pair(cfg: SpecialistsConfig, pair_name: str, seed: int, components_dir: Path, stories: Path,
             run_root: Path, pretrained: frozenset[str], figure4_only: bool = False) -> dict:
    """Every run of one pair at one seed (one worker job); `pretrained`: the instruction components'
    pretraining documents, which no instruction here repeats. `figure4_only`: the projector
    pretraining and the sweeps of Figure 4 only (a seed of `figure4.seeds` that is not one of
    `seeds`)."""
    pair = cfg.pairs[pair_name]
    components, tokenizer = components_for_hybrid(components_dir, pair.components)
    vocab_size = len(tokenizer)
    run_dir = run_root / pair_name / f"seed{seed}"
    data = write_genre_data(cfg, seed, tokenizer, stories, run_dir / "data",
                            single_genre=pair.tasks and not figure4_only, pretrained=pretrained)
    runner = Runner(cfg.tuning(pair, seed), components, vocab_size, run_dir)
    snapshots = cfg.figure4.steps if cfg.figure4_seed(pair_name, seed) else []
    start, projector_history = runner.pretrain_projectors(data["projector"], cfg.projector_steps, snapshots=snapshots)

    def own_embeddings(state: dict) -> dict:
        return state if cfg.carry_embeddings else with_own_embeddings(runner, state)

    start = own_embeddings(start)

    def scored(run) -> dict:
        return {"loss": genre_losses(run.module.net, data["finetune"], cfg), "curve": curve(run),
                "train_seconds": round(run.metrics.state_dict()["elapsed_s"], 2)}

    def searched_and_retrained(name: str, method: str, update: str, task_data: Path) -> dict:
        alphas, history = search_alphas(runner, cfg, method, update, start, task_data, f"search_{name}")
        return {"alphas": alphas.tolist(), "trajectory": alpha_trajectory(history, cfg.n_blocks, 2),
                **scored(runner.fixed_run(f"retrain_{name}", alphas, start, task_data))}

    def alone(name: str, component, task_data: Path, steps: int) -> dict:
        def module() -> CausalLMModule:
            return CausalLMModule(copy.deepcopy(component), vocab_size, cfg.optim)

        return scored(runner.fit(name, module, task_data, steps))

    grid = sweep_grid(cfg.n_blocks, cfg.sweep_points)
    sweep = [{"alphas": alphas.tolist(), **scored(runner.fixed_run(f"sweep_{k}", alphas, start, data["finetune"]))}
             for k, alphas in enumerate(grid)]
    chance = genre_chance(data["finetune"], vocab_size)
    projector_curve = [[r["step"], r["val/loss"]] for r in projector_history]
    figure4 = None
    if snapshots:
        budgets = []
        for step in sorted(snapshots):
            budget_start = own_embeddings(runner.projector_snapshot(step))
            points = [{**final, "trained": False} if projector_free(final["alphas"], cfg) else
                      {"alphas": alphas.tolist(),
                       **scored(runner.fixed_run(f"budget{step}_sweep_{k}", alphas, budget_start, data["finetune"]))}
                      for k, (alphas, final) in enumerate(zip(grid, sweep))]
            budgets.append({"steps": step, "sweep": points})  # `trained: false`: the final sweep's corner
        figure4 = {"pair": pair_name, "seed": seed, "components": pair.components, "chance": chance,
                   "projector_pretraining": projector_curve,
                   "budgets": [*budgets, {"steps": cfg.projector_steps, "sweep": sweep}]}
    if figure4_only:
        return {"figure4": figure4}
    searched = {f"{method}_{update}": searched_and_retrained(f"{method}_{update}", method, update, data["finetune"])
                for method in pair.methods for update in pair.updates}
    result = {"pair": pair_name, "seed": seed, "components": pair.components,
              "chance": chance, "projector_pretraining": projector_curve,
              "projector_train_seconds": round(projector_history[-1]["elapsed_s"], 2) if projector_history else 0.0,
              "sweep": sweep, "searched": searched, "figure4": figure4}
    if pair.ensemble:
        run = runner.fit("ensemble", lambda: CausalLMModule(LearnedEnsemble(copy.deepcopy(components)), vocab_size,
                                                            cfg.optim), data["finetune"], cfg.train_steps)
        result["ensemble"] = {"weights": run.module.net.weights.detach().softmax(0).tolist(), **scored(run)}
    if pair.alone:
        hybrid_params = sum(p.numel() for p in runner.hybrid("fixed", None).parameters())
        result["alone_at_hybrid_compute"] = {}
        for name, component in zip(pair.components, components):
            steps = round(cfg.train_steps * hybrid_params / sum(p.numel() for p in component.parameters()))
            result["alone_at_hybrid_compute"][name] = {"steps": steps, **alone(f"alone_{name}", component,
                                                                               data["finetune"], steps)}
    if pair.tasks:
        result["tasks"] = {}
        label = "_".join(TASK_SEARCH)
        for task in TASKS:
            task_data = data["finetune" if task == "mix" else f"finetune_{task}"]
            row = {"alone": {name: alone(f"{task}_alone_{name}", component, task_data, cfg.train_steps)
                             for name, component in zip(pair.components, components)}}
            row["manticore"] = searched[label] if task == "mix" and label in searched else \
                searched_and_retrained(f"{task}_{label}", *TASK_SEARCH, task_data)
            result["tasks"][task] = row
    log.info("%s seed %d: sweep %s", pair_name, seed, [round(point["loss"]["mix"], 4) for point in sweep])
    return result


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "specialists", SpecialistsConfig)
    text_cfg, _, _ = load_stage(args.params, "instruction_text", InstructionTextConfig)
    pretrained = frozenset(pretraining_documents(text_cfg)["train"])
    # Every pair's components before any pair trains: a worker would find a missing one only when
    # its pair's turn comes.
    check_component_names(args.components, sorted({c for pair in cfg.pairs.values() for c in pair.components}))
    common = {"cfg": cfg, "components_dir": args.components, "stories": args.stories, "run_root": args.run_dir,
              "pretrained": pretrained}
    jobs = [{**common, "pair_name": name, "seed": seed} for name in cfg.pairs for seed in cfg.seeds]
    jobs += [{**common, "pair_name": cfg.figure4.pair, "seed": seed, "figure4_only": True}
             for seed in cfg.figure4.seeds if seed not in cfg.seeds]
    runs = run_jobs(run_pair, jobs, cfg.trainer.job_workers(cfg.workers))
    figure4 = sorted((row for run in runs if (row := run.pop("figure4")) is not None), key=lambda row: row["seed"])
    runs = [run for run in runs if run]  # a Figure 4 seed's job holds nothing else
    write_json(args.out, {"profile": profile, "config": asdict(cfg), "runs": runs, "figure4": figure4})
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
