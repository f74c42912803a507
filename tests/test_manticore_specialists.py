"""Specialist components and the data their hybrids fine-tune on (`papers.manticore.specialists`)."""

from __future__ import annotations

import json
from dataclasses import replace

import datasets
import pytest
import torch
import yaml

from common.errors import ConfigError, DataError
from common.eval.heldout import heldout_loss
from common.models.lm import LanguageModel, LMConfig
from papers.manticore import components, instruction_text
from papers.manticore.components import genre_margins
from papers.manticore.specialists import SpecialistsConfig, genre_documents
from tests.conftest import ROOT, write_params


def test_heldout_loss_is_the_token_mean_over_non_padding_labels(one_thread):
    torch.manual_seed(0)
    net = LanguageModel(LMConfig(vocab_size=11, n_ctx=8, d_model=16, pattern="attn,mlp", repeat=1))
    lengths = [8, 3, 5, 1, 6, 8, 2]
    rows = [{"input_ids": [int(t) for t in torch.randint(0, 11, (8,))], "attention_mask": [1] * n + [0] * (8 - n)}
            for n in lengths]
    # Oracle: one row at a time, log-probabilities indexed by hand, padding labels skipped.
    per_row = []
    with torch.no_grad():
        for row in rows:
            log_p = torch.log_softmax(net(torch.tensor([row["input_ids"]]))[0].double(), -1)
            per_row.append([-log_p[t - 1, row["input_ids"][t]].item() for t in range(1, sum(row["attention_mask"]))])
    total, count = sum(map(sum, per_row)), sum(map(len, per_row))
    for batch_size in (1, 3, 16):
        assert heldout_loss(net, rows, batch_size) == pytest.approx(total / count, rel=1e-5)
    padded = [{**row, "input_ids": row["input_ids"][:-1] + [0]} if row["attention_mask"][-1] == 0 else row
              for row in rows]
    assert heldout_loss(net, padded, 4) == pytest.approx(total / count, rel=1e-5), "padding is never scored"
    first_two = per_row[0] + per_row[1]
    assert heldout_loss(net, rows, 4, max_rows=2) == pytest.approx(sum(first_two) / len(first_two), rel=1e-5)


def test_genre_margins_compare_each_corpus_own_components_with_the_best_outsider():
    scores = {"neo_s": {"stories": 1.0, "instructions": 3.0}, "mamba_s": {"stories": 1.2, "instructions": 2.5},
              "neo_i": {"stories": 2.0, "instructions": 0.8}, "mamba_i": {"stories": 1.9, "instructions": 0.9}}
    corpus = {"neo_s": "stories", "mamba_s": "stories", "neo_i": "instructions", "mamba_i": "instructions"}
    margins = genre_margins(scores, corpus)
    assert margins["stories"] == pytest.approx(1.9 - 1.2)
    assert margins["instructions"] == pytest.approx(2.5 - 0.9)
    assert genre_margins(scores, {"neo_s": "stories", "mamba_s": "stories"}) == {}, "no outsider, no margin"


@pytest.mark.pipeline
def test_components_refuse_components_that_are_not_specialists(smoke_data, tmp_path):
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    params["profile"] = "smoke"
    params["components"]["smoke"]["min_margin"] = 100.0
    params = write_params(tmp_path / "params.yaml", params)
    instruction_text.main(["--params", str(params), "--tokenizer", str(smoke_data["tokenizer"]),
                           "--out", str(tmp_path / "instructions"), "--summary", str(tmp_path / "it.json")])
    with pytest.raises(SystemExit) as stop:
        components.main(["--params", str(params), "--data", str(smoke_data["tokenized"] / "packed"),
                         "--instructions", str(tmp_path / "instructions"), "--tokenizer", str(smoke_data["tokenizer"]),
                         "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "components"),
                         "--metrics", str(tmp_path / "components.json")])
    assert stop.value.code == 2
    assert not (tmp_path / "components").exists() and not (tmp_path / "components.json").exists()


def test_genre_documents_hold_out_the_same_documents_for_every_seed(smoke_data):
    cfg = SpecialistsConfig(n_train=40, n_projector=20, n_validation=10, fraction_instructions=0.5)
    docs = {seed: genre_documents(cfg, seed, smoke_data["stories"]) for seed in (0, 1)}
    stories = set(datasets.load_from_disk(str(smoke_data["stories"]))["validation"]["text"])
    for d in docs.values():
        assert len(d["train"]) == 40 and len(d["projector"]) == 20
        assert sum(doc in stories for doc in d["train"]) == 20, "an even mix"
        held_out = set(d["validation_stories"]) | set(d["validation_instructions"])
        assert not held_out & set(d["train"]) and not held_out & set(d["projector"])
        assert not set(d["train"]) & set(d["projector"])
        assert all("### Instruction:" in doc for doc in d["validation_instructions"])
    assert docs[0]["validation_stories"] == docs[1]["validation_stories"]
    assert docs[0]["validation_instructions"] == docs[1]["validation_instructions"]
    assert docs[0]["train"] != docs[1]["train"], "each seed draws and orders its own mix"


def test_held_out_instructions_leave_out_what_the_instruction_components_pretrained_on(smoke_data):
    from papers.manticore.instructions import InstructionTextConfig, pretraining_documents

    cfg = SpecialistsConfig(n_train=20, n_projector=20, n_validation=25, fraction_instructions=0.5)
    pretrained = frozenset(pretraining_documents(InstructionTextConfig(n_train=20_000, n_validation=10))["train"])
    assert set(genre_documents(cfg, 0, smoke_data["stories"])["validation_instructions"]) & pretrained, \
        "the check needs short tasks the pretraining text repeats"
    for projector_text in ("encyclopedia", "genres"):
        docs = genre_documents(replace(cfg, projector_text=projector_text), 0, smoke_data["stories"],
                               single_genre=True, pretrained=pretrained)
        assert len(docs["validation_instructions"]) == 25
        for name, texts in docs.items():
            assert not set(texts) & pretrained, name


def test_projector_text_is_a_third_genre_held_out_apart_or_the_two_fine_tuning_genres(smoke_data):
    cfg = SpecialistsConfig(n_train=40, n_projector=20, n_validation=10, fraction_instructions=0.5)
    docs = {seed: genre_documents(cfg, seed, smoke_data["stories"]) for seed in (0, 1)}
    corpus = datasets.load_from_disk(str(smoke_data["stories"]))
    stories = set(corpus["train"]["text"]) | set(corpus["validation"]["text"])
    for d in docs.values():
        entries = d["projector"] + d["validation_projector"]
        assert len(set(d["projector"])) == 20 and len(d["validation_projector"]) == 10
        assert not set(d["projector"]) & set(d["validation_projector"])
        assert not set(entries) & stories and not any("### Instruction:" in doc for doc in entries)
        assert not set(entries) & set(d["train"] + d["validation_stories"] + d["validation_instructions"])
    assert set(docs[0]["projector"]) == set(docs[1]["projector"]) and docs[0]["projector"] != docs[1]["projector"]
    assert docs[0]["validation_projector"] == docs[1]["validation_projector"]
    genres = genre_documents(replace(cfg, projector_text="genres"), 0, smoke_data["stories"])
    assert "validation_projector" not in genres and genres["train"] == docs[0]["train"]
    assert sum(doc in stories for doc in genres["projector"]) == 10, "half stories, half instructions"


def test_encyclopedia_entries_depend_only_on_seed_and_index():
    from papers.manticore.encyclopedia import KINDS, generate_entries

    entries = generate_entries(400, 0)
    assert generate_entries(5, 0, start=3) == entries[3:8] and generate_entries(5, 1) != entries[:5]
    assert len(set(entries)) == 400
    words = [len(entry.split()) for entry in entries]
    assert 20 <= min(words) and max(words) <= 90
    # Every kind occurs: the entries' first sentences say what each is.
    openings = {"town": " is a town in ", "river": " is a river in ", "animal": " is a species of ",
                "invention": " is an instrument used to ", "person": " was a scholar of "}
    assert set(openings) == set(KINDS)
    assert all(any(marker in entry.split(".")[0] for entry in entries) for marker in openings.values())


def test_table1_tasks_read_one_genre_each_and_leave_the_mix_as_it_was(smoke_data):
    cfg = SpecialistsConfig(n_train=16, n_projector=20, n_validation=10, fraction_instructions=0.5)
    docs = genre_documents(cfg, 1, smoke_data["stories"], single_genre=True)
    plain = genre_documents(cfg, 1, smoke_data["stories"])
    assert docs["train"] == plain["train"], "the tasks do not move the mix the other experiments read"
    stories = set(datasets.load_from_disk(str(smoke_data["stories"]))["validation"]["text"])
    held_out = set(docs["validation_stories"]) | set(docs["validation_instructions"])
    assert len(docs["train_stories"]) == len(docs["train_instructions"]) == 16
    assert set(docs["train_stories"]) <= stories and not set(docs["train_instructions"]) & stories
    assert all("### Instruction:" in doc for doc in docs["train_instructions"])
    for genre in ("stories", "instructions"):
        assert len(set(docs[f"train_{genre}"])) == 16 and not set(docs[f"train_{genre}"]) & held_out
        assert not set(docs[f"train_{genre}"]) & set(docs["projector"])
    assert set(d for d in docs["train"] if d in stories) <= set(docs["train_stories"])


@pytest.mark.pipeline
def test_the_stage_fine_tunes_each_component_and_the_hybrid_on_every_table1_task(smoke_data, tmp_path, one_thread):
    from papers.manticore import specialists

    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    params["profile"] = "smoke"
    params["specialists"]["smoke"].update(seeds=[0], workers=1, pairs={"specialists": {
        "components": ["gpt_neo", "mamba_instructions"], "methods": ["darts"], "updates": ["simultaneous"],
        "ensemble": False, "tasks": True}})
    params = write_params(tmp_path / "params.yaml", params)
    instruction_text.main(["--params", str(params), "--tokenizer", str(smoke_data["tokenizer"]),
                           "--out", str(tmp_path / "instructions"), "--summary", str(tmp_path / "it.json")])
    components.main(["--params", str(params), "--data", str(smoke_data["tokenized"] / "packed"),
                     "--instructions", str(tmp_path / "instructions"), "--tokenizer", str(smoke_data["tokenizer"]),
                     "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "components"),
                     "--metrics", str(tmp_path / "components.json")])
    specialists.main(["--params", str(params), "--components", str(tmp_path / "components"),
                      "--stories", str(smoke_data["stories"]), "--run-dir", str(tmp_path / "sp"),
                      "--out", str(tmp_path / "sp.json")])
    (run,) = json.loads((tmp_path / "sp.json").read_text())["runs"]
    assert set(run["tasks"]) == {"stories", "instructions", "mix"}
    for row in run["tasks"].values():
        assert set(row["alone"]) == {"gpt_neo", "mamba_instructions"}
        assert sum(row["manticore"]["alphas"][0]) == pytest.approx(1.0)
        assert set(row["manticore"]["loss"]) == {"stories", "instructions", "mix"}
    assert run["tasks"]["mix"]["manticore"] == run["searched"]["darts_simultaneous"], "the mix reuses the search"
    pair_dir = tmp_path / "sp/specialists/seed0"
    assert (pair_dir / "search_stories_darts_simultaneous").is_dir()
    assert not (pair_dir / "search_mix_darts_simultaneous").exists()


@pytest.mark.parametrize("carry", [False, True])
def test_only_projectors_carry_over_unless_asked_so_a_one_hot_alpha_starts_as_its_component(tmp_path, carry):
    """The start after projector pretraining, under a one-hot alpha, against each component run alone."""
    from papers.manticore.specialists import with_own_embeddings

    general, components, V = _general_text(tmp_path)
    runner = _runner(components, V, tmp_path / "runs")
    start, _ = runner.pretrain_projectors(general, 3)
    if not carry:
        start = with_own_embeddings(runner, start)
    ids = torch.randint(0, V, (2, 16))
    for m, component in enumerate(components):
        net = runner.hybrid("fixed", start).eval()
        net.set_alphas(torch.eye(2)[m].expand(net.alphas.shape[0], 2))
        with torch.no_grad():
            same = torch.allclose(net(ids), component.eval()(ids), atol=1e-5)
        assert same is not carry, f"component {m}: the pretrained embeddings {'did' if carry else 'did not'} carry"


def _general_text(tmp_path):
    """32 random rows of 16 tokens as a tokenized set, and tiny components of its vocabulary."""
    from common.data.manifest import write_manifest
    from tests.test_manticore_hybrid import V, tiny_components

    torch.manual_seed(0)
    components = tiny_components()
    rows = {"input_ids": torch.randint(0, V, (32, 16)).tolist(), "attention_mask": [[1] * 16] * 32}
    general = tmp_path / "general"
    datasets.DatasetDict({s: datasets.Dataset.from_dict(rows) for s in ("train", "validation")}).save_to_disk(general)
    write_manifest(general, stage="test", params={}, counts={})
    return general, components, V


def _runner(components, vocab_size, run_dir, **tuning):
    from common.training.optim import OptimConfig
    from common.training.trainer import TrainerConfig
    from papers.manticore.finetune import FineTuneConfig, Runner

    trainer = TrainerConfig(val_every_n_steps=2, limit_val_batches=1, log_every_n_steps=1, progress_bar=False,
                            threads=1)
    # A constant rate: the first k steps of a run are then a run of k steps of their own.
    optim = OptimConfig(lr=1e-2, schedule="constant", warmup_steps=0)
    return Runner(FineTuneConfig(batch_size=4, trainer=trainer, optim=optim, **tuning), components, vocab_size,
                  run_dir)


def test_projector_snapshots_hold_the_weights_of_a_run_stopped_at_their_step(tmp_path, one_thread):
    general, components, V = _general_text(tmp_path)
    runner = _runner(components, V, tmp_path / "runs")
    final, _ = runner.pretrain_projectors(general, 4, snapshots=[2, 0])
    for step in (0, 2):
        expected, _ = _runner(components, V, tmp_path / f"short{step}").pretrain_projectors(general, step)
        kept = runner.projector_snapshot(step)
        assert kept.keys() == expected.keys()
        assert all(torch.allclose(kept[k], expected[k], atol=1e-7) for k in expected), f"step {step}"
    moved = [k for k in final if k.startswith("proj_") and not torch.equal(final[k], kept[k])]
    assert moved, "the last two steps changed the projectors: the snapshot is not the run's end"
    # A finished run is reused with its snapshots; a missing one says how to get it back.
    again, _ = runner.pretrain_projectors(general, 4, snapshots=[0, 2])
    assert all(torch.equal(again[k], final[k]) for k in final)
    (tmp_path / "runs/projectors/snapshots/step2.pt").unlink()
    with pytest.raises(DataError, match="step2.pt is missing.*delete"):
        runner.projector_snapshot(2)
    with pytest.raises(ConfigError, match=r"projector snapshots \[4\]"):
        runner.pretrain_projectors(general, 4, snapshots=[4])


def test_a_run_at_a_corner_does_not_depend_on_the_projectors_so_every_budget_shares_the_final_corners(
        tmp_path, one_thread):
    """Figure 4's budgets reuse the final sweep's corners (`projector_free`): the same one-hot run
    from two projector states ends the same, while an interior alpha does not."""
    from papers.manticore.finetune import val_loss
    from papers.manticore.specialists import projector_free, with_own_embeddings

    general, components, V = _general_text(tmp_path)
    runner = _runner(components, V, tmp_path / "runs", train_steps=2)
    final, _ = runner.pretrain_projectors(general, 4, snapshots=[0])
    cfg = SpecialistsConfig()
    starts = [with_own_embeddings(runner, state) for state in (runner.projector_snapshot(0), final)]
    for name, alphas in (("gpt", [[1.0, 0.0]]), ("mamba", [[0.0, 1.0]]), ("half", [[0.5, 0.5]])):
        losses = [val_loss(runner.fixed_run(f"{name}{i}", torch.tensor(alphas), start, general).history)
                  for i, start in enumerate(starts)]
        assert (losses[0] == losses[1]) is projector_free(alphas, cfg), (name, losses)
    assert not projector_free([[1.0, 0.0]], replace(cfg, carry_embeddings=True))
