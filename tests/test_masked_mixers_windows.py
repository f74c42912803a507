"""The masked mixers' window against the rows they train on, at every profile.

A masked mixer's convolution has one weight per position of its window, so training rows shorter
than the window leave the later positions at their initial values, and retrieval then embeds at a
position no training row reached. The `paper` profile once trained 512-token models on 256-token
packed rows; this reads the real `dvc.yaml` and params files, so such a mismatch fails here.
The other way round, a window longer than every story trains on padding: the `context_length`
stage counts the stories' tokens.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import datasets
import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ("smoke", "tiny", "paper")


def _profile(section: dict, profile: str) -> dict:
    return {**section["base"], **(section.get(profile) or {})}


def _training_stages() -> dict[str, str]:
    """Stage name -> the tokenized layout (`padded`, `packed`) its command trains on."""
    stages = yaml.safe_load((ROOT / "papers/masked_mixers/dvc.yaml").read_text())["stages"]
    found = {name: re.search(r"--data data/tokenized/(\w+)", stage["cmd"]) for name, stage in stages.items()}
    return {name: match.group(1) for name, match in found.items() if match}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_stage_reads_rows_that_hold_the_whole_window(profile):
    root = yaml.safe_load((ROOT / "params.yaml").read_text())
    paper = yaml.safe_load((ROOT / "papers/masked_mixers/params.yaml").read_text())
    n_ctx = _profile(paper["models"], profile)["n_ctx"]
    row_lengths = _profile(root["tokenize"], profile)
    stages = _training_stages()
    assert {"clm", "autoencoders", "bidirectional", "representation", "generation"} <= set(stages)
    short = {name: row_lengths[f"{layout}_n_ctx"] for name, layout in stages.items()
             if row_lengths[f"{layout}_n_ctx"] < n_ctx}
    assert not short, f"{profile}: rows shorter than the models' window n_ctx={n_ctx}: {short}"


def test_story_tokens_counts_each_story_with_its_end_of_text_token(smoke_data):
    from transformers import AutoTokenizer

    from papers.masked_mixers.context_length import story_tokens

    stories = datasets.load_from_disk(str(smoke_data["stories"]))["train"]["text"]
    tokenizer = AutoTokenizer.from_pretrained(str(smoke_data["tokenizer"]))
    row = len(datasets.load_from_disk(str(smoke_data["tokenized"] / "padded"))["train"][0]["input_ids"])
    lengths = [min(len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1, row) for text in stories]
    counted = story_tokens(smoke_data["tokenized"] / "padded")
    assert counted == {"stories": len(stories), "median": pytest.approx(statistics.median(lengths)),
                       "p95": pytest.approx(float(np.percentile(lengths, 95))), "longest": max(lengths),
                       "row_tokens": row}
