"""Stage `nl_experiments`: the paper's Figure 2 (left), Table 4 and Table 8 on the completions set.

1. Projector pretraining: a Manticore[GPT-Neo, Mamba] with frozen components trains its projectors
   and embeddings on general text (the `general_text` stage's: stories at `tiny`, FineWeb at
   `paper`) for `projector_steps` batches, with uniform mixture weights. Every later run starts
   from these weights.
2. Sweep: for each fixed alpha on a grid (the weight of the second component per block), train
   everything for `train_steps` on the completions and record the validation loss: the landscape.
   The grid's ends are the components alone (a one-hot alpha turns the projectors off).
3. Search: for each method (DARTS = softmax, DASH = Gumbel-softmax, GAEA = exponentiated gradient
   on the simplex) and update rule (alternating, simultaneous), search the alphas for
   `search_steps` while everything trains, then rewind the weights to step 1's, freeze the
   searched alphas and retrain for `train_steps`.
4. Ensemble: the components' output distributions mixed by learned weights, trained likewise.

Claims checked: does search land in the sweep's best region, and does the ensemble fall below
Manticore? Writes `results/nl_experiments.json` and the landscape plot with the searched alphas.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import lightning as L
import matplotlib.pyplot as plt
import torch

from common.config import bounded
from common.data.datamodule import TextDataModule
from common.errors import ConfigError, DataError, exit_on_user_error
from common.eval.plots import save_figure
from common.io import write_json
from common.models.lm import LanguageModel
from common.stages import load_stage, stage_parser
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, train
from papers.manticore.alphas import sweep_grid
from papers.manticore.ensemble import LearnedEnsemble
from papers.manticore.hybrid import Manticore, ManticoreConfig
from papers.manticore.search import ManticoreSearchModule, SearchConfig, alpha_trajectory, rewind, snapshot
from papers.manticore.vocabulary import check_tokenized_with, components_for_hybrid

log = logging.getLogger("nl_experiments")
METHODS = {"darts": "softmax", "dash": "gumbel", "gaea": "simplex"}


@dataclass
class FineTuneConfig:
    """What every stage that fine-tunes Manticore[two components] shares: the components, the
    projector pretraining every run starts from, and how each run trains."""
    seed: int = 0
    n_blocks: int = bounded(1, ge=1)
    components: list[str] = field(default_factory=lambda: ["gpt_neo", "mamba"])
    projector_steps: int = bounded(100, ge=0)
    # Projector pretraining reads general text cut to this many tokens (None: rows as stored); the
    # fine-tuning sets are short, and the components' cost grows with the sequence.
    general_n_ctx: int | None = bounded(None, ge=2)
    train_steps: int = bounded(100, ge=1)
    batch_size: int = bounded(16, ge=1)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        if len(self.components) != 2:
            raise ConfigError(f"components: these experiments mix exactly two, got {self.components}")


@dataclass
class SweepConfig(FineTuneConfig):
    """Fine-tuning on the completions plus the grid of fixed alphas swept there."""
    sweep_points: list[float] = field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])


@dataclass
class NLExperimentsConfig(SweepConfig):
    methods: list[str] = field(default_factory=lambda: ["darts", "dash"])
    updates: list[str] = field(default_factory=lambda: ["alternating", "simultaneous"])
    search_steps: int = bounded(100, ge=1)
    search: SearchConfig = field(default_factory=SearchConfig)
    # Per-method mixture-weight learning rates, over `search.arch_lr`: GAEA's exponentiated
    # gradient moves the weights themselves, not AdamW-normalised logits, and needs its own scale.
    arch_lr: dict[str, float] = field(default_factory=dict)
    best_region_tolerance: float = bounded(0.02, ge=0)  # relative loss above the sweep's best

    def check(self) -> None:
        super().check()
        for m in self.methods:
            if m not in METHODS:
                raise ConfigError(f"methods: {m!r} unknown; allowed: {', '.join(METHODS)}")
        for m, lr in self.arch_lr.items():
            if m not in METHODS or lr <= 0:
                raise ConfigError(f"arch_lr.{m}: must name a method ({', '.join(METHODS)}) with a positive rate, "
                                  f"got {lr}")
        for u in self.updates:
            if u not in ("alternating", "simultaneous"):
                raise ConfigError(f"updates: {u!r} unknown; allowed: alternating, simultaneous")


def completions_parser(doc: str, runs: str, results: str, plot: str):
    """The arguments every completions stage takes, with its own run directory, results and plot."""
    parser = stage_parser(doc)
    parser.add_argument("--components", type=Path, default=Path("data/manticore/components"))
    parser.add_argument("--completions", type=Path, default=Path("data/manticore/completions/tokenized"))
    parser.add_argument("--general", type=Path, default=Path("data/manticore/general"))
    parser.add_argument("--run-dir", type=Path, default=Path(f"data/manticore/{runs}"))
    parser.add_argument("--out", type=Path, default=Path(f"papers/manticore/results/{results}.json"))
    parser.add_argument("--plot", type=Path, default=Path(f"papers/manticore/results/{plot}.png"))
    return parser


class Runner:
    """Trains one network per experiment, each from the same starting weights."""

    def __init__(self, cfg: FineTuneConfig, components: list[LanguageModel], vocab_size: int, run_root: Path,
                 profile: str):
        self.cfg, self.components, self.vocab_size = cfg, components, vocab_size
        self.run_root, self.profile = run_root, profile

    def hybrid(self, alpha_mode: str, start: dict | None) -> Manticore:
        # Seeded here, not only in `fit`: the projectors and new embeddings are drawn now, and the
        # process's generator starts from a random seed.
        L.seed_everything(self.cfg.seed, verbose=False)
        net = Manticore(copy.deepcopy(self.components),
                        ManticoreConfig(n_blocks=self.cfg.n_blocks, vocab_size=self.vocab_size, alpha_mode=alpha_mode))
        if start is not None:
            rewind(net, start)
        return net

    def fit(self, name: str, module: L.LightningModule, data: Path, steps: int, manual: bool = False,
            n_ctx: int | None = None) -> list[dict]:
        L.seed_everything(self.cfg.seed, workers=True, verbose=False)
        trainer_cfg = replace(self.cfg.trainer, max_steps=steps,
                              gradient_clip_val=None if manual else self.cfg.trainer.gradient_clip_val)
        datamodule = TextDataModule(data, batch_size=self.cfg.batch_size, seed=self.cfg.seed, n_ctx=n_ctx)
        metrics = train(module, datamodule, trainer_cfg, self.run_root / name, run_config={
            "profile": self.profile, "name": name, "config": asdict(self.cfg), "steps": steps})
        return metrics.history

    def pretrain_projectors(self, general: Path, steps: int, name: str = "projectors") -> tuple[dict, list[dict]]:
        """Step 1: projectors and embeddings trained on general text for `steps` batches, components
        frozen, uniform alphas. Returns the weights every later run starts from, and the
        validation history."""
        base = self.hybrid("fixed", None)
        base.components.requires_grad_(False)
        history = []
        if steps:
            history = self.fit(name, CausalLMModule(base, self.vocab_size, self.cfg.optim), general, steps,
                               n_ctx=self.cfg.general_n_ctx)
        return snapshot(base), [r for r in history if "val/loss" in r]

    def sweep(self, start: dict, completions: Path, prefix: str = "sweep") -> list[dict]:
        """Step 2: the landscape, every fixed alpha of the grid fine-tuned for `train_steps`."""
        points = []
        for k, alphas in enumerate(sweep_grid(self.cfg.n_blocks, self.cfg.sweep_points)):
            points.append({"alphas": alphas.tolist(),
                           "val_loss": self.retrain(f"{prefix}_{k}", alphas, start, completions)})
            log.info("sweep %s: %.4f", alphas[:, 1].tolist(), points[-1]["val_loss"])
        return points

    def retrain(self, name: str, alphas: torch.Tensor, start: dict, completions: Path) -> float:
        """All weights fine-tuned from `start` with `alphas` frozen; the final validation loss."""
        net = self.hybrid("fixed", start)
        net.set_alphas(alphas)
        return val_loss(self.fit(name, CausalLMModule(net, self.vocab_size, self.cfg.optim), completions,
                                 self.cfg.train_steps))


def hybrid_inputs(args, cfg: FineTuneConfig, stage: str, fine_tuning_data: list[Path]):
    """What a fine-tuning stage's hybrids read: the components (each reading the hybrid's
    tokenizer, the first component's), that tokenizer, and the general text tokenized with it.
    The general text and `fine_tuning_data` must have been tokenized with that tokenizer."""
    components, tokenizer = components_for_hybrid(args.components, cfg.components)
    general = args.general / cfg.components[0]
    if not general.is_dir():
        raise DataError(f"{general}: no general text in {cfg.components[0]}'s tokenizer; "
                        f"add {cfg.components[0]} to general_text.tokenizers and rerun that stage")
    for path in [general, *fine_tuning_data]:
        check_tokenized_with(path, tokenizer, f"{stage} (first component {cfg.components[0]})")
    return components, tokenizer, general


def val_loss(history: list[dict]) -> float:
    return next(r["val/loss"] for r in reversed(history) if "val/loss" in r)


def plot_landscape(sweep: list[dict], searched: dict, names: list[str], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    if len(sweep[0]["alphas"]) == 1:
        xs = [s["alphas"][0][1] for s in sweep]
        ax.plot(xs, [s["val_loss"] for s in sweep], "o-", color="black", label="fixed-alpha sweep")
        for label, res in searched.items():
            trajectory = res["trajectory"]
            ax.plot([t[0][1] for t in trajectory], [res["val_loss"]] * len(trajectory), "-", alpha=0.3)
            ax.plot([res["alphas"][0][1]], [res["val_loss"]], "*", markersize=12, label=f"{label} (retrained)")
        ax.set_xlabel(f"alpha of {names[1]} (1 - alpha for {names[0]})")
        ax.set_ylabel("validation loss after training")
    else:
        points = sorted({s["alphas"][0][1] for s in sweep})
        grid = torch.full((len(points), len(points)), float("nan"))
        for s in sweep:
            grid[points.index(s["alphas"][1][1]), points.index(s["alphas"][0][1])] = s["val_loss"]
        # Pixel centres on the grid points (the grid is evenly spaced).
        half = (points[1] - points[0]) / 2 if len(points) > 1 else 0.5
        low, high = points[0] - half, points[-1] + half
        image = ax.imshow(grid.numpy(), origin="lower", extent=(low, high, low, high), cmap="viridis_r")
        fig.colorbar(image, ax=ax, label="validation loss")
        for label, res in searched.items():
            trajectory = res["trajectory"]
            ax.plot([t[0][1] for t in trajectory], [t[1][1] for t in trajectory], "-", color="white", alpha=0.6)
            ax.plot([res["alphas"][0][1]], [res["alphas"][1][1]], "*", markersize=12, label=label)
        ax.set_xlabel(f"block 1: alpha of {names[1]}")
        ax.set_ylabel(f"block 2: alpha of {names[1]}")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    save_figure(fig, path)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    parser = completions_parser(__doc__, "nl_runs", "nl_experiments", "nl_landscape")
    args = parser.parse_args(argv)
    cfg, profile, _ = load_stage(args.params, "nl_experiments", NLExperimentsConfig)
    components, tokenizer, general = hybrid_inputs(args, cfg, "nl_experiments", [args.completions])
    vocab_size = len(tokenizer)
    runner = Runner(cfg, components, vocab_size, args.run_dir, profile)
    start, projector_history = runner.pretrain_projectors(general, cfg.projector_steps)
    sweep = runner.sweep(start, args.completions)

    # 3. Search, rewind, retrain.
    searched = {}
    for method in cfg.methods:
        for update in cfg.updates:
            label = f"{method}_{update}"
            net = runner.hybrid(METHODS[method], start)
            search = replace(cfg.search, update=update, arch_lr=cfg.arch_lr.get(method, cfg.search.arch_lr))
            module = ManticoreSearchModule(net, vocab_size, cfg.optim, search)
            history = runner.fit(f"search_{label}", module, args.completions, cfg.search_steps, manual=True)
            alphas = net.mixture_weights(sample=False).detach()
            searched[label] = {"alphas": alphas.tolist(), "search_val_loss": val_loss(history),
                               "val_loss": runner.retrain(f"retrain_{label}", alphas, start, args.completions),
                               "trajectory": alpha_trajectory(history, cfg.n_blocks, 2)}
            log.info("%s: alphas %s, retrained %.4f", label, alphas[:, 1].tolist(), searched[label]["val_loss"])

    # 4. The learned ensemble.
    ensemble = LearnedEnsemble(copy.deepcopy(components))
    ensemble_history = runner.fit("ensemble", CausalLMModule(ensemble, vocab_size, cfg.optim), args.completions,
                                  cfg.train_steps)
    ensemble_result = {"weights": ensemble.weights.detach().softmax(0).tolist(), "val_loss": val_loss(ensemble_history)}

    best = min(sweep, key=lambda s: s["val_loss"])
    # A one-hot alpha is the component alone (fine-tuned): the sweep's corners, when on the grid.
    component_alone = {name: s["val_loss"] for m, name in enumerate(cfg.components) for s in sweep
                       if all(row[1] == float(m) for row in s["alphas"])}
    threshold = best["val_loss"] * (1 + cfg.best_region_tolerance)
    best_manticore = min([best["val_loss"], *(r["val_loss"] for r in searched.values())])
    summary = {
        "sweep_best": best, "component_alone": component_alone,
        "search_in_best_region": {label: r["val_loss"] <= threshold for label, r in searched.items()},
        "best_region_threshold": threshold,
        "ensemble_below_manticore": ensemble_result["val_loss"] > best_manticore,
        "best_manticore_val_loss": best_manticore,
    }
    write_json(args.out, {"profile": profile, "components": cfg.components, "summary": summary, "sweep": sweep,
                          "searched": searched, "ensemble": ensemble_result,
                          "projector_pretraining": projector_history})
    plot_landscape(sweep, searched, cfg.components, args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
