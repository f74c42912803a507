"""Stage times read from `dvc repro`'s output: each stage from its "Running stage" line to the next
stage's, kept stages without a time; and the page table written from a record."""

from common import stage_times


def test_each_stage_runs_from_its_line_to_the_next_stage():
    lines = [(10.0, "Running stage 'generate_stories':"), (11.0, "wrote data/stories"),
             (12.5, "Updating lock file 'dvc.lock'"),
             (13.0, "Stage 'train_tokenizer' didn't change, skipping"),
             (14.0, "Running stage 'papers/blackmamba/dvc.yaml:train_compare':"), (90.0, "log line"),
             (100.0, "Running stage 'papers/blackmamba/dvc.yaml:report':")]
    stages = stage_times.stage_times(lines, finished=104.5)
    assert stages == [{"stage": "generate_stories", "ran": True, "seconds": 3.0},
                      {"stage": "train_tokenizer", "ran": False, "seconds": None},
                      {"stage": "papers/blackmamba/dvc.yaml:train_compare", "ran": True, "seconds": 86.0},
                      {"stage": "papers/blackmamba/dvc.yaml:report", "ran": True, "seconds": 4.5}]


def test_the_table_names_the_machine_and_marks_kept_stages():
    record = {"pipeline": "blackmamba", "command": "dvc repro papers/blackmamba/dvc.yaml", "profile": "tiny",
              "commit": "abc1234", "tree_clean": True, "date": "2026-11-29",
              "machine": {"cpu": "AMD EPYC", "cores": 2, "avx512": False, "torch_cpu_capability": "AVX2"},
              "every_stage_ran": False, "total_seconds": 3723.0,
              "stages": [{"stage": "tokenize", "ran": True, "seconds": 26.2},
                         {"stage": "papers/blackmamba/dvc.yaml:table1", "ran": False, "seconds": None},
                         {"stage": "papers/blackmamba/dvc.yaml:train_compare", "ran": True, "seconds": 3000.0}]}
    text = stage_times.table(record)
    assert "2 cores of an AMD EPYC without AVX-512" in text and "commit abc1234:" in text
    assert "| `tokenize` (root) | 26 s |" in text
    assert "| `table1` | kept, not run |" in text
    assert "| `train_compare` | 50.0 min |" in text and "| the pipeline | 62.0 min |" in text


def test_render_refuses_a_pipeline_without_a_record(tmp_path, monkeypatch, capsys):
    import pytest

    monkeypatch.setattr(stage_times, "RECORDS", tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        stage_times.main(["render", "--pipelines", "blackmamba"])
    assert exit_info.value.code == 2
    assert "no record of blackmamba's stage times" in capsys.readouterr().err
