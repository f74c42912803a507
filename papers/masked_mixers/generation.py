"""Stage `generation`: greedy continuations of the same prompts by the trained mixer (the
paper's fixed-window method, `generate_fixed_window`) and the trained transformer (KV cache), both
from the `clm` stage's run of one seed.

Prompts are the openings of the first validation stories (`prompt_tokens` tokens each). The
samples, decoded, go to `generation.json` with the time each model took per token.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import torch

from common.config import bounded
from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.stages import stage_args
from papers.masked_mixers.models import build_model, generate_fixed_window
from papers.masked_mixers.shared import load_paper_stage
from papers.masked_mixers.train import load_weights, run_dir_of

log = logging.getLogger("mm_generation")


@dataclass
class GenerationConfig:
    seed: int = 0  # whose models: the clm stage's run of this seed
    mixer: str = "mixer_flat"
    transformer: str = "llama_h4"
    n_prompts: int = bounded(3, ge=1)
    prompt_tokens: int = bounded(16, ge=1)
    new_tokens: int = bounded(48, ge=1)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = stage_args(argv, __doc__, "data", "tokenizer", "clm-dir", "out")
    cfg, sizes, profile = load_paper_stage(args.params, "generation", GenerationConfig)
    if cfg.prompt_tokens + cfg.new_tokens > sizes.n_ctx:
        raise ConfigError(f"generation: prompt_tokens + new_tokens must fit the window n_ctx={sizes.n_ctx}")
    tokenizer = load_tokenizer(args.tokenizer)
    rows = load_tokenized(args.data)["validation"].select(range(cfg.n_prompts))
    prompts = torch.tensor(rows["input_ids"], dtype=torch.long)[:, : cfg.prompt_tokens]

    models = {}
    for role, name in (("mixer", cfg.mixer), ("transformer", cfg.transformer)):
        models[role] = load_weights(build_model(sizes.spec(name), sizes, len(tokenizer)),
                                    run_dir_of(args.clm_dir, name, cfg.seed))
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
    write_json(args.out, {
        "profile": profile, "mixer": cfg.mixer, "transformer": cfg.transformer, "decoding": "greedy",
        "new_tokens": cfg.new_tokens,
        "ms_per_token": {"mixer_fixed_window": round(1000 * mixer_s / (cfg.new_tokens * cfg.n_prompts), 2),
                         "transformer_kv_cache": round(1000 * transformer_s / (cfg.new_tokens * cfg.n_prompts), 2)},
        "samples": samples,
    })
    log.info("wrote %d samples to %s", len(samples), args.out)


if __name__ == "__main__":
    main()
