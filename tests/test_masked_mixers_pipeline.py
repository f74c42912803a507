"""The real `dvc repro papers/masked_mixers/dvc.yaml` at the smoke profile, in a throwaway copy of
the repository; then the notebook runs on what it produced, and a second repro has nothing to do."""

from __future__ import annotations

import json
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from tests.test_dvc import _run, copy_checkout

STAGES = ("clm", "norms", "mixer_variants", "train_test_gap", "one_step", "context_length", "representation",
          "generation", "autoencoders", "bidirectional", "lr_check", "summaries", "retrieval", "memory", "expansion",
          "report")
RESULTS = "papers/masked_mixers/results"


@pytest.mark.slow  # the pipeline under DVC, about 4 min; make test runs its stages in process
def test_smoke_pipeline_runs_every_stage_and_the_notebook_reads_it(tmp_path):
    repo = copy_checkout(tmp_path / "repo", profile="smoke")
    first = _run([sys.executable, "-m", "dvc", "repro", "papers/masked_mixers/dvc.yaml"], repo)
    for stage in STAGES:
        assert f"Running stage 'papers/masked_mixers/dvc.yaml:{stage}'" in first.stdout, first.stdout[-2000:]
    # Quiet logs: no Lightning banners, tips, notices or deprecations, and about a line per run.
    noise = ("GPU available", "TPU available", "Tip:", "was configured so", "is deprecated")
    assert not [line for line in first.stderr.splitlines() if any(n in line for n in noise)], first.stderr[-3000:]
    clm_log = first.stderr.split("stage: clm at profile smoke on ", 1)[1].split(" stage: ", 1)[0].splitlines()
    clm = json.loads((repo / RESULTS / "clm.json").read_text())
    runs = sum(len(model["seeds"]) for model in clm["models"].values())
    assert len(clm_log) <= runs + len(clm["models"]) + 8, "\n".join(clm_log)
    results = repo / RESULTS
    for name in ("clm_loss.png", "autoencoders_loss.png", "bidirectional_loss.png", "claims.json", "metrics.json"):
        assert (results / name).stat().st_size > 0, name

    for section in ("clm", "norms", "mixer_variants", "train_test_gap", "one_step", "context_length", "autoencoders",
                    "bidirectional"):
        res = json.loads((results / f"{section}.json").read_text())
        assert res["profile"] == "smoke" and res["chance_loss"] > 0
        for name, model in res["models"].items():
            assert sorted(model["seeds"]) == ["0", "1", "2"], name
            for run in model["seeds"].values():
                assert run["steps"] == res["steps"], f"{section}/{name}: every run stops at exactly {res['steps']}"
    norms = json.loads((results / "norms.json").read_text())
    assert norms["recipe_of"] == "clm" and set(norms["models"]) == {"mixer_flat", "llama_h4"}
    for name, model in norms["models"].items():
        assert model["n_params"] < clm["models"][name]["n_params"], f"{name} without its norms has fewer parameters"
    variants = json.loads((results / "mixer_variants.json").read_text())
    assert variants["baseline"]["name"] == "mixer_flat" and set(variants["models"]) == {
        "mixer_k4", "mixer_heads2_k4", "mixer_parallel2", "mixer_softmax_weights", "mixer_softmax_outputs"}
    flat = variants["baseline"]["forward_flops_per_row"]
    assert all(variants["models"][m]["forward_flops_per_row"] > flat
               for m in ("mixer_k4", "mixer_heads2_k4", "mixer_parallel2")), \
        "a kernel of 4, or a second convolution, costs more per step than the flat mixer"
    softmax = ("mixer_softmax_weights", "mixer_softmax_outputs")
    assert all(abs(variants["models"][m]["forward_flops_per_row"] - flat) < 0.01 * flat for m in softmax), \
        "a softmax adds no matrix product"
    gap = json.loads((results / "train_test_gap.json").read_text())
    assert gap["train_rows"] == 8 and gap["epochs"] > 1, "the subset comes round more than once"
    assert all(run["gap"] == pytest.approx(run["scored_val_loss"] - run["scored_train_loss"], abs=2e-4)
               for model in gap["models"].values() for run in model["seeds"].values())
    check = json.loads((results / "lr_check.json").read_text())["sections"]
    assert set(check) == {"clm", "autoencoders", "bidirectional"}
    for section, checked in check.items():
        trained = json.loads((results / f"{section}.json").read_text())
        assert checked["factors"] == [1, 2] and checked["own_lr"] == trained["lr"]
        assert {name: list(losses) for name, losses in checked["final_val_loss"].items()} == {
            name: [f"{2 * lr:g}"] for name, lr in trained["lr"].items()}, "each model at twice its own rate, only"
    doubled = 2 * check["clm"]["own_lr"]["mixer_flat"]
    assert (repo / f"data/masked_mixers/lr_check/clm/mixer_flat/lr{doubled:g}").is_dir()
    rep = json.loads((results / "representation.json").read_text())["results"]
    assert set(rep) == {"untrained/d16_l2", "untrained/d32_l2", "trained/d16_l2"}
    assert set(rep["untrained/d32_l2"]["llama_h4"]["2"]) == {"full", "last_token"}
    expansion = json.loads((results / "expansion.json").read_text())
    assert expansion["expansions"]["2.0"]["dead"] > 0 and expansion["expansions"]["0.5"]["lost_positions"] > 0
    assert expansion["representation_size"] == "d32_l2"
    assert set(expansion["representation"]) == {"mixer_flat", "mixer_expanded"}
    summaries = json.loads((results / "summaries.json").read_text())
    assert summaries["source"] == "corpus" and summaries["empty_summaries"] == 0
    retrieval = json.loads((results / "retrieval.json").read_text())
    assert summaries["counts"] == {"train": retrieval["n_train"], "validation": retrieval["n_test"]}
    assert retrieval["sources"]["mixer_trained_mean"]["pooling"] == "mean"
    for source in retrieval["sources"].values():
        assert list(source["seeds"]) == ["0", "1", "2"]
        for run in source["seeds"].values():
            for c in retrieval["candidates"]:
                assert 0 <= run[f"c{c}"]["test_top1"] <= 1
                assert set(run[f"c{c}"]["top1_curve"]) == {"2", "4"}
    assert all(run["texts_per_s"] > 0 and run["speedup_c8"] > 0 for run in retrieval["infonce"]["seeds"].values())
    # Each InfoNCE run's score before tuning is its source's own cosine ranking of the same seed,
    # computed apart in the source's run: the same embeddings and candidate draws.
    c, source = retrieval["candidates"][0], retrieval["sources"][retrieval["infonce"]["source"]]
    for seed, run in retrieval["infonce"]["seeds"].items():
        assert run[f"c{c}_cosine_top1_before"] == source["seeds"][seed][f"c{c}_cosine_top1"]
    generation = json.loads((results / "generation.json").read_text())
    (stopped,) = [c for c in generation["checkpoints"].values() if "max_diff_vs_clm" in c]
    assert stopped["steps_compared_with_clm"] and stopped["max_diff_vs_clm"] < 1e-4, "the clm run's weights again"
    memory = json.loads((results / "memory.json").read_text())
    assert memory["rows"] and not memory["failed"]
    readme = (repo / "papers/masked_mixers/README.md").read_text()
    assert "| claim | where | verdict |" in readme and "_Profile `smoke`" in readme
    claims = json.loads((results / "claims.json").read_text())["claims"]
    assert {"clm-mixer-vs-llama", "fig3-untrained-transformer", "bidirectional-as-clm",
            "fig-s1-expansion-unused-parameters", "fig-s3-flat-passes-more-between-tokens",
            "tables-s1-s3-width-sweep", "blog-mixer-slower-without-norms", "sec3-4-kernel4-lower-loss-per-step",
            "tab-s5-two-heads-slightly-better", "sec4-2-cosine-unsuitable-for-mixers",
            "sec6-1-mixer-larger-train-test-gap", "blog-one-step-completion-parity"} <= {c["id"] for c in claims}

    notebook_path = repo / "notebooks" / "masked_mixers.ipynb"
    notebook = nbformat.read(notebook_path, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(notebook_path.parent)}}).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]
    assert not [out for out in outputs if out.get("output_type") == "error"]

    second = _run([sys.executable, "-m", "dvc", "repro", "papers/masked_mixers/dvc.yaml"], repo)
    assert "Running stage" not in second.stdout, second.stdout[-2000:]


def test_committed_readme_and_ledger_match_the_committed_results():
    """The README and the ledger in git must be what the report stage makes of the results in git."""
    from common.eval.report import render
    from papers.masked_mixers.report import TABLES
    from tests.conftest import ROOT, rebuilt_ledger

    readme = (ROOT / "papers/masked_mixers/README.md").read_text()
    assert render(readme, ROOT / RESULTS, TABLES, "") == readme, "run `dvc repro papers/masked_mixers/dvc.yaml`"
    rebuilt, committed = rebuilt_ledger("masked_mixers")
    assert rebuilt == committed
