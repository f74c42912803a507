"""Zero-shot tasks made from the generated story corpus, as lm-evaluation-harness local tasks.

`write_story_tasks(stories, out_dir, n, seed)` writes one JSONL file and one YAML task config per
task, so the harness loads them through its ordinary local-file mechanism (`include_path`):

- `stories_cloze` (LAMBADA-like, `loglikelihood`): the story up to the hero's last mention in its
  final paragraph; the target is the hero's name, which only the earlier context gives away.
  Metrics: accuracy of greedy prediction (`acc`) and perplexity.
- `stories_next_line` (HellaSwag-like, `multiple_choice`): the story's first lines; choose the true
  next line among it and three lines that stand at another position of other stories. A model that
  has learnt how a story runs (an opening, a wish, a mishap, a helper, an ending) can tell them
  apart. Metrics: `acc` and length-normalised `acc_norm`; the lines differ in length, so `acc_norm`
  is the one to read.

Earlier the distractors were the same-numbered lines of other stories. They told apart
only a model that tracks who is in the story, and every model trained at `tiny` scored 0.26-0.30
against chance 0.25, while predicting 78% of the tokens.

Chance (`CHANCE`) is what a guess scores without the skill the task tests: for the cloze, one of
the names of the hero's gender, which the story's pronouns give away; for the next line, one of
the four lines.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from common.data.stories import BOY_NAMES, GIRL_NAMES
from common.io import atomic_dir

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

CHOICES = 4
# The names per gender are equally many; `min` would keep the higher chance if they were not.
CHANCE = {"stories_cloze": 1 / min(len(GIRL_NAMES), len(BOY_NAMES)), "stories_next_line": 1 / CHOICES}
# The metric each task is read by: the next line's choices differ in length.
METRIC = {"stories_cloze": "acc,none", "stories_next_line": "acc_norm,none"}


def cloze_item(story: dict) -> dict | None:
    text, hero = story["text"], story["hero"]
    last_paragraph = text.rfind("\n") + 1
    at = text.rfind(" " + hero, last_paragraph)
    if at <= 0:
        return None
    return {"context": text[:at], "target": " " + hero}


def next_line_items(stories: list[dict], rng: random.Random, fits: Callable[[str], bool]) -> list[dict]:
    """One item per story whose drawn line `fits`, with distractors that fit too."""
    lines = [s["text"].split("\n") for s in stories]
    items = []
    for i, story_lines in enumerate(lines):
        if len(story_lines) < 2 or len(lines) < 2:
            continue
        cut = rng.randrange(1, len(story_lines))
        truth = story_lines[cut]
        if not fits(truth):
            continue
        choices = [truth]
        for _ in range(50 * CHOICES):  # a few draws suffice; the bound only stops a degenerate corpus
            j = rng.randrange(len(lines))
            k = rng.randrange(len(lines[j]))
            if j != i and k != cut and lines[j][k] not in choices and fits(lines[j][k]):
                choices.append(lines[j][k])
            if len(choices) == CHOICES:
                break
        else:
            continue
        rng.shuffle(choices)
        items.append({"context": "\n".join(story_lines[:cut]) + "\n", "choices": choices,
                      "label": choices.index(truth)})
    return items


def _task_yaml(name: str, data_file: Path, output_type: str) -> dict:
    config = {"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data_file)}},
              "test_split": "test", "output_type": output_type, "doc_to_text": "{{context}}"}
    if output_type == "loglikelihood":
        config.update(doc_to_target="{{target}}", target_delimiter="",
                      metric_list=[{"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False},
                                   {"metric": "acc", "aggregation": "mean", "higher_is_better": True}])
    else:
        config.update(doc_to_choice="{{choices}}", doc_to_target="{{label}}", target_delimiter="",
                      metric_list=[{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                                   {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}])
    return config


def write_story_tasks(stories: list[dict], out_dir: str | Path, n: int, seed: int,
                      tokenizer: PreTrainedTokenizerBase | None = None, window: int | None = None) -> list[str]:
    """Write the tasks for up to `n` stories each; returns the task names.

    With `tokenizer` and `window` (the scored models' context length), every continuation (a cloze
    target, a next line or a distractor) fits in the window beside one token of context: lm-eval's
    `hf` model refuses a longer continuation, and no model with that window could score it. At
    `smoke` (64 tokens, a 512-word vocabulary, lines of 85 tokens at the median) it keeps the shorter
    lines; at `tiny` (256 tokens; the longest line 143) every line fits and the tasks are as without it.

    Each task's YAML names its data file under `out_dir` as given: a relative `out_dir` (the stage's)
    gives paths that the harness resolves from its working directory, the repository root, so the
    written tasks do not depend on where the checkout lives."""
    if (tokenizer is None) != (window is None):
        raise ValueError("write_story_tasks: give both tokenizer and window, or neither")

    def fits(text: str) -> bool:
        return window is None or len(tokenizer.encode(text)) < window

    rng = random.Random(seed)
    pool = list(stories)
    rng.shuffle(pool)
    cloze = [item for s in pool if (item := cloze_item(s)) and fits(item["target"])]
    next_line = next_line_items(pool[:4 * n], rng, fits)
    tasks = {"stories_cloze": (cloze[:n], "loglikelihood"), "stories_next_line": (next_line[:n], "multiple_choice")}
    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        for name, (items, output_type) in tasks.items():
            with open(tmp / f"{name}.jsonl", "w") as handle:
                handle.writelines(json.dumps(item) + "\n" for item in items)
            config = _task_yaml(name, out_dir / f"{name}.jsonl", output_type)
            (tmp / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return list(tasks)
