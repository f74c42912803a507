"""Tokenizer and tokenized layouts, checked against direct encodings; damaged data is refused."""

from __future__ import annotations

import datasets
import pytest
from transformers import AutoTokenizer

from common.data.datamodule import TextDataModule
from common.data.manifest import write_manifest
from common.data.tokenized import load_tokenized, tokenize_packed, tokenize_padded
from common.data.tokenizer import train_tokenizer
from common.errors import DataError

TEXTS = ["Once upon a time, Tom found a red ball.\nHe was happy.", "Mia sat by the river.\n\n\"Hello!\" she said."] * 40


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    train_tokenizer(TEXTS, vocab_size=300).save_pretrained(str(path))
    return AutoTokenizer.from_pretrained(str(path))  # through transformers, as users load it


def test_special_ids_and_exact_round_trip(tokenizer):
    assert tokenizer.convert_ids_to_tokens([0, 1, 2]) == ["<unk>", "<s>", "</s>"]
    special = (tokenizer.unk_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id)
    assert special == (0, 1, 2, 2)
    for text in [*TEXTS[:2], "unseen: zebra 42 ñ\t\n  double  spaces"]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert 0 not in ids  # byte fallback: nothing is ever <unk>, newlines included
        assert tokenizer.decode(ids) == text


def test_padded_layout(tokenizer):
    texts = datasets.Dataset.from_dict({"text": ["Tom ran.", "Mia sat by the river and sang a long song."]})
    rows = tokenize_padded(texts, tokenizer, n_ctx=8)
    for text, row in zip(texts["text"], rows):
        doc = (tokenizer.encode(text, add_special_tokens=False) + [2])[:8]
        assert row["input_ids"] == doc + [2] * (8 - len(doc))
        assert row["attention_mask"] == [1] * len(doc) + [0] * (8 - len(doc))


def test_packed_layout(tokenizer):
    texts = datasets.Dataset.from_dict({"text": TEXTS[:5]})
    stream = [t for text in TEXTS[:5] for t in tokenizer.encode(text, add_special_tokens=False) + [2]]
    rows = tokenize_packed(texts, tokenizer, n_ctx=16)
    assert len(rows) == len(stream) // 16
    assert [t for row in rows["input_ids"] for t in row] == stream[: len(rows) * 16]
    assert all(all(m == 1 for m in row) for row in rows["attention_mask"])


def test_packed_from_a_stream_stops_at_the_token_budget(tokenizer):
    stream = [t for text in TEXTS for t in tokenizer.encode(text, add_special_tokens=False) + [2]]
    rows = tokenize_packed(iter(TEXTS), tokenizer, n_ctx=8, max_tokens=37)
    assert len(rows) == 4, "37 tokens make four whole blocks of 8"
    assert [t for row in rows["input_ids"] for t in row] == stream[:32]
    everything = tokenize_packed(iter(TEXTS), tokenizer, n_ctx=8)
    assert [t for row in everything["input_ids"] for t in row] == stream[: len(stream) // 8 * 8]


def _saved(tmp_path, tokenizer):
    texts = datasets.Dataset.from_dict({"text": TEXTS[:6]})
    data = datasets.DatasetDict({"train": tokenize_padded(texts, tokenizer, 32),
                                 "validation": tokenize_padded(texts, tokenizer, 32)})
    data.save_to_disk(str(tmp_path / "tok"))
    write_manifest(tmp_path / "tok", stage="test", params={}, counts={})
    return tmp_path / "tok"


def test_datamodule_batches(tmp_path, tokenizer):
    dm = TextDataModule(_saved(tmp_path, tokenizer), batch_size=4, seed=3)
    dm.setup()
    first = [b["input_ids"].tolist() for b in dm.train_dataloader()]
    again = [b["input_ids"].tolist() for b in dm.train_dataloader()]
    assert first == again and len(first) == 2  # seeded shuffling: the same order each time
    stored = dm.train_dataloader().dataset
    rows, in_storage = [row for batch in first for row in batch], [list(row["input_ids"]) for row in stored]
    assert sorted(rows) == sorted(in_storage) and rows != in_storage  # every row once, shuffled
    other = TextDataModule(_saved(tmp_path / "other", tokenizer), batch_size=4, seed=4)
    other.setup()
    assert [b["input_ids"].tolist() for b in other.train_dataloader()] != first  # and by the seed
    batch = next(iter(dm.val_dataloader()))
    assert batch["input_ids"].shape == (4, 32)
    assert (batch["labels"] == -100).equal(batch["attention_mask"] == 0)


def test_full_window_refuses_rows_shorter_than_the_window_and_takes_rows_as_long(tmp_path, tokenizer):
    path = _saved(tmp_path, tokenizer)  # rows of 32 tokens
    short = TextDataModule(path, batch_size=4, n_ctx=48, full_window=True)
    with pytest.raises(DataError, match=r"train rows hold 32 tokens, fewer than the model window n_ctx=48"):
        short.setup()
    exact = TextDataModule(path, batch_size=4, n_ctx=32, full_window=True)
    exact.setup()
    assert next(iter(exact.train_dataloader()))["input_ids"].shape == (4, 32)
    # Without full_window a longer n_ctx only cuts nothing: the rows stay as stored.
    loose = TextDataModule(path, batch_size=4, n_ctx=48)
    loose.setup()
    assert next(iter(loose.train_dataloader()))["input_ids"].shape == (4, 32)


def test_corrupted_arrow_file_is_refused(tmp_path, tokenizer):
    path = _saved(tmp_path, tokenizer)
    arrow = next((path / "train").glob("*.arrow"))
    blob = bytearray(arrow.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # one flipped byte in the middle: Arrow alone would not notice
    arrow.write_bytes(bytes(blob))
    with pytest.raises(DataError, match=r"corrupted \(content hash differs from the manifest\); rebuild it"):
        load_tokenized(path)


def test_missing_data_directory(tmp_path):
    with pytest.raises(DataError, match=r"data directory not found; rebuild it with `dvc repro tokenize`"):
        load_tokenized(tmp_path / "nowhere")
