"""Parameter and FLOP counts of `LanguageModel` configs, computed from the config alone.

Parameters are counted per block from the constructor arguments, so a 1.5B-parameter config is
counted without allocating it; tests compare every count with an instantiated model's exact
`numel()` sum. "Forward" (active) parameters count one routed expert per MoE layer (`top_k` of
them), which is what a token actually multiplies with.

FLOPs are forward FLOPs per token, matmul-dominated (a multiply-add is 2 FLOPs), following the
itemisation of BlackMamba's Appendix D:

- Mamba-1: `6*I*H` (in and out projections) + `2*I*K` (depthwise conv) + `I*(11*S + 4*R + 1)`
  (x_proj's B, C and dt parts, dt_proj, discretisation, state update, C readout, D skip).
- MoE: `top_k * 6*F*H` (a SwiGLU expert's three matrices) + `2*H*E` (router).
- Attention: `8*H^2` (q, k, v, o) + `4*T*H` (scores and weighted sum over a context of T,
  the Chinchilla convention of counting the full context).
- SwiGLU `6*F*H`; GELU MLP `4*F*H`; LM head `2*H*V`. Norms, activations and embedding lookups
  are ignored.

Training FLOPs = 3 x forward (backward is twice the forward) x tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from common.blocks.moe import default_d_ff
from common.models.lm import LMConfig

TRAIN_FACTOR = 3


@dataclass(frozen=True)
class Count:
    params: int
    forward_params: int
    flops_per_token: float  # forward


def _mamba(H: int, kw: dict) -> Count:
    S, K = kw.get("d_state", 16), kw.get("d_conv", 4)
    I = int(kw.get("expand", 2) * H)
    R = math.ceil(H / 16) if kw.get("dt_rank", "auto") == "auto" else int(kw["dt_rank"])
    bias, conv_bias = kw.get("bias", False), kw.get("conv_bias", True)
    params = (2 * I * H + I * K + (R + 2 * S) * I + R * I + I + I * S + I + H * I
              + (I if conv_bias else 0) + ((2 * I + H) if bias else 0))
    flops = 6 * I * H + 2 * I * K + I * (11 * S + 4 * R + 1)
    return Count(params, params, flops)


def _moe(H: int, kw: dict) -> Count:
    E, k = kw.get("n_experts", 8), kw.get("top_k", 1)
    F = kw.get("d_ff") or default_d_ff(H)
    expert = 3 * F * H + ((2 * F + H) if kw.get("bias", False) else 0)
    router = E * H + (E if kw.get("router_bias", True) else 0)
    return Count(router + E * expert, router + k * expert, k * 6 * F * H + 2 * H * E)


def _swiglu(H: int, kw: dict) -> Count:
    F = kw.get("d_ff") or 8 * ((8 * H // 3 + 7) // 8)
    return Count(3 * F * H, 3 * F * H, 6 * F * H)


def _mlp(H: int, kw: dict) -> Count:
    F = kw.get("d_ff") or 4 * H
    params = 2 * F * H + ((F + H) if kw.get("bias", True) else 0)
    return Count(params, params, 4 * F * H)


def _attn(H: int, kw: dict, n_ctx: int) -> Count:
    params = 4 * H * H + (4 * H if kw.get("bias", False) else 0)
    return Count(params, params, 8 * H * H + 4 * n_ctx * H)


def _attn_neo(H: int, kw: dict, n_ctx: int) -> Count:
    params = 4 * H * H + H  # GPT-Neo: only the output projection has a bias
    return Count(params, params, 8 * H * H + 4 * n_ctx * H)


COUNTERS = {"mamba": _mamba, "moe": _moe, "swiglu": _swiglu, "mlp": _mlp}
CONTEXT_COUNTERS = {"attn": _attn, "attn_neo": _attn_neo}


def _norm_params(kind: str, H: int) -> int:
    return {"rmsnorm": H, "layernorm": 2 * H, "none": 0}[kind]


def count_lm(cfg: LMConfig, n_ctx: int | None = None) -> Count:
    """Counts for `LanguageModel(cfg)`; attention FLOPs use a context of `n_ctx` (default cfg.n_ctx)."""
    H, V = cfg.d_model, cfg.vocab_size
    n_ctx = n_ctx or cfg.n_ctx
    params = forward = V * H + (0 if cfg.tie_embeddings else V * H) + _norm_params(cfg.final_norm, H)
    if cfg.pos_embedding == "learned":
        params += cfg.n_ctx * H
        forward += cfg.n_ctx * H
    flops = 2 * H * V
    for name in cfg.layers:
        kw = cfg.blocks.get(name, {})
        if name in COUNTERS:
            block = COUNTERS[name](H, kw)
        elif name in CONTEXT_COUNTERS:
            block = CONTEXT_COUNTERS[name](H, kw, n_ctx)
        else:
            raise ValueError(f"no parameter/FLOP counter for block {name!r}; counted: "
                             f"{', '.join(sorted([*COUNTERS, *CONTEXT_COUNTERS]))}")
        norm = _norm_params(cfg.norm, H)
        params += block.params + norm
        forward += block.forward_params + norm
        flops += block.flops_per_token
    return Count(params, forward, flops)


def training_flops(count: Count, tokens: float) -> float:
    return TRAIN_FACTOR * count.flops_per_token * tokens
