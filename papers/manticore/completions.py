"""Stage `completions`: the "completions" data set, built the way the paper built PTB completions.

For every held-out text (validation stories at `tiny`, Penn Treebank at `paper`), the prompt is its
first `prompt_words` words. The Mamba component completes it greedily and the GPT-Neo component
by sampling (top-k 50, temperature 1), each with `max_new_tokens` new tokens.
Both completions become rows, tagged with the model that wrote them (`slice`), and the rows are
split train/validation at random. A hybrid trained on this mixture has reason to use both
components, which is what the mixture-weight experiments need.

Each component completes with its own tokenizer (at `paper`, GPT-2's BPE for GPT-Neo and
GPT-NeoX's for Mamba, as the official generation did); the finished text is then tokenized with the
hybrid's tokenizer, the first component's (`papers.manticore.vocabulary`). Unlike the official
code, the text is tokenized as text: its PTB/completions pipeline joined the characters of each
string with spaces before tokenizing (see the README).

Writes `<out>/text` (DatasetDict: text, slice) and `<out>/tokenized` (one completion per row,
padded to `n_ctx`, with a manifest that records the tokenizer), and a small JSON of counts and samples.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "stories", "out", "summary")

import logging
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import datasets
import torch

from common.config import bounded, seed_field
from common.data.hub import load_hub_text
from common.data.manifest import load_dataset_dir, write_manifest
from common.data.tokenized import tokenize_padded
from common.data.tokenizer import tokenizer_fingerprint
from common.device import compute_device
from common.errors import ConfigError, exit_on_user_error
from common.io import atomic_dir, write_json
from common.models.lm import LanguageModel
from papers.manticore.vocabulary import load_component_tokenizers, load_components

log = logging.getLogger("completions")


@dataclass
class CompletionsConfig:
    source: str = "stories"  # or "ptb" (paper)
    seed: int = seed_field()
    n_prompts: int = bounded(1000, ge=2)
    prompt_words: int = bounded(4, ge=1)
    max_new_tokens: int = bounded(30, ge=1)
    top_k: int = bounded(50, ge=1)
    validation_fraction: float = bounded(0.3, gt=0, le=0.9)
    n_ctx: int = bounded(64, ge=8)
    components: list[str] = field(default_factory=lambda: ["gpt_neo", "mamba"])
    greedy: str = "mamba"  # the component that completes greedily; the others sample
    threads: int = bounded(2, ge=1)

    def check(self) -> None:
        if self.source not in ("stories", "ptb"):
            raise ConfigError(f"source: 'stories' or 'ptb', got {self.source!r}")
        if self.greedy not in self.components:
            raise ConfigError(f"greedy: {self.greedy!r} is not one of the components; allowed: "
                              f"{', '.join(self.components)}")


def prompts(cfg: CompletionsConfig, stories: Path) -> list[str]:
    if cfg.source == "ptb":
        texts = load_hub_text("ptb", "validation")["text"]
    else:
        corpus = load_dataset_dir(stories, splits=("validation",), columns=("text",),
                                  hint="run `dvc repro generate_stories` first")
        texts = corpus["validation"]["text"]
    # Each prompt once: stories open with a few templates ("A long time ago," starts 100 of 1,000),
    # and a prompt twice would be completed twice alike (greedily), once on each side of the split.
    out = dict.fromkeys(" ".join(t.split()[:cfg.prompt_words]) for t in texts if len(t.split()) >= cfg.prompt_words)
    return list(out)[:cfg.n_prompts]


@torch.no_grad()
def complete_all(model: LanguageModel, tokenizer, texts: list[str], cfg: CompletionsConfig, greedy: bool,
                 seed: int) -> list[str]:
    """Every prompt completed, prompts of one token length batched together: equal lengths need no
    padding, so a batch computes exactly what each prompt alone would (sampling draws from one
    generator per batch, seeded by `seed` and the length)."""
    encoded = [[tokenizer.eos_token_id] + tokenizer.encode(t, add_special_tokens=False) for t in texts]
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(encoded):
        by_length.setdefault(len(ids), []).append(i)
    out = [""] * len(texts)
    for length, rows in sorted(by_length.items()):
        ids = torch.tensor([encoded[i] for i in rows], device=model.embed.weight.device)
        generated = model.generate(ids, max_new_tokens=cfg.max_new_tokens, do_sample=not greedy, top_k=cfg.top_k,
                                   seed=seed + length)
        for i, new in zip(rows, generated[:, length:].tolist()):
            if tokenizer.eos_token_id in new:
                new = new[:new.index(tokenizer.eos_token_id)]
            out[i] = texts[i] + tokenizer.decode(new)
    return out


def split_by_prompt(done: dict[str, list[str]], validation_fraction: float, seed: int) -> dict[str, list[dict]]:
    """Rows `{"text", "slice"}` of train and validation, from each component's completions of the same
    prompts (`done[component][i]` completes prompt i). Split by prompt, so that the components'
    completions of one prompt fall on the same side; each side's rows shuffled."""
    rng = random.Random(seed)
    n = len(next(iter(done.values())))
    order = rng.sample(range(n), n)
    n_val = int(n * validation_fraction)
    splits = {}
    for name, ids in (("train", order[n_val:]), ("validation", order[:n_val])):
        rows = [{"text": done[c][i], "slice": c} for i in ids for c in done]
        rng.shuffle(rows)
        splits[name] = rows
    return splits


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "completions", CompletionsConfig)
    torch.set_num_threads(cfg.threads)
    components = load_components(args.components, cfg.components)
    # On the GPU when there is one: on one CPU thread the paper rehearsal's 256 prompts were not done in 5 min.
    models = {name: model.eval().to(compute_device()) for name, model in zip(cfg.components, components)}
    tokenizers = dict(zip(cfg.components, load_component_tokenizers(args.components, cfg.components)))

    texts = prompts(cfg, args.stories)
    done = {name: complete_all(model, tokenizers[name], texts, cfg, greedy=name == cfg.greedy, seed=cfg.seed)
            for name, model in models.items()}
    splits = split_by_prompt(done, cfg.validation_fraction, cfg.seed)
    text = datasets.DatasetDict({name: datasets.Dataset.from_list(rows) for name, rows in splits.items()})
    tokenizer = tokenizers[cfg.components[0]]  # the hybrid's
    with atomic_dir(args.out) as tmp:
        text.save_to_disk(str(tmp / "text"))
        tokenized = datasets.DatasetDict({split: tokenize_padded(ds.select_columns(["text"]), tokenizer, cfg.n_ctx)
                                          for split, ds in text.items()})
        tokenized.save_to_disk(str(tmp / "tokenized"))
        write_manifest(tmp / "tokenized", stage="completions", params={"profile": profile, **asdict(cfg),
                                                                     "tokenizer": tokenizer_fingerprint(tokenizer)},
                       counts={split: len(ds) for split, ds in tokenized.items()}, seed=cfg.seed)
    samples = {name: [r["text"] for r in splits["train"] if r["slice"] == name][:3] for name in models}
    write_json(args.summary, {"profile": profile, "rows": {s: len(d) for s, d in text.items()}, "samples": samples})
    log.info("wrote %s: %s rows", args.out, {s: len(d) for s, d in text.items()})


if __name__ == "__main__":
    main()
