"""Real text data sets of the `paper` profile, loaded from the Hugging Face Hub.

Every loader returns a `datasets.Dataset` (or `IterableDataset` when streaming) with one string
column, `text`; all Hub columns are dropped by the normalising `map`. The sources, by name:

- `tinystories`: `roneneldan/TinyStories`. Columns: text. Splits: train, validation.
  text = text.
- `fineweb_edu`: `HuggingFaceFW/fineweb-edu`, config `sample-10BT`. Columns: text, id, dump, url,
  file_path, language, language_score, token_count, score, int_score. The Hub has only `train`;
  as in the masked-mixers work, `validation` is its first `validation_rows` rows (default 50_000)
  and `train` is everything after them, so the two never overlap. text = text.
- `fineweb`: `HuggingFaceFW/fineweb`, config `sample-10BT`, the general text Manticore pretrains
  its projectors on. Columns and splits as `fineweb_edu`. text = text.
- `ptb`: `ptb_text_only`, config `penn_treebank`. Columns: sentence. Splits: train, validation,
  test. text = sentence. (This began as a loading-script set; datasets 5.x needs the Hub's
  script-free copy of it, and says so with a `DataError` if there is none.)
- `alpaca`: `tatsu-lab/alpaca`. Columns: instruction, input, output, text. Split: train.
  text = the template below. The Hub's own `text` column is ignored: it carries the long Stanford
  preamble ("Below is an instruction that describes a task..."), and rendering our own keeps the
  result identical whether or not a local copy has that column::

      ### Instruction:
      {instruction}

      ### Input:            <- these two lines and the blank line after them only when
      {input}                  `input` is non-empty

      ### Response:
      {output}

- `eli5`: the original `eli5` Hub set is defunct (its source, the Pushshift Reddit dump, is
  gone), so we use the maintained copy `sentence-transformers/eli5`. Columns: question, answer.
  Split: train. text = question + "\\n" + answer.
- `mlqa_es`, `mlqa_zh`, `mlqa_vi`: `facebook/mlqa`, configs `mlqa.es.es`, `mlqa.zh.zh`,
  `mlqa.vi.vi` (context and question in the same language), three of Manticore's Figure 3 sets.
  Columns: id, title, context, question, answers (answer_start, text). Our `train` is the Hub's
  `test` split, which the official code fine-tunes on; `validation` is the Hub's. text = the
  official code's prompt, then the first answer::

      Based on given context "{context}" Answer the following question: "{question}"{answer}

  (The official code tokenizes prompt and answer as a pair, which for these BPE tokenizers puts the
  two token sequences back to back; we tokenize the joined string.)
- `xquad_ar`: `google/xquad`, config `xquad.ar`, Figure 3's "XQuAD Ar.". Columns as MLQA's. The
  Hub has only `validation` (1,190 questions); it is our `train`, which a stage splits itself (the
  official code: 80/20). text as MLQA's.
- `openorca_ja`: `atsushi3110/cross-lingual-openorcha-830k-en-ja`, the Japanese OpenOrca that the
  official code reads for Figure 3's "OpenOrca". Columns: id/en, system_prompt/en, question/en,
  response/en, question/ja, response/ja. Split: train. Only rows with an empty system prompt, as
  the official code (which then samples 10,000 of them; a stage here takes the first rows it
  needs). text = question/ja then response/ja, back to back, as MLQA's prompt and answer.

Rehearsal: with `HYBRID_STANDINS` set (`common.standins`), Hub loads read its generated files.

Offline use: pass `data_files=` (parquet, json/jsonl or csv in the same schema as the Hub) and the
very same normalisation runs on local files. Without network, a Hub load fails within seconds
with `HubUnavailable`, pointing at the `tiny` profile, which needs no network.

Long Range Arena's two Hub tasks load with `load_hub_classification`, which returns the columns
`input_ids` (list of ints) and `label` (int) instead of `text`:

- `imdb`: `stanfordnlp/imdb`, config `plain_text`. Columns: text, label (0 neg, 1 pos). Splits:
  train, test (the Hub's `unsupervised` split has no labels and is not offered). Byte-level:
  the text is encoded as ASCII with every non-ASCII character replaced by `?`, byte b becomes
  id b + 1, so id 0 is free for padding: vocabulary 129 (pad + 128 bytes). Truncated to `max_len`
  bytes (default 2048, the length Manticore's LRA copy uses for IMDb).
- `cifar10`: `uoft-cs/cifar10`, config `plain_text`. Columns: img (32x32 RGB image), label (0-9).
  Splits: train, test. Grayscale by PIL's `convert("L")` (ITU-R 601-2 luma,
  L = (299 R + 587 G + 114 B) / 1000), then flattened row by row: 1024 ids, vocabulary 256.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import datasets
import httpx2  # the HTTP client huggingface_hub uses; its transport errors can escape datasets
import pyarrow
from datasets.exceptions import DatasetGenerationError, DatasetNotFoundError
from huggingface_hub import constants as hub_constants
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import get_session

from common.errors import DataError, HubUnavailable
from common.standins import dataset_file

Batch = dict[str, list[Any]]

FINEWEB_VALIDATION_ROWS = 50_000
PROBE_TIMEOUT_S = 5.0
_TRUE = {"1", "ON", "YES", "TRUE"}
_OFFLINE_HINT = "the 'paper' profile needs network access — use profile 'tiny' (generated data, no network): " \
                "dvc exp run -S profile=tiny"


@dataclass(frozen=True)
class HubSource:
    name: str
    path: str                         # Hub repository id
    config: str | None                # Hub config name
    splits: tuple[str, ...]           # splits `load_hub_text` accepts
    to_text: Callable[[Batch], list[str]]  # a batch in the Hub schema -> its `text` values
    description: str
    columns: tuple[str, ...] = ()     # Hub columns `to_text` reads; checked so a wrong file says so
    validation_from_train: bool = False  # the Hub has only `train`: validation = its first N rows
    hub_splits: tuple[tuple[str, str], ...] = ()  # (our split, the Hub's) where the names differ
    keep: Callable[[Batch], list[bool]] | None = None  # rows to keep, before `limit` counts them


def _str(value: Any) -> str:
    # Parquet and csv give None for empty cells; treat them as empty strings.
    return "" if value is None else str(value)


def _same_text(batch: Batch) -> list[str]:
    return [_str(t) for t in batch["text"]]


def _ptb_text(batch: Batch) -> list[str]:
    return [_str(s) for s in batch["sentence"]]


def _alpaca_text(batch: Batch) -> list[str]:
    texts = []
    for instruction, given, output in zip(batch["instruction"], batch["input"], batch["output"]):
        text = f"### Instruction:\n{_str(instruction)}\n\n"
        if _str(given).strip():
            text += f"### Input:\n{_str(given)}\n\n"
        texts.append(text + f"### Response:\n{_str(output)}")
    return texts


def _eli5_text(batch: Batch) -> list[str]:
    return [f"{_str(q)}\n{_str(a)}" for q, a in zip(batch["question"], batch["answer"])]


def _squad_text(batch: Batch) -> list[str]:
    return [f'Based on given context "{_str(c)}" Answer the following question: "{_str(q)}"{_str(a["text"][0])}'
            for c, q, a in zip(batch["context"], batch["question"], batch["answers"])]


def _openorca_text(batch: Batch) -> list[str]:
    return [f"{_str(q)}{_str(r)}" for q, r in zip(batch["question/ja"], batch["response/ja"])]


def _without_system_prompt(batch: Batch) -> list[bool]:
    return [not _str(p) for p in batch["system_prompt/en"]]


def _mlqa(language: str, name: str) -> HubSource:
    return HubSource(f"mlqa_{language}", "facebook/mlqa", f"mlqa.{language}.{language}", ("train", "validation"),
                     _squad_text, f"MLQA questions on {name} Wikipedia paragraphs, with the answer; train = the "
                     f"Hub's test split", columns=("context", "question", "answers"),
                     hub_splits=(("train", "test"),))


HUB_SOURCES: dict[str, HubSource] = {
    source.name: source
    for source in (
        HubSource("tinystories", "roneneldan/TinyStories", None, ("train", "validation"), _same_text,
                  "short stories in simple English written by GPT-3.5/4", columns=("text",)),
        HubSource("fineweb_edu", "HuggingFaceFW/fineweb-edu", "sample-10BT", ("train", "validation"), _same_text,
                  "educational web pages, 10B-token sample; validation = first N rows of train",
                  columns=("text",), validation_from_train=True),
        HubSource("fineweb", "HuggingFaceFW/fineweb", "sample-10BT", ("train", "validation"), _same_text,
                  "web pages, 10B-token sample; validation = first N rows of train",
                  columns=("text",), validation_from_train=True),
        HubSource("ptb", "ptb_text_only", "penn_treebank", ("train", "validation", "test"), _ptb_text,
                  "Penn Treebank sentences, Mikolov's preprocessing (<unk>, N)", columns=("sentence",)),
        HubSource("alpaca", "tatsu-lab/alpaca", None, ("train",), _alpaca_text,
                  "52k instruction/response pairs, rendered with a simple template",
                  columns=("instruction", "input", "output")),
        HubSource("eli5", "sentence-transformers/eli5", None, ("train",), _eli5_text,
                  "Reddit ELI5 questions with answers (maintained copy of the defunct `eli5`)",
                  columns=("question", "answer")),
        _mlqa("es", "Spanish"), _mlqa("zh", "Chinese"), _mlqa("vi", "Vietnamese"),
        HubSource("xquad_ar", "google/xquad", "xquad.ar", ("train",), _squad_text,
                  "XQuAD questions on Arabic Wikipedia paragraphs, with the answer; train = the Hub's validation",
                  columns=("context", "question", "answers"), hub_splits=(("train", "validation"),)),
        HubSource("openorca_ja", "atsushi3110/cross-lingual-openorcha-830k-en-ja", None, ("train",), _openorca_text,
                  "OpenOrca questions and responses in Japanese translation, rows without a system prompt",
                  columns=("system_prompt/en", "question/ja", "response/ja"), keep=_without_system_prompt),
    )
}


@dataclass(frozen=True)
class HubClassificationSource:
    name: str
    path: str
    config: str | None
    splits: tuple[str, ...]
    encode: Callable[[Batch, int], list[list[int]]]  # a batch in the Hub schema, max_len -> ids
    columns: tuple[str, ...]
    vocab_size: int
    num_classes: int
    max_len: int                      # default `max_len` (sequence length for images)
    description: str


def _imdb_bytes(batch: Batch, max_len: int) -> list[list[int]]:
    return [[b + 1 for b in _str(text).encode("ascii", errors="replace")[:max_len]] for text in batch["text"]]


def _cifar_pixels(batch: Batch, max_len: int) -> list[list[int]]:
    return [list(img.convert("L").tobytes())[:max_len] for img in batch["img"]]


HUB_CLASSIFICATION_SOURCES: dict[str, HubClassificationSource] = {
    source.name: source
    for source in (
        HubClassificationSource("imdb", "stanfordnlp/imdb", "plain_text", ("train", "test"), _imdb_bytes,
                                ("text", "label"), vocab_size=129, num_classes=2, max_len=2048,
                                description="movie reviews, sentiment; byte-level (LRA text classification)"),
        HubClassificationSource("cifar10", "uoft-cs/cifar10", "plain_text", ("train", "test"), _cifar_pixels,
                                ("img", "label"), vocab_size=256, num_classes=10, max_len=1024,
                                description="32x32 images as grayscale pixel sequences (LRA image)"),
    )
}


def load_hub_classification(name: str, split: str, *, data_files: str | list[str] | dict | None = None,
                            cache_dir: str | None = None, limit: int | None = None,
                            max_len: int | None = None) -> datasets.Dataset:
    """Split `split` of LRA Hub task `name` as columns `input_ids` (ints in [0, vocab)) and `label`.

    `data_files` and `limit` work as in `load_hub_text`; `max_len` truncates (default: the source's)."""
    source = HUB_CLASSIFICATION_SOURCES.get(name)
    if source is None:
        raise DataError(f"unknown Hub classification source {name!r}; "
                        f"allowed: {', '.join(HUB_CLASSIFICATION_SOURCES)}")
    if split not in source.splits:
        raise DataError(f"{name}: unknown split {split!r}; allowed: {', '.join(source.splits)}")
    if limit is not None and limit < 0:
        raise DataError(f"{name}: limit must be >= 0, got {limit}")
    max_len = source.max_len if max_len is None else max_len
    if max_len < 1:
        raise DataError(f"{name}: max_len must be >= 1, got {max_len}")
    if data_files is None:
        ds = _load_from_hub(source, split, streaming=False, cache_dir=cache_dir)
    else:
        ds = _load_local(source, split, data_files, streaming=False, cache_dir=cache_dir)
    if limit is not None:
        ds = _first_rows(ds, limit)
    missing = [c for c in source.columns if c not in ds.column_names]
    if missing:
        raise DataError(f"{name}: data lacks column(s) {', '.join(missing)} of the Hub schema; "
                        f"it has: {', '.join(ds.column_names)}")
    features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int32")),
                                  "label": datasets.Value("int64")})
    return ds.map(lambda batch: {"input_ids": source.encode(batch, max_len), "label": batch["label"]},
                  batched=True, remove_columns=ds.column_names, features=features)


def load_hub_text(name: str, split: str, *, data_files: str | list[str] | dict | None = None,
                  streaming: bool = False, cache_dir: str | None = None, limit: int | None = None,
                  validation_rows: int = FINEWEB_VALIDATION_ROWS) -> datasets.Dataset | datasets.IterableDataset:
    """Load split `split` of source `name` as a data set with a single `text` column.

    `data_files`: local files in the Hub schema instead of the Hub. A string or list holds the
    rows of the Hub split being read (`train` for sources whose validation is carved out of it);
    a dict maps Hub split names to files. `limit` keeps the first `limit` rows.
    `validation_rows` is N for sources whose validation split is the first N rows of train.
    """
    source = HUB_SOURCES.get(name)
    if source is None:
        raise DataError(f"unknown Hub text source {name!r}; allowed: {', '.join(HUB_SOURCES)}")
    if split not in source.splits:
        raise DataError(f"{name}: unknown split {split!r}; allowed: {', '.join(source.splits)}")
    if limit is not None and limit < 0:
        raise DataError(f"{name}: limit must be >= 0, got {limit}")
    if validation_rows < 0:
        raise DataError(f"{name}: validation_rows must be >= 0, got {validation_rows}")
    hub_split = "train" if source.validation_from_train else dict(source.hub_splits).get(split, split)

    if data_files is None:
        ds = _load_from_hub(source, hub_split, streaming=streaming, cache_dir=cache_dir)
    else:
        ds = _load_local(source, hub_split, data_files, streaming=streaming, cache_dir=cache_dir)

    # Cut rows before normalising, so a small `limit` does not map the whole corpus.
    if source.validation_from_train:
        if isinstance(ds, datasets.Dataset) and len(ds) <= validation_rows:
            # Otherwise train would silently come out empty.
            raise DataError(f"{name}: only {len(ds)} rows, all taken by validation (validation_rows="
                            f"{validation_rows}); pass a smaller validation_rows")
        ds = _first_rows(ds, validation_rows) if split == "validation" else _skip_rows(ds, validation_rows)
    if source.keep is not None:
        _check_columns(source, ds)
        ds = ds.filter(source.keep, batched=True)
    if limit is not None:
        ds = _first_rows(ds, limit)
    return _normalise(source, ds)


def _load_from_hub(source: HubSource | HubClassificationSource, split: str, *, streaming: bool,
                   cache_dir: str | None):
    standin = dataset_file(source.name, split)
    if standin is not None:  # the `paper` rehearsal: generated rows in the Hub's schema
        return _load_local(source, split, standin, streaming=streaming, cache_dir=cache_dir)
    where = source.path + (f" (config {source.config})" if source.config else "")
    # huggingface_hub retries an unreachable Hub with back-off: ~23 s when DNS fails at once, and
    # minutes when packets are silently dropped (60 s timeout per try). So decide up front: if
    # offline mode is requested, or one quick request to the Hub fails, load in offline mode,
    # which answers at once from the local cache (a copy downloaded earlier still works) or fails.
    # A stream reads its files lazily, so a network loss after this point surfaces on iteration.
    cause = _offline_cause() or _probe_hub()
    try:
        with _offline_mode() if cause else contextlib.nullcontext():
            return datasets.load_dataset(source.path, source.config, split=split, streaming=streaming,
                                         cache_dir=cache_dir)
    except DatasetNotFoundError as err:
        raise HubUnavailable(f"cannot load {where} from the Hugging Face Hub (not found or not accessible: "
                             f"{_first_line(err)}); {_OFFLINE_HINT}") from None
    except (ConnectionError, TimeoutError, HfHubHTTPError, httpx2.TransportError) as err:
        raise HubUnavailable(f"cannot load {where} from the Hugging Face Hub (offline or unreachable: "
                             f"{cause or _first_line(err)}); {_OFFLINE_HINT}") from None
    except RuntimeError as err:
        # datasets 5.x runs no loading scripts; a Hub set that never got a parquet copy ends here.
        if "scripts are no longer supported" not in str(err):
            raise
        raise DataError(f"{where}: the Hub copy needs a loading script, which datasets 5.x no longer runs; "
                        f"download its files and pass them as data_files") from None


def _offline_cause() -> str | None:
    """Why offline mode is on, or None. Read at call time: both libraries read it only at import."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().upper() in _TRUE:
            return f"{var}={os.environ[var]}"
    if hub_constants.HF_HUB_OFFLINE or datasets.config.HF_HUB_OFFLINE:
        return "offline mode is on"
    return None


def _probe_hub() -> str | None:
    """One request to the Hub endpoint, no retries; why it failed, or None if the Hub answered.

    It goes through huggingface_hub's own HTTP session, so proxies and certificates are the ones
    the real download would use. Any HTTP status counts as reachable.
    """
    try:
        get_session().head(hub_constants.ENDPOINT, timeout=PROBE_TIMEOUT_S)
    except Exception as err:  # noqa: BLE001 - any failure to connect means "unreachable"
        return f"{hub_constants.ENDPOINT}: {_first_line(err)}"
    return None


@contextlib.contextmanager
def _offline_mode():
    """Run datasets and huggingface_hub as under HF_HUB_OFFLINE=1 for the duration of the block.

    Both read the variable once, at import, into these module constants (checked at each request),
    so setting the environment later has no effect. Not thread-safe; loads are not run in threads.
    """
    saved = hub_constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE
    hub_constants.HF_HUB_OFFLINE = datasets.config.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        hub_constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE = saved


_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}
_COMPRESSION = (".gz", ".bz2", ".xz", ".zst")


def local_files(source: HubSource | HubClassificationSource, split: str, data_files) -> tuple[list[str], str]:
    """The file patterns `data_files` gives for `split` and the `datasets` builder that reads them,
    each pattern checked to match a file of a supported type: a `DataError` naming it otherwise.
    Stages call it while checking their settings, before any slow work."""
    files = data_files if isinstance(data_files, dict) else {split: data_files}
    if split not in files:
        raise DataError(f"{source.name}: data_files has no {split!r} entry; it has: {', '.join(map(str, files))}")
    patterns = [files[split]] if isinstance(files[split], str) else list(files[split])
    if not patterns:
        raise DataError(f"{source.name}: data_files for split {split!r} is empty")
    for pattern in patterns:
        found = glob.glob(pattern) if any(c in pattern for c in "*?[") else os.path.exists(pattern)
        if not found:
            raise DataError(f"{pattern}: local data file for {source.name} not found")
    return patterns, _builder_for(source, patterns)


def _load_local(source: HubSource | HubClassificationSource, split: str, data_files, *, streaming: bool,
                cache_dir: str | None):
    patterns, builder = local_files(source, split, data_files)
    try:
        return datasets.load_dataset(builder, data_files={split: patterns[0] if len(patterns) == 1 else patterns},
                                     split=split, streaming=streaming, cache_dir=cache_dir)
    except (DatasetGenerationError, pyarrow.ArrowException) as err:
        cause = _first_line(err.__cause__ or err)
        raise DataError(f"{', '.join(patterns)}: cannot read as {builder} for {source.name}: {cause}") from None


def _builder_for(source: HubSource | HubClassificationSource, patterns: list[str]) -> str:
    builders = set()
    for pattern in patterns:
        stem = pattern.lower()
        for suffix in _COMPRESSION:
            stem = stem.removesuffix(suffix)
        builder = _BUILDERS.get(os.path.splitext(stem)[1])
        if builder is None:
            raise DataError(f"{pattern}: unsupported file type for {source.name}; use "
                            f"{', '.join(_BUILDERS)} (optionally compressed)")
        builders.add(builder)
    if len(builders) > 1:
        raise DataError(f"{source.name}: data_files mix formats ({', '.join(sorted(builders))}); use one")
    return builders.pop()


def _first_rows(ds, n: int):
    if isinstance(ds, datasets.IterableDataset):
        return ds.take(n)
    return ds.select(range(min(n, len(ds))))


def _skip_rows(ds, n: int):
    if isinstance(ds, datasets.IterableDataset):
        return ds.skip(n)
    return ds.select(range(min(n, len(ds)), len(ds)))


def _check_columns(source: HubSource, ds) -> None:
    columns = ds.column_names  # None for a stream whose schema is not known up front
    if columns is not None:
        missing = [c for c in source.columns if c not in columns]
        if missing:
            raise DataError(f"{source.name}: data lacks column(s) {', '.join(missing)} of the Hub schema; "
                            f"it has: {', '.join(columns)}")


def _normalise(source: HubSource, ds):
    _check_columns(source, ds)
    columns = ds.column_names
    features = datasets.Features({"text": datasets.Value("string")})
    ds = ds.map(lambda batch: {"text": source.to_text(batch)}, batched=True, remove_columns=columns,
                features=features)
    # With an unknown schema nothing could be removed above; keep only `text` now.
    return ds.select_columns(["text"]) if columns is None else ds


def _first_line(err: BaseException, width: int = 150) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= width else text[: width - 1] + "…"
