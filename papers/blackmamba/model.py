"""BlackMamba (Anthony et al., 2024): Mamba-1 blocks alternating with top-1 MoE MLPs.

    embedding -> [x = x + Mamba(RMSNorm(x)); x = x + MoE(RMSNorm(x))] * n_layers/2
              -> LayerNorm (with bias) -> head tied to the embedding

Everything is the block library's: `mamba` and `moe` (8 SwiGLU experts, Sinkhorn router with
BlackMamba's initialisation) inside a `LanguageModel`. No biases in the linear layers, except the
router's, which the released checkpoints have (the paper says "without biases"; Megatron dropped
the router bias two weeks after the code BlackMamba forked).

Expert activation: the paper trained with SwiGLU (SiLU), and Megatron's `--swiglu` means SiLU.
The released inference code never sets its `activation_func`, so it runs GELU-gated experts
(GeGLU) on weights trained with SiLU. We default to `silu`; `activation: gelu` reproduces the
release's computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from common.config import bounded
from common.errors import ConfigError
from common.models.lm import LanguageModel, LMConfig


@dataclass
class BlackMambaConfig:
    vocab_size: int = bounded(50304, ge=2)
    d_model: int = bounded(1152, ge=1)
    n_layers: int = bounded(30, ge=2)  # Mamba and MoE layers together, Mamba first
    d_state: int = bounded(16, ge=1)
    d_conv: int = bounded(4, ge=1)
    expand: int = bounded(2, ge=1)
    n_experts: int = bounded(8, ge=1)
    d_ff: int = bounded(3072, ge=1)
    top_k: int = bounded(1, ge=1)
    activation: Literal["silu", "gelu"] = "silu"
    router: Literal["sinkhorn", "sigmoid", "softmax_topk"] = "sinkhorn"
    sinkhorn_init: Literal["blackmamba", "vanilla"] = "blackmamba"
    sinkhorn_temperature: float = bounded(0.5, gt=0)
    router_bias: bool = True
    norm_eps: float = bounded(1e-5, gt=0)
    n_ctx: int = bounded(2048, ge=1)
    scan: Literal["auto", "reference", "chunked", "cuda"] = "auto"

    def check(self) -> None:
        if self.n_layers % 2:
            raise ConfigError(f"n_layers: Mamba and MoE layers alternate, so it must be even, got {self.n_layers}")
        if self.top_k > self.n_experts:
            raise ConfigError(f"top_k: at most n_experts={self.n_experts}, got {self.top_k}")


# The name of train_compare's deeper BlackMamba, trained for the routing stage (Figures 6-7).
ROUTING_MODEL = "blackmamba_deep"

# The released sizes (paper Appendix A; the 2.8B expert width 3872 is from its config.json).
SIZES = {
    "340m_1.5b": BlackMambaConfig(d_model=1152, n_layers=30, d_ff=3072),
    "630m_2.8b": BlackMambaConfig(d_model=1472, n_layers=36, d_ff=3872),
}


def lm_config(cfg: BlackMambaConfig) -> LMConfig:
    return LMConfig(
        vocab_size=cfg.vocab_size, d_model=cfg.d_model, pattern="mamba,moe", repeat=cfg.n_layers // 2,
        n_ctx=cfg.n_ctx, norm="rmsnorm", norm_eps=cfg.norm_eps, final_norm="layernorm", tie_embeddings=True,
        blocks={
            "mamba": {"d_state": cfg.d_state, "d_conv": cfg.d_conv, "expand": cfg.expand, "scan": cfg.scan},
            "moe": {"n_experts": cfg.n_experts, "d_ff": cfg.d_ff, "top_k": cfg.top_k, "activation": cfg.activation,
                    "router": cfg.router, "sinkhorn_init": cfg.sinkhorn_init,
                    "sinkhorn_temperature": cfg.sinkhorn_temperature, "router_bias": cfg.router_bias},
        },
    )


def build_blackmamba(cfg: BlackMambaConfig) -> LanguageModel:
    return LanguageModel(lm_config(cfg))
