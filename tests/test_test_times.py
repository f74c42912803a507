"""Test tiers timed by their `make` targets: pytest's counts read back from its closing line, one
entry per passing tier, none for a failing one, and docs/testing.md showing the committed record."""

import io
import json

from common import test_times

MACHINE = {"cpu": "AMD EPYC", "cores": 2, "avx512": True, "torch_cpu_capability": "AVX512"}


def test_the_counts_come_from_pytests_last_closing_line():
    assert test_times.pytest_summary(["..........", "1467 passed, 43 skipped in 64.21s (0:01:04)"]) == \
        "1467 passed, 43 skipped"
    decorated = ["3 passed in 1.00s", "======= 161 passed, 17 skipped, 2 warnings in 544.10s (0:09:04) ======="]
    assert test_times.pytest_summary(decorated) == "161 passed, 17 skipped, 2 warnings"
    assert test_times.pytest_summary(["ruff: All checks passed!"]) == ""


class FakeMake:
    """`make <tier>` itself is not run: each tier passes or fails as `results` says."""
    commands, results = [], {}

    def __init__(self, command, **kwargs):
        self.commands.append(command)
        self.returncode = self.results[command[1]]
        self.stdout = io.StringIO(f"{command[1]} output\n5 passed in 0.50s\n")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_each_passing_tier_gets_an_entry_and_a_failing_one_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(test_times.subprocess, "Popen", FakeMake)
    monkeypatch.setattr(test_times, "checkout", lambda: ("abc1234", True))
    monkeypatch.setattr(test_times, "machine", lambda: MACHINE)
    out = tmp_path / "tests.json"
    out.write_text(json.dumps({"test-slow": {"seconds": 1.0, "pytest": "kept"}}))
    FakeMake.results = {"test": 0, "test-pipeline": 2, "test-numerics": 0}
    assert test_times.main(["run", "--out", str(out)]) == 2
    assert [command[1] for command in FakeMake.commands] == ["test", "test-pipeline"]  # numerics not reached
    record = json.loads(out.read_text())
    assert list(record) == ["test", "test-slow"]  # the failing tier wrote nothing; the others' entries stay
    assert record["test"]["pytest"] == "5 passed" and record["test"]["commit"] == "abc1234"
    assert record["test-slow"]["pytest"] == "kept"


def test_the_table_names_the_machine_and_tiers_not_measured():
    entry = {"seconds": 544.0, "pytest": "161 passed, 17 skipped", "commit": "abc1234", "tree_clean": True,
             "date": "2026-11-30", "machine": MACHINE}
    text = test_times.table({"test-pipeline": entry, "test": entry | {"seconds": 64.0, "tree_clean": False}})
    assert ("| `make test-pipeline` | 9.1 min | 161 passed, 17 skipped | 2026-11-30, commit abc1234, 2 cores of "
            "an AMD EPYC with AVX-512 |") in text
    assert "| `make test` | 64 s |" in text and "abc1234 with local changes" in text
    assert "| `make test-slow` | not measured | | |" in text
    assert text.index("`make test`") < text.index("`make test-pipeline`")  # the tiers' order, not the record's


def test_an_unknown_tier_and_a_missing_record_each_get_one_line(tmp_path, monkeypatch, capsys):
    import pytest

    monkeypatch.setattr(test_times, "RECORD", tmp_path / "missing.json")
    for argv, said in ((["run", "nonsense"], "no test tier nonsense; the tiers are test,"),
                       (["render"], "no record of test times; measure with `python -m common.test_times run`")):
        with pytest.raises(SystemExit) as exit_info:
            test_times.main(argv)
        assert exit_info.value.code == 2 and said in capsys.readouterr().err


def test_the_page_shows_the_committed_record():
    """`render` has been run since the last measurement."""
    if test_times.RECORD.is_file():
        table = test_times.table(test_times.load_json(test_times.RECORD, ""))
        assert table in test_times.PAGE.read_text(), "run `python -m common.test_times render`"
