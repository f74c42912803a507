"""A byte-level BPE tokenizer trained on our own corpus, saved so `transformers` can load it.

Special tokens follow the Llama convention the masked-mixer work used: `<unk>`=0, `<s>`=1,
`</s>`=2, and padding reuses `</s>`. The byte-level alphabet means every string, newlines included,
round-trips exactly: the original tokenizer was trained line by line and turned "\\n" into `<unk>`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from common.data.manifest import MANIFEST, verify_manifest
from common.errors import DataError

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
PAD_ID = EOS_ID


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Train byte-level BPE on `texts`; returns a fast tokenizer with the special ids above."""
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be at least {256 + len(SPECIAL_TOKENS)}, got {vocab_size}")
    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """A tokenizer directory; one written by a pipeline stage (it has a manifest) is checked against
    its manifest's hashes first, so an edited or truncated file is named instead of loaded."""
    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        raise DataError(f"{path}: no trained tokenizer here; run `dvc repro train_tokenizer` first")
    if (path / MANIFEST).is_file():
        verify_manifest(path, hint="rerun the stage that wrote it (`dvc repro train_tokenizer` for data/tokenizer)")
    try:
        return AutoTokenizer.from_pretrained(str(path))
    except Exception as err:  # the tokenizers library raises many types for a damaged or foreign file
        raise DataError(f"{path}: unreadable tokenizer ({type(err).__name__}: {str(err)[:200]})") from None


def tokenizer_fingerprint(tokenizer) -> str:
    """A short hash of the token-to-id map: two tokenizers with one fingerprint give the same ids
    the same meaning, so token ids written with one can be read with the other."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha256(json.dumps(vocab).encode()).hexdigest()[:16]
