"""docs/pipelines.md's "Do two runs agree?" table: built from compare records as read by hand here,
and current with the committed records."""

from __future__ import annotations

import json

import pytest

from reruns import page


def record() -> dict:
    found = {"identical": 5, "timing": ["a.json", "b.json"], "within": [], "redrawn": [], "absent": [],
             "disagreements": ["results/x.json: 1 differing values outside timing (loss)"],
             "verdicts_moved": [{"paper": "blackmamba", "id": "row", "here": "inconclusive", "other": "not reproduced",
                                 "margin_here": -0.274, "margin_other": 0.18}]}
    return {"label": "fresh clone", "date": "2026-01-01", "here": "abc1234", "other": "abc1234+", "rtol": 0.0,
            "machine": {"cpu": "Test CPU", "cores": 2, "avx512": True},
            "pipelines": {"papers/blackmamba/dvc.yaml": found}}


def test_a_row_per_pipeline_and_each_moved_verdict_with_both_margins():
    text = page.body({"r": record()})
    assert ("| 2026-01-01 | fresh clone | abc1234 / abc1234+ | Test CPU, 2 cores, AVX-512 | "
            "`papers/blackmamba/dvc.yaml` exactly | 5 | 2 | 0 | 1 | 1 |") in text
    assert "- 2026-01-01, `papers/blackmamba/dvc.yaml`: results/x.json: 1 differing values outside timing (loss)" \
        in text
    assert "`row`: inconclusive (margin -0.27) in abc1234, not reproduced (margin +0.18) in abc1234+" in text


def test_only_the_first_disagreements_are_listed_and_the_rest_counted():
    many = record()
    many["pipelines"]["papers/blackmamba/dvc.yaml"]["disagreements"] = [f"data/{i}: only in this checkout"
                                                                        for i in range(page.SHOWN + 3)]
    text = page.body({"r": many})
    assert f"data/{page.SHOWN - 1}: only" in text and f"data/{page.SHOWN}: only" not in text
    assert "`papers/blackmamba/dvc.yaml`: 3 more, in `reruns/records/r.json`" in text


def test_committed_page_is_current_with_the_committed_records():
    text = page.PAGE.read_text()
    assert page.replace_between_markers(text, page.BEGIN, page.END, page.body(page.load_records())) == text, \
        "run `python -m reruns.page`"


def test_a_folder_without_records_or_a_record_of_the_wrong_shape_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(page, "RECORDS", tmp_path)
    with pytest.raises(SystemExit) as stop:
        page.main([])
    assert stop.value.code == 2 and "no records" in capsys.readouterr().err
    (tmp_path / "r.json").write_text(json.dumps({"label": "x"}))
    with pytest.raises(SystemExit) as stop:
        page.main([])
    assert stop.value.code == 2 and "lacks" in capsys.readouterr().err


def test_arguments_are_refused_with_status_2():
    with pytest.raises(SystemExit) as stop:
        page.main(["--all"])
    assert stop.value.code == 2
