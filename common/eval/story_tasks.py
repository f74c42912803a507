"""Zero-shot tasks made from the generated story corpus, as lm-evaluation-harness local tasks.

`write_story_tasks(stories, out_dir, n, seed)` writes one JSONL file and one YAML task config per
task, so the harness loads them through its ordinary local-file mechanism (`include_path`):

- `stories_cloze` (LAMBADA-like, `loglikelihood`): the story up to the hero's last mention in its
  final paragraph; the target is the hero's name, which only the earlier context gives away.
  Metrics: accuracy of greedy prediction (`acc`) and perplexity.
- `stories_next_line` (HellaSwag-like, `multiple_choice`): the story's first lines; choose the true
  next line among it and the same-numbered lines of three other stories.
  Metrics: `acc` and length-normalised `acc_norm`.

Chance is 0 for the cloze and 0.25 for the next line.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

from common.io import atomic_dir

CHOICES = 4


def cloze_item(story: dict) -> dict | None:
    text, hero = story["text"], story["hero"]
    last_paragraph = text.rfind("\n") + 1
    at = text.rfind(" " + hero, last_paragraph)
    if at <= 0:
        return None
    return {"context": text[:at], "target": " " + hero}


def next_line_items(stories: list[dict], rng: random.Random) -> list[dict]:
    lines = [s["text"].split("\n") for s in stories]
    items = []
    for i, story_lines in enumerate(lines):
        if len(story_lines) < 3:
            continue
        cut = rng.randrange(1, len(story_lines) - 1)
        truth = story_lines[cut]
        others = [j for j in range(len(lines)) if j != i and len(lines[j]) > cut and lines[j][cut] != truth]
        if len(others) < CHOICES - 1:
            continue
        choices = [truth] + [lines[j][cut] for j in rng.sample(others, CHOICES - 1)]
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


def write_story_tasks(stories: list[dict], out_dir: str | Path, n: int, seed: int) -> list[str]:
    """Write the tasks for up to `n` stories each; returns the task names.

    Each task's YAML names its data file under `out_dir` as given: a relative `out_dir` (the stage's)
    gives paths that the harness resolves from its working directory, the repository root, so the
    written tasks do not depend on where the checkout lives."""
    rng = random.Random(seed)
    pool = list(stories)
    rng.shuffle(pool)
    tasks = {"stories_cloze": ([item for s in pool if (item := cloze_item(s))][:n], "loglikelihood"),
             "stories_next_line": (next_line_items(pool[:4 * n], rng)[:n], "multiple_choice")}
    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        for name, (items, output_type) in tasks.items():
            with open(tmp / f"{name}.jsonl", "w") as handle:
                handle.writelines(json.dumps(item) + "\n" for item in items)
            config = _task_yaml(name, out_dir / f"{name}.jsonl", output_type)
            (tmp / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return list(tasks)
