"""Stage `expansion`: flat against expanded masked mixers, untrained (the report's §2.3, §3.1 and
Figures S1-S3).

An expanded mixer mixes tokens with two masked convolutions, `n_ctx -> e n_ctx -> n_ctx`, each
with the lower-triangular mask cut to its rectangle. The report says that any e != 1 wastes
something: with e > 1 some parameters are never used (Figure S1), with e < 1 some input tokens
are lost (Figure S2); and that the flat mixer (e = 1) passes more information between tokens
than the expanded one (e = 2) while both represent their own tokens about equally (Figure S3).

Figures S1 and S2 are properties of the architecture, measured exactly on one untrained `mixer`
block as the models section builds it (width, window, kernel, heads), per expansion factor:

- a random input x over the whole window and a random read-out r, one backward pass of
  `sum(r * mixer(x))`;
- `dead_fraction`: of the convolutions' parameters the mask leaves trainable (weights and biases),
  the share whose gradient is exactly zero. With continuous random x and r a used parameter has a
  zero gradient with probability 0, so an exact zero means no input and no loss can move it;
- `lost_positions`: the input positions whose gradient is exactly zero: tokens no output reads.

The flat mixer (e = 1) is the control: it must show neither.

Figure S3 is measured as Figure 3 is (`input_representation.py`, with the `representation` section's
inputs, steps, rates and seeds), untrained at that section's last (the paper's) size, for the
flat and the expanded mixer of the models section: the whole last layer, and the last token's
vector alone.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "out")

import logging
from dataclasses import dataclass, field, replace

import torch

from common.blocks import build_block
from common.blocks.masked_mixer import MaskedMixer, MaskedSeqConv
from common.config import bounded, seed_field, stage_config
from common.data.tokenized import load_tokenized
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.parallel import run_jobs
from papers.masked_mixers.input_representation import RepresentationConfig, measure
from papers.masked_mixers.models import ModelsConfig
from papers.masked_mixers.shared import vocab_size

log = logging.getLogger("mm_expansion")
FLAT, EXPANDED = "mixer_flat", "mixer_expanded"  # the models section's flat and e = 2 mixers


@dataclass
class ExpansionConfig:
    expansions: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0])
    seed: int = seed_field()  # draws x and the read-out of the exact count (any seed gives the same count)
    workers: int | None = bounded(None, ge=1)  # processes for Figure S3; None: one per core

    def check(self) -> None:
        if not self.expansions or any(e <= 0 for e in self.expansions):
            raise ConfigError("expansions: a list of positive expansion factors, e.g. [0.5, 1, 2]")


def trace_mixer(mixer: MaskedMixer, d_model: int, seed: int) -> dict:
    """One backward pass of a random read-out of `mixer` on a random full-window input: which
    trainable convolution parameters and which input positions get an exactly zero gradient."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, mixer.n_ctx, d_model, generator=generator, requires_grad=True)
    out = mixer(x)
    (out * torch.randn(out.shape, generator=generator)).sum().backward()
    trainable = dead = 0
    for conv in (m for m in mixer.modules() if isinstance(m, MaskedSeqConv)):
        # The mask [n_out, n_in, 1] repeated over heads and kernel taps: the weights it lets train.
        allowed = conv.mask.repeat(conv.groups, 1, conv.kernel_size)
        params = [(conv.weight, allowed)] + ([(conv.bias, None)] if conv.bias is not None else [])
        for param, keep in params:
            grad = torch.zeros_like(param) if param.grad is None else param.grad
            keep = torch.ones_like(grad, dtype=torch.bool) if keep is None else keep
            trainable += int(keep.sum())
            dead += int((keep & (grad == 0)).sum())
    lost = (x.grad[0].abs().sum(-1) == 0).nonzero().flatten().tolist()
    return {"hidden_positions": mixer.hidden, "trainable": trainable, "dead": dead,
            "dead_fraction": round(dead / trainable, 4), "lost_positions": len(lost),
            "first_lost_position": lost[0] if lost else None}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, params = load_stage(args.params, "expansion", ExpansionConfig)
    sizes = stage_config(params, "models", ModelsConfig, profile)
    rep = stage_config(params, "representation", RepresentationConfig, profile)

    options = dict(sizes.spec(FLAT).blocks.get("mixer", {}))
    structure = {}
    for e in cfg.expansions:
        torch.manual_seed(cfg.seed)
        mixer = build_block("mixer", sizes.d_model, shared={"n_ctx": sizes.n_ctx}, **{**options, "expansion": e})
        structure[str(e)] = trace_mixer(mixer, sizes.d_model, cfg.seed)
        log.info("expansion %g: %s", e, structure[str(e)])

    # Figure S3: as the representation stage measures Figure 3, at its last size, untrained.
    d_model, n_layers = rep.untrained_sizes[-1]
    sized = replace(sizes, d_model=d_model, n_layers=n_layers)
    if rep.n_tokens > sized.n_ctx:
        raise ConfigError(f"representation.n_tokens: {rep.n_tokens} exceeds the models' window n_ctx={sized.n_ctx}")
    rows = load_tokenized(args.data)["validation"].select(range(rep.n_inputs))
    tokens = torch.tensor(rows["input_ids"], dtype=torch.long)[:, : rep.n_tokens]
    mask = torch.tensor(rows["attention_mask"], dtype=torch.bool)[:, : rep.n_tokens]
    vocab = vocab_size(args.tokenizer)
    keys = [(name, seed) for name in (FLAT, EXPANDED) for seed in rep.seeds]
    jobs = [dict(name=name, seed=seed, spec=sizes.spec(name), sizes=sized, vocab=vocab, weights=None, tokens=tokens,
                 mask=mask, targets=("full", "last_token"), cfg=rep) for name, seed in keys]
    representation: dict = {}
    for (name, seed), row in zip(keys, run_jobs(measure, jobs, cfg.workers)):
        representation.setdefault(name, {})[str(seed)] = row
        log.info("untrained d%d_l%d %-15s seed %d %s", d_model, n_layers, name, seed, row)

    write_json(args.out, {"profile": profile, "n_ctx": sizes.n_ctx, "d_model": sizes.d_model, "seed": cfg.seed,
                          "expansions": structure, "representation_size": f"d{d_model}_l{n_layers}",
                          "seeds": rep.seeds, "n_inputs": rep.n_inputs, "n_tokens": rep.n_tokens,
                          "representation": representation})


if __name__ == "__main__":
    main()
