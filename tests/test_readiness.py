"""The paper-readiness tables: every stage accounted for, FLOPs counted on the network itself that
agree with the architecture's own count, hours from FLOPs at the stated rate, and the README block
rewritten in place."""

from __future__ import annotations

import json

import pytest
import yaml

from common.eval.counting import count_lm
from common.models.lm import LanguageModel, LMConfig
from rehearsal import readiness
from rehearsal.paper_work import PIPELINES, ROOT, Work
from rehearsal.readiness import BEGIN, END, READMES, h100_hours, load_records, measure


@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_every_stage_of_every_pipeline_is_accounted_for(pipeline):
    dvc_file, stages = PIPELINES[pipeline]
    assert list(stages) == list(yaml.safe_load((ROOT / dvc_file).read_text())["stages"])
    text = (ROOT / READMES[pipeline]).read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1


@pytest.mark.parametrize("cfg", [
    LMConfig(vocab_size=512, d_model=64, pattern="attn,swiglu", repeat=2, n_ctx=96, blocks={"attn": {"n_heads": 4}}),
    LMConfig(vocab_size=512, d_model=64, pattern="mamba,moe", repeat=2, n_ctx=96,
             blocks={"moe": {"n_experts": 4, "d_ff": 128}}),
], ids=["transformer", "blackmamba"])
def test_flops_counted_on_the_network_agree_with_the_architecture_count(cfg):
    params, flops = measure(Work("net", lambda: LanguageModel(cfg), cfg.n_ctx, 1, 1, vocab=cfg.vocab_size))
    count = count_lm(cfg)
    assert params == count.params
    # The counter sees matmuls only (as `count_lm` itemises them), the MoE's routed expert included.
    assert flops / cfg.n_ctx == pytest.approx(count.flops_per_token, rel=0.1)


def test_hours_are_the_run_flops_at_the_stated_rate():
    rate = readiness.H100_BF16_DENSE * readiness.UTILISATION
    work = Work("net", lambda: None, 128, 8, 1000, runs=3, forward_flops_per_row=5e9, params=1)
    assert h100_hours(work, 5e9) == pytest.approx(3 * 5e9 * 8 * 1000 * 3 / rate / 3600)
    forward = Work("net", lambda: None, 128, 8, 1000, runs=3, train=False, forward_flops_per_row=5e9, params=1)
    assert h100_hours(forward, 5e9) == pytest.approx(h100_hours(work, 5e9) / 3)


def test_the_last_passing_record_of_a_stage_wins(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    def record(stage, rc, seconds):
        return {"stage": stage, "rc": rc, "seconds": seconds, "peak_pss_mib": 100}

    old.write_text(json.dumps([record("a", 0, 1), record("b", 0, 2)]))
    new.write_text(json.dumps([record("a", 0, 3), record("b", 1, 4)]))
    records = load_records([old, new, tmp_path / "missing.json"])
    assert records["a"]["seconds"] == 3 and records["b"]["seconds"] == 2


@pytest.mark.parametrize("records", [{"stage": "a"}, ["a"], [{"rc": 0, "seconds": 1, "peak_pss_mib": 1}],
                                     [{"stage": "a", "rc": 0, "seconds": "fast", "peak_pss_mib": 1}],
                                     [{"stage": "a", "rc": 0, "seconds": 1, "peak_pss_mib": None}]],
                         ids=["object", "text", "no-stage", "text-seconds", "null-peak"])
def test_records_of_another_shape_are_one_line(records, tmp_path):
    from common.errors import DataError

    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    with pytest.raises(DataError, match=rf"^{path}: record 0 is not a rehearsal record"):
        load_records([path])


def test_the_root_table_is_written_between_the_markers_and_nothing_else_moves(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    cuda = f"{readiness.CUDA_BEGIN}\nstale\n{readiness.CUDA_END}\n"
    readme.write_text(f"# Title\n\nhand-written\n\n{BEGIN}\nstale\n{END}\n\nbetween\n\n{cuda}\nafter\n")
    monkeypatch.setitem(READMES, "root", str(readme))
    monkeypatch.setattr(readiness, "CUDA_RECORDS", tmp_path / "records_cuda.json")
    cuda_run = {"pipeline": "root", "date": "2026-11-28", "device": "GPU", "stage": "tokenize", "seconds": 10.5,
                "peak_pss_mib": 611, "rc": 0}
    readiness.CUDA_RECORDS.write_text(json.dumps([cuda_run]))
    records = tmp_path / "records.json"
    records.write_text(json.dumps([{"stage": "lm_baseline", "rc": 0, "seconds": 90, "peak_pss_mib": 2048,
                                    "date": "2026-11-26", "batch_rows": 2, "precision": "32-true"}]))
    assert readiness.main(["--pipelines", "root", "--records", str(records)]) == 0
    text = readme.read_text()
    assert text.startswith("# Title\n\nhand-written\n\n") and f"{END}\n\nbetween\n\n" in text
    assert text.endswith(f"{readiness.CUDA_END}\n\nafter\n") and "stale" not in text
    assert "| GPU | 2026-11-28 | `tokenize` (root) | 10.5 s | 0.6 GiB | passed |  |" in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    assert list(rows) == [f"`{stage}`" for stage in PIPELINES["root"][1]]
    assert "2.0 GiB, 1.5 min (2026-11-26, batches of 2, 32-true)" in rows["`lm_baseline`"]
    assert "not rehearsed yet" in rows["`mad_suite`"]
    assert "| 32 × 256 | 20,000 × 1 |" in rows["`lm_baseline`"]  # the paper's batch, row length and steps


def test_the_root_readme_adds_up_each_pipelines_last_passing_rehearsals():
    stages = {pipeline: [stage if pipeline == "root" else f"{dvc_file}:{stage}" for stage in names]
              for pipeline, (dvc_file, names) in PIPELINES.items()}
    records = {stages["root"][0]: {"stage": stages["root"][0], "seconds": 60, "peak_pss_mib": 1024},
               stages["root"][1]: {"stage": stages["root"][1], "seconds": 30, "peak_pss_mib": 3072},
               stages["manticore"][0]: {"stage": stages["manticore"][0], "seconds": 600, "peak_pss_mib": 512}}
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
            for line in readiness.rehearsal_totals(records).splitlines()[2:]}
    assert rows["root"] == [f"2 of {len(stages['root'])}", "1.5", f"3.0 GiB (`{stages['root'][1]}`)"]
    manticore_stage = stages["manticore"][0].split(":")[-1]
    assert rows["manticore"] == [f"1 of {len(stages['manticore'])}", "10.0", f"0.5 GiB (`{manticore_stage}`)"]
    assert rows["blackmamba"] == [f"0 of {len(stages['blackmamba'])}", "0.0", ""]
    assert rows["all"] == ["", "11.5", ""]


def test_the_committed_records_name_stages_that_exist():
    # The tables are regenerated from these; a renamed stage would silently fall to "not rehearsed yet".
    stages = {stage if pipeline == "root" else f"{dvc_file}:{stage}"
              for pipeline, (dvc_file, names) in PIPELINES.items() for stage in names}
    for record in json.loads(readiness.RECORDS.read_text()):
        assert record["stage"] in stages, record["stage"]
        assert {"pipeline", "date", "batch_rows", "precision", "seconds", "peak_pss_mib", "rc"} <= set(record)


@pytest.mark.pipeline
def test_measured_gpu_steps_fill_their_rows_and_only_theirs():
    """A GPU record counts for the network of the same pipeline, name, shapes and parameter count; its
    hours are steps x runs x measured seconds, beside the hours at the stated utilisation."""
    lm_baseline = readiness.PIPELINES["root"][1]["lm_baseline"]()[0]
    params, _ = measure(lm_baseline)
    record = {"network": "llama", "n_ctx": lm_baseline.n_ctx, "rows_per_step": lm_baseline.rows_per_step,
              "params": params, "seconds_per_step": 0.5, "utilisation": 0.05}
    table, _, (measured, stated) = readiness.pipeline_table("root", {}, {"root:lm_baseline:0": record})
    row = next(line for line in table.splitlines() if line.startswith("| `lm_baseline`"))
    hours = lm_baseline.steps * lm_baseline.runs * 0.5 / 3600
    assert f"0.5 s, 5.0%, {hours:.3g} h" in row and measured == pytest.approx(hours) and stated > 0
    other = {**record, "rows_per_step": record["rows_per_step"] * 2}  # another batch: not this row's speed
    table, _, (measured, _) = readiness.pipeline_table("root", {}, {"root:lm_baseline:0": other})
    assert "0.5 s" not in table and measured == 0


def test_gpu_steps_names_its_rows_by_pipeline_stage_and_index():
    from common.errors import UserError
    from rehearsal.gpu_steps import works

    listed = works(["blackmamba:train_compare:1", "blackmamba:train_compare:0"])
    assert [(key, w.network) for key, w in listed] == [("blackmamba:train_compare:1", "mamba"),
                                                       ("blackmamba:train_compare:0", "blackmamba")]
    with pytest.raises(UserError, match="unknown rows"):
        works(["blackmamba:train_compare:9"])


@pytest.mark.pipeline
@pytest.mark.long  # lists Manticore's stages, which builds their full-size pretrained components
def test_the_committed_gpu_records_name_rows_that_exist():
    from rehearsal.gpu_steps import works

    rows = readiness.load_gpu_steps()
    assert rows, "rehearsal/gpu_steps.json holds the H100 measurements the READMEs quote"
    named = dict(works(list(rows)))
    for key, record in rows.items():
        assert named[key].network == record["network"] and named[key].n_ctx == record["n_ctx"]


def test_the_rehearsal_page_shows_every_committed_cuda_run():
    from common.io import load_json

    records = load_json(readiness.CUDA_RECORDS, "")
    table = readiness.cuda_runs(records)
    assert table in (readiness.ROOT / READMES["root"]).read_text(), "run `python -m rehearsal.readiness`"
    assert table.count("\n| NVIDIA") == len(records)
    record = {"device": "GPU", "date": "2026-11-28", "stage": "papers/blackmamba/dvc.yaml:train_compare",
              "pipeline": "blackmamba", "seconds": 231.64, "peak_pss_mib": 84032, "rc": 0}
    rows = readiness.cuda_runs([record, record | {"rc": 3, "note": "second call"}]).splitlines()[-2:]
    row = "| GPU | 2026-11-28 | `train_compare` (blackmamba) | 231.6 s | 82.1 GiB |"
    assert rows == [f"{row} passed |  |", f"{row} failed (rc 3) | second call |"]
