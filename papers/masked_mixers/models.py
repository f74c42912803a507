"""The Masked Mixers models, all built from the block library.

Every architecture is an `ArchSpec` in `params.yaml` (section `models`), sized by the profile's
shared `d_model`, `n_layers` and `n_ctx`:

- `kind: lm`: a `LanguageModel` with the spec's block pattern: flat / expanded / kernel-k /
  multi-head masked mixers (`"mixer,mlp"`, no final norm as the paper's `LanguageMixer`), the
  Llama-style transformer (`"attn,swiglu"`), the GPT-style baseline (`"attn_neo,mlp"` with learned
  positions), the transfixer variants (`"transfixer,swiglu"`) and the bidirectional mixer
  (`"mixer_bidirectional,mlp_two_stream"`, per-stream norms, two streams of `d_model` each).
- `kind: autoencoder`: an encoder and a decoder of the same pattern; the encoder's last-token
  hidden vector, repeated over all positions, is the decoder's only input (`Autoencoder`).
- `kind: bidirectional_transformer`: a forward and a reverse causal stack whose outputs are
  combined so that the prediction at t never sees token t + 1 (`BidirectionalTransformer`).

Initialisation follows the official code but for the output head: its mixers kept PyTorch's
defaults (`init: pytorch`, so `nn.Embedding`'s N(0, 1) token embedding), its transformers Hugging
Face's (`init: standard`, N(0, 0.02) linear layers and embedding); every untied head here starts at
N(0, 0.02) (`LanguageModel`), the mixers' too, where the official mixer's head is `nn.Linear`'s
default (the README says so). `embed_init_std` re-initialises an untied token
embedding: the params use it to state each start explicitly, and `llama_h4_embed1` gives a Llama
the mixers' N(0, 1) start to show what the embedding scale alone does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from common.config import bounded, check_names, from_dict
from common.errors import ConfigError
from common.models.lm import LanguageModel, LMConfig

Kind = Literal["lm", "autoencoder", "bidirectional_transformer"]


@dataclass
class ArchSpec:
    kind: Kind = "lm"
    pattern: str = "mixer,mlp"
    norm: Literal["rmsnorm", "layernorm", "layernorm_two_stream", "none"] = "layernorm"
    final_norm: Literal["rmsnorm", "layernorm", "none"] = "none"
    pos_embedding: Literal["none", "learned"] = "none"
    tie_embeddings: bool = False
    width_multiplier: int = bounded(1, ge=1)  # the bidirectional mixer: two streams of d_model each
    embed_init_std: float | None = bounded(None, gt=0)
    init: Literal["standard", "pytorch"] = "standard"  # see LMConfig.init
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ModelsConfig:
    d_model: int = bounded(64, ge=2)
    n_layers: int = bounded(4, ge=1)
    n_ctx: int = bounded(128, ge=4)
    archs: dict[str, ArchSpec] = field(default_factory=dict)

    def spec(self, name: str) -> ArchSpec:
        if name not in self.archs:
            raise ConfigError(f"models.archs: no architecture {name!r}; defined: {', '.join(sorted(self.archs))}")
        return self.archs[name]

    def check(self) -> None:
        check_names(self.archs, "archs")
        for name, spec in self.archs.items():
            if spec.embed_init_std is not None and spec.tie_embeddings:
                raise ConfigError(f"archs.{name}.embed_init_std: needs tie_embeddings false "
                                  "(it would rescale the head)")
            lm_config(spec, self, vocab_size=8, where=f"archs.{name}")


def lm_config(spec: ArchSpec, sizes: ModelsConfig, vocab_size: int, where: str = "lm") -> LMConfig:
    return from_dict(LMConfig, {
        "vocab_size": vocab_size, "d_model": sizes.d_model * spec.width_multiplier, "pattern": spec.pattern,
        "repeat": sizes.n_layers, "n_ctx": sizes.n_ctx, "norm": spec.norm, "final_norm": spec.final_norm,
        "pos_embedding": spec.pos_embedding, "tie_embeddings": spec.tie_embeddings, "init": spec.init,
        "blocks": spec.blocks,
    }, where=where)


def build_model(spec: ArchSpec, sizes: ModelsConfig, vocab_size: int) -> nn.Module:
    cfg = lm_config(spec, sizes, vocab_size)
    if spec.kind == "autoencoder":
        model = Autoencoder(cfg)
        embed = model.encoder.embed
    elif spec.kind == "bidirectional_transformer":
        model = BidirectionalTransformer(cfg)
        embed = model.forward_lm.embed
    else:
        model = LanguageModel(cfg)
        embed = model.embed
    if spec.embed_init_std is not None:
        nn.init.normal_(embed.weight, std=spec.embed_init_std)
    return model


def hidden_states(model: LanguageModel, x: torch.Tensor, final_norm: bool = False) -> torch.Tensor:
    """The residual stream after the last block, from input embeddings `x [B, T, D]`:
    representation recovery and the autoencoders start from embeddings rather than token ids."""
    return model.run_blocks(x, 0, len(model.blocks), final_norm=final_norm)


class Autoencoder(nn.Module):
    """Encoder stack -> the last position's hidden vector repeated over all T positions -> decoder
    stack -> head. Trained without the label shift: position t reproduces token t, which it can only
    know through the one vector. Both stacks are causal, as in the paper (the decoder's causality
    only matters in that each position sees the same vector)."""

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.encoder = LanguageModel(cfg)
        self.decoder = LanguageModel(cfg)
        # The encoder's last hidden vector is the code (no final norm, no head); the decoder
        # never reads tokens.
        del self.encoder.head, self.encoder.final_norm, self.decoder.embed
        if cfg.tie_embeddings:
            self.decoder.head.weight = self.encoder.embed.weight

    def encode(self, input_ids: torch.Tensor) -> torch.Tensor:
        return hidden_states(self.encoder, self.encoder.embed(input_ids))[:, -1]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        z = self.encode(input_ids)[:, None].expand(-1, input_ids.shape[1], -1)
        return self.decoder.head(hidden_states(self.decoder, z, final_norm=True))


class BidirectionalTransformer(nn.Module):
    """A forward causal stack on the tokens and a reverse causal stack on the flipped tokens.

    With the standard shift (position t predicts token t + 1), position t combines the forward
    stack at t (tokens <= t) with the reverse stack at t + 2 (tokens >= t + 2), the same positions
    the bidirectional mixer reads; the last two positions get zeros from the reverse side. The
    official code shifts the other way round and trains without the shift: the same pairing.
    """

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.forward_lm = LanguageModel(cfg)
        self.reverse_lm = LanguageModel(cfg)
        # One embedding and one head for both stacks.
        del self.forward_lm.head, self.reverse_lm.embed, self.reverse_lm.head
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        nn.init.normal_(self.head.weight, std=cfg.init_std)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.forward_lm.embed(input_ids)
        forward = hidden_states(self.forward_lm, x, final_norm=True)
        reverse = hidden_states(self.reverse_lm, x.flip(1), final_norm=True).flip(1)
        reverse = nn.functional.pad(reverse[:, 2:], (0, 0, 0, 2))  # position t <- reverse output at t + 2
        return self.head(forward + reverse)


@torch.no_grad()
def generate_fixed_window(model: LanguageModel, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
    """The paper's generation for masked mixers: a window of exactly `n_ctx` positions holds the
    prompt followed by padding; each step runs the whole window and writes the argmax at the last
    filled position into the next one. Positions after it hold junk the causal mask never reads.
    `prompt [B, P]`, returns `[B, P + n_new]` (at most `n_ctx` in all)."""
    n_ctx = model.cfg.n_ctx
    P = prompt.shape[1]
    if P + n_new > n_ctx:
        raise ValueError(f"prompt {P} + {n_new} new tokens exceed the window n_ctx={n_ctx}")
    window = torch.zeros(prompt.shape[0], n_ctx, dtype=prompt.dtype, device=prompt.device)
    window[:, :P] = prompt
    for pos in range(P - 1, P - 1 + n_new):
        window[:, pos + 1] = model(window)[:, pos].argmax(-1)
    return window[:, : P + n_new]
