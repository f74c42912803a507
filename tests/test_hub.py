"""Hub text loaders: normalisation on local files in each Hub schema, and fast offline failures.

Nothing here touches the network: sources are exercised through `data_files`, and the Hub paths
run in offline mode or against an endpoint that refuses connections at once.
"""

from __future__ import annotations

import functools
import json
import shutil
import socket
import time
from pathlib import Path

import datasets
import numpy as np
import pytest
from huggingface_hub import constants as hub_constants
from PIL import Image

from common.data import hub
from common.data.hub import HUB_SOURCES, load_hub_text
from common.errors import DataError, HubUnavailable

FAST_S = 30.0  # the brief's bound for an offline failure


@pytest.fixture
def load(tmp_path):
    """`load_hub_text` with a private cache, so tests leave nothing in the user's HF cache."""
    return functools.partial(load_hub_text, cache_dir=str(tmp_path / "cache"))


def write(path: Path, rows: dict[str, list]) -> str:
    """Write `rows` (column -> values) to `path` in the format its extension names."""
    if path.suffix == ".parquet":
        datasets.Dataset.from_dict(rows).to_parquet(path)
    elif path.suffix == ".csv":
        datasets.Dataset.from_dict(rows).to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        records = [dict(zip(rows, values)) for values in zip(*rows.values())]
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    else:
        raise ValueError(path)
    return str(path)


def fineweb_rows(n: int) -> dict[str, list]:
    return {
        "text": [f"page {i}" for i in range(n)],
        "id": [f"<urn:uuid:{i}>" for i in range(n)],
        "dump": ["CC-MAIN-2024-10"] * n,
        "url": [f"https://example.org/{i}" for i in range(n)],
        "file_path": ["s3://commoncrawl/x.warc.gz"] * n,
        "language": ["en"] * n,
        "language_score": [0.9] * n,
        "token_count": [2] * n,
        "score": [3.1] * n,
        "int_score": [3] * n,
    }


def assert_one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert message and "\n" not in message
    return message


def test_registry_names_and_fields():
    assert set(HUB_SOURCES) == {"tinystories", "fineweb_edu", "fineweb", "ptb", "alpaca", "eli5", "mlqa_es",
                                "mlqa_zh", "mlqa_vi", "xquad_ar", "openorca_ja"}
    for name, source in HUB_SOURCES.items():
        assert source.name == name and source.path and source.splits and source.description
    assert (HUB_SOURCES["fineweb_edu"].path, HUB_SOURCES["fineweb_edu"].config) == \
        ("HuggingFaceFW/fineweb-edu", "sample-10BT")
    assert (HUB_SOURCES["fineweb"].path, HUB_SOURCES["fineweb"].config) == ("HuggingFaceFW/fineweb", "sample-10BT")
    assert (HUB_SOURCES["ptb"].path, HUB_SOURCES["ptb"].config) == ("ptb_text_only", "penn_treebank")
    # Figure 3's sets, as the official code loads them
    assert [(HUB_SOURCES[f"mlqa_{x}"].path, HUB_SOURCES[f"mlqa_{x}"].config) for x in ("es", "zh", "vi")] == \
        [("facebook/mlqa", "mlqa.es.es"), ("facebook/mlqa", "mlqa.zh.zh"), ("facebook/mlqa", "mlqa.vi.vi")]
    assert (HUB_SOURCES["xquad_ar"].path, HUB_SOURCES["xquad_ar"].config) == ("google/xquad", "xquad.ar")


# --- every source, from local files in its Hub schema -------------------------------------------

def test_tinystories_both_splits(load, tmp_path):
    files = {
        "train": write(tmp_path / "train.parquet", {"text": ["Once upon a time, a cat.", "Tom ran.\nHe fell."]}),
        "validation": write(tmp_path / "val.parquet", {"text": ["Lily saw a bird."]}),
    }
    train = load("tinystories", "train", data_files=files)
    assert isinstance(train, datasets.Dataset)
    assert train.column_names == ["text"]
    assert train["text"] == ["Once upon a time, a cat.", "Tom ran.\nHe fell."]
    assert load("tinystories", "validation", data_files=files)["text"] == ["Lily saw a bird."]


def test_fineweb_edu_drops_metadata(load, tmp_path):
    path = write(tmp_path / "fw.parquet", fineweb_rows(5))
    val = load("fineweb_edu", "validation", data_files=path, validation_rows=2)
    assert val.column_names == ["text"]
    assert val["text"] == ["page 0", "page 1"]


def test_ptb_sentence_becomes_text(load, tmp_path):
    path = write(tmp_path / "ptb.jsonl", {"sentence": [" aer banknote berlitz", "pierre <unk> N years old"]})
    ds = load("ptb", "test", data_files=path)
    assert ds.column_names == ["text"]
    assert ds["text"] == [" aer banknote berlitz", "pierre <unk> N years old"]


def test_alpaca_template_with_and_without_input(load, tmp_path):
    path = write(tmp_path / "alpaca.parquet", {
        "instruction": ["Give a tip for staying healthy.", "Translate to French."],
        "input": ["", "Hello"],
        "output": ["Eat well.", "Bonjour"],
        # The Hub's own rendering, which the loader ignores in favour of its template.
        "text": ["Below is an instruction that describes a task. ...", "Below is an instruction ..."],
    })
    ds = load("alpaca", "train", data_files=path)
    assert ds.column_names == ["text"]
    assert ds["text"] == [
        "### Instruction:\nGive a tip for staying healthy.\n\n### Response:\nEat well.",
        "### Instruction:\nTranslate to French.\n\n### Input:\nHello\n\n### Response:\nBonjour",
    ]


def test_alpaca_without_text_column_renders_the_same(load, tmp_path):
    path = write(tmp_path / "alpaca.jsonl", {"instruction": ["Say hi."], "input": [""], "output": ["Hi."]})
    assert load("alpaca", "train", data_files=path)["text"] == [
        "### Instruction:\nSay hi.\n\n### Response:\nHi."]


def test_eli5_question_newline_answer(load, tmp_path):
    path = write(tmp_path / "eli5.csv", {
        "question": ["Why is the sky blue?", "How do magnets work, really?"],
        "answer": ["Rayleigh scattering.", "Electrons spin,\nsort of."],
    })
    ds = load("eli5", "train", data_files=path)
    assert ds.column_names == ["text"]
    assert ds["text"] == ["Why is the sky blue?\nRayleigh scattering.",
                          "How do magnets work, really?\nElectrons spin,\nsort of."]


def test_streaming_gives_the_same_text(load, tmp_path):
    path = write(tmp_path / "eli5.parquet", {"question": ["Q1", "Q2"], "answer": ["A1", "A2"]})
    ds = load("eli5", "train", data_files=path, streaming=True)
    assert isinstance(ds, datasets.IterableDataset)
    assert list(ds) == [{"text": "Q1\nA1"}, {"text": "Q2\nA2"}]


# --- fineweb_edu: validation = first N rows of the Hub's train ----------------------------------

@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("name", ["fineweb_edu", "fineweb"])
def test_fineweb_validation_and_train_are_disjoint_and_cover_the_file(load, tmp_path, streaming, name):
    path = write(tmp_path / "fw.parquet", fineweb_rows(10))
    val = list(r["text"] for r in load(name, "validation", data_files=path, streaming=streaming, validation_rows=3))
    train = list(r["text"] for r in load(name, "train", data_files=path, streaming=streaming, validation_rows=3))
    assert val == ["page 0", "page 1", "page 2"]
    assert train == [f"page {i}" for i in range(3, 10)]
    assert not set(val) & set(train)
    assert sorted(val + train) == sorted(f"page {i}" for i in range(10))


def test_fineweb_default_holdout_is_50k_and_refuses_to_empty_train(load, tmp_path):
    path = write(tmp_path / "fw.parquet", fineweb_rows(10))
    with pytest.raises(DataError) as err:
        load("fineweb_edu", "train", data_files=path)
    assert "50000" in assert_one_line(err)


# --- limit ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("streaming", [False, True])
def test_limit_keeps_the_first_rows(load, tmp_path, streaming):
    path = write(tmp_path / "ts.parquet", {"text": [f"story {i}" for i in range(6)]})
    ds = load("tinystories", "train", data_files=path, streaming=streaming, limit=2)
    assert [r["text"] for r in ds] == ["story 0", "story 1"]


def test_limit_applies_after_the_fineweb_holdout(load, tmp_path):
    path = write(tmp_path / "fw.parquet", fineweb_rows(10))
    ds = load("fineweb_edu", "train", data_files=path, validation_rows=4, limit=2)
    assert ds["text"] == ["page 4", "page 5"]


# --- user errors -----------------------------------------------------------------------------------

def test_unknown_name_lists_sources(load):
    with pytest.raises(DataError) as err:
        load("wikitext", "train")
    message = assert_one_line(err)
    assert "wikitext" in message and all(name in message for name in HUB_SOURCES)


def test_unknown_split_lists_splits(load):
    with pytest.raises(DataError) as err:
        load("ptb", "dev")
    message = assert_one_line(err)
    assert "'dev'" in message and "train, validation, test" in message


def test_missing_local_file_is_named(load, tmp_path):
    missing = str(tmp_path / "nope.parquet")
    with pytest.raises(DataError) as err:
        load("tinystories", "train", data_files=missing)
    assert missing in assert_one_line(err)


def test_glob_matching_nothing_is_named(load, tmp_path):
    pattern = str(tmp_path / "*.parquet")
    with pytest.raises(DataError) as err:
        load("tinystories", "train", data_files=[pattern])
    assert pattern in assert_one_line(err)


def test_wrong_schema_names_missing_columns(load, tmp_path):
    path = write(tmp_path / "ptb.parquet", {"text": ["not a sentence column"]})
    with pytest.raises(DataError) as err:
        load("ptb", "train", data_files=path)
    assert "sentence" in assert_one_line(err)


def test_unsupported_extension(load, tmp_path):
    path = tmp_path / "stories.txt"
    path.write_text("hello\n")
    with pytest.raises(DataError) as err:
        load("tinystories", "train", data_files=str(path))
    assert str(path) in assert_one_line(err)


def test_corrupt_local_file_is_a_data_error(load, tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"this is not parquet")
    with pytest.raises(DataError) as err:
        load("tinystories", "train", data_files=str(path))
    assert str(path) in assert_one_line(err)


# --- the Hub, unreachable ------------------------------------------------------------------------

def assert_fast_hub_unavailable(cache_dir: Path, streaming: bool = False, within_s: float = FAST_S) -> str:
    start = time.monotonic()
    with pytest.raises(HubUnavailable) as err:
        load_hub_text("tinystories", "train", cache_dir=str(cache_dir), streaming=streaming)
    elapsed = time.monotonic() - start
    assert elapsed < within_s, f"offline failure took {elapsed:.1f} s"
    message = assert_one_line(err)
    assert "roneneldan/TinyStories" in message and "profile 'tiny'" in message
    return message


@pytest.mark.parametrize("streaming", [False, True])
def test_offline_env_fails_fast_with_hint(tmp_path, monkeypatch, streaming):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    before = hub_constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE
    message = assert_fast_hub_unavailable(tmp_path / "cache", streaming)
    assert "HF_HUB_OFFLINE" in message
    # Offline mode was forced for the call only: the libraries' switches are back as they were.
    assert (hub_constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE) == before


def test_config_is_named_in_the_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable) as err:
        load_hub_text("fineweb_edu", "validation", cache_dir=str(tmp_path))
    assert "HuggingFaceFW/fineweb-edu (config sample-10BT)" in assert_one_line(err)


def clear_offline_env(monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    # In case the test process itself was started offline: the libraries read these at import.
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)


def test_refused_connection_fails_fast_without_offline_env(tmp_path, monkeypatch):
    # Port 9 on localhost refuses at once, so this runs the same whether or not there is network.
    # 10 s, not 30: without the probe in `hub.py`, huggingface_hub's retries take ~23 s here.
    clear_offline_env(monkeypatch)
    monkeypatch.setattr(hub_constants, "ENDPOINT", "http://127.0.0.1:9")
    message = assert_fast_hub_unavailable(tmp_path / "cache", within_s=10.0)
    assert "127.0.0.1:9" in message


def hub_reachable() -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
        return True
    except OSError:
        return False


def test_no_network_fails_fast_without_offline_env(tmp_path, monkeypatch):
    # The real case on a machine without network. Without the up-front probe in `hub.py`,
    # huggingface_hub's retries took ~23 s here (DNS fails at once) and far longer where packets
    # are dropped. Skipped with network, where it would download TinyStories.
    if hub_reachable():
        pytest.skip("the Hub is reachable; this test is for machines without network")
    clear_offline_env(monkeypatch)
    assert_fast_hub_unavailable(tmp_path / "cache")


def test_offline_still_loads_a_copy_cached_earlier(tmp_path, monkeypatch):
    # Users who downloaded once can run offline. Fake the cache layout datasets 5.x writes for a
    # Hub data set (<namespace>___<name>/<config>/<version>/<hash>/<name>-<split>.arrow) from a
    # local build, then load the Hub name in offline mode.
    parquet = write(tmp_path / "ts.parquet", {"text": ["cached story"]})
    built = datasets.load_dataset("parquet", data_files={"train": parquet}, split="train",
                                  cache_dir=str(tmp_path / "build"))
    source_dir = Path(built.cache_files[0]["filename"]).parent
    target = tmp_path / "cache" / "roneneldan___tiny_stories" / "default" / "0.0.0" / "0123abcd"
    shutil.copytree(source_dir, target)
    (target / "parquet-train.arrow").rename(target / "tiny_stories-train.arrow")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = load_hub_text("tinystories", "train", cache_dir=str(tmp_path / "cache"))
    assert ds["text"] == ["cached story"]


def test_probe_is_skipped_in_offline_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "_probe_hub", lambda: pytest.fail("probed the Hub in offline mode"))
    with pytest.raises(HubUnavailable):
        load_hub_text("ptb", "train", cache_dir=str(tmp_path))


def test_script_only_hub_copy_is_a_one_line_data_error(tmp_path, monkeypatch):
    # What datasets 5.x raises for a Hub set that only has a loading script (ptb began as one).
    def script_only(*args, **kwargs):
        raise RuntimeError("Dataset scripts are no longer supported, but found ptb_text_only.py")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets, "load_dataset", script_only)
    with pytest.raises(DataError) as err:
        load_hub_text("ptb", "train", cache_dir=str(tmp_path))
    message = assert_one_line(err)
    assert "ptb_text_only (config penn_treebank)" in message and "data_files" in message


# --- LRA classification sources: byte-level IMDb and grayscale CIFAR-10 ---------------------------

IMDB_FEATURES = datasets.Features({"text": datasets.Value("string"),
                                   "label": datasets.ClassLabel(names=["neg", "pos"])})
CIFAR_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
CIFAR_FEATURES = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=CIFAR_NAMES)})


def write_imdb(path: Path, texts: list[str], labels: list[int]) -> str:
    datasets.Dataset.from_dict({"text": texts, "label": labels}, features=IMDB_FEATURES).to_parquet(path)
    return str(path)


def write_cifar(path: Path, pixels, labels: list[int]) -> str:
    images = [Image.fromarray(p) for p in pixels]
    datasets.Dataset.from_dict({"img": images, "label": labels}, features=CIFAR_FEATURES).to_parquet(path)
    return str(path)


def test_classification_registry():
    assert set(hub.HUB_CLASSIFICATION_SOURCES) == {"imdb", "cifar10"}
    imdb, cifar = hub.HUB_CLASSIFICATION_SOURCES["imdb"], hub.HUB_CLASSIFICATION_SOURCES["cifar10"]
    assert (imdb.path, imdb.vocab_size, imdb.num_classes) == ("stanfordnlp/imdb", 129, 2)
    assert (cifar.path, cifar.vocab_size, cifar.num_classes, cifar.max_len) == ("uoft-cs/cifar10", 256, 10, 1024)


def test_imdb_is_bytes_shifted_by_one(tmp_path):
    texts = ["Great film!<br />10/10", "Café crème: meh \U0001F610", ""]
    path = write_imdb(tmp_path / "imdb.parquet", texts, [1, 0, 0])
    ds = hub.load_hub_classification("imdb", "test", data_files={"test": path}, cache_dir=str(tmp_path / "c"))
    assert ds.column_names == ["input_ids", "label"] and ds["label"] == [1, 0, 0]
    # Independent: ASCII code + 1 per character; any non-ASCII character becomes '?' (63 + 1).
    expected = [[ord(c) + 1 if ord(c) < 128 else ord("?") + 1 for c in t] for t in texts]
    assert ds["input_ids"] == expected
    assert all(0 < i < 129 for row in ds["input_ids"] for i in row)
    short = hub.load_hub_classification("imdb", "test", data_files={"test": path}, max_len=5, limit=1,
                                        cache_dir=str(tmp_path / "c"))
    assert short["input_ids"] == [expected[0][:5]]


def test_cifar_is_grayscale_pixels_row_by_row(tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    path = write_cifar(tmp_path / "cifar.parquet", pixels, [3, 9, 0])
    ds = hub.load_hub_classification("cifar10", "train", data_files=path, cache_dir=str(tmp_path / "c"))
    assert ds["label"] == [3, 9, 0]
    ids = np.asarray(ds["input_ids"])
    assert ids.shape == (3, 1024)
    # ITU-R 601-2 luma in floating point; PIL's fixed-point rounding may differ by one level.
    luma = pixels.astype(float) @ np.array([0.299, 0.587, 0.114])
    assert np.abs(ids - luma.reshape(3, 1024)).max() <= 1.0
    assert ids[0, 33] == pytest.approx(luma[0, 1, 1], abs=1)  # row-major: index 33 = row 1, column 1


def test_classification_wrong_schema_and_bad_split(tmp_path):
    path = write(tmp_path / "plain.parquet", {"text": ["no label column"]})
    with pytest.raises(DataError) as err:
        hub.load_hub_classification("imdb", "train", data_files=path, cache_dir=str(tmp_path / "c"))
    assert "label" in assert_one_line(err)
    with pytest.raises(DataError) as err:
        hub.load_hub_classification("imdb", "unsupervised")
    assert "train, test" in assert_one_line(err)
    with pytest.raises(DataError) as err:
        hub.load_hub_classification("mnist", "train")
    assert "imdb, cifar10" in assert_one_line(err)


@pytest.mark.parametrize("name, where", [("imdb", "stanfordnlp/imdb"), ("cifar10", "uoft-cs/cifar10")])
def test_classification_offline_fails_fast_in_one_line(tmp_path, monkeypatch, name, where):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(HubUnavailable) as err:
        hub.load_hub_classification(name, "train", cache_dir=str(tmp_path))
    assert time.monotonic() - start < FAST_S
    message = assert_one_line(err)
    assert where in message and "profile 'tiny'" in message
