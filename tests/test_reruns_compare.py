"""`python -m reruns.compare`: two checkouts' outputs agree outside timing, and every other
difference is reported."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from safetensors.torch import save_file

from reruns.compare import main


def checkout(root, results: dict, weights: torch.Tensor, table: str):
    (root / "results").mkdir(parents=True)
    (root / "data/run").mkdir(parents=True)
    (root / "results/r.json").write_text(json.dumps(results))
    save_file({"w": weights}, root / "data/run/model.safetensors")
    (root / "results/table.md").write_text(table)
    outs = [{"path": p, "md5": "x"} for p in ("results/r.json", "data/run", "results/table.md")]
    (root / "dvc.lock").write_text(yaml.safe_dump({"stages": {"s": {"outs": outs}}}))
    return root


def run(tmp_path, capsys, other_results, other_weights, other_table="| a |"):
    results = {"loss": 1.5, "elapsed_s": 3.0, "claims": [{"id": "fig5-flat-latency", "ours": 2.0}]}
    here = checkout(tmp_path / "a", results, torch.ones(3), "| a |")
    other = checkout(tmp_path / "b", other_results, other_weights, other_table)
    status = main([str(other), "--here", str(here), "--pipelines", "dvc.yaml"])
    return status, capsys.readouterr().out


def test_timing_fields_and_timing_claims_may_differ(tmp_path, capsys):
    status, out = run(tmp_path, capsys, {"loss": 1.5, "elapsed_s": 9.0, "claims": [{"id": "fig5-flat-latency",
                                                                                    "ours": 7.0}]}, torch.ones(3))
    assert status == 0 and "2 outputs identical, 1 differ only in timing (results/r.json), 0 disagreements" in out


def test_a_result_weights_or_other_file_that_differs_is_a_disagreement(tmp_path, capsys):
    status, out = run(tmp_path, capsys, {"loss": 1.25, "elapsed_s": 3.0,
                                         "claims": [{"id": "fig5-flat-latency", "ours": 2.0}]},
                      torch.tensor([1.0, 1.0, 1.5]), "| b |")
    assert status == 1
    assert "results/r.json: 1 differing values outside timing (loss); largest numeric difference 0.25 at loss" in out
    assert "data/run/model.safetensors: weights differ" in out and "results/table.md: bytes differ" in out


def test_the_largest_numeric_difference_is_named_and_other_kinds_are_not_measured(tmp_path, capsys):
    status, out = run(tmp_path, capsys, {"loss": 1.375, "elapsed_s": 3.0, "seeds": [0.5, "x"], "flag": True,
                                         "claims": [{"id": "fig5-flat-latency", "ours": 2.0}]}, torch.ones(3))
    # loss 1.5 -> 1.375 (0.125); the new leaves exist on one side only, so they have no difference
    assert status == 1 and "largest numeric difference 0.125 at loss" in out


@pytest.mark.parametrize("lock", [{"stages": {"s": None}}, {"stages": {"s": {"outs": [{"md5": "x"}]}}},
                                  {"stages": {"s": {"outs": {"path": "x"}}}}], ids=["null-stage", "no-path", "mapping"])
def test_a_lock_of_the_wrong_shape_is_one_line(lock, tmp_path, capsys):
    here = checkout(tmp_path / "a", {"loss": 1.0}, torch.ones(3), "| a |")
    other = checkout(tmp_path / "b", {"loss": 1.0}, torch.ones(3), "| a |")
    (other / "dvc.lock").write_text(yaml.safe_dump(lock))
    with pytest.raises(SystemExit) as stop:
        main([str(other), "--here", str(here), "--pipelines", "dvc.yaml"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {other / 'dvc.lock'}: not a readable dvc.lock"


def test_weights_of_another_precision_disagree(tmp_path, capsys):
    status, out = run(tmp_path, capsys, {"loss": 1.5, "elapsed_s": 3.0,
                                         "claims": [{"id": "fig5-flat-latency", "ours": 2.0}]},
                      torch.ones(3, dtype=torch.float16))
    assert status == 1 and "data/run/model.safetensors: weights differ" in out


def test_an_output_in_neither_checkout_is_named_and_not_a_disagreement(tmp_path, capsys):
    """Two fresh clones hold no `data/`: what neither has made cannot disagree (it failed them both)."""
    run(tmp_path, capsys, {"loss": 1.5, "elapsed_s": 3.0, "claims": [{"id": "fig5-flat-latency", "ours": 2.0}]},
        torch.ones(3))
    for side in ("a", "b"):
        (tmp_path / side / "results/table.md").unlink()
    status = main([str(tmp_path / "b"), "--here", str(tmp_path / "a"), "--pipelines", "dvc.yaml"])
    out = capsys.readouterr().out
    assert status == 0 and "0 disagreements, 1 in neither checkout, not compared (results/table.md)" in out
    (tmp_path / "b/results/r.json").unlink()
    status = main([str(tmp_path / "b"), "--here", str(tmp_path / "a"), "--pipelines", "dvc.yaml"])
    assert status == 1 and "results/r.json: only in this checkout" in capsys.readouterr().out


def test_under_a_tolerance_close_numbers_agree_and_a_moved_verdict_does_not(tmp_path, capsys):
    """Another CPU's rerun: losses and weights 1% apart agree within 0.02, the table drawn from them
    is redrawn; a verdict that moved is a disagreement at any tolerance, as is a number 5% apart."""
    here = checkout(tmp_path / "a", {"loss": 2.0, "claims": [{"id": "c", "verdict": "reproduced"}]},
                    torch.ones(3), "| 2.00 |")
    other = checkout(tmp_path / "b", {"loss": 2.02, "claims": [{"id": "c", "verdict": "reproduced"}]},
                     torch.tensor([1.0, 1.01, 0.99]), "| 2.02 |")
    args = [str(other), "--here", str(here), "--pipelines", "dvc.yaml"]
    assert main(args) == 1  # exactly: everything differs
    capsys.readouterr()
    assert main([*args, "--rtol", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "0 outputs identical, 0 differ only in timing, 2 agree within rtol (data/run, results/r.json), " \
           "1 hold figures or tables redrawn (results/table.md), 0 disagreements" in out
    assert main([*args, "--rtol", "0.005"]) == 1
    assert "data/run/model.safetensors: weights differ" in capsys.readouterr().out
    (other / "results/r.json").write_text(json.dumps({"loss": 2.1, "claims": [{"id": "c", "verdict": "inconclusive"}]}))
    assert main([*args, "--rtol", "0.02"]) == 1
    out = capsys.readouterr().out
    assert "results/r.json: 2 differing values outside timing beyond rtol 0.02 (claims.0.verdict, loss); " \
           "largest numeric difference 0.1 at loss" in out


@pytest.mark.parametrize("rtol", ["-0.1", "1", "x"])
def test_a_tolerance_outside_zero_to_one_is_one_line(rtol, tmp_path, capsys):
    here = checkout(tmp_path / "a", {"loss": 1.0}, torch.ones(3), "| a |")
    with pytest.raises(SystemExit) as stop:
        main([str(here), "--here", str(here), "--rtol", rtol])
    assert stop.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_record_lists_each_pipelines_findings_and_the_verdicts_that_moved(tmp_path, capsys):
    """A paper's ledger in both checkouts: the row whose verdict differs is named with both margins,
    the row that kept its verdict is not, and the record says what the printed lines say."""
    def ledger(root, verdict, margin):
        (root / "papers/blackmamba/results").mkdir(parents=True)
        rows = [{"id": "moved", "verdict": verdict, "margin": margin},
                {"id": "kept", "verdict": "reproduced", "margin": 2.0}]
        (root / "papers/blackmamba/results/claims.json").write_text(json.dumps({"claims": rows}))
        outs = [{"path": "papers/blackmamba/results/claims.json"}]
        (root / "papers/blackmamba/dvc.lock").write_text(yaml.safe_dump({"stages": {"report": {"outs": outs}}}))

    here = checkout(tmp_path / "a", {"loss": 1.5}, torch.ones(3), "| a |")
    other = checkout(tmp_path / "b", {"loss": 1.5}, torch.ones(3), "| a |")
    ledger(here, "inconclusive", -0.27)
    ledger(other, "not reproduced", 0.18)
    record = tmp_path / "record.json"
    status = main([str(other), "--here", str(here), "--pipelines", "dvc.yaml", "papers/blackmamba/dvc.yaml",
                   "--record", str(record), "--label", "a test"])
    out = capsys.readouterr().out
    assert status == 1
    assert "verdict moved: moved: inconclusive here (margin -0.27), not reproduced in the other (margin 0.18)" in out
    written = json.loads(record.read_text())
    assert written["label"] == "a test" and written["here"] is None and written["rtol"] == 0.0  # not git checkouts
    root = written["pipelines"]["dvc.yaml"]
    assert root["identical"] == 3 and root["disagreements"] == []
    paper = written["pipelines"]["papers/blackmamba/dvc.yaml"]
    assert paper["identical"] == 0 and len(paper["disagreements"]) == 1
    assert paper["verdicts_moved"] == [{"paper": "blackmamba", "id": "moved", "here": "inconclusive",
                                        "other": "not reproduced", "margin_here": -0.27, "margin_other": 0.18}]


@pytest.mark.parametrize("extra", [["--label", "no record"], ["--record", "record.txt"],
                                   ["--record", "no_such_folder/record.json"]], ids=["label-alone", "suffix", "folder"])
def test_a_record_option_that_cannot_be_written_is_one_line(extra, tmp_path, capsys, monkeypatch):
    here = checkout(tmp_path / "a", {"loss": 1.0}, torch.ones(3), "| a |")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main([str(here), "--here", str(here), *extra])
    assert stop.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("record*"))
