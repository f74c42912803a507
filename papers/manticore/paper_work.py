"""What each stage of the Manticore pipeline computes at the `paper` profile (`common.paper_work`),
declared beside the stages, for the readiness tables of `make rehearse`."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import nn

from common.config import stage_config
from common.data.mad import sequence_length
from common.paper_work import Work, paper_params

MC_PARAMS = "papers/manticore/params.yaml"


class SideBySide(nn.Module):
    """Components run on the same ids: the ensemble's cost (its mixing weights cost nothing)."""

    def __init__(self, components: list[nn.Module]):
        super().__init__()
        self.components = nn.ModuleList(components)

    def forward(self, ids: torch.Tensor) -> list[torch.Tensor]:
        return [component(ids) for component in self.components]


def _mc(section: str, cls, shared: tuple[str, type] | None = None):
    return stage_config(paper_params(MC_PARAMS), section, cls, shared=shared)


@functools.cache
def hub_components(names: tuple[str, ...]) -> tuple:
    """The pretrained components of `paper` (the components section's Hub ids), built from their real
    architecture configs (`rehearsal.standins`) with random weights, each reading the first one's
    vocabulary as the hybrids' stages make them (`papers.manticore.vocabulary`). Built once: the
    FLOP count only runs them forward."""
    from common.models.hf import language_model_from_hf
    from common.models.lm import LanguageModel
    from common.models.mamba import mamba_lm_from_hf
    from papers.manticore.components import ComponentsConfig
    from rehearsal.standins import CHECKPOINTS

    hub = _mc("components", ComponentsConfig).hub
    models = [(mamba_lm_from_hf if "mamba" in name else language_model_from_hf)(CHECKPOINTS[hub[name]].build())
              for name in names]
    vocab = models[0].cfg.vocab_size
    return tuple(m if m.cfg.vocab_size == vocab else LanguageModel(replace(m.cfg, vocab_size=vocab)) for m in models)


@functools.cache
def _hybrid(names: tuple[str, ...], n_blocks: int) -> Callable[[], nn.Module]:
    """The builder of one hybrid, the same object for every stage that trains it, so that its FLOPs
    are counted once per context length (`rehearsal.readiness` keys its counts by builder)."""
    def build() -> nn.Module:
        from papers.manticore.hybrid import Manticore, ManticoreConfig

        components = list(hub_components(names))
        return Manticore(components, ManticoreConfig(n_blocks=n_blocks, vocab_size=components[0].cfg.vocab_size))
    return build


def _hybrid_runs(cfg, n_ctx: int, general_n_ctx: int, prefix: str = "") -> Callable[..., Work]:
    """Work of the stage's Manticore (a `FineTuneConfig` stage's two components and blocks) in one of
    its phases: `phase(label, steps, runs, n_ctx=...)`."""
    blocks = f"{cfg.n_blocks} block{'s' if cfg.n_blocks > 1 else ''}"
    name = f"{prefix}Manticore[{', '.join(cfg.components)}], {blocks}"
    build = _hybrid(tuple(cfg.components), cfg.n_blocks)

    def phase(label: str, steps: int, runs: int, projectors: bool = False, note: str = "") -> Work:
        if projectors:
            note = "components frozen; counted as full training, an upper bound"
        return Work(f"{name}: {label}", build, general_n_ctx if projectors else n_ctx, cfg.batch_size, steps, runs,
                    vocab=hub_components(tuple(cfg.components))[0].cfg.vocab_size, note=note)
    return phase


SWEEP_NOTE = "the one-hot ends run one component; counted as the hybrid"


@functools.cache
def _component(names: tuple[str, ...], m: int) -> Callable[[], nn.Module]:
    return lambda: hub_components(names)[m]


def _alone(names: list[str], m: int, network: str, n_ctx: int, rows: int, steps: int, runs: int) -> Work:
    return Work(network, _component(tuple(names), m), n_ctx, rows, steps, runs,
                vocab=hub_components(tuple(names))[m].cfg.vocab_size)


def _general_n_ctx(cfg) -> int:
    from papers.manticore.general_text import GeneralTextConfig

    return cfg.general_n_ctx or _mc("general_text", GeneralTextConfig).block_size


def _completions_n_ctx() -> int:
    from papers.manticore.completions import CompletionsConfig

    return _mc("completions", CompletionsConfig).n_ctx


def mc_nl_experiments() -> list[Work]:
    from papers.manticore.alphas import sweep_grid
    from papers.manticore.landscape import LandscapeConfig

    cfg = _mc("nl_experiments", LandscapeConfig)
    n_ctx = _completions_n_ctx()
    phase = _hybrid_runs(cfg, n_ctx, _general_n_ctx(cfg))
    components = hub_components(tuple(cfg.components))
    return [phase("projector pretraining", cfg.projector_steps, 1, projectors=True),
            phase("alpha sweep", cfg.train_steps, len(sweep_grid(cfg.n_blocks, cfg.sweep_points)), note=SWEEP_NOTE),
            phase("search and retraining", cfg.search_steps + cfg.train_steps, len(cfg.methods) * len(cfg.updates)),
            Work(f"ensemble of {', '.join(cfg.components)}", lambda: SideBySide(list(components)), n_ctx,
                 cfg.batch_size, cfg.train_steps, vocab=components[0].cfg.vocab_size)]


def mc_programmed() -> list[Work]:
    from papers.manticore.alphas import sweep_grid
    from papers.manticore.programmed import ProgrammedConfig

    cfg = _mc("programmed", ProgrammedConfig)
    phase, seeds = _hybrid_runs(cfg, _completions_n_ctx(), _general_n_ctx(cfg)), len(cfg.seeds)
    return [phase("projector pretraining", cfg.projector_steps, seeds, projectors=True),
            phase("alpha sweep", cfg.train_steps, seeds * len(sweep_grid(cfg.n_blocks, cfg.sweep_points)),
                  note=SWEEP_NOTE),
            phase("programmed retraining", cfg.train_steps, seeds)]


def mc_projector_budget() -> list[Work]:
    from papers.manticore.alphas import sweep_grid
    from papers.manticore.projector_budget import ProjectorBudgetConfig

    cfg = _mc("projector_budget", ProjectorBudgetConfig)
    phase = _hybrid_runs(cfg, _completions_n_ctx(), _general_n_ctx(cfg))
    # Each budget pretrains its own projectors from scratch, then sweeps.
    return [phase("projector pretraining", sum(cfg.budgets), 1, projectors=True),
            phase("alpha sweep", cfg.train_steps, len(cfg.budgets) * len(sweep_grid(cfg.n_blocks, cfg.sweep_points)),
                  note=SWEEP_NOTE)]


def _standin_depths(names: list[str]) -> str:
    """What the rehearsal trained instead, where a component's stand-in is shallower than the real
    model (`rehearsal.standins.Checkpoint.standin_layers`); counts stay at the real depth."""
    from papers.manticore.components import ComponentsConfig
    from rehearsal.standins import CHECKPOINTS

    hub = _mc("components", ComponentsConfig).hub
    cut = [f"{name} at {CHECKPOINTS[hub[name]].standin_layers} layers" for name in names
           if CHECKPOINTS[hub[name]].standin_layers is not None]
    return f"rehearsed with {' and '.join(cut)}" if cut else ""


def mc_finetune_tasks() -> list[Work]:
    from papers.manticore.alphas import sweep_grid
    from papers.manticore.finetune_tasks import FineTuneTasksConfig

    cfg = _mc("finetune_tasks", FineTuneTasksConfig)
    phase = _hybrid_runs(cfg, cfg.n_ctx, _general_n_ctx(cfg))
    works = [phase("projector pretraining", cfg.projector_steps, 1, projectors=True)]
    # Tasks differ in steps; Figure 3's add the sweep, every search and the ensemble. The table sums
    # each network's runs over the tasks.
    task_cfgs = {name: cfg.for_task(name) for name in cfg.tasks}
    groups = Counter((task.landscape, task_cfgs[name].search_steps, task_cfgs[name].train_steps)
                     for name, task in cfg.tasks.items())
    components = hub_components(tuple(cfg.components))
    for (landscape, search_steps, train_steps), tasks in groups.items():
        # Table 1's search is one of the landscape's when the landscape has its method and update rule.
        shared = cfg.method in cfg.methods and cfg.search.update in cfg.updates
        searches = len(cfg.methods) * len(cfg.updates) + (0 if shared else 1) if landscape else 1
        works += [*(_alone(cfg.components, m, f"{name} alone", cfg.n_ctx, cfg.batch_size, train_steps, tasks)
                    for m, name in enumerate(cfg.components)),
                  phase("search and retraining", search_steps + train_steps, tasks * searches)]
        if landscape:
            works += [phase("alpha sweep", train_steps, tasks * len(sweep_grid(cfg.n_blocks, cfg.sweep_points)),
                            note=SWEEP_NOTE),
                      Work(f"ensemble of {', '.join(cfg.components)}", lambda: SideBySide(list(components)), cfg.n_ctx,
                           cfg.batch_size, train_steps, tasks, vocab=components[0].cfg.vocab_size)]
    first = works[0]  # the note once, on the stage's first row
    return [replace(first, note="; ".join(filter(None, [first.note, _standin_depths(cfg.components)]))), *works[1:]]


def mc_specialists() -> list[Work]:
    from papers.manticore.alphas import sweep_grid
    from papers.manticore.specialists import TASKS, SpecialistsConfig

    cfg = _mc("specialists", SpecialistsConfig)
    work, seeds = [], len(cfg.seeds)
    for pair_name, pair in cfg.pairs.items():
        tuning = cfg.tuning(pair, cfg.seeds[0])
        phase = _hybrid_runs(tuning, cfg.n_ctx, cfg.n_ctx, prefix=f"{pair_name}: ")
        searches = len(pair.methods) * len(pair.updates) + (len(TASKS) if pair.tasks else 0)
        work += [phase("projector pretraining", cfg.projector_steps, seeds, projectors=True),
                 phase("alpha sweep", cfg.train_steps, seeds * len(sweep_grid(cfg.n_blocks, cfg.sweep_points)),
                       note=SWEEP_NOTE),
                 phase("search and retraining", cfg.search_steps + cfg.train_steps, seeds * searches)]
        if pair.ensemble:
            components = hub_components(tuple(pair.components))
            work.append(Work(f"{pair_name}: ensemble", lambda c=components: SideBySide(list(c)), cfg.n_ctx,
                             cfg.batch_size, cfg.train_steps, seeds, vocab=components[0].cfg.vocab_size))
        if pair.alone:  # each component alone for the hybrid's parameter-steps: about the hybrid's compute
            work.append(phase("each component alone at the hybrid's compute", cfg.train_steps,
                              seeds * len(pair.components), note="counted as the hybrid"))
        if pair.tasks:
            work += [_alone(pair.components, m, f"{pair_name}: {name} alone on each task", cfg.n_ctx,
                            cfg.batch_size, cfg.train_steps, seeds * len(TASKS))
                     for m, name in enumerate(pair.components)]
    return work


def _mad():
    from papers.manticore.mad_config import MAD_TASKS, MADExperimentsConfig

    return _mc("mad_experiments", MADExperimentsConfig, MAD_TASKS)


def _mad_hybrid(configs: dict, n_blocks: int, vocab: int, projectors: bool) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        from papers.manticore.mad_runs import build_hybrid

        return build_hybrid(configs, n_blocks, vocab, projectors)
    return build


def mc_mad_experiments() -> list[Work]:
    """Per MAD task and seed: each component and existing hybrid alone, and each Manticore searched then
    retrained."""
    from common.models.lm import LanguageModel
    from papers.manticore.mad_config import baseline_configs, component_configs

    cfg = _mad()
    work = []
    for task in cfg.tasks().values():
        n_ctx, vocab, steps, rows = sequence_length(task), task.vocab_size, cfg.trainer.max_steps, cfg.batch_size
        seeds = len(cfg.seeds)
        components, baselines = component_configs(cfg, vocab, n_ctx), baseline_configs(cfg, vocab, n_ctx)
        work += [Work(f"{name} alone", lambda lm=lm: LanguageModel(lm), n_ctx, rows, steps, seeds, vocab=vocab)
                 for name, lm in {**components, **baselines}.items()]
        searches = 1 + len(cfg.retrain) + (1 if cfg.programming is not None else 0)
        work.append(Work(f"Manticore[{', '.join(components)}]",
                         _mad_hybrid(components, cfg.n_blocks, vocab, cfg.projectors), n_ctx, rows, steps,
                         searches * seeds, vocab=vocab, note="search, retrainings and the programming search"))
        everyone = {**components, **baselines}
        for name, hybrid in cfg.hybrids.items():
            build = _mad_hybrid({c: everyone[c] for c in hybrid.components}, hybrid.n_blocks, vocab, cfg.projectors)
            work.append(Work(name, build, n_ctx, rows, steps, (1 + len(hybrid.retrain)) * seeds, vocab=vocab))
    return work


def mc_mad_sizing() -> list[Work]:
    from common.models.lm import LanguageModel
    from papers.manticore.mad_config import baseline_configs, component_configs
    from papers.manticore.mad_sizing import MADSizingConfig

    cfg, sizing = _mad(), _mc("mad_sizing", MADSizingConfig)
    steps = sum(sizing.budgets)  # one run per budget; the tables' own is mad_experiments' runs
    return [] if not steps else [Work(f"{name} alone", lambda lm=lm: LanguageModel(lm), lm.n_ctx, cfg.batch_size, steps,
                 vocab=task.vocab_size, note="one run per budget, steps summed")
            for task in cfg.tasks().values()
            for name, lm in {**component_configs(cfg, task.vocab_size, sequence_length(task)),
                             **baseline_configs(cfg, task.vocab_size, sequence_length(task))}.items()]


def _lra():
    from papers.manticore.lra_config import LRA_TASKS, LRAExperimentsConfig

    return _mc("lra_experiments", LRAExperimentsConfig, LRA_TASKS)


def _lra_task(cfg, name: str):
    """(task config, its longest sequence) of an lra_experiments task at `paper`."""
    from common.data.lra import LRATaskConfig
    from common.stages.lra_generate import LRAGenerateConfig

    entry = cfg.tasks[name]
    task = (entry.lra_task() if entry.task is not None
            else stage_config(paper_params("params.yaml"), "lra_generate", LRAGenerateConfig).tasks[entry.data])
    assert isinstance(task, LRATaskConfig)
    # The longest sequence the task allows: ListOps and IMDb are cut at max_len, images are flattened.
    length = {"listops": task.max_len, "imdb": task.max_len, "cifar10": 32 * 32, "pathfinder": task.size ** 2}
    return task, length[task.task]


def _lra_networks(cfg, name: str) -> tuple[dict, int, int, int]:
    """(configs of the components that can read the task, length, vocabulary, rows per step)."""
    from common.data.lra import vocab_size
    from papers.manticore.lra_config import can_read

    task, length = _lra_task(cfg, name)
    configs = cfg.component_configs(name, vocab_size(task), length)
    readers = {c: lm for c, lm in configs.items() if can_read(lm, length)}
    return readers, length, vocab_size(task), cfg.tasks[name].batch_size or cfg.batch_size


def mc_lra_experiments() -> list[Work]:
    """Per task and seed: each component that can read the task alone, and the hybrid (searched, or
    programmed without the components that cannot read it, which it then never calls)."""
    from common.models.lm import LanguageModel

    cfg = _lra()
    work = []
    for name, entry in cfg.tasks.items():
        readers, length, vocab, rows = _lra_networks(cfg, name)
        steps = entry.max_steps or cfg.trainer.max_steps
        work += [Work(f"{name}: {c} alone", lambda lm=lm: LanguageModel(lm), length, rows, steps, len(cfg.seeds),
                      vocab=vocab) for c, lm in readers.items()]
        work.append(Work(f"{name}: Manticore[{', '.join(readers)}]",
                         _mad_hybrid(readers, entry.n_blocks or cfg.n_blocks, vocab, cfg.projectors),
                         length, rows, steps, len(cfg.seeds), vocab=vocab))
    return work


def mc_lra_sizing() -> list[Work]:
    from common.models.lm import LanguageModel
    from papers.manticore.lra_sizing import LRASizingConfig

    cfg, sizing = _lra(), _mc("lra_sizing", LRASizingConfig)
    work = []
    for name, budgets in sizing.budgets.items():
        readers, length, vocab, rows = _lra_networks(cfg, name)
        # one run per budget; the table's own is lra_experiments' first seed's
        steps = sum(set(budgets) - {cfg.tasks[name].max_steps or cfg.trainer.max_steps})
        if steps:
            work += [Work(f"{name}: {c} alone", lambda lm=lm: LanguageModel(lm), length, rows, steps, vocab=vocab,
                          note="one run per budget, steps summed") for c, lm in readers.items()]
    return work


STAGES: dict[str, Callable[[], list[Work]] | str] = {
    "instruction_text": "data: generated instructions",
    "components": "conversion of the Hub checkpoints",
    "general_text": "data: FineWeb tokenized",
    "completions": "greedy completions by Mamba-130M: forward passes, not counted",
    "nl_experiments": mc_nl_experiments,
    "specialists": mc_specialists,
    "mad_experiments": mc_mad_experiments,
    "mad_lr_check": "no rates checked at this profile (the paper's rate)",
    "mad_sizing": mc_mad_sizing,
    "lra_experiments": mc_lra_experiments,
    "lra_sizing": mc_lra_sizing,
    "programmed": mc_programmed,
    "projector_budget": mc_projector_budget,
    "finetune_tasks": mc_finetune_tasks,
    "report": "tables and ledger",
}
