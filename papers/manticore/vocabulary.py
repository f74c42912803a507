"""Which token ids a Manticore stage reads, when its components were pretrained with different tokenizers.

The `components` stage saves each component with the tokenizer it was pretrained with
(`<components>/<name>/tokenizer`). A hybrid has one embedding table per component but reads one
sequence of ids, so it reads one tokenizer: its first component's. (The paper picked one tokenizer
and relearned every embedding; taking a component's lets at least that component keep its own.)

- Text a component writes (the completions) is generated with its own tokenizer, then tokenized
  with the hybrid's.
- A component that runs alone over the hybrid's ids (a fine-tuning baseline, an ensemble member, or
  the source of a hybrid's initial embeddings) gets an embedding and head with one row per token
  of the hybrid's tokenizer: a token both vocabularies spell the same way keeps its row, the
  others start fresh. With the same tokenizer this only drops the rows a checkpoint pads its
  vocabulary with (Pythia's embedding has 50,304 rows, more than its tokenizer has tokens).
- Tokenized data records the fingerprint of its tokenizer in its manifest, and a stage checks it
  against the tokenizer it reads with, so ids are never read in another vocabulary's meaning.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch
from transformers import AutoTokenizer

from common.data.tokenizer import tokenizer_fingerprint
from common.errors import ConfigError, DataError
from common.models.lm import LanguageModel, load_language_model

TOKENIZER_DIR = "tokenizer"


def check_component_names(directory: Path, names: list[str]) -> None:
    """Names of components the `components` stage wrote into `directory`: a name it never wrote is
    the config's mistake and says which names there are; a missing directory is a stage not run."""
    if not directory.is_dir():
        raise DataError(f"{directory}: no components; run the components stage first")
    written = sorted(p.name for p in directory.iterdir() if (p / "config.json").is_file())
    if unknown := [n for n in names if n not in written]:
        raise ConfigError(f"components: {', '.join(unknown)}: not a component in {directory} (it has: "
                          f"{', '.join(written) or 'none'}); name one of those, or add it to the components "
                          "stage's models and rerun that stage")


def load_components(directory: Path, names: list[str]) -> list[LanguageModel]:
    """The named components as the `components` stage saved them, each with its own vocabulary, in
    training mode: a hybrid trains them or holds them frozen, and Lightning keeps each module's mode,
    so a component left in eval mode would, for one, route a mixture of experts by argmax in training."""
    check_component_names(directory, names)
    return [load_language_model(directory / n).train() for n in names]


def load_component_tokenizers(directory: Path, names: list[str]) -> list:
    """Each named component's own tokenizer."""
    check_component_names(directory, names)
    tokenizers = []
    for name in names:
        path = directory / name / TOKENIZER_DIR
        if not (path / "tokenizer_config.json").is_file():
            raise DataError(f"{path}: no tokenizer saved with component {name!r}; rerun the components stage")
        try:
            tokenizers.append(AutoTokenizer.from_pretrained(str(path)))
        except Exception as err:  # the tokenizers library raises many types for a damaged file
            raise DataError(f"{path}: unreadable tokenizer of component {name!r} ({type(err).__name__}); "
                            "rerun the components stage") from None
    return tokenizers


def components_for_hybrid(directory: Path, names: list[str]) -> tuple[list[LanguageModel], object]:
    """The components, each reading the hybrid's tokenizer (the first component's), and that tokenizer."""
    tokenizers = load_component_tokenizers(directory, names)
    components = [adapt_to_tokenizer(model, own, tokenizers[0])
                  for model, own in zip(load_components(directory, names), tokenizers)]
    return components, tokenizers[0]


def adapt_to_tokenizer(model: LanguageModel, own, target) -> LanguageModel:
    """`model` (pretrained with tokenizer `own`) reading `target`'s ids: `model` itself when the two
    tokenizers agree and the vocabulary is not padded, else a copy whose embedding (and untied head)
    has `len(target)` rows, each the row of the same token in `own` where `own` has it."""
    same = tokenizer_fingerprint(own) == tokenizer_fingerprint(target)
    if same and model.cfg.vocab_size == len(target):
        return model
    own_ids = own.get_vocab()
    pairs = [(new, own_ids[token]) for token, new in target.get_vocab().items()
             if token in own_ids and own_ids[token] < model.cfg.vocab_size and new < len(target)]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the fresh rows are the same in every run, and the caller's generator is untouched
        adapted = LanguageModel(replace(model.cfg, vocab_size=len(target)))
    body = {k: v for k, v in model.state_dict().items() if k not in ("embed.weight", "head.weight")}
    missing, unexpected = adapted.load_state_dict(body, strict=False)
    assert not unexpected and set(missing) <= {"embed.weight", "head.weight"}, (missing, unexpected)
    new = torch.tensor([n for n, _ in pairs], dtype=torch.long)
    old = torch.tensor([o for _, o in pairs], dtype=torch.long)
    with torch.no_grad():
        adapted.embed.weight[new] = model.embed.weight[old]
        if not model.cfg.tie_embeddings:
            adapted.head.weight[new] = model.head.weight[old]
    return adapted.train(model.training)


def tokenized_with(path: Path) -> str | None:
    """The tokenizer fingerprint a tokenized data set's manifest records (None if it records none)."""
    manifest = path / "manifest.json"
    if not manifest.is_file():
        raise DataError(f"{path}: no manifest.json; rebuild it with its stage")
    return json.loads(manifest.read_text())["params"].get("tokenizer")


def check_tokenized_with(path: Path, tokenizer, reader: str) -> None:
    """Refuse data whose ids come from another tokenizer than the one `reader` reads with."""
    recorded, expected = tokenized_with(path), tokenizer_fingerprint(tokenizer)
    if recorded != expected:
        raise ConfigError(f"{path}: tokenized with tokenizer {recorded}, but {reader} reads with {expected}; "
                          "the stage that wrote it must use the same first component")
