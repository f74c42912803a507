"""Stage `generation`: greedy continuations of the same prompts by a mixer (the paper's fixed-window
method, `generate_fixed_window`) and a transformer (KV cache) at the same validation loss, as the
paper compares samples.

The `clm` stage's runs of one seed end at different losses. The model that ends lower is trained
again, exactly as `clm` trained it (same seed, data order, optimizer and schedule over the same
`max_steps`), validated every `check_every` steps, and stopped at the first validation whose loss
is at or below the other model's final loss: its weights are those its `clm` run had at that step.
The stage checks that by comparing the validation losses of both runs at the steps both validated
(`max_diff_vs_clm`). The other model's final `clm` weights are used as they are.

Prompts are the openings of the first validation stories (`prompt_tokens` tokens each). The
samples, decoded, go to `generation.json` with the losses, steps, and the time each model took per
token.
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "clm-dir", "clm-results", "run-dir", "out")

import logging
import time
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import lightning as L
import torch

from common.config import bounded, seed_field
from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.errors import ConfigError, DataError, exit_on_user_error
from common.io import load_json, write_json
from papers.masked_mixers.models import build_model, generate_fixed_window
from papers.masked_mixers.shared import load_paper_stage
from papers.masked_mixers.train import CompareConfig, load_weights, run_dir_of, train_network

log = logging.getLogger("mm_generation")


@dataclass
class GenerationConfig:
    seed: int = seed_field()  # whose models: the clm stage's run of this seed
    mixer: str = "mixer_flat"
    transformer: str = "llama_h4"
    n_prompts: int = bounded(3, ge=1)
    prompt_tokens: int = bounded(16, ge=1)
    new_tokens: int = bounded(48, ge=1)
    check_every: int = bounded(10, ge=1)  # validation interval of the run stopped at equal loss


class StopAtLoss(L.Callback):
    """Stop training at the first validation whose loss is at or below `target`."""

    def __init__(self, target: float):
        self.target = target

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        loss = trainer.callback_metrics.get("val/loss")
        if not trainer.sanity_checking and loss is not None and float(loss) <= self.target:
            trainer.should_stop = True


def clm_run(results: Path, name: str, seed: int) -> dict:
    """The `clm` stage's record of `name` at `seed`."""
    data = load_json(results, "run `dvc repro papers/masked_mixers/dvc.yaml:clm` first")
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict) or not models:
        raise DataError(f"{results}: no models; run `dvc repro papers/masked_mixers/dvc.yaml:clm` first")
    if name not in models or str(seed) not in models[name]["seeds"]:
        seeds = next(iter(models.values()))["seeds"]
        raise ConfigError(f"generation: the clm stage did not train {name} with seed {seed}; "
                          f"it trained {', '.join(models)} with seeds {', '.join(seeds)}")
    return models[name]["seeds"][str(seed)]


def val_losses(history: list[dict]) -> dict[int, float]:
    return {row["step"]: row["val/loss"] for row in history if "val/loss" in row}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, sizes, profile = load_paper_stage(args.params, "generation", GenerationConfig)
    if cfg.prompt_tokens + cfg.new_tokens > sizes.n_ctx:
        raise ConfigError(f"generation: prompt_tokens + new_tokens must fit the window n_ctx={sizes.n_ctx}")
    clm = load_paper_stage(args.params, "clm", CompareConfig)[0]  # how the clm stage trained
    if clm.trainer.val_every_n_steps % cfg.check_every:
        raise ConfigError(f"generation.check_every: {cfg.check_every} must divide clm's validation interval "
                          f"({clm.trainer.val_every_n_steps}), so that the two runs can be compared")
    tokenizer = load_tokenizer(args.tokenizer)
    vocab = len(tokenizer)
    rows = load_tokenized(args.data)["validation"].select(range(cfg.n_prompts))
    prompts = torch.tensor(rows["input_ids"], dtype=torch.long)[:, : cfg.prompt_tokens]

    names = {"mixer": cfg.mixer, "transformer": cfg.transformer}
    runs = {role: clm_run(args.clm_results, name, cfg.seed) for role, name in names.items()}
    early = min(runs, key=lambda role: runs[role]["val_loss"])  # the one to stop at the other's final loss
    late = "transformer" if early == "mixer" else "mixer"
    target = runs[late]["val_loss"]
    # The clm weights the samples come from, before the early model is retrained.
    late_model = load_weights(build_model(sizes.spec(names[late]), sizes, vocab),
                              run_dir_of(args.clm_dir, names[late], cfg.seed))
    spec = sizes.spec(names[early])
    stopped = train_network(partial(build_model, spec, sizes, vocab), vocab_size=vocab, data_dir=args.data,
                            n_ctx=sizes.n_ctx, run_dir=run_dir_of(args.run_dir, names[early], cfg.seed),
                            optim=clm.optim_of(names[early]),
                            trainer_cfg=replace(clm.trainer, val_every_n_steps=cfg.check_every),
                            batch_size=clm.batch_size, seed=cfg.seed,
                            run_config={"arch": asdict(spec), "sizes": asdict(sizes), "stop_at": target},
                            callbacks=[StopAtLoss(target)])
    ours, theirs = val_losses(stopped["history"]), val_losses(runs[early]["history"])
    shared = sorted(set(ours) & set(theirs))
    # None when it stopped before clm's first validation: nothing to compare.
    max_diff = max((abs(ours[step] - theirs[step]) for step in shared), default=None)
    log.info("%s stopped at step %d, validation loss %.4f (%s ends at %.4f); against clm at steps %s: max diff %s",
             names[early], stopped["steps"], stopped["val_loss"], names[late], target, shared, max_diff)

    models = {early: load_weights(build_model(spec, sizes, vocab), run_dir_of(args.run_dir, names[early], cfg.seed)),
              late: late_model}
    start = time.perf_counter()
    mixer_ids = generate_fixed_window(models["mixer"], prompts, cfg.new_tokens)
    mixer_s = time.perf_counter() - start
    start = time.perf_counter()
    transformer_ids = models["transformer"].generate(prompts, cfg.new_tokens)
    transformer_s = time.perf_counter() - start

    def text(ids):
        return tokenizer.decode(ids[cfg.prompt_tokens:], skip_special_tokens=False)

    samples = [{"prompt": tokenizer.decode(p), "mixer": text(m), "transformer": text(t)}
               for p, m, t in zip(prompts.tolist(), mixer_ids.tolist(), transformer_ids.tolist())]
    checkpoints = {early: {"model": names[early], "step": stopped["steps"], "val_loss": stopped["val_loss"],
                           "reached_target": stopped["val_loss"] <= target, "max_diff_vs_clm": max_diff,
                           "steps_compared_with_clm": shared},
                   late: {"model": names[late], "step": clm.trainer.max_steps, "val_loss": target}}
    write_json(args.out, {
        "profile": profile, "seed": cfg.seed, "mixer": cfg.mixer, "transformer": cfg.transformer,
        "decoding": "greedy", "new_tokens": cfg.new_tokens, "checkpoints": checkpoints,
        "ms_per_token": {"mixer_fixed_window": round(1000 * mixer_s / (cfg.new_tokens * cfg.n_prompts), 2),
                         "transformer_kv_cache": round(1000 * transformer_s / (cfg.new_tokens * cfg.n_prompts), 2)},
        "samples": samples,
    })
    log.info("wrote %d samples to %s", len(samples), args.out)


if __name__ == "__main__":
    main()
