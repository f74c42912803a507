"""The generated zero-shot tasks: items checked against the stories they come from."""

from __future__ import annotations

import json
import random

from common.data.stories import BOY_NAMES, GIRL_NAMES, generate_stories
from common.eval.story_tasks import CHANCE, CHOICES, next_line_items, write_story_tasks


def stories(n: int = 120) -> list[dict]:
    columns = generate_stories(n, seed=0)
    return [dict(zip(columns, row)) for row in zip(*columns.values())]


def everything(text: str) -> bool:
    return True


class Words:
    """A tokenizer of one token per word: the window check against a count computed by hand."""

    def encode(self, text: str) -> list[str]:
        return text.split()


def test_next_line_distractors_stand_elsewhere_in_other_stories():
    pool = stories()
    lines = [s["text"].split("\n") for s in pool]
    items = next_line_items(pool, random.Random(0), fits=everything)
    assert len(items) == len(pool)  # every story has at least two lines
    for item in items:
        source = next(i for i, s in enumerate(pool) if s["text"].startswith(item["context"]))
        cut = item["context"].count("\n")
        truth = item["choices"][item["label"]]
        assert lines[source][cut] == truth
        assert len(set(item["choices"])) == CHOICES
        for choice in item["choices"]:
            if choice != truth:
                assert any(j != source and k != cut and line == choice
                           for j, story in enumerate(lines) for k, line in enumerate(story))


def test_truth_positions_cover_the_whole_story_after_its_first_line():
    items = next_line_items(stories(), random.Random(0), fits=everything)
    cuts = {item["context"].count("\n") for item in items}
    assert min(cuts) == 1 and max(cuts) >= 4


def test_cloze_chance_is_one_name_of_the_heros_gender():
    assert len(GIRL_NAMES) == len(BOY_NAMES) == len(set(GIRL_NAMES)) == 25
    assert CHANCE == {"stories_cloze": 1 / 25, "stories_next_line": 1 / CHOICES}


def test_cloze_target_is_the_hero_named_earlier(tmp_path):
    pool = stories(40)
    write_story_tasks(pool, tmp_path / "tasks", n=40, seed=0)
    items = [json.loads(line) for line in (tmp_path / "tasks" / "stories_cloze.jsonl").read_text().splitlines()]
    assert items
    for item in items:
        story = next(s for s in pool if s["text"].startswith(item["context"] + item["target"]))
        assert item["target"] == " " + story["hero"] and story["hero"] in item["context"]


def test_every_continuation_fits_the_window_and_a_window_no_line_reaches_changes_nothing(tmp_path):
    pool = stories()
    longest = max(len(line.split()) for s in pool for line in s["text"].split("\n"))
    window = 34  # the median line's words: about half the lines are left out
    assert longest >= window  # the check has lines to leave out
    write_story_tasks(pool, tmp_path / "fitted", n=20, seed=0, tokenizer=Words(), window=window)
    for name, key in (("stories_next_line", "choices"), ("stories_cloze", "target")):
        items = [json.loads(line) for line in (tmp_path / "fitted" / f"{name}.jsonl").read_text().splitlines()]
        assert len(items) == 20
        for item in items:
            texts = item[key] if key == "choices" else [item[key]]
            assert all(len(text.split()) < window for text in texts), item

    write_story_tasks(pool, tmp_path / "plain", n=20, seed=0)
    write_story_tasks(pool, tmp_path / "wide", n=20, seed=0, tokenizer=Words(), window=longest + 1)
    for name in ("stories_next_line.jsonl", "stories_cloze.jsonl"):
        assert (tmp_path / "wide" / name).read_text() == (tmp_path / "plain" / name).read_text()
