"""The Masked Mixers step-count sizing: its runs follow the stage's recipe but for the rate and
steps, its table is worked from the record by hand here, and the page shows the committed record."""

import pytest

from common.config import load_yaml
from sizing import masked_mixers_steps as steps


def test_the_sizing_runs_differ_from_the_stages_recipe_only_where_they_must():
    params = load_yaml(steps.ROOT / "papers" / "masked_mixers" / "params.yaml")
    from common.config import stage_config
    from papers.masked_mixers.train import CompareConfig

    for section, models in steps.SECTIONS.items():
        stage = stage_config(params, section, CompareConfig, "tiny")
        sized = steps.sizing_recipe(params, section)
        assert sized.models == models and sized.seeds == [0] and set(models) <= set(stage.models)
        assert sized.optim.schedule == "constant" and sized.optim.lr == stage.optim.lr
        assert sized.batch_size == stage.batch_size and sized.trainer.max_steps == steps.STEPS
        assert sized.trainer.limit_val_batches == stage.trainer.limit_val_batches


def _model(curve):
    return {"curve": [[step, loss] for step, loss in curve.items()], "train_seconds": 60.0}


def test_the_table_gives_each_pair_its_gap_beside_the_stages_late_movement():
    every = {step: 2.0 for step in steps.SHOWN}
    record = {"commit": "abc1234", "tree_clean": True, "machine": {"cores": 2, "cpu": "AMD EPYC"}, "chance_loss": 5.76,
              "sections": {"clm": {"optim": {"lr": 2e-3, "warmup_steps": 20},
                                   "models": {"mixer_flat": _model(every | {300: 1.79, 600: 1.10}),
                                              "gpt": _model(every | {300: 2.06, 600: 1.17}),
                                              "llama_h4": _model(every | {300: 1.12})}},
                           "autoencoders": {"optim": {"lr": 2e-3, "warmup_steps": 20},
                                            "models": {"mixer_autoencoder": _model(every),
                                                       "transformer_autoencoder": _model(every)}}}}
    clm = {"steps": 600, "models": {name: {"seeds": {"0": {"late_movement": 0.1}, "1": {"late_movement": 0.2}}}
                                    for name in ("mixer_flat", "gpt", "llama_h4")}}
    text = steps.table(record, clm)
    assert "| `mixer_flat` | 2.00 | 2.00 | 1.79 | 1.10 | 2.00 | 2.00 |" in text
    assert "| `mixer_flat` - `gpt` | +0.00 | +0.00 | -0.27 | -0.07 | +0.00 | +0.00 |" in text
    assert "| `mixer_flat` - `llama_h4` | +0.00 | +0.00 | +0.67 | -0.90 | +0.00 | +0.00 |" in text
    assert "`mixer_flat` 0.15; `gpt` 0.15; `llama_h4` 0.15" in text  # the mean of 0.1 and 0.2
    assert "trained 5.0 minutes in all" in text and "chance, the unigram loss, is 5.76" in text


def test_page_without_a_record_says_how_to_make_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(steps, "RECORD", tmp_path / "missing.json")
    with pytest.raises(SystemExit) as exit_info:
        steps.main(["page"])
    assert exit_info.value.code == 2
    assert "python -m sizing.masked_mixers_steps run" in capsys.readouterr().err


def test_the_page_shows_the_committed_record():
    if steps.RECORD.is_file():
        table = steps.table(steps.load_json(steps.RECORD, ""), steps.load_json(steps.CLM_RESULTS, ""))
        assert table in steps.PAGE.read_text(), "run `python -m sizing.masked_mixers_steps page`"
