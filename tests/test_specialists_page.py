"""The sizing tables of docs/manticore/specialists.md: built from the sizing records as computed by
hand here, and current with the committed records."""

from __future__ import annotations

import json

import pytest

from common.errors import DataError
from common.io import load_json
from sizing import specialists_page as page

OWN = {"projector_text": "encyclopedia", "carry_embeddings": False}
MACHINE = {"cpu": "Test CPU", "torch_cpu_capability": "AVX2"}
CURVE = [[100 * (k + 1), loss] for k, loss in enumerate([5.0, 4.0, 3.5, 3.2, 3.0, 2.9, 2.85, 2.8])]


def _sweep(losses: list[float]) -> list[dict]:
    return [{"alpha": alpha, "loss": {"mix": loss, "stories": loss + 1, "instructions": loss - 1}}
            for alpha, loss in zip((0.0, 0.5, 1.0), losses)]


def budgets_record(seed: int, at_0: list[float], at_800: list[float]) -> dict:
    return {"which": "budgets", "seed": seed, "design": OWN, "components": ["gpt_neo", "mamba"], "machine": MACHINE,
            "path": f"budgets_seed{seed}.json",
            "runs": [{"budget": 800, "projector_curve": CURVE, "sweep": _sweep(at_800)},
                     {"budget": 0, "projector_curve": [], "sweep": _sweep(at_0)}]}


def test_budgets_table_means_best_alpha_gain_and_fall_per_seed():
    records = [budgets_record(1, [3.2, 2.9, 2.4], [3.2, 2.2, 2.4]), budgets_record(0, [3.0, 2.8, 2.5], [3.0, 2.0, 2.5])]
    rows = page.budgets_table(records).splitlines()
    assert rows[0].startswith("| projector steps | alpha 0 | 0.5 | 1 | best alpha per seed |")
    # budget 0: a corner is best in both seeds, so no gain; no projector curve, so no fall
    assert rows[2] == "| 0 | 3.100 ± 0.141 | 2.850 ± 0.071 | **2.450 ± 0.071** | 1, 1 | 0.000, 0.000 | -, - |"
    # budget 800: alpha 0.5 best in both; gains 2.5 - 2.0 and 2.4 - 2.2; fall (2.9 - 2.8) / 2.8 from step 600
    assert rows[3] == ("| 800 | 3.100 ± 0.141 | **2.100 ± 0.141** | 2.450 ± 0.071 | 0.5, 0.5 | 0.500, 0.200 | "
                       "3.57%, 3.57% |")


def same_text_record(design: dict) -> dict:
    runs = [{"component": name, "variant": variant, "steps": steps, "loss": {"mix": m, "stories": m + 1,
                                                                           "instructions": m - 1}}
            for (name, variant, steps, m) in [("mamba", "same_compute", [5180, 324], 2.4),
                                              ("gpt_neo", "same_compute", [5542, 346], 2.5),
                                              ("mamba", "same_steps", [1600, 100], 3.4),
                                              ("gpt_neo", "same_steps", [1600, 100], 3.5)]]
    return {"which": "same-text", "seed": 0, "design": design, "components": ["gpt_neo", "mamba"],
            "machine": MACHINE, "path": "same_text_seed0.json", "runs": runs}


def test_same_text_table_takes_corners_and_the_hybrid_from_the_stage_run_of_its_seed():
    stage_run = {"pair": "specialists", "seed": 0, "components": ["gpt_neo", "mamba"],
                 "sweep": [{"alphas": [[1 - a, a]], "loss": {"mix": m, "stories": 0.0, "instructions": 0.0}}
                           for a, m in ((0.0, 3.1), (0.25, 2.6), (0.75, 2.25), (1.0, 2.4))]}
    stage = {"config": OWN, "runs": [dict(stage_run, seed=1), stage_run]}
    record = same_text_record(OWN)
    rows = page.same_text_table(record, page.hybrid_source(record, [record], stage)).splitlines()
    assert rows[2:] == ["| mamba alone | 0 + 100 (the sweep's corner) | 2.400 | 0.000 | 0.000 |",
                        "| gpt_neo alone | 0 + 100 (the sweep's corner) | 3.100 | 0.000 | 0.000 |",
                        "| mamba alone | 1,600 + 100 | 3.400 | 4.400 | 2.400 |",
                        "| gpt_neo alone | 1,600 + 100 | 3.500 | 4.500 | 2.500 |",
                        "| mamba alone, the hybrid's compute | 5,180 + 324 | 2.400 | 3.400 | 1.400 |",
                        "| gpt_neo alone, the hybrid's compute | 5,542 + 346 | 2.500 | 3.500 | 1.500 |",
                        "| the hybrid at alpha 0.75 (the stage) | 1,600 + 100 | 2.250 | 0.000 | 0.000 |"]


def test_another_design_takes_its_hybrid_from_its_budgets_record_without_corners():
    carried = {"projector_text": "genres", "carry_embeddings": True}
    record = same_text_record(carried)
    budgets = budgets_record(0, [3.0, 2.8, 2.5], [3.0, 2.0, 2.5]) | {"design": carried}
    budgets["runs"].append({"budget": 1600, "projector_curve": CURVE, "sweep": _sweep([3.0, 1.5, 2.0])})
    source = page.hybrid_source(record, [record, budgets], {"config": OWN, "runs": []})
    rows = page.same_text_table(record, source).splitlines()
    assert len(rows) == 7 and "corner" not in "".join(rows)
    assert rows[-1] == ("| the hybrid at alpha 0.5 (the `budgets` run at 1,600 projector steps) | 1,600 + 100 | "
                        "1.500 | 2.500 | 0.500 |")


def test_the_page_shows_the_committed_records():
    stage = load_json(page.STAGE_RESULTS, "")
    text = page.PAGE.read_text()
    assert page.tables(text, page.load_records(page.RECORDS), stage) == text, "run `python -m sizing.specialists_page`"
    for which in ("budgets", "same-text"):
        assert page.markers(which, "encyclopedia own-embeddings")[0] in text


def test_a_file_that_is_not_a_record_is_refused(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(DataError, match="not a sizing record"):
        page.load_records(tmp_path)


def test_arguments_are_refused_with_status_2(capsys):
    with pytest.raises(SystemExit) as stop:
        page.main(["--out", "x"])
    assert stop.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


def test_the_caption_names_seeds_records_cpu_and_minutes():
    records = [budgets_record(seed, [3.0, 2.8, 2.5], [3.0, 2.0, 2.5]) for seed in (2, 0)]
    for record in records:
        for run in record["runs"]:
            run["seconds"] = 90.0
    text = page.caption(records, "CMD")
    assert text.startswith("_Seeds 0, 2; `CMD`; sizing/records/budgets_seed0.json, sizing/records/budgets_seed2.json")
    assert "Test CPU (AVX2); 6 minutes of runs" in text and text.endswith("the weight of mamba._")
