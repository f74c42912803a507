"""Manticore hybrids (Roberts et al., "Pretrained Hybrids with MAD Skills"): M component language
models run side by side in L Manticore blocks, joined by projectors and mixed by weights alpha.

Each component (any `LanguageModel`: our own blocks, or GPT-Neo / GPT-NeoX / Mamba checkpoints
converted by `common.models`) is cut into L contiguous, equal slices of its blocks. With
D = max_m d_m, `pad` zero-pads a d_m-wide vector to D and `[:d_m]` truncates, block i computes,
for alpha = alpha^(i) (a point of the simplex over the M components):

    u_m = (1 - alpha_m) * P_in[m,i](h) + alpha_m * h[:d_m]        # gated residual projector in
    y_m = slice i of component m (u_m)                            # its final norm on the last slice
    h   = sum_m alpha_m * ((1 - alpha_m) * P_out[m,i](y_m) + alpha_m * pad(y_m))

The same alpha_m gates the projector residuals and weights the convex combination, so a one-hot
alpha computes exactly its component. The input is h_0 = sum_m alpha^(0)_m pad(E_m[x]) and the
logits are sum_m alpha^(0)_m head_m(h[:d_m]), with new per-component embeddings E_m and tied heads
(optionally initialised from the components' own embeddings when the vocabularies agree).

Mixture weights (`alpha_mode`):
- `softmax`: alpha = softmax(a), a trained by its own optimizer (DARTS-style search);
- `gumbel`: DASH-style, a Gumbel-softmax sample of a while training, softmax(a) in eval;
- `simplex`: GAEA, alpha itself lives on the simplex, updated by exponentiated gradient;
- `fixed`: alpha given (`set_alphas`), not trained. An exact zero skips that component's work
  entirely, which is how a component that cannot take the sequence (GPT-Neo's 2048 positions on
  Pathfinder-128) is programmed out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from common.config import bounded
from common.errors import ConfigError
from common.models.lm import LanguageModel


@dataclass
class ManticoreConfig:
    n_blocks: int = bounded(1, ge=1)
    vocab_size: int = bounded(4096, ge=2)
    alpha_mode: Literal["softmax", "gumbel", "simplex", "fixed"] = "softmax"
    gumbel_tau: float = bounded(1.0, gt=0)
    use_projectors: bool = True
    embeddings_from_components: bool = True  # when a component's vocabulary equals vocab_size
    init_std: float = bounded(0.02, gt=0)


def pad_to(x: torch.Tensor, width: int) -> torch.Tensor:
    return x if x.shape[-1] == width else F.pad(x, (0, width - x.shape[-1]))


class Manticore(nn.Module):
    # Parameters a step leaves without a gradient: the components' own embeddings (the hybrid has
    # its own), and under fixed alphas every component weighted 0. DDP must be told (`run_training`).
    skips_parameters = True

    def __init__(self, components: list[LanguageModel], cfg: ManticoreConfig):
        super().__init__()
        if not components:
            raise ConfigError("components: a hybrid needs at least one component model")
        L = cfg.n_blocks
        for m, comp in enumerate(components):
            if len(comp.blocks) % L:
                raise ConfigError(f"n_blocks: {L} must divide every component's depth; component {m} has "
                                  f"{len(comp.blocks)} blocks (depths: {[len(c.blocks) for c in components]})")
        self.cfg = cfg
        self.components = nn.ModuleList(components)
        self.widths = [comp.cfg.d_model for comp in components]
        self._ran = list(range(len(components)))  # the components the last forward ran (`aux_loss`)
        self.d_model = max(self.widths)
        M, D = len(components), self.d_model

        self.embeddings = nn.ModuleList(nn.Embedding(cfg.vocab_size, d) for d in self.widths)
        for emb, comp in zip(self.embeddings, components):
            if cfg.embeddings_from_components and comp.cfg.vocab_size == cfg.vocab_size:
                emb.weight.data.copy_(comp.embed.weight.data)
            else:
                nn.init.normal_(emb.weight, std=cfg.init_std)
        if cfg.use_projectors:
            self.proj_in = nn.ModuleList(nn.ModuleList(nn.Linear(D, d) for _ in range(L)) for d in self.widths)
            self.proj_out = nn.ModuleList(nn.ModuleList(nn.Linear(d, D) for _ in range(L)) for d in self.widths)
        if cfg.alpha_mode == "simplex":
            self.alphas = nn.Parameter(torch.full((L, M), 1.0 / M))
        elif cfg.alpha_mode == "fixed":
            self.register_buffer("alphas", torch.full((L, M), 1.0 / M))
        else:
            self.alphas = nn.Parameter(torch.zeros(L, M))  # softmax(0) = uniform, as in the paper

    # --- mixture weights ---------------------------------------------------------------------------

    def mixture_weights(self, sample: bool = True) -> torch.Tensor:
        """alpha^(i) for every block, `[L, M]`, each row on the simplex. In training, DASH's Gumbel
        mode draws a sample unless `sample=False`."""
        mode = self.cfg.alpha_mode
        if mode in ("simplex", "fixed"):
            return self.alphas
        if mode == "gumbel" and self.training and sample:
            return F.gumbel_softmax(self.alphas, tau=self.cfg.gumbel_tau, hard=False, dim=-1)
        return self.alphas.softmax(dim=-1)

    @torch.no_grad()
    def set_alphas(self, alphas: torch.Tensor) -> None:
        """Set the mixture weights to `alphas [L, M]` (rows on the simplex), whatever the mode."""
        alphas = torch.as_tensor(alphas, dtype=self.alphas.dtype, device=self.alphas.device)
        if alphas.shape != self.alphas.shape:
            raise ConfigError(f"alphas: expected shape {tuple(self.alphas.shape)} (blocks x components), "
                              f"got {tuple(alphas.shape)}")
        if (alphas < 0).any() or not torch.allclose(alphas.sum(-1), torch.ones(alphas.shape[0], dtype=alphas.dtype)):
            raise ConfigError(f"alphas: each row must be non-negative and sum to 1, got {alphas.tolist()}")
        if self.cfg.alpha_mode in ("simplex", "fixed"):
            self.alphas.copy_(alphas)
        else:  # logits whose softmax is alphas; exact zeros become -inf-like
            self.alphas.copy_(alphas.clamp_min(1e-30).log())

    def discretize(self) -> None:
        """Argmax per block: switch to fixed one-hot weights."""
        alphas = F.one_hot(self.mixture_weights().detach().argmax(-1), len(self.components)).to(self.alphas.dtype)
        del self.alphas
        self.cfg.alpha_mode = "fixed"
        self.register_buffer("alphas", alphas)

    # --- forward ------------------------------------------------------------------------------------

    def _slice(self, m: int, i: int) -> tuple[int, int]:
        n = len(self.components[m].blocks) // self.cfg.n_blocks
        return i * n, (i + 1) * n

    def _active(self, alphas: torch.Tensor) -> list[int]:
        """Components that run: all of them, except under fixed alphas those weighted 0 in every block."""
        return [m for m in range(len(self.components)) if not (self.cfg.alpha_mode == "fixed" and
                                                               bool((alphas[:, m] == 0).all()))]

    def _hidden(self, input_ids: torch.Tensor, alphas: torch.Tensor, active: list[int]) -> torch.Tensor:
        self._ran = active
        D = self.d_model
        h = sum(alphas[0, m] * pad_to(self.embeddings[m](input_ids), D) for m in active)
        for i in range(self.cfg.n_blocks):
            out = 0
            for m in active:
                a, d = alphas[i, m], self.widths[m]
                u = h[..., :d]
                if self.cfg.use_projectors:
                    u = (1 - a) * self.proj_in[m][i](h) + a * u
                y = self.components[m].run_blocks(u, *self._slice(m, i))
                z = pad_to(y, D)
                if self.cfg.use_projectors:
                    z = (1 - a) * self.proj_out[m][i](y) + a * z
                out = out + a * z
            h = out
        return h

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        alphas = self.mixture_weights()
        active = self._active(alphas)
        h = self._hidden(input_ids, alphas, active)
        return sum(alphas[0, m] * F.linear(h[..., :self.widths[m]], self.embeddings[m].weight) for m in active)

    def hidden(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The final hidden states `[B, T, D]`, where `forward` applies the heads: for sequence
        classification. Under a one-hot alpha, component m's own final-normed states, zero-padded
        from d_m to D. (One Gumbel sample per call, as `forward` draws.)"""
        alphas = self.mixture_weights()
        return self._hidden(input_ids, alphas, self._active(alphas))

    def aux_loss(self) -> torch.Tensor | None:
        """The auxiliary losses (MoE balancing) of the components that ran in the last forward; a
        component programmed out keeps a stale value from an earlier forward, which must not count."""
        losses = [loss for m in self._ran if (loss := self.components[m].aux_loss()) is not None]
        return torch.stack(losses).sum() if losses else None

    # --- parameter groups ---------------------------------------------------------------------------

    def arch_parameters(self) -> list[nn.Parameter]:
        return [self.alphas] if isinstance(self.alphas, nn.Parameter) else []

    def weight_parameters(self) -> list[nn.Parameter]:
        arch = {id(p) for p in self.arch_parameters()}
        return [p for p in self.parameters() if id(p) not in arch]

    def projector_parameters(self) -> list[nn.Parameter]:
        if not self.cfg.use_projectors:
            return []
        return [*self.proj_in.parameters(), *self.proj_out.parameters()]
