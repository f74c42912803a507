"""Summary-to-story retrieval on frozen language-model embeddings (the report's Section 4), and the
InfoNCE baseline of "Masked Mixers II".

1. Embeddings. Every story and every summary is right-padded to the window and run through a
   frozen model. A source with `pooling: mean` averages the final hidden vectors over the text's
   tokens (padding excluded); at this size these are the embeddings that carry the match, and the
   ones the claims are judged on. A source with `pooling: position` takes the hidden vector at one
   position, the paper's choice: the second-to-last for masked mixers (the last output is never
   trained), the last for transformers (after the final norm, as Hugging Face's last hidden
   state). The pairs are the summaries stage's (`summaries.py`): the first n_train stories of
   train and n_test of validation, each with its summary as the query.
2. Sampling (Algorithm 1). A training example is the query's embedding followed by c candidate
   story embeddings: c - 1 distinct stories other than the query's own, and the matching story
   at a uniformly drawn slot, whose index is the label. Negatives are drawn afresh every time.
3. The retrieval model is a bidirectional (unmasked) mixer over the c + 1 positions, a linear
   score per candidate position, and cross-entropy over the c scores: the logits go straight
   into the loss (the v1 code's extra softmax before the cross-entropy is not reproduced). Its
   inputs are standardized per dimension with the training pairs' mean and spread (`standardize`,
   a deviation from the paper): a trained mixer's pooled states share one large direction (mean
   pairwise cosine near 0.96 at `tiny`), and on them as they are the model stays at chance.
4. Reported per embedding source, c and seed (each seed embeds with the language models that seed
   trained, and seeds the retrieval model and the candidate draws): train loss, test loss and
   top-1 accuracy on the test pairs, also at the `curve_steps` of the run (the learning curve; every
   point scores the same candidate sets), and the top-1 of ranking the candidates by cosine
   similarity, L1 or L2 distance alone (no retrieval model): whether the embeddings carry the
   match at all. Each (seed, source) pair runs as a job of its own in parallel worker processes, one
   torch thread each.
5. Throughput (`throughput`): a short timed run of the retrieval model on the InfoNCE source's
   embeddings of the first `n_train` pairs, per c, in examples per second and in embeddings per
   second (c + 1 per example, the blog's count), embedding included.
6. InfoNCE: the language model itself is tuned so that the cosine similarity of a summary with
   its story beats the other stories of the batch (temperature `tau`); its throughput in texts
   per second (two per pair) is compared with the embedding route's embeddings per second, and
   its top-1 accuracy is measured on the same candidate sets by cosine similarity (the source's
   own cosine ranking, before tuning, is the baseline). The blog finds InfoNCE fails at small
   batch: the loss does not fall below chance (log of the batch size) and then blows up. The
   training loss curve (means over `curve_points` windows), its maximum and whether it stayed
   finite are reported for that claim.
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "summaries", "tokenizer", "clm-dir", "out")

import logging
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import datasets
import torch
import torch.nn.functional as F
from torch import nn

from common.config import bounded, check_distinct, seeds_field
from common.data.manifest import load_dataset_dir
from common.data.tokenizer import load_tokenizer
from common.device import compute_device
from common.errors import ConfigError, DataError, exit_on_user_error
from common.io import write_json
from common.models.lm import LanguageModel
from common.parallel import run_jobs
from common.training.optim import OptimConfig, build_optimizer
from papers.masked_mixers.models import build_model, hidden_states
from papers.masked_mixers.shared import load_paper_stage
from papers.masked_mixers.train import load_weights, run_dir_of

log = logging.getLogger("mm_retrieval")


# ---------------------------------------------------------------------------------- embeddings

Pooling = Literal["position", "mean"]


def embed_texts(model: nn.Module, ids: torch.Tensor, position: int, pooling: Pooling = "position",
                pad_id: int | None = None, batch_size: int = 64) -> torch.Tensor:
    """`[N, T]` token ids -> `[N, D]` embeddings (see `sequence_embedding`), without gradients,
    computed on the GPU when there is one and returned on the CPU."""
    device = compute_device()
    model.eval().to(device)
    out = []
    with torch.no_grad():
        for start in range(0, len(ids), batch_size):
            batch = ids[start: start + batch_size].to(device)
            out.append(sequence_embedding(model, batch, position, pooling, pad_id).cpu())
    return torch.cat(out)


def sequence_embedding(model: nn.Module, ids: torch.Tensor, position: int, pooling: Pooling = "position",
                       pad_id: int | None = None) -> torch.Tensor:
    """The hidden vector at `position`, or (`mean`) the mean over the positions whose id is not `pad_id`."""
    if not isinstance(model, LanguageModel):
        raise ConfigError(f"retrieval embeddings: {type(model).__name__} is not a language model")
    states = hidden_states(model, model.embed(ids), final_norm=True)
    if pooling == "position":
        return states[:, position]
    mask = (ids != pad_id).to(states.dtype)[..., None]
    return (states * mask).sum(1) / mask.sum(1).clamp_min(1)


# ------------------------------------------------------------------------------- Algorithm 1

def sample_candidates(queries: torch.Tensor, n_targets: int, c: int,
                      generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`[B, c]` candidate target indices for the `[B]` query indices, and `[B]` slots of their own
    targets: per row, c - 1 distinct negatives drawn uniformly from all targets but the query's
    (the indices of the c - 1 largest of n - 1 uniform keys, which come out in random order), and
    the query's target swapped in at a uniform slot."""
    if c > n_targets:
        raise ConfigError(f"retrieval: c={c} candidates need at least {c} targets, have {n_targets}")
    rows = torch.arange(len(queries))
    others = torch.rand(len(queries), n_targets - 1, generator=generator).topk(c - 1, dim=1).indices
    negatives = others + (others >= queries[:, None]).long()  # skip the query's own index
    slots = torch.randint(c, (len(queries),), generator=generator)
    candidates = torch.cat([negatives, queries[:, None]], dim=1)
    candidates[rows, -1] = candidates[rows, slots]
    candidates[rows, slots] = queries
    return candidates, slots


def make_batch(queries: torch.Tensor, targets: torch.Tensor, indices: torch.Tensor, c: int,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`[B, c + 1, D]` inputs (query first, then the candidates) and `[B]` labels (the slot)."""
    candidates, slots = sample_candidates(indices, len(targets), c, generator)
    return torch.cat([queries[indices, None], targets[candidates]], dim=1), slots


# ------------------------------------------------------------------------------ the model

class RetrievalMixer(nn.Module):
    """Unmasked mixer over the c + 1 positions: [x + conv(LN x); x + FF(LN x)] x depth, where the
    conv is `Conv1d(c + 1, c + 1, 1)` over positions (every candidate sees every other and the
    query), then one score per candidate position."""

    def __init__(self, d_model: int, n_positions: int, depth: int, expansion: int = 4):
        super().__init__()
        self.layers = nn.ModuleList(nn.ModuleList([
            nn.LayerNorm(d_model), nn.Conv1d(n_positions, n_positions, 1),
            nn.LayerNorm(d_model), nn.Sequential(nn.Linear(d_model, expansion * d_model), nn.GELU(),
                                                 nn.Linear(expansion * d_model, d_model)),
        ]) for _ in range(depth))
        self.score = nn.Linear(d_model, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for seq_norm, conv, ff_norm, ff in self.layers:
            x = x + conv(seq_norm(x))
            x = x + ff(ff_norm(x))
        return self.score(x[:, 1:])[..., 0]  # [B, c] logits, the query position dropped


@dataclass
class RetrievalTraining:
    depth: int = bounded(4, ge=1)
    steps: int = bounded(300, ge=1)
    batch_size: int = bounded(64, ge=1)
    eval_batches: int = bounded(8, ge=1)
    curve_steps: list[int] = field(default_factory=list)  # steps before the last at which test top-1 is also read
    standardize: bool = True  # inputs less the training pairs' mean, over their spread, per dimension
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-3, weight_decay=0.0, warmup_steps=20))


def evaluate_retrieval(model: nn.Module, queries, targets, c: int, n_batches: int, batch_size: int,
                       generator: torch.Generator) -> tuple[float, float]:
    """Mean loss and top-1 accuracy over freshly drawn candidate sets, every query at most once
    (drawn on the CPU, scored where the model is)."""
    device = next(model.parameters()).device
    model.eval()
    order = torch.randperm(len(queries), generator=generator)
    losses, correct, n = [], 0, 0
    with torch.no_grad():
        for b in range(n_batches):
            indices = order[b * batch_size: (b + 1) * batch_size]
            if len(indices) == 0:
                break
            x, labels = (t.to(device) for t in make_batch(queries, targets, indices, c, generator))
            logits = model(x)
            losses.append(F.cross_entropy(logits, labels).item() * len(indices))
            correct += (logits.argmax(-1) == labels).sum().item()
            n += len(indices)
    model.train()
    return sum(losses) / n, correct / n


def standardized(train_q, train_t, *others: torch.Tensor) -> list[torch.Tensor]:
    """Every set of embeddings less the mean of the training queries and targets together, over
    their standard deviation, per dimension: statistics of the training pairs only."""
    train = torch.cat([train_q, train_t])
    mean, std = train.mean(0), train.std(0).clamp_min(1e-6)
    return [(x - mean) / std for x in (train_q, train_t, *others)]


def train_retrieval(train_q, train_t, test_q, test_t, c: int, cfg: RetrievalTraining, seed: int) -> dict:
    if cfg.standardize:
        train_q, train_t, test_q, test_t = standardized(train_q, train_t, test_q, test_t)
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)  # candidates are drawn on the CPU wherever the model is
    device = compute_device()
    model = RetrievalMixer(train_q.shape[1], c + 1, cfg.depth).to(device)
    optimizer, scheduler = build_optimizer(model, cfg.optim, cfg.steps)

    def evaluate() -> tuple[float, float]:
        # A generator of its own: every point of the curve scores the same candidate sets, and
        # scoring draws nothing from the training stream.
        return evaluate_retrieval(model, test_q, test_t, c, cfg.eval_batches, cfg.batch_size,
                                  torch.Generator().manual_seed(seed))

    losses, curve, eval_seconds = [], {}, 0.0
    start = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        indices = torch.randint(len(train_q), (cfg.batch_size,), generator=generator)
        x, labels = (t.to(device) for t in make_batch(train_q, train_t, indices, c, generator))
        loss = F.cross_entropy(model(x), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step in cfg.curve_steps and step < cfg.steps:
            eval_start = time.perf_counter()
            curve[str(step)] = round(evaluate()[1], 4)
            eval_seconds += time.perf_counter() - eval_start
    seconds = time.perf_counter() - start - eval_seconds
    test_loss, test_top1 = evaluate()
    curve[str(cfg.steps)] = round(test_top1, 4)
    tail = losses[-max(1, cfg.steps // 10):]
    return {"train_loss": round(sum(tail) / len(tail), 4), "test_loss": round(test_loss, 4),
            "test_top1": round(test_top1, 4), "top1_curve": curve,
            "queries_scored": min(len(test_q), cfg.eval_batches * cfg.batch_size), "chance_top1": round(1 / c, 4),
            "train_seconds": round(seconds, 2),
            "train_examples_per_s": round(cfg.steps * cfg.batch_size / seconds, 1),
            "train_embeddings_per_s": round(cfg.steps * cfg.batch_size * (c + 1) / seconds, 1)}


# ------------------------------------------------------------------------------------ InfoNCE

@dataclass
class InfoNCEConfig:
    steps: int = bounded(20, ge=1)
    batch_size: int = bounded(16, ge=2)
    tau: float = bounded(0.05, gt=0)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4, weight_decay=0.0, warmup_steps=0))
    curve_points: int = bounded(16, ge=1)  # the training loss is reported as means over this many windows
    # InfoNCE runs beyond the stage's `seeds`, where its claim declares more (claims.yaml): each tunes
    # the clm stage's model of that seed (clm's extra_seeds must have trained it).
    extra_seeds: list[int] = seeds_field()


def infonce_loss(q: torch.Tensor, d: torch.Tensor, tau: float) -> torch.Tensor:
    """Query i's positive is text i; every other text of the batch is a negative."""
    sims = F.normalize(q, dim=-1) @ F.normalize(d, dim=-1).T / tau
    return F.cross_entropy(sims, torch.arange(len(q), device=q.device))


def train_infonce(model: nn.Module, query_ids, target_ids, position: int, cfg: InfoNCEConfig, seed: int,
                  pooling: Pooling = "position", pad_id: int | None = None) -> dict:
    generator = torch.Generator().manual_seed(seed)
    device = compute_device()
    model.train().to(device)  # before the optimizer takes its parameters
    optimizer, scheduler = build_optimizer(model, cfg.optim, cfg.steps)
    losses = []
    start = time.perf_counter()
    for _ in range(cfg.steps):
        indices = torch.randperm(len(query_ids), generator=generator)[: cfg.batch_size]
        loss = infonce_loss(sequence_embedding(model, query_ids[indices].to(device), position, pooling, pad_id),
                            sequence_embedding(model, target_ids[indices].to(device), position, pooling, pad_id),
                            cfg.tau)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    # The blog's failure at small batch is a loss that does not fall below chance (log of the batch:
    # every text of the batch equally likely), then blows up: the curve shows both.
    n = min(cfg.curve_points, cfg.steps)
    ends = [round((i + 1) * cfg.steps / n) for i in range(n)]
    curve = {str(end): round(sum(losses[start:end]) / (end - start), 4) for start, end in zip([0, *ends], ends)}
    return {"train_loss": round(sum(losses[-5:]) / len(losses[-5:]), 4), "loss_curve": curve,
            "max_loss": round(max(losses), 4), "finite": all(math.isfinite(x) for x in losses),
            "chance_loss": round(math.log(cfg.batch_size), 4), "train_seconds": round(seconds, 2),
            "pairs_per_s": round(cfg.steps * cfg.batch_size / seconds, 2),
            "texts_per_s": round(2 * cfg.steps * cfg.batch_size / seconds, 2)}


def ranking_top1(queries, targets, c: int, n: int, generator: torch.Generator) -> dict[str, float]:
    """Top-1 accuracy of ranking c candidates (Algorithm 1 sets) by cosine similarity, and by L1 and
    L2 distance (§4.2 finds all three unsuitable for mixers), on the same candidate sets."""
    indices = torch.randperm(len(queries), generator=generator)[:n]
    candidates, slots = sample_candidates(indices, len(targets), c, generator)
    q, t = queries[indices, None], targets[candidates]
    scores = {"cosine": F.cosine_similarity(q, t, dim=-1), "l1": -(q - t).abs().sum(-1),
              "l2": -(q - t).pow(2).sum(-1)}  # squared: the same order as the distance
    return {name: (score.argmax(-1) == slots).float().mean().item() for name, score in scores.items()}


# -------------------------------------------------------------------------------------- stage

@dataclass
class SourceSpec:
    model: str = "mixer_flat"  # a causal language model of the `models` section
    weights: Literal["clm", "untrained"] = "clm"
    position: int = -2
    pooling: Pooling = "position"  # mean: over the text's tokens, `position` unused


@dataclass
class Throughput:
    """A short timed run of the retrieval model per c, on the InfoNCE source's embeddings of the
    first `n_train` pairs, for the comparison with InfoNCE: its rates, embedding included."""
    n_train: int = bounded(2000, ge=2)
    steps: int = bounded(300, ge=1)
    candidates: list[int] = field(default_factory=lambda: [32, 128])


@dataclass
class RetrievalConfig:
    seeds: list[int] = seeds_field(0)  # the clm runs of each seed
    workers: int | None = bounded(None, ge=1)  # processes; None: one per core
    n_train: int = bounded(2000, ge=2)
    n_test: int = bounded(200, ge=2)
    candidates: list[int] = field(default_factory=lambda: [32, 128])
    sources: dict[str, SourceSpec] = field(default_factory=dict)
    training: RetrievalTraining = field(default_factory=RetrievalTraining)
    throughput: Throughput = field(default_factory=Throughput)
    infonce: InfoNCEConfig = field(default_factory=InfoNCEConfig)
    infonce_source: str = "mixer_trained"
    threads: int | None = bounded(None, ge=1)

    def check(self) -> None:
        if not self.sources:
            raise ConfigError("sources: name at least one embedding source")
        check_distinct(self.seeds, "seeds")
        check_distinct(self.infonce.extra_seeds, "infonce.extra_seeds", at_least=0)
        if self.infonce_source not in self.sources:
            raise ConfigError(f"infonce_source: {self.infonce_source!r} is not a source; "
                              f"have {', '.join(self.sources)}")
        for c in self.candidates:
            if c < 2 or c > min(self.n_train, self.n_test):
                raise ConfigError(f"candidates: {c} must be within 2..min(n_train, n_test)")
        if self.throughput.n_train > self.n_train:
            raise ConfigError(f"throughput.n_train: {self.throughput.n_train} must be at most n_train "
                              f"({self.n_train})")
        for c in self.throughput.candidates:
            if c < 2 or c > min(self.throughput.n_train, self.n_test):
                raise ConfigError(f"throughput.candidates: {c} must be within 2..min(throughput.n_train, n_test)")
        if any(n < 1 for n in self.training.curve_steps):
            raise ConfigError(f"training.curve_steps: list positive step counts, got {self.training.curve_steps}")

    def infonce_seeds(self) -> list[int]:
        return self.seeds + [seed for seed in self.infonce.extra_seeds if seed not in self.seeds]


def tokenize_pairs(stories: datasets.Dataset, tokenizer, n: int, n_ctx: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Summaries (queries) and stories (targets), each right-padded or cut to the window."""
    rows = stories.select(range(min(n, len(stories))))

    def encode(texts):
        ids = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=n_ctx - 1)["input_ids"]
        return torch.tensor([(x + [tokenizer.eos_token_id] + [tokenizer.pad_token_id] * n_ctx)[:n_ctx] for x in ids])

    return encode(list(rows["summary"])), encode(list(rows["text"]))


def load_pairs(path: Path, cfg: RetrievalConfig) -> datasets.DatasetDict:
    """The summaries stage's (story, summary) pairs, with at least n_train and n_test per split."""
    pairs = load_dataset_dir(path, splits=("train", "validation"), columns=("text", "summary"),
                             hint="run `dvc repro papers/masked_mixers/dvc.yaml:summaries` first")
    for split, key in (("train", "n_train"), ("validation", "n_test")):
        needed = getattr(cfg, key)
        if len(pairs[split]) < needed:
            raise DataError(f"{path}: {split} has {len(pairs[split])} summaries, fewer than the {needed} retrieval "
                            f"reads ({key}); raise summaries.{key} to at least that")
    return pairs


def load_source(name: str, spec: SourceSpec, sizes, vocab: int, clm_dir: Path, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    model = build_model(sizes.spec(spec.model), sizes, vocab)
    if not isinstance(model, LanguageModel):
        raise ConfigError(f"retrieval.sources.{name}.model: {spec.model!r} is not a causal language model")
    if spec.weights == "clm":
        load_weights(model, run_dir_of(clm_dir, spec.model, seed))
    return model


def retrieval_rates(result: dict, c: int, embed_seconds: float, steps: int, batch_size: int) -> dict:
    """Examples and embeddings (c + 1 per example, the blog's count) per second, embedding included."""
    examples, seconds = steps * batch_size, embed_seconds + result["train_seconds"]
    return {"examples_per_s_with_embedding": round(examples / seconds, 1),
            "embeddings_per_s_with_embedding": round(examples * (c + 1) / seconds, 1)}


def retrieve(seed: int, name: str, cfg: RetrievalConfig, sizes, vocab: int, pad_id: int,
             ids: dict[str, torch.Tensor], clm_dir: Path) -> dict:
    """One source's retrieval results for one seed's language model: the rankings and the trained
    retrieval model at every c."""
    spec = cfg.sources[name]
    model = load_source(name, spec, sizes, vocab, clm_dir, seed)
    start = time.perf_counter()
    train_q, train_t, test_q, test_t = (embed_texts(model, ids[k], spec.position, spec.pooling, pad_id)
                                        for k in ("train_q", "train_t", "test_q", "test_t"))
    row = {"embed_seconds": round(time.perf_counter() - start, 2)}
    # Parameter-free checks that the embeddings carry the match at all: ranking by similarity.
    generator = torch.Generator().manual_seed(seed)
    ranked = ranking_top1(test_q, test_t, cfg.candidates[0], cfg.n_test, generator)
    row.update({f"c{cfg.candidates[0]}_{ranking}_top1": round(top1, 4) for ranking, top1 in ranked.items()})
    for c in cfg.candidates:
        row[f"c{c}"] = train_retrieval(train_q, train_t, test_q, test_t, c, cfg.training, seed)
        log.info("seed %d %-24s c=%-4d %s", seed, name, c, row[f"c{c}"])
    return row


def against_infonce(seed: int, cfg: RetrievalConfig, sizes, vocab: int, pad_id: int, ids: dict[str, torch.Tensor],
                    clm_dir: Path) -> dict:
    """The embedding route timed as the blog times it, and InfoNCE from the same language model."""
    spec, n = cfg.sources[cfg.infonce_source], cfg.throughput.n_train
    model = load_source(cfg.infonce_source, spec, sizes, vocab, clm_dir, seed)
    start = time.perf_counter()
    train_q, train_t, test_q, test_t = (embed_texts(model, x, spec.position, spec.pooling, pad_id) for x in
                                        (ids["train_q"][:n], ids["train_t"][:n], ids["test_q"], ids["test_t"]))
    embed_seconds = time.perf_counter() - start
    # The source's own cosine ranking before tuning, as `retrieve` scores it (same embeddings, same draws).
    ranked = cfg.candidates[0]
    before = ranking_top1(test_q, test_t, ranked, cfg.n_test, torch.Generator().manual_seed(seed))["cosine"]
    timed = replace(cfg.training, steps=cfg.throughput.steps, curve_steps=[])
    throughput = {"embed_seconds": round(embed_seconds, 2), "texts_embedded": 2 * (n + len(test_q))}
    for c in cfg.throughput.candidates:
        result = train_retrieval(train_q, train_t, test_q, test_t, c, timed, seed)
        throughput[f"c{c}"] = {**{k: result[k] for k in ("train_seconds", "train_examples_per_s",
                                                          "train_embeddings_per_s")},
                               **retrieval_rates(result, c, embed_seconds, timed.steps, timed.batch_size)}

    infonce = train_infonce(model, ids["train_q"], ids["train_t"], spec.position, cfg.infonce, seed, spec.pooling,
                            pad_id)
    generator = torch.Generator().manual_seed(seed)
    test_q, test_t = (embed_texts(model, ids[k], spec.position, spec.pooling, pad_id) for k in ("test_q", "test_t"))
    infonce[f"c{ranked}_cosine_top1"] = round(ranking_top1(test_q, test_t, ranked, cfg.n_test, generator)["cosine"], 4)
    infonce[f"c{ranked}_cosine_top1_before"] = round(before, 4)
    # The blog counts InfoNCE samples as pairs (640/s); counting both texts of a pair, as here,
    # doubles InfoNCE's figure and halves every ratio below.
    for c in cfg.throughput.candidates:
        ours = throughput[f"c{c}"]
        infonce[f"speedup_c{c}"] = round(ours["embeddings_per_s_with_embedding"] / infonce["texts_per_s"], 1)
        infonce[f"speedup_training_only_c{c}"] = round(ours["train_embeddings_per_s"] / infonce["texts_per_s"], 1)
    log.info("seed %d InfoNCE %s", seed, infonce)
    return {"throughput": throughput, "infonce": infonce}


def run_job(kind: str, **job) -> dict:
    """One worker job: a source of a seed (`retrieve`), or a seed's comparison with InfoNCE."""
    return retrieve(**job) if kind == "source" else against_infonce(**job)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, sizes, profile = load_paper_stage(args.params, "retrieval", RetrievalConfig)
    pairs = load_pairs(args.summaries, cfg)
    tokenizer = load_tokenizer(args.tokenizer)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    ids = dict(zip(("train_q", "train_t"), tokenize_pairs(pairs["train"], tokenizer, cfg.n_train, sizes.n_ctx)))
    ids.update(zip(("test_q", "test_t"), tokenize_pairs(pairs["validation"], tokenizer, cfg.n_test, sizes.n_ctx)))
    for name, spec in cfg.sources.items():  # every source's weights exist before any worker starts
        for seed in cfg.infonce_seeds() if name == cfg.infonce_source else cfg.seeds:
            load_source(name, spec, sizes, len(tokenizer), args.clm_dir, seed)

    # Every (seed, source) pair is a job of its own, so the workers stay busy to the end.
    inputs = dict(cfg=cfg, sizes=sizes, vocab=len(tokenizer), pad_id=tokenizer.pad_token_id, clm_dir=args.clm_dir,
                  ids=ids)
    jobs = [dict(kind="source", seed=seed, name=name, **inputs) for seed in cfg.seeds for name in cfg.sources]
    jobs += [dict(kind="infonce", seed=seed, **inputs) for seed in cfg.infonce_seeds()]
    steps = cfg.training.steps * len(cfg.candidates)
    cost = {"source": steps, "infonce": cfg.throughput.steps * len(cfg.throughput.candidates) + cfg.infonce.steps}
    done = iter(run_jobs(run_job, jobs, cfg.workers, cost=lambda job: cost[job["kind"]]))
    rows = {(str(seed), name): next(done) for seed in cfg.seeds for name in cfg.sources}
    compared = {str(seed): next(done) for seed in cfg.infonce_seeds()}
    sources = {name: {"model": spec.model, "weights": spec.weights, "pooling": spec.pooling,
                      "position": spec.position if spec.pooling == "position" else None,
                      "seeds": {str(seed): rows[str(seed), name] for seed in cfg.seeds}}
               for name, spec in cfg.sources.items()}
    throughput = {"source": cfg.infonce_source, "n_train": cfg.throughput.n_train, "steps": cfg.throughput.steps,
                  "candidates": cfg.throughput.candidates,
                  "seeds": {seed: out["throughput"] for seed, out in compared.items()}}
    infonce = {"source": cfg.infonce_source, "steps": cfg.infonce.steps, "batch_size": cfg.infonce.batch_size,
               "tau": cfg.infonce.tau, "seeds": {seed: out["infonce"] for seed, out in compared.items()}}
    write_json(args.out, {"profile": profile, "n_train": len(ids["train_q"]), "n_test": len(ids["test_q"]),
                          "n_ctx": sizes.n_ctx, "candidates": cfg.candidates, "steps": cfg.training.steps,
                          "standardized": cfg.training.standardize,
                          "sources": sources, "throughput": throughput, "infonce": infonce, "seeds": cfg.seeds})


if __name__ == "__main__":
    main()
