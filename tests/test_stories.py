"""Tests for the synthetic story generator in common/data/stories.py."""

import collections
import re
import statistics
import time

import pytest

from common.data.stories import STORY_FIELDS, generate_stories, iter_stories

SENTENCE_END = re.compile(r"[.!?]")


@pytest.fixture(scope="module")
def stories():
    return generate_stories(2000, seed=7)


def _records(columns):
    return [dict(zip(columns, row)) for row in zip(*columns.values())]


def test_columns_and_types(stories):
    assert tuple(stories) == STORY_FIELDS
    assert all(len(col) == 2000 for col in stories.values())
    assert stories["story_id"] == list(range(2000))
    for field in STORY_FIELDS:
        if field != "story_id":
            assert all(isinstance(v, str) and v for v in stories[field]), field


def test_deterministic_across_calls(stories):
    assert generate_stories(2000, seed=7) == stories
    assert generate_stories(50, seed=8)["text"] != stories["text"][:50]


def test_prefix_and_start_offset(stories):
    assert generate_stories(100, seed=7) == {k: v[:100] for k, v in stories.items()}
    middle = generate_stories(300, seed=7, start=1200)
    assert middle == {k: v[1200:1500] for k, v in stories.items()}
    assert list(iter_stories(300, seed=7, start=1200)) == _records(middle)


def test_story_shape(stories):
    for text in stories["text"]:
        assert "\n" in text
        assert len(SENTENCE_END.findall(text)) >= 3
        assert "{" not in text and "}" not in text  # no unfilled template slot


def test_lengths_vary(stories):
    words = [len(t.split()) for t in stories["text"]]
    assert statistics.pstdev(words) > 25
    assert min(words) < max(words) / 2
    assert 50 <= min(words) and max(words) <= 400


def test_summary_is_one_sentence_naming_the_plot(stories):
    for rec in _records(stories):
        summary = rec["summary"]
        assert "\n" not in summary
        assert summary.endswith(".") and len(SENTENCE_END.findall(summary)) == 1, summary
        assert summary[0].isupper()
        for field in ("hero", "place", "object", "helper"):
            assert rec[field] in summary, (field, summary)
        # the text tells the same plot
        for field in ("hero", "place", "object", "helper"):
            assert rec[field] in rec["text"], (field, rec["text"])


def test_names_are_shared(stories):
    heroes = collections.Counter(stories["hero"])
    assert heroes.most_common(1)[0][1] > 20
    assert len(heroes) < 100
    assert all(h != helper for h, helper in zip(stories["hero"], stories["helper"]))


def test_retrieval_from_summary_is_not_trivial(stories):
    # A summary's hero name alone must match many stories ...
    heroes = collections.Counter(stories["hero"])
    shared = sum(heroes[h] >= 10 for h in stories["hero"])
    assert shared > 0.9 * len(stories["hero"])
    # ... while whole summaries still (almost always) tell stories apart.
    assert len(set(stories["summary"])) > 0.99 * len(stories["summary"])
    assert len(set(stories["text"])) == len(stories["text"])


def test_plot_fields_vary(stories):
    for field, at_least in (("place", 30), ("object", 50), ("obstacle", 50),
                            ("ending", 5), ("hero_kind", 20), ("helper_kind", 20)):
        assert len(set(stories[field])) >= at_least, field


def test_vocabulary_size():
    data = generate_stories(5000, seed=0)
    words = set()
    for text in data["text"]:
        words.update(re.findall(r"[a-z']+", text.lower()))
    assert len(words) > 1000


def test_speed():
    t0 = time.perf_counter()
    generate_stories(20_000, seed=3)
    assert time.perf_counter() - t0 < 12.0


def test_empty_and_negative():
    empty = generate_stories(0, seed=1)
    assert tuple(empty) == STORY_FIELDS and all(col == [] for col in empty.values())
    assert list(iter_stories(0, seed=1)) == []
    with pytest.raises(ValueError):
        generate_stories(-1, seed=1)
    with pytest.raises(ValueError):
        iter_stories(-1, seed=1)
