"""Stage `table1`: the parameter and training-FLOP columns of the paper's Table I, recomputed.

Every row is rebuilt as a `LanguageModel` config from its public architecture (layers, width,
vocabulary, tied or untied head) and counted by `common.eval.counting` (Appendix D's itemisation)
without allocating weights. Training FLOPs = 3 x forward FLOPs per token (context 2048) x the
tokens the model was trained on. The paper's own numbers sit next to ours with their ratio.

Approximations, stated in each row's `note`: transformers are counted as pre-norm blocks of
attention plus GELU MLP with biases (GPT-2 / GPT-NeoX / OPT all have that shape; Pythia's
attention and MLP run in parallel, which changes no count); OPT-350M's 512-wide embedding with
in/out projections is counted as a full-width embedding.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "out")

import logging
from dataclasses import dataclass

from common.config import bounded
from common.errors import exit_on_user_error
from common.eval.counting import count_lm, training_flops
from common.io import write_json
from common.models.lm import LMConfig
from papers.blackmamba.model import SIZES, lm_config

log = logging.getLogger("table1")
N_CTX = 2048


def transformer(n_layers: int, d_model: int, vocab: int, tied: bool, learned_pos: bool) -> LMConfig:
    return LMConfig(vocab_size=vocab, d_model=d_model, pattern="attn,mlp", repeat=n_layers, n_ctx=N_CTX,
                    norm="layernorm", final_norm="layernorm", tie_embeddings=tied,
                    pos_embedding="learned" if learned_pos else "none",
                    blocks={"attn": {"bias": True, "n_heads": 1}, "mlp": {"d_ff": 4 * d_model}})


def mamba(n_layers: int, d_model: int, vocab: int = 50304) -> LMConfig:
    return LMConfig(vocab_size=vocab, d_model=d_model, pattern="mamba", repeat=n_layers, n_ctx=N_CTX,
                    norm="rmsnorm", final_norm="rmsnorm", tie_embeddings=True)


def cerebras(n_layers, d_model):  # GPT-2 layout: learned positions, tied head, GPT-2 vocabulary
    return transformer(n_layers, d_model, 50257, tied=True, learned_pos=True)


def opt(n_layers, d_model):
    return transformer(n_layers, d_model, 50272, tied=True, learned_pos=True)


def pythia(n_layers, d_model):  # GPT-NeoX: rotary positions, untied head
    return transformer(n_layers, d_model, 50304, tied=False, learned_pos=False)


# (row name, config, tokens trained, paper's forward params, total params, training FLOPs,
#  downstream average). Paper columns are quoted from Table I. Tokens: Pythia and BlackMamba
# 300B; OPT 180B; Cerebras-GPT 20 tokens per parameter; the paper's Mamba 340M used BlackMamba's
# data and hyper-parameters (300B).
ROWS = [
    ("Cerebras-GPT 111M", cerebras(10, 768), 2.2e9, 111e6, 111e6, 2.6e18, 0.315, ""),
    ("OPT 125M", opt(12, 768), 180e9, 125e6, 125e6, 4.1e20, 0.371, ""),
    ("Pythia 160M", pythia(12, 768), 300e9, 160e6, 160e6, 4.1e20, 0.375, ""),
    ("Cerebras-GPT 256M", cerebras(14, 1088), 5.1e9, 256e6, 256e6, 1.3e19, 0.347, ""),
    ("BlackMamba 342M/1.5B", lm_config(SIZES["340m_1.5b"]), 300e9, 342e6, 1.5e9, 6.4e20, 0.439, ""),
    ("OPT 350M", opt(24, 1024), 180e9, 350e6, 350e6, 1.1e21, 0.395,
     "512-wide embedding and its projections counted as full width"),
    ("Mamba 343M", mamba(34, 1152), 300e9, 343e6, 343e6, 8.0e20, 0.417, ""),
    ("Pythia 410M", pythia(24, 1024), 300e9, 410e6, 410e6, 1.1e21, 0.419, ""),
    ("BlackMamba 631M/2.8B", lm_config(SIZES["630m_2.8b"]), 300e9, 631e6, 2.8e9, 1.2e21, 0.466, ""),
    ("Pythia 1B", pythia(16, 2048), 300e9, 1e9, 1e9, 2.2e21, 0.456, ""),
    ("OPT 1.3B", opt(24, 2048), 180e9, 1.3e9, 1.3e9, 3.2e21, 0.478, ""),
    ("Cerebras-GPT 1.3B", cerebras(24, 2048), 26.3e9, 1.3e9, 1.3e9, 2.8e20, 0.410, ""),
    ("Pythia 1.4B", pythia(24, 2048), 300e9, 1.4e9, 1.4e9, 3.2e21, 0.474, ""),
    ("OPT 2.8B", opt(32, 2560), 180e9, 2.8e9, 2.8e9, 6.1e21, 0.510, ""),
    ("Cerebras-GPT 2.8B", cerebras(32, 2560), 53.1e9, 2.8e9, 2.8e9, 1.1e21, 0.462, ""),
    ("Pythia 2.8B", pythia(32, 2560), 300e9, 2.8e9, 2.8e9, 6.1e21, 0.513, ""),
]


@dataclass
class Table1Config:
    n_ctx: int = bounded(N_CTX, ge=1)  # the context the attention FLOPs are counted at


def table1(n_ctx: int = N_CTX) -> list[dict]:
    rows = []
    for name, cfg, tokens, p_fwd, p_total, p_flops, p_avg, note in ROWS:
        count = count_lm(cfg, n_ctx=n_ctx)
        ours_flops = training_flops(count, tokens)
        rows.append({
            "model": name, "tokens": tokens, "note": note,
            "paper": {"forward_params": p_fwd, "total_params": p_total, "training_flops": p_flops,
                      "downstream_average": p_avg},
            "ours": {"forward_params": count.forward_params, "total_params": count.params,
                     "training_flops": ours_flops, "forward_flops_per_token": count.flops_per_token},
            "ratio_ours_over_paper": {"forward_params": count.forward_params / p_fwd,
                                      "total_params": count.params / p_total,
                                      "training_flops": ours_flops / p_flops},
        })
    return rows


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "table1", Table1Config)
    rows = table1(cfg.n_ctx)
    write_json(args.out, {"profile": profile, "n_ctx": cfg.n_ctx, "rows": rows})
    log.info("wrote %s (%d rows)", args.out, len(rows))


if __name__ == "__main__":
    main()
