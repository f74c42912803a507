"""Tests for the synthetic instruction generator and the genre mixer in papers/manticore/instructions.py.

The answers of the computed kinds are re-derived here with plain Python from the instruction and
input text alone, so a bug in a generator's bookkeeping cannot hide behind the same bookkeeping.
"""

import collections
import math
import re
import statistics

import pytest

from common.data import hub
from common.data.stories import generate_stories
from papers.manticore.instructions import (
    COLORS,
    INSTRUCTION_FIELDS,
    KIND_NAMES,
    OPPOSITES,
    PLURALS,
    generate_instructions,
    iter_instructions,
    mix_genres,
)

N = 800
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
SMALL_NUMBERS = {"the day": 1, "two days": 2, "three days": 3}
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


@pytest.fixture(scope="module")
def docs():
    return generate_instructions(N, seed=3)


def _records(columns):
    return [dict(zip(columns, row)) for row in zip(*columns.values())]


def _of_kind(docs, kind):
    found = [r for r in _records(docs) if r["kind"] == kind]
    assert found, kind
    return found


def _ints(text):
    return [int(x) for x in re.findall(r"\d+", text)]


def _items(given):
    return given.split("\n") if "\n" in given else given.split(", ")


# -----------------------------------------------------------------------------
# shape and determinism


def test_columns_and_types(docs):
    assert tuple(docs) == INSTRUCTION_FIELDS
    assert all(len(col) == N for col in docs.values())
    assert docs["doc_id"] == list(range(N))
    for field in ("text", "instruction", "output", "kind"):
        assert all(isinstance(v, str) and v for v in docs[field]), field
    assert all(isinstance(v, str) for v in docs["input"])
    assert set(docs["kind"]) <= set(KIND_NAMES)


def test_deterministic_across_calls(docs):
    assert generate_instructions(N, seed=3) == docs
    assert generate_instructions(50, seed=4)["text"] != docs["text"][:50]


def test_prefix_and_start_offset(docs):
    assert generate_instructions(100, seed=3) == {k: v[:100] for k, v in docs.items()}
    middle = generate_instructions(200, seed=3, start=450)
    assert middle == {k: v[450:650] for k, v in docs.items()}
    assert list(iter_instructions(200, seed=3, start=450)) == _records(middle)
    with pytest.raises(ValueError, match="n must be >= 0"):
        generate_instructions(-1, seed=3)


def test_every_kind_appears(docs):
    counts = collections.Counter(docs["kind"][:400])
    assert set(counts) == set(KIND_NAMES)
    assert min(counts.values()) >= 4


def test_alpaca_template_is_exactly_hubs(docs):
    # The very function that renders the real Alpaca rows in the `paper` profile.
    assert hub._alpaca_text({k: docs[k] for k in ("instruction", "input", "output")}) == docs["text"]
    for rec in _records(docs):
        expected = f"### Instruction:\n{rec['instruction']}\n\n"
        if rec["input"]:
            expected += f"### Input:\n{rec['input']}\n\n"
        assert rec["text"] == expected + f"### Response:\n{rec['output']}"
        assert ("### Input:" in rec["text"]) == bool(rec["input"])
        for field in ("instruction", "input", "output"):
            # a blank line or a '###' inside a field would make the layout ambiguous
            assert "\n\n" not in rec[field] and "###" not in rec[field]
            assert rec[field] == rec[field].strip()
        assert "{" not in rec["text"] and "}" not in rec["text"]  # no unfilled template slot


def test_inputs_present_for_some_kinds_only(docs):
    with_input = collections.Counter(k for k, g in zip(docs["kind"], docs["input"]) if g)
    for kind in ("sort_words", "reverse_list", "count_items", "uppercase", "count_words"):
        assert with_input[kind] == docs["kind"].count(kind), kind
    for kind in ("word_add", "tips", "note", "describe_place"):
        assert with_input[kind] == 0, kind


def test_lengths_vary(docs):
    words = [len(t.split()) for t in docs["text"]]
    assert 8 <= min(words) and max(words) <= 130
    assert 20 <= statistics.median(words) <= 60
    assert statistics.pstdev(words) > 8


def test_vocabulary_mostly_from_the_stories(docs):
    # So that a tokenizer trained on the stories covers most of this genre too.
    vocab = set(re.findall(r"[a-z]+", " ".join(generate_stories(1000, seed=0)["text"]).lower()))
    words = re.findall(r"[a-z]+", " ".join(docs["text"]).lower())
    assert sum(w in vocab for w in words) / len(words) > 0.6


# -----------------------------------------------------------------------------
# responses of the computed kinds, re-derived


@pytest.mark.parametrize("kind, op", [("add", lambda a, b: a + b), ("subtract", lambda a, b: a - b),
                                      ("multiply", lambda a, b: a * b), ("word_add", lambda a, b: a + b),
                                      ("word_subtract", lambda a, b: a - b)])
def test_arithmetic(docs, kind, op):
    for rec in _of_kind(docs, kind):
        numbers = _ints(rec["instruction"] + " " + rec["input"])
        assert len(numbers) == 2, rec["text"]
        if re.search(r"(Take|Subtract) \d+ (away )?from \d+", rec["instruction"]):
            numbers.reverse()  # "take b away from a" names the smaller number first
        answer = op(*numbers)
        assert answer >= 0
        assert _ints(rec["output"])[-1] == answer, rec["text"]  # the stated answer is the last number


def test_sum_list(docs):
    for rec in _of_kind(docs, "sum_list"):
        assert _ints(rec["output"])[-1] == sum(_ints(rec["input"])), rec["text"]


def test_count_items_words_letters(docs):
    for rec in _of_kind(docs, "count_items"):
        assert _ints(rec["output"])[-1] == len(_items(rec["input"])), rec["text"]
    for rec in _of_kind(docs, "count_words"):
        assert _ints(rec["output"])[-1] == len(rec["input"].split()), rec["text"]
    for rec in _of_kind(docs, "count_letters"):
        word = re.search(r'"([a-z]+)"', rec["instruction"]).group(1)
        assert _ints(rec["output"])[-1] == len(word), rec["text"]


def test_largest_and_smallest(docs):
    for kind, fn in (("largest_number", max), ("smallest_number", min)):
        for rec in _of_kind(docs, kind):
            assert _ints(rec["output"])[-1] == fn(_ints(rec["input"])), rec["text"]


def test_sort_and_reverse(docs):
    for kind, order in (("sort_words", sorted), ("reverse_list", lambda xs: xs[::-1])):
        for rec in _of_kind(docs, kind):
            sep = "\n" if "\n" in rec["input"] else ", "
            items = rec["input"].split(sep)
            assert len(set(items)) == len(items)
            assert rec["output"].endswith(sep.join(order(items))), rec["text"]
            if order(items) != items:
                assert rec["input"] not in rec["output"]


def test_first_and_last_item(docs):
    for kind, pick in (("first_item", 0), ("last_item", -1)):
        for rec in _of_kind(docs, kind):
            items = _items(rec["input"])
            named = {w for w in items if re.search(rf"\b{w}\b", rec["output"])}
            assert named == {items[pick]}, rec["text"]


def test_uppercase(docs):
    for rec in _of_kind(docs, "uppercase"):
        assert rec["output"] == rec["input"].upper()
        assert rec["output"] != rec["input"]


def test_days_and_months(docs):
    for rec in _of_kind(docs, "next_day"):
        text = rec["instruction"]
        start = DAYS.index(re.findall("|".join(DAYS), text)[-1])
        if text.startswith(("List", "Write all")) or " List " in text or " Write all " in text:
            assert rec["output"] == ", ".join(DAYS[start:] + DAYS[:start]) + "."
            continue
        m = re.search(r"(the day|two days|three days) (after|before)", text)
        if m:
            step = SMALL_NUMBERS[m.group(1)] * (1 if m.group(2) == "after" else -1)
        else:  # "What day comes after X?" / "Which day of the week follows X?"
            step = 1
        target = DAYS[(start + step) % 7]
        # the target is the one day the answer names besides the one asked about
        assert set(re.findall("|".join(DAYS), rec["output"])) - {DAYS[start]} == {target}, rec["text"]
    for rec in _of_kind(docs, "next_month"):
        text = rec["instruction"]
        named = [MONTHS.index(m) for m in re.findall("|".join(MONTHS), text)]
        if "List the months" in text:
            first, last = named
            assert rec["output"] == ", ".join(MONTHS[first:last + 1]) + "."
            continue
        step = -1 if "before" in text else 1
        assert re.findall("|".join(MONTHS), rec["output"])[-1] == MONTHS[(named[0] + step) % 12], rec["text"]


def test_batch_lookups_answer_each_item_in_order(docs):
    tables = {"opposite": OPPOSITES, "plural": PLURALS, "color_of": COLORS}
    batches = 0
    for kind, table in tables.items():
        for rec in _of_kind(docs, kind):
            if not rec["input"]:
                continue
            batches += 1
            keys = _items(rec["input"])
            assert rec["output"].split("\n") == [f"{k}: {table[k]}" for k in keys], rec["text"]
    assert batches >= 10
    assert all(OPPOSITES[OPPOSITES[w]] == w for w in OPPOSITES)


def test_tips_count_matches_the_request(docs):
    for rec in _of_kind(docs, "tips"):
        asked = NUMBER_WORDS[re.search(r"\b(two|three|four|five|six) tips", rec["instruction"]).group(1)]
        numbered = [line for line in rec["output"].split("\n") if re.match(r"\d+\. ", line)]
        assert [int(line.split(".")[0]) for line in numbered] == list(range(1, asked + 1)), rec["text"]
        assert len(set(numbered)) == asked


def test_sentence_rewrites(docs):
    for rec in _of_kind(docs, "make_question"):
        assert rec["input"].endswith(".") and rec["output"].endswith("?")
    for rec in _of_kind(docs, "make_plural"):
        assert rec["output"] != rec["input"]
        assert re.search(r"\b(are|were)\b", rec["output"]) and not re.search(r"\b(is|was)\b", rec["output"])


# -----------------------------------------------------------------------------
# mix_genres


def _pools(na=30, nb=20):
    return [f"story {i}" for i in range(na)], [f"instruction {i}" for i in range(nb)]


@pytest.mark.parametrize("n, fraction, n_b", [(10, 0.5, 5), (20, 0.25, 5), (7, 0.3, 2), (10, 0.0, 0),
                                              (20, 1.0, 20), (0, 0.5, 0)])
def test_mix_counts(n, fraction, n_b):
    a, b = _pools()
    mixed = mix_genres(a, b, fraction, n, seed=0)
    assert len(mixed) == n
    assert sum(doc in b for doc in mixed) == n_b == round(n * fraction)
    assert sum(doc in a for doc in mixed) == n - n_b
    assert len(set(mixed)) == n


def test_mix_is_deterministic_and_shuffled():
    a, b = _pools(200, 200)
    mixed = mix_genres(a, b, 0.5, 100, seed=1)
    assert mix_genres(a, b, 0.5, 100, seed=1) == mixed
    assert mix_genres(a, b, 0.5, 100, seed=2) != mixed
    genres = [doc in b for doc in mixed]
    assert genres != sorted(genres) and genres != sorted(genres, reverse=True)  # interleaved


def test_mix_never_repeats_a_document():
    a = ["x", "x", "y", "shared", "z"]
    b = ["shared", "p", "p", "q"]
    mixed = mix_genres(a, b, 0.4, 5, seed=0)  # needs 3 of a's 4 distinct and 2 of b's 2 not in a
    assert len(set(mixed)) == 5
    assert sorted(d for d in mixed if d in ("p", "q")) == ["p", "q"]


def test_mix_stories_with_instructions():
    stories = generate_stories(40, seed=0)["text"]
    instructions = generate_instructions(40, seed=0)["text"]
    mixed = mix_genres(stories, instructions, 0.5, 60, seed=0)
    assert sum(doc.startswith("### Instruction:\n") for doc in mixed) == 30


@pytest.mark.parametrize("fraction", [-0.1, 1.5, math.nan])
def test_mix_rejects_bad_fraction(fraction):
    a, b = _pools()
    with pytest.raises(ValueError, match=r"^fraction_b must be in \[0, 1\], got") as err:
        mix_genres(a, b, fraction, 10, seed=0)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("n, fraction, pool, has, need", [(10, 0.8, "b", 3, 8), (10, 0.2, "a", 5, 8)])
def test_mix_rejects_small_pools(n, fraction, pool, has, need):
    a, b = _pools(5, 3)
    message = rf"^pool {pool} has {has} distinct documents, .* needs {need} from it$"
    with pytest.raises(ValueError, match=message) as err:
        mix_genres(a, b, fraction, n, seed=0)
    assert "\n" not in str(err.value)


def test_mix_counts_duplicates_once():
    with pytest.raises(ValueError, match="pool a has 1 distinct documents"):
        mix_genres(["same"] * 5, ["b1", "b2"], 0.0, 2, seed=0)
    with pytest.raises(ValueError, match="n must be >= 0"):
        mix_genres(["a"], ["b"], 0.5, -1, seed=0)


def test_instruction_text_validation_is_distinct_and_unseen_in_its_training_split():
    from papers.manticore.instructions import InstructionTextConfig, pretraining_documents

    cfg = InstructionTextConfig(seed=0, start=1_000_000, n_train=3_000, n_validation=300)
    docs = pretraining_documents(cfg)
    train = set(docs["train"])
    assert docs["train"] == generate_instructions(3_000, 0, 1_000_000)["text"], "train: the generator's ids as they are"
    # The failure this guards against: the next ids as generated repeat training documents.
    assert set(generate_instructions(300, 0, 1_003_000)["text"]) & train
    assert len(docs["validation"]) == len(set(docs["validation"])) == 300
    assert not set(docs["validation"]) & train
