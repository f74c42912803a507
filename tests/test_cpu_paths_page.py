"""The "Results across CPUs" table of docs/pipelines.md: built from a cpu_paths record as computed
by hand here, and current with the committed record."""

from __future__ import annotations

import pytest

from common.io import load_json
from sizing import cpu_paths_page as page


def record() -> dict:
    steps = range(10, 130, 10)  # 12 logged steps: every second one shown, the last among them
    dense = {"first_step_that_differs": None, "gap_by_step": {str(s): 0.0 for s in steps},
             "final_loss": {"avx2": 3.25, "default": 3.25}}
    moe = {"first_step_that_differs": 30, "gap_by_step": {str(s): (0.0 if s < 30 else s * 1e-5) for s in steps},
           "final_loss": {"avx2": 3.5, "default": 3.5012}}
    return {"steps": 120, "training": {"dense": dense, "moe": moe},
            "routing": {"train_decisions": 1000, "train_decisions_that_differ": 0, "eval_decisions": 1000,
                        "eval_decisions_that_differ": 2, "sinkhorn_iterations": {"avx2": [1], "default": [1, 2]},
                        "eval_margins_below": {"1e-06 x logit scale": 3}, "eval_tokens": 500},
            "machine": {"cpu": "Test CPU", "torch_cpu_capability": "AVX512"}, "commit": "abc1234",
            "date": "2026-01-01", "seconds": 600.0}


def test_table_shows_gaps_at_evenly_spaced_logged_steps_and_final_losses():
    rows = page.training_table(record()).splitlines()
    assert rows[0] == ("| model | first logged step that differs | gap at 20 | gap at 40 | gap at 60 | gap at 80 | "
                       "gap at 100 | gap at 120 | final loss, `avx2` / `default` |")
    assert rows[2] == "| dense | none | 0 | 0 | 0 | 0 | 0 | 0 | 3.25000 / 3.25000 |"
    assert rows[3] == "| moe | 30 | 0 | 4.0e-04 | 6.0e-04 | 8.0e-04 | 1.0e-03 | 1.2e-03 | 3.50000 / 3.50120 |"


def test_routing_sentence_counts_differing_decisions():
    text = page.routing_text(record()["routing"])
    assert "0 of 1,000 training (Sinkhorn) decisions and 2 of 1,000 evaluation (top-1) decisions differ" in text
    assert "`avx2` 1; `default` 1, 2" in text and "3 within 1e-06 x logit scale" in text


def test_committed_page_is_current_with_the_committed_record():
    text = page.PAGE.read_text()
    body = page.body(load_json(page.RECORD, "run `python -m sizing.cpu_paths`"))
    assert page.replace_between_markers(text, page.BEGIN, page.END, body) == text, \
        "run `python -m sizing.cpu_paths_page`"


def test_arguments_are_refused_with_status_2():
    with pytest.raises(SystemExit) as stop:
        page.main(["--steps", "3"])
    assert stop.value.code == 2
