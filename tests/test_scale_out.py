"""Every training path under two-process DDP on CPU (gloo), against one process at the same global batch.

Each test runs a stage's own command twice, at the smoke profile: once as the stage is configured
with only trainer keys changed (`strategy: ddp`, `devices: 2`), so two processes each train on
`batch_size` rows a step; once in one process with `2 * batch_size` rows a step. The processes'
shares of a step are exactly the rows the one process trains on (`EpochShuffleSampler`), their
gradients are averaged, and the logged losses are the global batch's; BlackMamba's Sinkhorn
routing balances over both processes' tokens. So the two runs compute the same thing in another
order of floating-point sums, and their results must agree:

- losses, accuracies and scores within a relative 1e-5 (measured: at most 5e-6; float32 sums of
  two halves and of the whole differ in the last bits, and a few optimizer steps carry that on),
  and figures a stage rounds to 4 decimals within one unit of their last place;
- Manticore's searched mixture weights within 1e-3 absolute (measured: at most 1.7e-4): Adam
  divides the mixture weights' gradient by its own running size, and on a weight whose gradient
  is near zero that ratio turns last-bit differences into differences of 1e-4. The reports round
  mixture weights to two decimals.

The paths, and the stages that take each (the rest of a paper's training stages run the same
modules on the same data modules): the dense Llama baseline (`lm_baseline`); BlackMamba's Mamba, MoE
and transformer language models (`train_compare`); the masked mixers' causal models (`clm`, and
`norms`, `context_length`, `mixer_variants`, `train_test_gap`, `bidirectional`, `generation` through
the same `train_network`) and autoencoders (`autoencoders`); Manticore's mixture-weight search,
retraining and hybrids on MAD (`mad_experiments`, `mad_sizing`; the root's `mad_suite`), its
classifiers and searched classifiers on Long Range Arena (`lra_experiments`, `lra_sizing`), and
its projector pretraining with frozen components, searches (DARTS, DASH, GAEA; alternating and
simultaneous) and fixed-weight retraining on text (`nl_experiments`; `programmed`,
`projector_budget`, `finetune_tasks` and `specialists` through the same `Runner`).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, run_module, smoke_params, with_overrides, write_params

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`

DDP = {"trainer.strategy": "ddp", "trainer.devices": 2}
LOSS_RTOL = 1e-5
ALPHA_ATOL = 1e-3
TIMING = ("seconds", "elapsed_s", "timing")
PER_PROCESS = ("batch_size", "world_size")  # what the two runs differ in


def paper_params(paper: str, section: str, overrides: dict) -> dict:
    """`papers/<paper>/params.yaml` at the smoke profile, with dotted `overrides` in `section`'s smoke block."""
    params = yaml.safe_load((ROOT / "papers" / paper / "params.yaml").read_text())
    params["profile"] = "smoke"  # a paper's params file names no profile; the stage reads it here first
    return with_overrides(params, section, overrides)


def one_and_two_processes(tmp_path: Path, module: str, params: dict, section: str, batch_key: str,
                          argv) -> tuple[Path, Path]:
    """Run `module` in one process with twice the stage's `batch_key` and in two DDP processes with
    it as configured; `argv(out)` gives the command's arguments writing under `out`. Returns the
    two output directories."""
    block = params[section]["smoke"]
    batch = lookup(block, batch_key)
    if batch is None:
        batch = lookup(params[section]["base"], batch_key)
    outs = {}
    for label, overrides in (("one", {batch_key: 2 * batch}), ("ddp", DDP)):
        out = tmp_path / label
        out.mkdir()
        path = write_params(out / "params.yaml", with_overrides(params, section, overrides))
        done = run_module(module, "--params", path, *argv(out), timeout=600)
        assert done.returncode == 0, f"{label}: {done.stderr[-4000:]}"
        if label == "ddp":  # both processes ran the stage; the second says whose its lines are
            assert "[local_rank 1" in done.stderr, done.stderr[-2000:]
            assert not list(out.rglob(".*.tmp-*")), "a process left a scratch output behind"
        outs[label] = out
    return outs["one"], outs["ddp"]


def lookup(block: dict, dotted: str):
    node = block
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def assert_same_results(one, ddp, path: str = "", mixture_weights: bool = False) -> int:
    """Every number of `one` equals `ddp`'s within the tolerances above (times excepted, and the
    per-process batch size a result records); returns how many were compared."""
    if isinstance(one, dict):
        assert isinstance(ddp, dict) and set(one) == set(ddp), f"{path}: keys {sorted(set(one) ^ set(ddp))}"
        return sum(assert_same_results(one[k], ddp[k], f"{path}/{k}", mixture_weights or k in ("alphas", "trajectory"))
                   for k in one if not any(t in k for t in TIMING) and k not in PER_PROCESS)
    if isinstance(one, list):
        assert isinstance(ddp, list) and len(one) == len(ddp), f"{path}: lengths differ"
        return sum(assert_same_results(a, b, f"{path}[{i}]", mixture_weights) for i, (a, b) in enumerate(zip(one, ddp)))
    if isinstance(one, float) and isinstance(ddp, float):
        if mixture_weights:
            assert abs(one - ddp) <= ALPHA_ATOL, f"{path}: {one} vs {ddp}"
        else:
            # A figure a stage rounds to 4 decimals may differ by one in its last place.
            rounded = 1.01e-4 if round(one, 4) == one and round(ddp, 4) == ddp else 0.0
            assert math.isclose(one, ddp, rel_tol=LOSS_RTOL, abs_tol=rounded), f"{path}: {one} vs {ddp}"
        return 1
    assert one == ddp, f"{path}: {one!r} vs {ddp!r}"
    return 1


def compare_json(one: Path, ddp: Path) -> None:
    compared = assert_same_results(json.loads(one.read_text()), json.loads(ddp.read_text()))
    assert compared > 20, f"{one.name}: only {compared} values"


def test_dense_baseline(smoke_data, tmp_path):
    params = smoke_params(**{"lm_baseline.trainer.max_steps": 6, "lm_baseline.trainer.val_every_n_steps": 3,
                             "lm_baseline.trainer.log_every_n_steps": 1})
    one, ddp = one_and_two_processes(tmp_path, "common.stages.lm_baseline", params, "lm_baseline", "data.batch_size",
                                     lambda out: baseline_argv(smoke_data, out))
    compare_json(one / "metrics.json", ddp / "metrics.json")
    assert json.loads((ddp / "metrics.json").read_text())["world_size"] == 2


def baseline_argv(smoke_data, out: Path) -> list:
    return ["--data", smoke_data["tokenized"] / "packed", "--tokenizer", smoke_data["tokenizer"],
            "--run-dir", out / "run", "--metrics", out / "metrics.json", "--plot", out / "loss.png"]


def test_blackmamba_models(smoke_data, tmp_path):
    """BlackMamba (Mamba and Sinkhorn-routed top-1 experts), dense Mamba, the one-expert control,
    the transformer and the MoE transformer, and the deep routing model."""
    params = paper_params("blackmamba", "train_compare", {"seeds": [0]})
    one, ddp = one_and_two_processes(
        tmp_path, "papers.blackmamba.train_compare", params, "train_compare", "data.batch_size",
        lambda out: ["--data", smoke_data["tokenized"] / "packed", "--tokenizer", smoke_data["tokenizer"],
                     "--run-dir", out / "train", "--models-out", out / "models", "--out", out / "train_compare.json",
                     "--plot", out / "loss.png"])
    compare_json(one / "train_compare.json", ddp / "train_compare.json")  # FLOPs count both processes' tokens


@pytest.mark.parametrize("section", ["clm", "autoencoders"])
def test_masked_mixer_models(smoke_data, tmp_path, section):
    params = paper_params("masked_mixers", section, {"seeds": [0]})
    one, ddp = one_and_two_processes(
        tmp_path, "papers.masked_mixers.compare", params, section, "batch_size",
        lambda out: ["--section", section, "--data", smoke_data["tokenized"] / "padded", "--tokenizer",
                     smoke_data["tokenizer"], "--run-dir", out / "runs", "--results", out])
    compare_json(one / f"{section}.json", ddp / f"{section}.json")
    assert any((ddp / "runs").rglob("model.pt"))


def test_manticore_on_mad(tmp_path):
    """Components and existing hybrids alone, Manticore's searches (its own components' embeddings
    unused: DDP is told) and their discretized retraining."""
    params = paper_params("manticore", "mad_tasks", {})  # the batch and the trainer: mad_tasks' recipe
    one, ddp = one_and_two_processes(tmp_path, "papers.manticore.mad_experiments", params, "mad_tasks",
                                     "batch_size", lambda out: ["--run-dir", out / "runs", "--out", out / "mad.json"])
    compare_json(one / "mad.json", ddp / "mad.json")


@pytest.fixture(scope="module")
def lra_data(tmp_path_factory):
    from common.stages import lra_generate

    out = tmp_path_factory.mktemp("lra") / "lra"
    params = write_params(out.parent / "params.yaml", smoke_params())
    lra_generate.main(["--params", str(params), "--out", str(out)])
    return out


def test_manticore_on_lra(lra_data, tmp_path):
    """Classifiers, the hybrid with searched weights, and the hybrid with a component programmed out
    (weight exactly 0, so its parameters get no gradient)."""
    params = paper_params("manticore", "lra_tasks", {"seeds": [0], "trainer.threads": 1})
    one, ddp = one_and_two_processes(
        tmp_path, "papers.manticore.lra_experiments", params, "lra_tasks", "batch_size",
        lambda out: ["--lra", lra_data, "--run-dir", out / "runs", "--out", out / "lra.json"])
    compare_json(one / "lra.json", ddp / "lra.json")


@pytest.fixture(scope="module")
def manticore_text(smoke_data, tmp_path_factory):
    """Manticore's components pretrained at smoke, and the text its fine-tuning stages read."""
    from papers.manticore import completions, components, general_text, instruction_text

    root = tmp_path_factory.mktemp("manticore")
    params = str(write_params(root / "params.yaml", paper_params("manticore", "components", {})))
    instruction_text.main(["--params", params, "--tokenizer", str(smoke_data["tokenizer"]),
                           "--out", str(root / "instruction_text"), "--summary", str(root / "instruction_text.json")])
    components.main(["--params", params, "--data", str(smoke_data["tokenized"] / "packed"),
                     "--instructions", str(root / "instruction_text"), "--tokenizer", str(smoke_data["tokenizer"]),
                     "--run-dir", str(root / "components_runs"), "--out", str(root / "components"),
                     "--metrics", str(root / "components.json")])
    for stage in (general_text, completions):
        out = "general" if stage is general_text else "completions"
        stage.main(["--params", params, "--components", str(root / "components"), "--stories",
                    str(smoke_data["stories"]), "--out", str(root / out), "--summary", str(root / f"{out}.json")])
    return root


def test_manticore_on_text(manticore_text, tmp_path):
    """Projector pretraining with frozen components, every search method in both update schedules,
    and fixed-weight retraining over the sweep."""
    params = paper_params("manticore", "nl_experiments", {"methods": ["darts", "dash", "gaea"],
                                                          "updates": ["alternating", "simultaneous"]})
    one, ddp = one_and_two_processes(
        tmp_path, "papers.manticore.nl_experiments", params, "nl_experiments", "batch_size",
        lambda out: ["--components", manticore_text / "components", "--completions",
                     manticore_text / "completions" / "tokenized", "--general", manticore_text / "general",
                     "--run-dir", out / "runs", "--out", out / "nl.json", "--plot", out / "landscape.png"])
    compare_json(one / "nl.json", ddp / "nl.json")


def test_a_killed_ddp_run_resumes(smoke_data, tmp_path):
    """Both processes of a DDP run killed after its first checkpoint; the same command again resumes
    from it and ends where an uninterrupted run ends."""
    overrides = {"lm_baseline.trainer.max_steps": 60, "lm_baseline.trainer.checkpoint_every_n_steps": 5,
                 "lm_baseline.trainer.val_every_n_steps": 30, "lm_baseline.trainer.threads": 1,
                 **{f"lm_baseline.{k}": v for k, v in DDP.items()}}
    params = write_params(tmp_path / "params.yaml", smoke_params(**overrides))
    killed, straight = tmp_path / "killed", tmp_path / "straight"
    argv = [sys.executable, "-m", "common.stages.lm_baseline", "--params", str(params)]
    ckpt = killed / "run" / "checkpoints" / "last.ckpt"
    proc = subprocess.Popen([*argv, *map(str, baseline_argv(smoke_data, killed))], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not ckpt.is_file() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher and the process it started, as a killed job
    proc.wait()
    assert ckpt.is_file(), proc.stderr.read()[-3000:]
    assert not (killed / "metrics.json").exists()

    again = run_module("common.stages.lm_baseline", "--params", params, *baseline_argv(smoke_data, killed), timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    # Rank zero says so; the other process took the same decision from the same files, or the two
    # would not have trained to the end together.
    assert "resuming from" in again.stderr, again.stderr[-3000:]
    done = run_module("common.stages.lm_baseline", "--params", params, *baseline_argv(smoke_data, straight),
                      timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed, whole = (json.loads((d / "metrics.json").read_text()) for d in (killed, straight))
    assert resumed["final"]["step"] == 60
    assert_same_results(resumed["final"], whole["final"])


def ddp_everywhere(repo: Path) -> list[str]:
    """Switch every section of `repo` whose base declares a trainer to two DDP processes at smoke
    (trainer keys only); the sections switched."""
    switched = []
    for path in [repo / "params.yaml", *sorted((repo / "papers").glob("*/params.yaml"))]:
        params = yaml.safe_load(path.read_text())
        for name, section in params.items():
            if isinstance(section, dict) and "trainer" in (section.get("base") or {}):
                block = section.get("smoke") or {}
                block["trainer"] = {**(block.get("trainer") or {}), "strategy": "ddp", "devices": 2}
                section["smoke"] = block
                switched.append(f"{path.relative_to(repo)}:{name}")
        path.write_text(yaml.safe_dump(params, sort_keys=False))
    return switched


@pytest.mark.slow  # a paper's whole pipeline under DVC, every training stage in two processes: 5 to 15 min
@pytest.mark.parametrize("paper", ["blackmamba", "masked_mixers", "manticore"])
def test_every_training_stage_runs_under_ddp(paper, tmp_path):
    """Not compared with one process (the tests above do that per path): every stage of the paper's
    pipeline, and of the root one it reads, runs to its outputs and its verdicts with each trainer
    spanning two processes."""
    from common.claims.ledger import check_ledger
    from tests.test_dvc import _run, copy_checkout

    repo = copy_checkout(tmp_path / "repo", profile="smoke")
    assert len(ddp_everywhere(repo)) >= 8
    done = _run([sys.executable, "-m", "dvc", "repro", f"papers/{paper}/dvc.yaml"], repo, timeout=3600)
    log = done.stdout + done.stderr
    assert "[local_rank 1" in log and "Traceback" not in log, log[-3000:]
    check_ledger(json.loads((repo / "papers" / paper / "results" / "claims.json").read_text())["claims"])
