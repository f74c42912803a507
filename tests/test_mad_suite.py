"""Stage `mad_suite` at the smoke profile: per-setting scores, the MAD score and the table; bad settings."""

from __future__ import annotations

import json

import pytest

from common.data import mad
from common.stages import mad_suite
from tests.conftest import run_module, smoke_params, write_params

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`


def test_smoke_run_writes_scores_and_table(tmp_path):
    params = write_params(tmp_path / "params.yaml", smoke_params())
    out = run_module("common.stages.mad_suite", "--params", params, "--run-dir", tmp_path / "runs",
                     "--metrics", tmp_path / "mad.json", "--table", tmp_path / "mad.md")
    assert out.returncode == 0, out.stderr[-2000:]
    results = json.loads((tmp_path / "mad.json").read_text())
    assert results["profile"] == "smoke"
    assert set(results["tasks"]) == {"mad_baseline/in-context-recall", "mad_baseline/compression"}
    for r in results["tasks"].values():
        assert 0 <= r["accuracy"] <= 1 and 0 <= r["class_averaged_accuracy"] <= 1 and r["loss"] > 0
        assert r["steps"] == 4 and r["task"]["num_train_examples"] == 64 and r["task"]["seq_len"] == 32
    # Chance: 1/8 for recall values at vocabulary 16 (keys 0-7, values 8-15), 1/15 for compression.
    assert results["tasks"]["mad_baseline/in-context-recall"]["chance"] == pytest.approx(1 / 8)
    assert results["tasks"]["mad_baseline/compression"]["chance"] == pytest.approx(1 / 15)
    accs = [r["accuracy"] for r in results["tasks"].values()]
    assert results["mad_score"] == pytest.approx(sum(accs) / len(accs))
    assert results["tasks"]["mad_baseline/compression"]["scored_positions"] == 32 * 32
    table = (tmp_path / "mad.md").read_text()
    assert "| mad_baseline/compression | 16 | 32 | 64 |" in table and "MAD score" in table


@pytest.mark.parametrize("override, needle", [
    ({"mad_suite.settings": ["mad_baseline/sorting"]}, "settings[0]"),
    ({"mad_suite.settings": ["baseline/compression"]}, "mad_baseline, manticore, manticore_as_run"),
    ({"mad_suite.overrides": {"vocab": 8}}, "overrides.vocab"),
    ({"mad_suite.overrides": {"seq_len": "64"}}, "overrides.seq_len: expected an integer, got str '64'"),
    ({"mad_suite.task_overrides": {"compression": {"seed": -1}}}, "task_overrides.compression.seed: must be >= 0"),
    ({"mad_suite.task_overrides": {"selective-copying": {"num_tokens_to_copy": 40}},
      "mad_suite.settings": ["mad_baseline/selective-copying"]}, "seq_len > 2 * num_tokens_to_copy + 1"),
    ({"mad_suite.task_overrides": {"noisy-in-context-recall": {"vocab_size": 17}},  # 16 of them noise
      "mad_suite.settings": ["mad_baseline/noisy-in-context-recall"]}, "vocabulary too small"),
])
def test_bad_settings_are_one_line_errors(tmp_path, capsys, override, needle):
    params = write_params(tmp_path / "params.yaml", smoke_params(**override))
    with pytest.raises(SystemExit) as exit_info:
        mad_suite.main(["--params", str(params), "--run-dir", str(tmp_path / "runs"),
                        "--metrics", str(tmp_path / "mad.json"), "--table", str(tmp_path / "mad.md")])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: mad_suite.smoke.") and needle in lines[0], lines
    assert not (tmp_path / "mad.json").exists()


def test_every_named_setting_builds():
    cfg = mad_suite.MADSuiteConfig(settings=[f"{s}/{t}" for s in mad.SETTINGS for t in mad.TASKS])
    assert len(cfg.tasks()) == len(mad.SETTINGS) * len(mad.TASKS)
