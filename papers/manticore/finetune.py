"""What every Manticore stage that fine-tunes a two-component hybrid on text shares: its config,
its arguments, the hybrid's inputs, and `Runner`, which trains one network per experiment from the
same projector-pretrained weights (projector pretraining, the fixed-alpha sweep, retraining)."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import lightning as L
import matplotlib.pyplot as plt
import torch

from common.config import bounded, check_distinct, seed_field
from common.data.datamodule import TextDataModule
from common.errors import ConfigError, DataError
from common.eval.plots import save_figure
from common.io import atomic_file, write_json
from common.models.lm import LanguageModel
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, TrainingRun, run_training
from papers.manticore.alphas import sweep_grid
from papers.manticore.hybrid import Manticore, ManticoreConfig
from papers.manticore.search import rewind, snapshot
from papers.manticore.vocabulary import check_tokenized_with, components_for_hybrid

log = logging.getLogger(__name__)
METHODS = {"darts": "softmax", "dash": "gumbel", "gaea": "simplex"}


@dataclass
class FineTuneConfig:
    """What every stage that fine-tunes Manticore[two components] shares: the components, the
    projector pretraining every run starts from, and how each run trains."""
    seed: int = seed_field()
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
        check_distinct(self.components, "components")


@dataclass
class SweepConfig(FineTuneConfig):
    """Fine-tuning on the completions plus the grid of fixed alphas swept there."""
    sweep_points: list[float] = field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])

    def check(self) -> None:
        super().check()
        if not self.sweep_points or any(not 0 <= p <= 1 for p in self.sweep_points):
            raise ConfigError(f"sweep_points: weights of the second component, each in [0, 1], got {self.sweep_points}")


class SnapshottingLM(CausalLMModule):
    """A causal LM run that also saves its network's weights (`search.snapshot`) once it has taken
    each of `steps` optimizer steps, as `directory/step<N>.pt`: Figure 4's projector budgets read
    from one projector run. A hook of the module, not a callback, so that a finished run is still
    reused (`run_training`) and its files with it; a resumed run keeps the files it wrote before."""

    def __init__(self, net: Manticore, vocab_size: int, optim: OptimConfig, steps: Sequence[int], directory: Path):
        super().__init__(net, vocab_size, optim)
        self.snapshot_steps, self.directory = frozenset(steps), directory

    def _save(self) -> None:
        step = self.trainer.global_step
        if step in self.snapshot_steps:
            with atomic_file(snapshot_path(self.directory, step), "wb") as handle:
                torch.save(snapshot(self.net), handle)

    def on_train_start(self) -> None:  # step 0: the weights before any training
        self._save()

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self._save()


def snapshot_path(directory: Path, step: int) -> Path:
    return directory / f"step{step}.pt"


class Runner:
    """Trains one network per experiment, each from the same starting weights."""

    def __init__(self, cfg: FineTuneConfig, components: list[LanguageModel], vocab_size: int, run_root: Path):
        self.cfg, self.components, self.vocab_size, self.run_root = cfg, components, vocab_size, run_root

    def hybrid(self, alpha_mode: str, start: dict | None) -> Manticore:
        # Seeded here too, not only by `fit`: a hybrid built outside a run (projector pretraining
        # with no steps) draws the same projectors and embeddings as one built inside it.
        L.seed_everything(self.cfg.seed, verbose=False)
        net = Manticore(copy.deepcopy(self.components),
                        ManticoreConfig(n_blocks=self.cfg.n_blocks, vocab_size=self.vocab_size, alpha_mode=alpha_mode))
        if start is not None:
            rewind(net, start)
        return net

    def fit(self, name: str, build: Callable[[], L.LightningModule], data: Path, steps: int, manual: bool = False,
            n_ctx: int | None = None, key: dict | None = None) -> TrainingRun:
        """Train the module `build()` makes on `data` for `steps` batches; `manual` for modules that
        clip their own gradients (the search); `key`: settings of the module that the run's key must
        hold too (a finished run is reused only with the same key)."""
        trainer_cfg = replace(self.cfg.trainer, max_steps=steps,
                              gradient_clip_val=None if manual else self.cfg.trainer.gradient_clip_val)
        datamodule = TextDataModule(data, batch_size=self.cfg.batch_size, seed=self.cfg.seed, n_ctx=n_ctx)
        return run_training(build, datamodule, trainer_cfg, self.run_root / name, seed=self.cfg.seed,
                            run_config={"name": name, "config": asdict(self.cfg), "steps": steps, **(key or {})})

    def pretrain_projectors(self, general: Path, steps: int, name: str = "projectors",
                            snapshots: Sequence[int] = ()) -> tuple[dict, list[dict]]:
        """Step 1: projectors and embeddings trained on general text for `steps` batches, components
        frozen, uniform alphas. Returns the weights every later run starts from, and the
        validation history. `snapshots`: steps (below `steps`) at which the weights are also kept,
        read back with `projector_snapshot`."""
        def frozen_components() -> Manticore:
            base = self.hybrid("fixed", None)
            base.components.requires_grad_(False)
            return base

        if not steps:
            return snapshot(frozen_components()), []
        if late := [s for s in snapshots if not 0 <= s < steps]:
            raise ConfigError(f"projector snapshots {late}: each must be a step in [0, {steps}), the projector steps")
        if snapshots:
            def build() -> CausalLMModule:
                return SnapshottingLM(frozen_components(), self.vocab_size, self.cfg.optim, snapshots,
                                      self.run_root / name / "snapshots")
        else:
            def build() -> CausalLMModule:
                return CausalLMModule(frozen_components(), self.vocab_size, self.cfg.optim)
        run = self.fit(name, build, general, steps, n_ctx=self.cfg.general_n_ctx,
                       key={"snapshots": sorted(snapshots)} if snapshots else None)
        return snapshot(run.module.net), [r for r in run.history if "val/loss" in r]

    def projector_snapshot(self, step: int, name: str = "projectors") -> dict:
        """The weights `pretrain_projectors(..., snapshots)` kept after `step` steps."""
        path = snapshot_path(self.run_root / name / "snapshots", step)
        if not path.is_file():
            raise DataError(f"{path} is missing, though its projector run is complete; delete "
                            f"{self.run_root / name} and rerun to train it again")
        return torch.load(path, weights_only=True)

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
        return val_loss(self.fixed_run(name, alphas, start, completions).history)

    def fixed_run(self, name: str, alphas: torch.Tensor, start: dict, data: Path) -> TrainingRun:
        """`retrain`'s run, trained network included."""
        def fixed() -> CausalLMModule:
            net = self.hybrid("fixed", start)
            net.set_alphas(alphas)
            return CausalLMModule(net, self.vocab_size, self.cfg.optim)

        return self.fit(name, fixed, data, self.cfg.train_steps)


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


def write_not_trained(args, profile: str, components: list[str], empty: dict) -> None:
    """The outputs of a stage that trains nothing at `profile`: its results (the profile, the
    components and `empty`, what it would have trained), an empty run directory, and its figure, a
    line that says so where a reader of the plots expects the stage's figure."""
    write_json(args.out, {"profile": profile, "components": components, **empty})
    args.run_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.text(0.5, 0.5, f"nothing trained at profile {profile}: a claim that reads this stage reads its earlier run",
            ha="center", va="center", fontsize=9)
    ax.axis("off")
    save_figure(fig, args.plot)
    log.info("wrote %s: nothing trained at %s", args.out, profile)


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
