"""The claims pages (the front page's counts, docs/claims.md's rows) agree with the committed ledgers."""

from __future__ import annotations

import json

import pytest

from common.claims.ledger import claim_entry
from common.claims.page import BEGIN, END, PAGES, counts, every_claim, load_ledgers, main, render
from tests.conftest import ROOT


def test_committed_pages_match_the_committed_ledgers():
    ledgers = load_ledgers(ROOT)
    for name, table in PAGES.items():
        text = (ROOT / name).read_text()
        assert render(text, table, ledgers) == text, f"{name}: run `python -m common.claims.page`"


def _ledger():
    return [
        claim_entry(id="a", paper="p", claim="A beats B", where="Table 1", metric="loss", profile="tiny",
                    verdict="reproduced", why="w", arms={"A": [1, 2, 3], "B": [2, 3, 4]},
                    difference=[1.0, 1.1, 0.9], chance=5.0),
        claim_entry(id="b", paper="p", claim="C at chance", where="Figure 2", metric="acc", profile="tiny",
                    verdict="inconclusive", why="w", arms={"C": [0.1, 0.1, 0.12]}, chance=0.1),
        claim_entry(id="c", paper="p", claim="big", where="Table 3", metric="acc", profile="tiny", trained=False,
                    verdict="needs paper scale", why="w", evidence="e"),
    ]


def test_the_page_counts_verdicts_and_lists_every_claim():
    ledgers = {"manticore": None, "blackmamba": _ledger(), "masked_mixers": None}
    rows = counts(ledgers).splitlines() + every_claim(ledgers).splitlines()
    assert "| BlackMamba | 1 | 0 | 0 | 1 | 1 | 3 |" in rows
    assert "| Manticore | - | - | - | - | - | no ledger yet |" in rows
    # The margin: the interval 1 +- t(0.975, 2) * 0.1 / sqrt(3) = [0.752, 1.248] lies 0.752 / 0.248 =
    # 3.03 half-widths from zero.
    assert "| BlackMamba | `a`: A beats B (Table 1) | reproduced | 1 ± 0.1 (difference) | +3.03 | 3 |" in rows
    assert "| BlackMamba | `b`: C at chance (Figure 2) | inconclusive | C: 0.107 ± 0.012 | - | 3 |" in rows
    assert "| BlackMamba | `c`: big (Table 3) | needs paper scale | - | - | - |" in rows


def write_pages(root):
    (root / "docs").mkdir(exist_ok=True)
    for name in PAGES:
        (root / name).write_text(f"intro\n{BEGIN}\nold\n{END}\nrest\n")


def test_check_mode_fails_on_a_stale_page(tmp_path, monkeypatch):
    (tmp_path / "papers/blackmamba/results").mkdir(parents=True)
    (tmp_path / "papers/blackmamba/results/claims.json").write_text(json.dumps({"claims": _ledger()}))
    write_pages(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["--check"]) == 1
    assert main([]) == 0 and main(["--check"]) == 0
    assert "| BlackMamba | 1 | 0 | 0 | 1 | 1 | 3 |" in (tmp_path / "README.md").read_text()
    every = (tmp_path / "docs/claims.md").read_text()
    assert "| BlackMamba | `c`: big (Table 3) | needs paper scale | - | - | - |" in every
    (tmp_path / "README.md").write_text("no markers\n")
    assert main([]) == 2


def test_a_damaged_ledger_is_one_line_naming_its_file(tmp_path, monkeypatch, capsys):
    ledger = tmp_path / "papers/blackmamba/results/claims.json"
    ledger.parent.mkdir(parents=True)
    write_pages(tmp_path)
    monkeypatch.chdir(tmp_path)
    for text in ("junk{", "[]", json.dumps({"claims": 5}), json.dumps({"claims": [{"id": "a"}]})):
        ledger.write_text(text)
        assert main(["--check"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {ledger}"), err


@pytest.mark.parametrize("damage, expected", [
    (lambda c: ["a claim as text"], "a claim that is not an object"),
    (lambda c: [{**c, "trained": "no"}], "trained must be true or false, got 'no'"),
    (lambda c: [{**c, "arms": {**c["arms"], "ours": {"n": 3, "std": 0.1}}}], "arms.ours.mean: not a number"),
    (lambda c: [{**c, "difference": {**c["difference"], "mean": "oops"}}], "difference.mean: not a number, got 'oops'"),
    (lambda c: [{**c, "arms": [1, 2]}], "arms must map each arm to its summary"),
], ids=["text", "trained", "arm-mean", "difference-mean", "arms-list"])
def test_a_ledger_damaged_inside_a_claim_names_the_claim_and_key(damage, expected, tmp_path, monkeypatch, capsys):
    committed = json.loads((ROOT / "papers/manticore/results/claims.json").read_text())
    claim = next(c for c in committed["claims"] if c.get("difference"))
    ledger = tmp_path / "papers/manticore/results/claims.json"
    ledger.parent.mkdir(parents=True)
    ledger.write_text(json.dumps({**committed, "claims": damage(claim)}))
    write_pages(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {ledger}: ") and expected in err[0], err


def test_the_history_counts_then_and_now_and_lists_each_moved_row(tmp_path, monkeypatch):
    from common.claims import page

    then = {"blackmamba": {"a": "inconclusive", "b": "inconclusive", "gone": "reproduced"}}
    (tmp_path / "verdicts-abc1234.json").write_text(json.dumps({"commit": "abc1234", "date": "2026-01-01",
                                                                "verdicts": then}))
    monkeypatch.setattr(page, "RECORDS", tmp_path)
    rows = page.history({"manticore": None, "blackmamba": _ledger(), "masked_mixers": None}).splitlines()
    assert rows[0] == "### Since abc1234 (2026-01-01)"
    assert "| BlackMamba | abc1234 | 1 | 0 | 0 | 2 | 0 | 3 |" in rows
    assert "| BlackMamba | now | 1 | 0 | 0 | 1 | 1 | 3 |" in rows
    assert "| Manticore | now | 0 | 0 | 0 | 0 | 0 | 0 |" in rows
    # a: inconclusive -> reproduced; b kept its verdict; c is new; `gone` left the ledger
    assert "3 rows moved or new:" in rows
    assert "| BlackMamba | `a` | inconclusive | reproduced | w |" in rows
    assert "| BlackMamba | `c` | new | needs paper scale | w |" in rows
    assert "| BlackMamba | `gone` | reproduced | removed | |" in rows
    assert not any("`b`" in row for row in rows)


def test_since_records_the_verdicts_of_a_commit_from_git(tmp_path, monkeypatch):
    import subprocess

    from common.claims import since

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    ledger = tmp_path / "papers/blackmamba/results/claims.json"
    ledger.parent.mkdir(parents=True)
    ledger.write_text(json.dumps({"claims": [{"id": "a", "verdict": "inconclusive"}]}))
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "ledger")
    ledger.write_text(json.dumps({"claims": [{"id": "a", "verdict": "reproduced"}]}))  # the tree moves on
    monkeypatch.setattr(since, "ROOT", tmp_path)
    monkeypatch.setattr(since, "RECORDS", tmp_path / "records")
    (tmp_path / "records").mkdir()
    assert since.main(["HEAD"]) == 0
    [record] = (tmp_path / "records").glob("verdicts-*.json")
    assert json.loads(record.read_text())["verdicts"] == {"blackmamba": {"a": "inconclusive"}}
    with pytest.raises(SystemExit) as stop:
        since.main(["no-such-commit"])
    assert stop.value.code == 2
