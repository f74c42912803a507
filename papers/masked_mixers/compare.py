"""Stages `autoencoders` and `bidirectional`: a mixer and a transformer of equal width and
depth, trained for the same number of steps on the same batches, with their loss curves.

- `--section autoencoders`: the autoencoders of "Masked Mixers II" on whole stories (padded
  rows): each position reproduces its own token from the encoder's last-token vector, so the
  labels are not shifted. Their weights stay in `--run-dir/<model>/model.pt` for retrieval.
- `--section bidirectional`: bidirectional language models on packed tokens; the prediction at t
  is of token t + 1 from tokens <= t and >= t + 2 (standard shift).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from functools import partial

from common.config import bounded
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.stages import stage_args
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.masked_mixers.models import build_model
from papers.masked_mixers.shared import curve, load_paper_stage, plot_curves, vocab_size
from papers.masked_mixers.train import train_network

log = logging.getLogger("mm_compare")
SECTIONS = ("autoencoders", "bidirectional")


@dataclass
class CompareConfig:
    seed: int = 0
    models: list[str] = field(default_factory=list)
    batch_size: int = bounded(16, ge=1)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        if len(self.models) < 2:
            raise ConfigError("models: list the mixer and the transformer to compare")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = stage_args(argv, __doc__, "data", "tokenizer", "run-dir", "results",
                      extra=lambda parser: parser.add_argument("--section", choices=SECTIONS, required=True))
    cfg, sizes, profile = load_paper_stage(args.params, args.section, CompareConfig)
    vocab = vocab_size(args.tokenizer)
    expected = "autoencoder" if args.section == "autoencoders" else None
    runs = {}
    for name in cfg.models:
        spec = sizes.spec(name)
        if (spec.kind == "autoencoder") != (expected == "autoencoder"):
            raise ConfigError(f"{args.section}.models: {name} is a {spec.kind}, which does not belong here")
        result = train_network(partial(build_model, spec, sizes, vocab), vocab_size=vocab, data_dir=args.data,
                               n_ctx=sizes.n_ctx, run_dir=args.run_dir / name, optim=cfg.optim, trainer_cfg=cfg.trainer,
                               batch_size=cfg.batch_size, seed=cfg.seed, shift_labels=spec.kind != "autoencoder",
                               run_config={"arch": asdict(spec), "sizes": asdict(sizes)})
        runs[name] = {"kind": spec.kind, "pattern": spec.pattern, **result}
        log.info("%-26s steps %d  %.1f s  train %.3f  val %.3f", name, result["steps"], result["train_seconds"],
                 result["train_loss"] or float("nan"), result["val_loss"])
    args.results.mkdir(parents=True, exist_ok=True)
    plot_curves({n: curve(r["history"], "step") for n, r in runs.items()}, args.results / f"{args.section}_loss.png",
                f"{args.section} ({profile}): d_model {sizes.d_model}, {sizes.n_layers} layers", "optimizer step")
    write_json(args.results / f"{args.section}.json", {
        "profile": profile, "batch_size": cfg.batch_size, "steps": cfg.trainer.max_steps,
        "sizes": {"d_model": sizes.d_model, "n_layers": sizes.n_layers, "n_ctx": sizes.n_ctx}, "models": runs,
    })


if __name__ == "__main__":
    main()
