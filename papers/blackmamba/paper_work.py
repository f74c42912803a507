"""What each stage of the BlackMamba pipeline computes at the `paper` profile (`common.paper_work`),
declared beside the stages, for the readiness tables of `make rehearse`."""

from __future__ import annotations

from collections.abc import Callable

from common.config import stage_config
from common.paper_work import Work, paper_params, root_sizes


def _train_compare():
    from papers.blackmamba.compared_models import TrainCompareConfig

    return stage_config(paper_params("papers/blackmamba/params.yaml"), "train_compare", TrainCompareConfig)


def bm_train_compare() -> list[Work]:
    from common.models.lm import LanguageModel
    from papers.blackmamba.compared_models import model_configs, routing_model_config

    cfg = _train_compare()
    vocab, n_ctx, _ = root_sizes()
    configs = {**model_configs(cfg, vocab, n_ctx), **routing_model_config(cfg, vocab, n_ctx)}
    rows = cfg.data.batch_size * cfg.trainer.accumulate_grad_batches
    return [Work(name, lambda lm=lm: LanguageModel(lm), n_ctx, rows, cfg.trainer.max_steps, len(cfg.seeds_of(name)),
                 vocab=vocab) for name, lm in configs.items()]


def bm_routing() -> list[Work]:
    from common.models.lm import LanguageModel
    from papers.blackmamba.compared_models import model_configs, routing_model_config
    from papers.blackmamba.routing import RoutingConfig

    routing = stage_config(paper_params("papers/blackmamba/params.yaml"), "routing", RoutingConfig)
    cfg = _train_compare()
    vocab, n_ctx, _ = root_sizes()
    name, lm = next(iter({**model_configs(cfg, vocab, n_ctx), **routing_model_config(cfg, vocab, n_ctx)}.items()))
    # Every validation batch twice (eval mode and train mode), every seed's model.
    return [Work(name, lambda: LanguageModel(lm), n_ctx, routing.batch_size, 2 * routing.batches,
                 len(cfg.seeds_of(name)), train=False, vocab=vocab)]


STAGES: dict[str, Callable[[], list[Work]] | str] = {
    "table1": "counting from the architectures",
    "sinkhorn": "Sinkhorn iterations on random logits (CPU)",
    "train_compare": bm_train_compare,
    "lr_check": "no rates checked at this profile (Appendix B's rate)",
    "latency": "timed generation, not a budget",
    "routing": bm_routing,
    "zero_shot": "lm-eval tasks: forward passes, not counted",
    "report": "tables and ledger",
}
