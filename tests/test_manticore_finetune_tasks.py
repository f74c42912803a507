"""`finetune_tasks`: Table 1's tasks and Figure 3's sets (MLQA and XQuAD, half Alpaca where the paper
mixes it in), each task's own counts and steps, and the Figure 3 readings on hand-built results."""

from __future__ import annotations

import json

import pytest
import yaml

from common.data.hub import load_hub_text
from common.errors import ConfigError, DataError
from common.stages import stage_config
from papers.manticore.finetune_tasks import FineTuneTasksConfig, TaskSpec, figure3_claims, task_texts
from papers.manticore.report import figure3_tasks
from tests.conftest import ROOT

ENV = "HYBRID_STANDINS"
PROMPT = 'Based on given context "'


def squad_row(i: int) -> dict:
    return {"id": f"q{i}", "title": "T", "context": f"Context {i}. More.", "question": f"Question {i}?",
            "answers": {"answer_start": [0], "text": [f"Answer {i}"]}}


def test_mlqa_text_is_the_official_prompt_then_the_first_answer_and_train_is_the_hubs_test(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(squad_row(i)) + "\n" for i in range(3)))
    texts = load_hub_text("mlqa_es", "train", data_files={"test": str(path)})["text"]
    assert texts == [f'{PROMPT}Context {i}. More." Answer the following question: "Question {i}?"Answer {i}'
                     for i in range(3)]
    with pytest.raises(DataError, match="no 'validation' entry"):
        load_hub_text("mlqa_es", "validation", data_files={"test": str(path)})


def test_openorca_keeps_rows_without_a_system_prompt_before_counting_and_joins_question_and_response(tmp_path):
    rows = [{"id/en": str(i), "system_prompt/en": "Be brief." if i % 2 else "", "question/en": "Q", "response/en": "R",
             "question/ja": f"質問{i}", "response/ja": f"答え{i}"} for i in range(6)]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert load_hub_text("openorca_ja", "train", data_files=str(path), limit=2)["text"] == ["質問0答え0", "質問2答え2"]


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    from rehearsal.standins import write_standins
    root = tmp_path_factory.mktemp("standins")
    write_standins(root, only={"mlqa_es", "xquad_ar", "alpaca"})
    return root


@pytest.mark.pipeline
def test_a_figure3_set_mixed_with_alpaca_holds_half_alpaca_and_no_document_twice(standins, monkeypatch):
    monkeypatch.setenv(ENV, str(standins))
    cfg = FineTuneTasksConfig(tasks={"es": TaskSpec(source="hub", hub="mlqa_es", mix_with="alpaca")},
                              n_train=40, n_validation=10)
    texts = task_texts(cfg.tasks["es"], cfg, stories=None)
    assert len(texts) == 50 and len(set(texts)) == 50
    assert sum(t.startswith("### Instruction:") for t in texts) == 25
    assert sum(t.startswith(PROMPT) for t in texts) == 25
    assert texts == task_texts(cfg.tasks["es"], cfg, stories=None), "the same seed draws the same documents"
    # The validation rows (the last 10) are a mix too, not one source's tail.
    assert 0 < sum(t.startswith(PROMPT) for t in texts[-10:]) < 10


def test_a_set_too_small_for_its_counts_says_so(standins, monkeypatch):
    monkeypatch.setenv(ENV, str(standins))
    cfg = FineTuneTasksConfig(tasks={"ar": TaskSpec(source="hub", hub="xquad_ar")}, n_train=5000, n_validation=10)
    with pytest.raises(DataError, match="xquad_ar: 600 distinct documents, the task needs "
                                        "n_train \\+ n_validation = 5010"):
        task_texts(cfg.tasks["ar"], cfg, stories=None)


def test_the_generated_instructions_task_holds_each_document_once():
    """Short templated instructions repeat ("Give the opposite of the word loud."): drawn as generated,
    11 of 300 validation documents were training documents too (found 2026-11-28)."""
    cfg = FineTuneTasksConfig(tasks={"instructions": TaskSpec(source="instructions")}, n_train=1500, n_validation=300)
    texts = task_texts(cfg.tasks["instructions"], cfg, stories=None)
    assert len(texts) == 1800 and len(set(texts)) == 1800
    assert not set(texts[:1500]) & set(texts[1500:])


def test_a_tasks_own_counts_and_steps_replace_the_stages():
    cfg = FineTuneTasksConfig(tasks={"a": TaskSpec(), "b": TaskSpec(n_train=7, n_validation=3, steps=5)},
                              n_train=100, n_validation=20, search_steps=60, train_steps=50)
    cfg.trainer.val_every_n_steps = 10
    a, b = cfg.for_task("a"), cfg.for_task("b")
    assert (a.n_train, a.n_validation, a.search_steps, a.train_steps) == (100, 20, 60, 50)
    assert (b.n_train, b.n_validation, b.search_steps, b.train_steps) == (7, 3, 5, 5)
    assert (a.trainer.val_every_n_steps, b.trainer.val_every_n_steps) == (10, 5), "validated on the last step"
    cfg.tasks["c"] = TaskSpec(steps=30)
    assert cfg.for_task("c").trainer.val_every_n_steps == 10, "an interval that divides the steps stays"


def test_the_stages_own_steps_are_validated_on_their_last_step():
    # 60 search and 45 retraining steps under an interval of 10: the retraining's last validation
    # would come at step 40, five steps before the weights it should score.
    cfg = FineTuneTasksConfig(tasks={"a": TaskSpec()}, search_steps=60, train_steps=45)
    cfg.trainer.val_every_n_steps = 10
    a = cfg.for_task("a")
    assert (a.search_steps, a.train_steps) == (60, 45)
    assert a.trainer.val_every_n_steps == 15
    assert cfg.trainer.val_every_n_steps == 10, "the stage's own settings are left as they were"


@pytest.mark.parametrize("task, match", [
    (TaskSpec(source="hub", hub="mlqa_fr"), "tasks.t.hub: 'mlqa_fr' is not a Hub text source"),
    (TaskSpec(source="hub", hub="mlqa_es", mix_with="alpacca"), "tasks.t.mix_with: 'alpacca' is not"),
    (TaskSpec(source="stories", mix_with="alpaca"), "`mix_with` and `data_files` go with source 'hub'"),
])
def test_bad_task_settings_are_config_errors(task, match):
    with pytest.raises(ConfigError, match=match):
        FineTuneTasksConfig(tasks={"t": task}).check()


def test_paper_runs_only_the_papers_tasks_and_figure3_only_on_its_sets():
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    paper = stage_config(params, "finetune_tasks", FineTuneTasksConfig, "paper")
    assert {name: task.hub for name, task in paper.tasks.items()} == {
        "ptb": "ptb", "alpaca": "alpaca", "eli5": "eli5", "es_alpaca": "mlqa_es", "zh_alpaca": "mlqa_zh",
        "vi_alpaca": "mlqa_vi", "xquad_ar": "xquad_ar", "openorca_ja": "openorca_ja"}, "no tiny task leaks into paper"
    assert [n for n, t in paper.tasks.items() if t.landscape] == ["es_alpaca", "zh_alpaca", "vi_alpaca", "xquad_ar",
                                                                   "openorca_ja"]
    assert [n for n, t in paper.tasks.items() if t.mix_with == "alpaca"] == ["es_alpaca", "zh_alpaca", "vi_alpaca"]
    tiny = stage_config(params, "finetune_tasks", FineTuneTasksConfig, "tiny")
    assert not any(t.landscape for t in tiny.tasks.values()), "at tiny, Figure 3 is the specialists stage"


def landscape(searched: dict[str, float], sweep_best: float, ensemble: float) -> dict:
    threshold = sweep_best * 1.02
    best = min([sweep_best, *searched.values()])
    return {"summary": {"sweep_best": {"alphas": [[0.5, 0.5]], "val_loss": sweep_best},
                        "search_in_best_region": {k: v <= threshold for k, v in searched.items()},
                        "best_region_threshold": threshold, "ensemble_below_manticore": ensemble > best,
                        "best_manticore_val_loss": best},
            "searched": {k: {"val_loss": v} for k, v in searched.items()}, "ensemble": {"val_loss": ensemble}}


def test_figure3_readings_count_searches_below_the_better_component():
    row = {"a": 2.0, "b": 1.8}
    result = landscape({"darts_simultaneous": 1.7, "dash_simultaneous": 1.85, "gaea_simultaneous": 1.79},
                       sweep_best=1.75, ensemble=2.1)
    claims = figure3_claims(row, result, ["a", "b"])
    assert claims == {"searches_beating_components": ["darts_simultaneous", "gaea_simultaneous"],
                      "search_matches_sweep": True, "manticore_beats_components": True}
    behind = landscape({"darts_simultaneous": 1.9}, sweep_best=1.81, ensemble=1.7)
    assert figure3_claims(row, behind, ["a", "b"]) == {"searches_beating_components": [],
                                                        "search_matches_sweep": False,
                                                        "manticore_beats_components": False}


def test_the_report_tables_figure3_apart_from_table1():
    result = landscape({"darts_simultaneous": 1.7}, sweep_best=1.75, ensemble=2.1)
    result["summary"].update(figure3_claims({"a": 2.0, "b": 1.8}, result, ["a", "b"]))
    res = {"components": ["a", "b"], "tasks": {"xquad_ar": {"a": 2.0, "b": 1.8, "landscape": result},
                                               "ptb": {"a": 1.0, "b": 1.1}}}
    lines = figure3_tasks(res)
    assert "| xquad_ar | 2.0000 | 1.8000 | 2.1000 | 1.7500 (0.50) | 1.7000 | 0.205 / 0.207 / 0.533 / 0.201 |" in lines
    assert not any(line.startswith("| ptb") for line in lines)
    assert any("searches beating both components: darts_simultaneous" in line for line in lines)
    assert figure3_tasks({"components": ["a", "b"], "tasks": {"ptb": {"a": 1.0, "b": 1.1}}}) == []
