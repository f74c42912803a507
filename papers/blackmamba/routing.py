"""Stage `routing`: the paper's Figures 6-7. Tokens per expert in every MoE layer of the trained
BlackMamba, as a heatmap, with a balance metric per layer.

The trained model (from `train_compare`) runs over validation batches twice: in eval mode, where
each token goes to the argmax of its router logits (inference), and in train mode without
gradients, where the Sinkhorn router balances each batch (how the model was trained). A layer
counts as balanced when its busiest expert takes at most `balanced_max_over_mean` times the mean
load. The paper reports balance in most layers, with imbalance appearing in the last layers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from common.blocks.moe import MoE, load_balance_stats
from common.config import bounded
from common.data.datamodule import TextDataModule
from common.errors import exit_on_user_error
from common.eval.plots import save_figure
from common.io import write_json
from common.models.lm import load_language_model
from common.stages import load_stage, stage_args

log = logging.getLogger("routing")


@dataclass
class RoutingConfig:
    batches: int = bounded(20, ge=1)
    batch_size: int = bounded(16, ge=1)
    balanced_max_over_mean: float = bounded(1.5, ge=1)


@torch.no_grad()
def count_tokens(model, loader, batches: int, train_mode: bool) -> list[torch.Tensor]:
    moe_layers = [b for b in model.blocks if isinstance(b, MoE)]
    for layer in moe_layers:
        layer.reset_stats()
    model.train(train_mode)
    for i, batch in enumerate(loader):
        if i == batches:
            break
        model(batch["input_ids"])
    model.eval()
    return [layer.tokens_per_expert.clone() for layer in moe_layers]


def heatmap(panels: dict[str, list[torch.Tensor]], path: Path) -> None:
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.5), squeeze=False)
    for ax, (title, counts) in zip(axes[0], panels.items()):
        share = torch.stack([c / c.sum() for c in counts]).double() * counts[0].numel()  # 1 = uniform
        image = ax.imshow(share.numpy(), cmap="viridis", aspect="auto", vmin=0, vmax=max(2.0, share.max().item()))
        ax.set_xlabel("expert")
        ax.set_ylabel("MoE layer")
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, label="load / mean load")
    save_figure(fig, path)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = stage_args(argv, __doc__, "model", "data", "out", "plot")
    cfg, profile, _ = load_stage(args.params, "routing", RoutingConfig)
    model = load_language_model(args.model)
    datamodule = TextDataModule(args.data, batch_size=cfg.batch_size, seed=0)
    datamodule.setup("validate")

    modes = {"inference (argmax)": False, "training (Sinkhorn)": True}
    panels = {mode: count_tokens(model, datamodule.val_dataloader(), cfg.batches, train)
              for mode, train in modes.items()}
    result = {}
    for mode, counts in panels.items():
        layers = [{"tokens_per_expert": c.tolist(), **load_balance_stats(c)} for c in counts]
        balanced = [layer["max_over_mean"] <= cfg.balanced_max_over_mean for layer in layers]
        result[mode] = {"layers": layers, "balanced_layers": sum(balanced), "n_layers": len(layers),
                        "most_layers_balanced": sum(balanced) > len(layers) / 2}
    write_json(args.out, {"profile": profile, "config": vars(cfg), "modes": result})
    heatmap(panels, args.plot)
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
