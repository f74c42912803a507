"""Stage times read from `dvc repro`'s output: each stage from its "Running stage" line to the next
stage's, kept stages without a time; and the page table written from a record."""

from common import stage_times


def test_each_stage_runs_from_its_line_to_the_next_stage():
    lines = [(10.0, "Running stage 'generate_stories':"), (11.0, "wrote data/stories"),
             (12.5, "Updating lock file 'dvc.lock'"),
             (13.0, "Stage 'train_tokenizer' didn't change, skipping"),
             (14.0, "Running stage 'papers/blackmamba/dvc.yaml:train_compare':"), (90.0, "log line"),
             (95.0, "2026-11-30 09:00:00,000 common.parallel: each job's seconds in the order started, 2 worker(s): "
                    "[40.0, 30.5, 2.0]"),
             (100.0, "Running stage 'papers/blackmamba/dvc.yaml:report':")]
    stages = stage_times.stage_times(lines, finished=104.5)
    assert stages == [{"stage": "generate_stories", "ran": True, "seconds": 3.0, "jobs": []},
                      {"stage": "train_tokenizer", "ran": False, "seconds": None},
                      {"stage": "papers/blackmamba/dvc.yaml:train_compare", "ran": True, "seconds": 86.0,
                       "jobs": [{"workers": 2, "seconds": [40.0, 30.5, 2.0]}]},
                      {"stage": "papers/blackmamba/dvc.yaml:report", "ran": True, "seconds": 4.5, "jobs": []}]


def test_the_log_line_of_run_jobs_is_the_one_read_back():
    from common.parallel import JOB_SECONDS

    found = stage_times.JOBS.search(JOB_SECONDS % (3, "[1.5, 2.0]"))
    assert found and found["workers"] == "3" and found["seconds"] == "[1.5, 2.0]"


def test_makespan_hands_each_free_worker_the_next_job():
    # Worked by hand: 3 and 3 start; 2 each when they end at 3; the last 2 at 5, on either.
    assert stage_times.makespan([3, 3, 2, 2, 2], 2) == 7
    assert stage_times.makespan([3, 3, 2, 2, 2], 1) == 12
    assert stage_times.makespan([3, 3, 2, 2, 2], 16) == 3
    assert stage_times.makespan([1, 5, 1, 1], 2) == 5  # in the order given: 1 then 1 then 1 beside the 5


def test_more_cores_shorten_only_the_independent_runs():
    # 100 s, of which two calls' runs took 12 and 5 s of makespan on 2 workers: 83 s is the rest.
    stage = {"seconds": 100.0, "jobs": [{"workers": 2, "seconds": [3, 3, 2, 2, 2]}, {"workers": 2, "seconds": [5]}]}
    assert stage_times.on_cores(stage, 2) == 100.0
    assert stage_times.on_cores(stage, 1) == 100.0 - 7 + 12
    assert stage_times.on_cores(stage, 16) == 100.0 - 7 + 3


def test_the_table_names_the_machine_and_marks_kept_stages():
    record = {"pipeline": "blackmamba", "command": "dvc repro papers/blackmamba/dvc.yaml", "profile": "tiny",
              "commit": "abc1234", "tree_clean": True, "date": "2026-11-29",
              "machine": {"cpu": "AMD EPYC", "cores": 2, "avx512": False, "torch_cpu_capability": "AVX2"},
              "total_seconds": 3723.0,
              "stages": [{"stage": "tokenize", "ran": True, "seconds": 26.2},
                         {"stage": "papers/blackmamba/dvc.yaml:train_compare", "ran": True, "seconds": 3000.0}]}
    declared = ["papers/blackmamba/dvc.yaml:table1", "papers/blackmamba/dvc.yaml:train_compare"]
    text = stage_times.table(record, declared)
    assert "2 cores of an AMD EPYC without AVX-512" in text and "commit abc1234:" in text
    assert "| `tokenize` (root) | 26 s | not recorded |" in text  # a record from before runs logged their times
    assert "| `table1` | kept: its committed outputs were up to date | |" in text
    assert "| `train_compare` | 50.0 min | not recorded |" in text
    assert "| the pipeline | 62.0 min | not recorded |" in text
    record["stages"][0]["jobs"] = []
    record["stages"][1]["jobs"] = [{"workers": 2, "seconds": [1200.0] * 4}]  # 40 min of the 50 on 2 cores
    text = stage_times.table(record, declared)
    assert "| `tokenize` (root) | 26 s | the same: one process |" in text
    assert "| `train_compare` | 50.0 min | 1: 90.0 min, 4: 30.0 min, 8: 30.0 min, 16: 30.0 min |" in text
    assert "| the pipeline | 62.0 min | 1: 102.0 min, 4: 42.0 min, 8: 42.0 min, 16: 42.0 min |" in text
    assert stage_times.pipeline_stages("blackmamba")[0].startswith("papers/blackmamba/dvc.yaml:")


def test_render_without_records_says_how_to_make_one(tmp_path, monkeypatch, capsys):
    import pytest

    monkeypatch.setattr(stage_times, "RECORDS", tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        stage_times.main(["render"])
    assert exit_info.value.code == 2
    assert "no records of stage times" in capsys.readouterr().err


def test_the_summary_gives_each_pipeline_its_time_and_longest_stages():
    record = {"pipeline": "blackmamba", "date": "2026-11-29", "commit": "abc1234",
              "machine": {"cpu": "AMD EPYC", "cores": 2, "avx512": True, "torch_cpu_capability": "AVX512"},
              "total_seconds": 600.0,
              "stages": [{"stage": "tokenize", "ran": True, "seconds": 30.0},
                         {"stage": "papers/blackmamba/dvc.yaml:table1", "ran": True, "seconds": 5.0},
                         {"stage": "papers/blackmamba/dvc.yaml:train_compare", "ran": True, "seconds": 500.0},
                         {"stage": "papers/blackmamba/dvc.yaml:report", "ran": True, "seconds": 65.0}]}
    row = stage_times.summary({"blackmamba": record}).splitlines()[-1]
    assert row == ("| blackmamba | 10.0 min | `train_compare` 8.3 min, `report` 1.1 min, `tokenize` 30 s | "
                   "2 cores, AVX-512 | 2026-11-29, abc1234 | not recorded |")
    # With every pipeline recorded, their sum: what `make repro` takes at most (each paper's run
    # counts the root data stages it reads once more).
    every = {pipeline: {**record, "pipeline": pipeline} for pipeline in stage_times.PIPELINES}
    assert stage_times.summary(every).splitlines()[-1] == f"| all (`make repro`, at most) | " \
        f"{600 * len(every) / 3600:.1f} h | | | | |"


def test_the_pages_show_the_committed_records():
    """`render` has been run since the last record: every table on the pages is the record's."""
    records = {p: stage_times.load_json(stage_times.RECORDS / f"{p}.json", "") for p in stage_times.PIPELINES
               if (stage_times.RECORDS / f"{p}.json").is_file()}
    for pipeline, record in records.items():
        table = stage_times.table(record, stage_times.pipeline_stages(pipeline))
        assert table in (stage_times.ROOT / stage_times.PAGES[pipeline]).read_text()
    if records:
        summary_page = (stage_times.ROOT / stage_times.SUMMARY_PAGE).read_text()
        assert stage_times.summary(records) in summary_page, "run `python -m common.stage_times render`"
        assert stage_times.workers(records) in summary_page, "run `python -m common.stage_times render`"


def test_busy_is_the_runs_seconds_over_workers_times_the_stage_wall():
    record = {"stages": [{"stage": "kept", "ran": False, "seconds": None},
                         {"stage": "papers/masked_mixers/dvc.yaml:norms", "ran": True, "seconds": 150.0,
                          "jobs": [{"workers": 2, "seconds": [60.0, 60.0, 60.0, 60.0]},
                                   {"workers": 1, "seconds": []}]}]}
    rows = stage_times.workers({"masked_mixers": record}).splitlines()
    assert rows[4:] == ["| masked_mixers | `norms` | 4 | 2 | 4.0 min | 2.5 min | 80% |"]  # 240 s / (2 x 150 s)
    assert "No record holds" in stage_times.workers({"root": {"stages": [{"stage": "x", "seconds": 1.0}]}})


def test_force_runs_every_stage_and_the_record_says_so(tmp_path, monkeypatch):
    import io
    import json

    class FakeRepro:  # `dvc repro` itself is not run: only the command the stage times are measured by
        commands = []

        def __init__(self, command, **kwargs):
            self.commands.append(command)
            self.stdout, self.returncode = io.StringIO("Running stage 'generate_stories':\n"), 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(stage_times.subprocess, "Popen", FakeRepro)
    monkeypatch.setattr(stage_times, "git", lambda *args, **kwargs: "")  # git runs through Popen as well
    assert stage_times.main(["run", "root", "--force", "--out", str(tmp_path / "forced.json")]) == 0
    assert stage_times.main(["run", "root", "--out", str(tmp_path / "kept.json")]) == 0
    assert [command[3:] for command in FakeRepro.commands] == [["repro", "-f", "dvc.yaml"], ["repro", "dvc.yaml"]]
    assert json.loads((tmp_path / "forced.json").read_text())["command"] == "dvc repro -f dvc.yaml"
    assert json.loads((tmp_path / "kept.json").read_text())["command"] == "dvc repro dvc.yaml"
