"""Input representation accuracy (the report's Figure 3): how much of its input a model's last
hidden layer still holds, measured as the official code does.

For a model body f (embedding output -> every block, no head) and a tokenized input with
embedding e = E[tokens]:

1. target T = f(e), fixed;
2. start from x ~ N(0, 1) of e's shape and take `steps` plain gradient steps on the input,
   x <- x - lr_i * d/dx sum |T - f(x)| (L1, summed), lr_i falling linearly from `lr_start` to
   `lr_end`; with `last_token_only` the target is the last position's hidden vector alone;
3. decode both x and e through the Moore-Penrose pseudo-inverse of the embedding matrix E [V, D]:
   logits = x @ pinv(E); the reference tokens are the top-1 decoding of e (as the official code:
   that separates the error of the recovery from that of the decoding, whose own accuracy is
   reported as `decode_round_trip`);
4. normalized Hamming metric: the fraction of non-padding positions whose reference token is not
   among the top-k decoded tokens of x (k = 1 and 5). 0 = the input is fully recovered, 1 = none.
   `hamming_top5_earlier` leaves out the last position: with the last token's vector as target,
   it measures what that vector holds about the other tokens (Figure 3b's inter-token claim).

Used by the `representation` and `expansion` stages; `RepresentationConfig` is the
`representation` section, which both read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from common.config import bounded, seeds_field
from common.device import compute_device
from common.errors import ConfigError
from papers.masked_mixers.models import ModelsConfig, build_model, hidden_states
from papers.masked_mixers.train import load_weights


def lr_at(i: int, steps: int, lr_start: float, lr_end: float) -> float:
    return lr_start * (steps - i) / steps + lr_end * i / steps


def recover_input(body: Callable[[torch.Tensor], torch.Tensor], target: torch.Tensor, shape: tuple[int, ...],
                  steps: int, lr_start: float, lr_end: float, seed: int,
                  last_token_only: bool = False) -> torch.Tensor:
    """Gradient descent on the input so that `body(x)` matches `target` in summed L1."""
    generator = torch.Generator().manual_seed(seed)  # the CPU's draw, so a GPU starts from the same x
    x = torch.randn(shape, generator=generator, dtype=target.dtype).to(target.device)
    for i in range(steps):
        x.requires_grad_(True)
        out = body(x)
        if last_token_only:
            out = out[:, -1]
        (grad,) = torch.autograd.grad((target - out).abs().sum(), x)
        x = (x - lr_at(i, steps, lr_start, lr_end) * grad).detach()
    return x


def decode_topk(x: torch.Tensor, embedding: torch.Tensor, k: int) -> torch.Tensor:
    """`[..., D] -> [..., k]` token ids, ranked by x @ pinv(E)."""
    return (x @ torch.linalg.pinv(embedding)).topk(k, dim=-1).indices


def hamming_metric(reference: torch.Tensor, top_ids: torch.Tensor, mask: torch.Tensor) -> float:
    """Fraction of positions with `mask` true whose `reference` token is not in `top_ids [..., k]`."""
    miss = ~(top_ids == reference[..., None]).any(-1)
    return (miss & mask).sum().item() / max(1, mask.sum().item())


def representation_accuracy(model, tokens: torch.Tensor, mask: torch.Tensor, *, steps: int, lr_start: float,
                            lr_end: float, seed: int, last_token_only: bool) -> dict:
    device = compute_device()
    model.eval().to(device)
    tokens, mask = tokens.to(device), mask.to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    embedding = model.embed.weight.detach()
    body = lambda x: hidden_states(model, x)  # noqa: E731
    with torch.no_grad():
        e = model.embed(tokens)
        target = body(e)[:, -1] if last_token_only else body(e)
    x = recover_input(body, target, tuple(e.shape), steps, lr_start, lr_end, seed, last_token_only)
    reference = decode_topk(e, embedding, 1)[..., 0]
    positions = torch.arange(tokens.shape[1], device=device)
    top5 = decode_topk(x, embedding, 5)
    return {
        "hamming_top1": round(hamming_metric(reference, top5[..., :1], mask), 4),
        "hamming_top5": round(hamming_metric(reference, top5, mask), 4),
        # Every position but the last: what the last token's vector says about the tokens before it.
        "hamming_top5_earlier": round(hamming_metric(reference, top5, mask & (positions < mask.shape[1] - 1)), 4),
        "decode_round_trip": round(((reference == tokens) & mask).sum().item() / max(1, mask.sum().item()), 4),
    }


@dataclass
class RepresentationConfig:
    seeds: list[int] = seeds_field(0, 1, 2)
    workers: int | None = bounded(None, ge=1)  # processes; None: one per core
    models: list[str] = field(default_factory=lambda: ["mixer_flat", "llama_h4"])
    untrained_sizes: list[tuple[int, int]] = field(default_factory=lambda: [(64, 4), (256, 8)])
    n_inputs: int = bounded(4, ge=1)
    n_tokens: int = bounded(32, ge=2)
    steps: int = bounded(500, ge=1)
    lr_start: float = bounded(0.02, gt=0)
    lr_end: float = bounded(0.002, gt=0)

    def check(self) -> None:
        if not self.models or not self.seeds:
            raise ConfigError("models and seeds: list at least one of each")
        if not self.untrained_sizes or any(d < 2 or n < 1 for d, n in self.untrained_sizes):
            raise ConfigError("untrained_sizes: list [d_model, n_layers] pairs, d_model >= 2 and n_layers >= 1")


def measure(name: str, seed: int, spec, sizes: ModelsConfig, vocab: int, weights: Path | None, tokens: torch.Tensor,
            mask: torch.Tensor, targets: tuple[str, ...], cfg: RepresentationConfig) -> dict:
    """One model (untrained from `seed`, or the weights of `weights`), each target: its metrics."""
    torch.manual_seed(seed)
    model = build_model(spec, sizes, vocab)
    if weights is not None:
        load_weights(model, weights)
    return {target: representation_accuracy(model, tokens, mask, steps=cfg.steps, lr_start=cfg.lr_start,
                                            lr_end=cfg.lr_end, seed=seed, last_token_only=target == "last_token")
            for target in targets}
