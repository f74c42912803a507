"""Stage `summaries`: the one-sentence story summaries that the retrieval stage uses as queries
(the report's Section 4).

- `source: corpus` (smoke, tiny) copies the generated corpus's own ground-truth summaries.
- `source: model` (paper) has an instruction model write them, as the report did with Llama-3 8B
  Instruct (v1 `pc/generate_retrieval.py`), with the official prompt: system message
  "You are an assistant for creating summaries for short stories." and user message
  "Give a brief one-sentence summary of the following story with no other text: {story}".
  The messages go through the tokenizer's chat template (with the assistant's generation prompt);
  decoding is greedy, in batches of left-padded prompts of similar length, and the summary is the
  decoded new tokens, stripped. The report sampled with llama.cpp's default settings instead.

Both take the first `n_train` stories of `train` and the first `n_test` of `validation`, and write
`text`, `summary` (and `story_id` when the corpus has one) as a `DatasetDict` with a manifest.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "stories", "out", "results")

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import datasets

from common.config import bounded
from common.data.manifest import load_dataset_dir, write_manifest
from common.errors import ConfigError, DataError, HubUnavailable, exit_on_user_error
from common.io import atomic_dir, write_json
from common.standins import model_source
from papers.masked_mixers.shared import resolve_device

log = logging.getLogger("mm_summaries")

SYSTEM_PROMPT = "You are an assistant for creating summaries for short stories."
USER_PROMPT = "Give a brief one-sentence summary of the following story with no other text: {story}"
SPLITS = {"train": "n_train", "validation": "n_test"}


@dataclass
class SummariesConfig:
    source: Literal["corpus", "model"] = "corpus"
    model: str | None = None  # a Hub id (paper profile only) or a local directory
    # The first n stories of train and validation; at least the retrieval section's n_train and
    # n_test, which the retrieval stage checks.
    n_train: int = bounded(2000, ge=1)
    n_test: int = bounded(256, ge=1)
    max_new_tokens: int = bounded(96, ge=1)
    batch_size: int = bounded(16, ge=1)
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: Literal["cpu", "cuda", "auto"] = "auto"

    def check(self) -> None:
        if self.source == "model" and not self.model:
            raise ConfigError("model: source 'model' needs a model (a Hub id or a local directory)")


def chat_messages(story: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_PROMPT.format(story=story)}]


def render_prompts(tokenizer, stories: list[str]) -> list[str]:
    return [tokenizer.apply_chat_template(chat_messages(story), tokenize=False, add_generation_prompt=True)
            for story in stories]


def load_instruction_model(name: str, profile: str, dtype: str, device: str):
    """(model, tokenizer) for greedy batched generation: eval mode on `device`, left padding."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = model_source(name)
    local = Path(name).is_dir()
    if not local and profile != "paper":
        raise ConfigError(f"summaries.model: {name!r} is not a local directory; models come from the Hugging Face "
                          "Hub only at profile paper")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local)
        model = AutoModelForCausalLM.from_pretrained(name, local_files_only=local, dtype=getattr(torch, dtype))
    except OSError as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if local:
            raise DataError(f"{name}: cannot load a causal LM and its tokenizer here ({reason})") from None
        hint = "gated models need their licence accepted and a token (HF_TOKEN), or set summaries.model to a local copy"
        raise HubUnavailable(f"cannot load {name} from the Hugging Face Hub ({reason}); {hint}") from None
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"summaries.model: {name}'s tokenizer has no chat template; summaries need an instruction "
                          "(chat) model such as meta-llama/Meta-Llama-3-8B-Instruct")
    tokenizer.padding_side = "left"  # so every row's new tokens start at the same column
    if tokenizer.pad_token is None:  # Llama 3 has none; padded positions are masked out anyway
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device).eval(), tokenizer


def summarize(model, tokenizer, stories: list[str], batch_size: int, max_new_tokens: int) -> list[str]:
    """Greedy summaries of `stories`, in their order. Prompts are batched by token length, which
    keeps padding short, and left-padded by the tokenizer (see `load_instruction_model`)."""
    import torch

    # The chat template writes the special tokens itself (Llama 3's <|begin_of_text|> included).
    ids = tokenizer(render_prompts(tokenizer, stories), add_special_tokens=False)["input_ids"]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    device = next(model.parameters()).device
    summaries: list[str] = [""] * len(ids)
    for start in range(0, len(order), batch_size):
        rows = order[start: start + batch_size]
        batch = tokenizer.pad({"input_ids": [ids[i] for i in rows]}, padding=True, return_tensors="pt").to(device)
        with torch.no_grad():
            out = model.generate(**batch, do_sample=False, max_new_tokens=max_new_tokens,
                                 pad_token_id=tokenizer.pad_token_id)
        new = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        for i, text in zip(rows, new):
            summaries[i] = text.strip()
        if (start // batch_size) % 50 == 0:
            log.info("summarised %d / %d stories", min(start + batch_size, len(order)), len(order))
    return summaries


def first_stories(corpus: datasets.DatasetDict, path: Path, cfg: SummariesConfig) -> dict[str, datasets.Dataset]:
    """The first n stories of each split, with the columns the output keeps."""
    out = {}
    for split, key in SPLITS.items():
        n = getattr(cfg, key)
        if split not in corpus:
            raise DataError(f"{path}: no {split} split; have {', '.join(corpus)}")
        if len(corpus[split]) < n:
            raise DataError(f"{path}: {split} has {len(corpus[split])} stories, fewer than summaries.{key} = {n}")
        keep = [c for c in ("story_id", "text", "summary") if c in corpus[split].column_names]
        out[split] = corpus[split].select(range(n)).select_columns(keep)
    return out


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "summaries", SummariesConfig)
    corpus = load_dataset_dir(args.stories, splits=tuple(SPLITS), columns=("text",),
                              hint="run `dvc repro generate_stories` first")
    splits = first_stories(corpus, args.stories, cfg)
    device = None
    start = time.perf_counter()
    if cfg.source == "corpus":
        if "summary" not in splits["train"].column_names:
            raise DataError(f"{args.stories}: no summary column to copy (TinyStories from the Hub has none); "
                            "set summaries.source: model to have an instruction model write them")
    else:
        device = resolve_device(cfg.device, "summaries.device")
        model, tokenizer = load_instruction_model(cfg.model, profile, cfg.dtype, device)
        for split, ds in splits.items():
            written = summarize(model, tokenizer, list(ds["text"]), cfg.batch_size, cfg.max_new_tokens)
            if "summary" in ds.column_names:
                ds = ds.remove_columns("summary")
            splits[split] = ds.add_column("summary", written)
    seconds = time.perf_counter() - start
    counts = {split: len(ds) for split, ds in splits.items()}
    with atomic_dir(args.out) as tmp:
        datasets.DatasetDict(splits).save_to_disk(str(tmp))
        write_manifest(tmp, stage="summaries", params={"profile": profile, **asdict(cfg)}, counts=counts)
    summaries = [s for ds in splits.values() for s in ds["summary"]]
    shown = splits["validation"].select(range(min(3, counts["validation"])))
    examples = [{"story": row["text"], "summary": row["summary"]} for row in shown]
    write_json(args.results, {
        "profile": profile, "source": cfg.source, "model": cfg.model if cfg.source == "model" else None,
        "device": device, "dtype": cfg.dtype if device else None, "counts": counts, "seconds": round(seconds, 2),
        "empty_summaries": sum(not s for s in summaries),
        "mean_summary_words": round(sum(len(s.split()) for s in summaries) / len(summaries), 2),
        "examples": examples})
    log.info("wrote %s: %s from %s in %.1f s", args.out, counts, cfg.model if device else "the corpus", seconds)


if __name__ == "__main__":
    main()
