"""The Masked Mixers learning-rate check: which runs it trains, and the settings it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.config import from_dict
from common.errors import ConfigError
from papers.masked_mixers.lr_check import LRCheckConfig, check_jobs
from papers.masked_mixers.models import ModelsConfig
from papers.masked_mixers.train import CompareConfig


def test_each_model_trains_its_first_seed_at_multiples_of_its_own_rate():
    section = from_dict(CompareConfig, {"seeds": [2, 0, 1], "models": ["mixer_flat", "llama_h4"],
                                        "optim": {"lr": 0.002, "warmup_steps": 3}, "trainer": {"max_steps": 7}},
                        where="clm")
    sizes = from_dict(ModelsConfig, {"archs": {"mixer_flat": {"pattern": "mixer,mlp"},
                                               "llama_h4": {"pattern": "attn,swiglu"}}}, where="models")
    jobs = check_jobs("clm", section, [0.5, 1, 2], sizes, 100, Path("data"), Path("runs"))
    assert [(job["name"], job["optim"].lr) for job in jobs] == [
        ("mixer_flat", 0.001), ("mixer_flat", 0.004), ("llama_h4", 0.001), ("llama_h4", 0.004)]
    assert {job["seed"] for job in jobs} == {2}, "the section's first seed, whose run is the own rate's"
    assert jobs[1]["run_dir"] == Path("runs/clm/mixer_flat/lr0.004")
    assert all(job["optim"].warmup_steps == 3 and job["trainer"].max_steps == 7 for job in jobs), \
        "everything but the rate as the section trains it"
    section.model_lr = {"llama_h4": 0.008}
    jobs = check_jobs("clm", section, [0.5, 1, 2], sizes, 100, Path("data"), Path("runs"))
    assert [(job["name"], job["optim"].lr) for job in jobs][2:] == [("llama_h4", 0.004), ("llama_h4", 0.016)], \
        "a model with a rate of its own is checked around that rate"


@pytest.mark.parametrize("raw, message", [
    ({"sections": ["clm", "norms"]}, r"^c\.sections: norms is not a comparison section; allowed: clm, autoencoders, "
                                     r"bidirectional$"),
    ({"factors": [1, 0.0]}, r"^c\.factors: multiples of a learning rate must be positive; got \[0\.0\]$"),
    ({"factors": [2, 2]}, r"^c\.factors: give"),
])
def test_a_bad_check_is_refused_in_one_line(raw, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(LRCheckConfig, raw, where="c")


def test_a_rate_for_a_model_the_section_does_not_train_is_refused():
    with pytest.raises(ConfigError, match=r"^clm\.model_lr\.gpt: not a model of this section; allowed: mixer_flat, "
                                          r"llama_h4$"):
        from_dict(CompareConfig, {"models": ["mixer_flat", "llama_h4"], "model_lr": {"gpt": 0.004},
                                  "trainer": {"max_steps": 7}}, where="clm")
