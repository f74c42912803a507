"""Stage `routing`: the paper's Figures 6-7. Tokens per expert in every MoE layer of the trained
BlackMamba, as a heatmap, with a balance metric per layer.

The model is `train_compare`'s deeper BlackMamba (`blackmamba_deep`, when configured; otherwise
`blackmamba`), every seed. Each runs over the same validation batches twice: in eval mode, where
each token goes to the argmax of its router logits (inference, as the released model routes), and
in train mode without gradients, where the Sinkhorn router balances each batch (how the model was
trained). A layer counts as balanced when its busiest expert takes at most `balanced_max_over_mean`
times the mean load. The paper reports balance in most layers, with imbalance appearing in the last
layers (from layer 20 of 30 and 25 of 36); `late_fraction` is the share of MoE layers counted as
"late" when the two parts are compared.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "models", "data", "out", "plot")

import logging
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from common.blocks.moe import MoE, load_balance_stats
from common.config import bounded
from common.data.datamodule import TextDataModule
from common.device import compute_device
from common.errors import DataError, exit_on_user_error
from common.eval.plots import save_figure
from common.io import write_json
from common.models.lm import load_language_model
from papers.blackmamba.model import ROUTING_MODEL

log = logging.getLogger("routing")


@dataclass
class RoutingConfig:
    batches: int = bounded(20, ge=1)
    batch_size: int = bounded(16, ge=1)
    balanced_max_over_mean: float = bounded(1.5, ge=1)
    late_fraction: float = bounded(1 / 3, gt=0, le=0.5)


@torch.no_grad()
def count_tokens(model, loader, batches: int, train_mode: bool) -> list[torch.Tensor]:
    moe_layers = [b for b in model.blocks if isinstance(b, MoE)]
    for layer in moe_layers:
        layer.reset_stats()
    device = compute_device()
    model.train(train_mode).to(device)
    for i, batch in enumerate(loader):
        if i == batches:
            break
        model(batch["input_ids"].to(device))
    model.eval()
    # Copies: the next call's reset_stats zeroes these buffers in place.
    return [layer.tokens_per_expert.to("cpu", copy=True) for layer in moe_layers]


def heatmap(panels: dict[str, list[torch.Tensor]], path: Path) -> None:
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.5), squeeze=False)
    for ax, (title, counts) in zip(axes[0], panels.items()):
        share = torch.stack([c / c.sum() for c in counts]).double() * counts[0].numel()  # 1 = uniform
        image = ax.imshow(share.numpy(), cmap="viridis", aspect="auto", vmin=0, vmax=max(2.0, share.max().item()))
        ax.set_xlabel("expert")
        ax.set_ylabel("MoE layer")
        ax.set_xticks(range(share.shape[1]))
        ax.set_yticks(range(share.shape[0]))
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, label="load / mean load")
    save_figure(fig, path)


def layer_stats(counts: list[torch.Tensor], cfg: RoutingConfig) -> dict:
    """Per layer balance; how many layers are balanced; late layers' imbalance minus early layers'."""
    layers = [{"tokens_per_expert": c.tolist(), **load_balance_stats(c)} for c in counts]
    balanced = [layer["max_over_mean"] <= cfg.balanced_max_over_mean for layer in layers]
    n_late = max(1, round(cfg.late_fraction * len(layers)))
    loads = [layer["max_over_mean"] for layer in layers]
    early, late = loads[:-n_late], loads[-n_late:]
    return {"layers": layers, "balanced_layers": sum(balanced), "n_layers": len(layers),
            "share_balanced": sum(balanced) / len(layers), "late_layers": n_late,
            "late_minus_early_max_over_mean": (sum(late) / len(late) - sum(early) / len(early)) if early else None}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "routing", RoutingConfig)
    name = ROUTING_MODEL if (args.models / ROUTING_MODEL).is_dir() else "blackmamba"
    seed_dirs = sorted(p for p in (args.models / name).glob("seed*") if (p / "config.json").is_file())
    if not seed_dirs:
        raise DataError(f"{args.models / name}: no trained seeds; run the train_compare stage first")
    datamodule = TextDataModule(args.data, batch_size=cfg.batch_size, seed=0)
    datamodule.setup("validate")

    modes = {"inference (argmax)": False, "training (Sinkhorn)": True}
    seeds, panels = {}, {}
    for seed_dir in seed_dirs:
        model = load_language_model(seed_dir)
        counts = {mode: count_tokens(model, datamodule.val_dataloader(), cfg.batches, train)
                  for mode, train in modes.items()}
        seeds[seed_dir.name.removeprefix("seed")] = {mode: layer_stats(c, cfg) for mode, c in counts.items()}
        panels = panels or {f"{mode}, {seed_dir.name}": c for mode, c in counts.items()}
    write_json(args.out, {"profile": profile, "config": vars(cfg), "model": name, "seeds": seeds})
    heatmap(panels, args.plot)
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
