"""Stage `sinkhorn`: the paper's Appendix F claim, that initialising Sinkhorn with a softmax along
the token axis cuts the iterations to convergence "from 10-20 to just 1".

Appendix F's footnote says what Sinkhorn balances: not the raw logits but sigmoid(logits) ("more
efficient"). Both inputs are studied (`inputs`); the sigmoid is the paper's setting, the raw logits
are Megatron's and our router's default (`sinkhorn_input` of the `moe` block selects either).

For router logits `N(0, scale) + a linear per-expert offset` (experts of unequal popularity, as a
router develops), over a grid of logit scales, temperatures and token counts, we count iterations
to tolerance for the BlackMamba init and the vanilla one (d1 = 1) under two stop tests:

- `absolute`, the release's mean|delta d1| < tol. With the BlackMamba init d1 is ~1/(E*N) in
  scale, so this test is N*E times looser for it than for the vanilla init: it flatters the new init.
- `relative`, mean|delta d1| / mean|d1| < tol, which is scale-free and compares like with like.

And, after exactly one iteration of each init: the load balance of the resulting top-1 assignment
(max and min expert load over the mean) and its agreement with the converged assignment.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "out")

import itertools
import logging
import statistics
from dataclasses import dataclass, field

import torch

from common.blocks.moe import SINKHORN_INITS, SinkhornInput, load_balance_stats, sinkhorn
from common.config import bounded, seed_field
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json

log = logging.getLogger("sinkhorn")
CRITERIA = ("absolute", "relative")


@dataclass
class SinkhornStudyConfig:
    seed: int = seed_field()
    n_experts: int = bounded(8, ge=2)
    logit_scales: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0])
    expert_offset: float = bounded(1.0, ge=0)  # logits of expert e get + offset * e / (E - 1)
    temperatures: list[float] = field(default_factory=lambda: [0.5, 1.0])
    token_counts: list[int] = field(default_factory=lambda: [1024, 4096, 16384])
    repeats: int = bounded(3, ge=1)
    tol: float = bounded(1e-4, gt=0)
    max_iter: int = bounded(1000, ge=1)
    inputs: list[SinkhornInput] = field(default_factory=lambda: ["logits", "sigmoid"])

    def check(self) -> None:
        if not self.inputs:
            raise ConfigError("inputs: at least one of logits, sigmoid")
        for name in ("logit_scales", "temperatures", "token_counts"):
            values = getattr(self, name)
            if not values or any(v <= 0 for v in values):
                raise ConfigError(f"{name}: needs at least one value, all > 0; got {values}")


def one_case(logits: torch.Tensor, temperature: float, tol: float, max_iter: int) -> dict:
    n_experts = logits.shape[1]
    converged, _ = sinkhorn(logits, temperature=temperature, init="vanilla", tol=1e-12, max_iter=10 * max_iter,
                            criterion="relative")
    target = converged.argmax(dim=1)
    out = {}
    for init in SINKHORN_INITS:
        row = {f"iters_{c}": sinkhorn(logits, temperature, init, tol, max_iter, c)[1] for c in CRITERIA}
        after_one = sinkhorn(logits, temperature, init, tol, max_iter=1)[0].argmax(dim=1)
        balance = load_balance_stats(torch.bincount(after_one, minlength=n_experts))
        row.update(agreement_after_1=(after_one == target).double().mean().item(),
                   max_load_after_1=balance["max_over_mean"], min_load_after_1=balance["min_over_mean"])
        out[init] = row
    plain = load_balance_stats(torch.bincount(logits.argmax(dim=1), minlength=n_experts))
    out["argmax_without_sinkhorn"] = {"max_load": plain["max_over_mean"], "min_load": plain["min_over_mean"]}
    return out


def summarise(cases: list[dict]) -> dict:
    summary = {}
    for init in SINKHORN_INITS:
        summary[init] = {
            **{f"median_iters_{c}": statistics.median(case[init][f"iters_{c}"] for case in cases) for c in CRITERIA},
            **{f"max_iters_{c}": max(case[init][f"iters_{c}"] for case in cases) for c in CRITERIA},
            "share_converged_in_1_absolute": statistics.mean(case[init]["iters_absolute"] == 1 for case in cases),
            "mean_agreement_after_1": statistics.mean(case[init]["agreement_after_1"] for case in cases),
            "min_agreement_after_1": min(case[init]["agreement_after_1"] for case in cases),
            "worst_max_load_after_1": max(case[init]["max_load_after_1"] for case in cases),
        }
    for c in CRITERIA:
        summary[f"share_blackmamba_fewer_iters_{c}"] = statistics.mean(
            case["blackmamba"][f"iters_{c}"] < case["vanilla"][f"iters_{c}"] for case in cases)
        summary[f"share_blackmamba_at_most_vanilla_{c}"] = statistics.mean(
            case["blackmamba"][f"iters_{c}"] <= case["vanilla"][f"iters_{c}"] for case in cases)
    return summary


def study(cfg: SinkhornStudyConfig) -> dict:
    g = torch.Generator().manual_seed(cfg.seed)
    E = cfg.n_experts
    offsets = cfg.expert_offset * torch.arange(E, dtype=torch.float64) / (E - 1)
    cases = []
    for scale, temperature, n in itertools.product(cfg.logit_scales, cfg.temperatures, cfg.token_counts):
        for r in range(cfg.repeats):
            logits = torch.randn(n, E, generator=g, dtype=torch.float64) * scale + offsets
            for source in cfg.inputs:
                balanced = logits.sigmoid() if source == "sigmoid" else logits
                cases.append({"input": source, "logit_scale": scale, "temperature": temperature, "tokens": n,
                              "repeat": r, **one_case(balanced, temperature, cfg.tol, cfg.max_iter)})
    summary = {source: summarise([case for case in cases if case["input"] == source]) for source in cfg.inputs}
    return {"cases": cases, "summary": summary}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "sinkhorn", SinkhornStudyConfig)
    result = study(cfg)
    write_json(args.out, {"profile": profile, "config": vars(cfg), **result})
    log.info("wrote %s: %s", args.out, result["summary"])


if __name__ == "__main__":
    main()
