"""The root stages at the smoke profile: chaining, determinism, resume after a kill (DDP: test_scale_out)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from common.data.tokenized import load_tokenized
from common.stages import lm_baseline
from tests.conftest import ROOT, smoke_params, write_params

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`


def baseline_args(smoke_data, out, params=None):
    return ["--params", str(params or smoke_data["params"]), "--data", str(smoke_data["tokenized"] / "packed"),
            "--tokenizer", str(smoke_data["tokenizer"]), "--run-dir", str(out / "run"),
            "--metrics", str(out / "metrics.json"), "--plot", str(out / "loss.png")]


def deterministic_part(path):
    metrics = json.loads(path.read_text())
    metrics.pop("timing")
    for row in metrics["history"]:
        row.pop("elapsed_s")
    return metrics


def test_smoke_chain_outputs(smoke_data):
    stories = json.loads((smoke_data["stories"] / "manifest.json").read_text())
    assert stories["counts"] == {"train": 400, "validation": 50}
    # Later stages must not write into an earlier stage's output (datasets' map caches would).
    on_disk = {str(p.relative_to(smoke_data["stories"])) for p in smoke_data["stories"].rglob("*") if p.is_file()}
    assert on_disk == {*stories["files"], "manifest.json"}
    for layout in ("padded", "packed"):
        manifest = json.loads((smoke_data["tokenized"] / layout / "manifest.json").read_text())
        assert manifest["counts"]["train"] > 0 and manifest["files"]


def test_lm_baseline_is_deterministic(smoke_data, tmp_path):
    lm_baseline.main(baseline_args(smoke_data, tmp_path / "a"))
    lm_baseline.main(baseline_args(smoke_data, tmp_path / "b"))
    a, b = deterministic_part(tmp_path / "a" / "metrics.json"), deterministic_part(tmp_path / "b" / "metrics.json")
    assert a == b
    assert a["final"]["step"] == 12 and len([r for r in a["history"] if "val/loss" in r]) == 2
    assert (tmp_path / "a" / "loss.png").read_bytes()[:4] == b"\x89PNG"


def test_lm_baseline_reads_rows_cut_to_its_data_n_ctx(smoke_data, tmp_path):
    """`data.n_ctx` cuts the rows the baseline trains on (it was ignored: the model kept the stored width)."""
    from common.data.datamodule import TextDataModule

    stored = len(load_tokenized(smoke_data["tokenized"] / "packed")["train"][0]["input_ids"])
    seen = []
    original = TextDataModule.setup
    params = write_params(tmp_path / "params.yaml", smoke_params(**{"lm_baseline.data.n_ctx": 8}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TextDataModule, "setup", lambda self, stage=None: (original(self, stage), seen.append(self))[0])
        lm_baseline.main(baseline_args(smoke_data, tmp_path, params))
    assert stored > 8 and json.loads((tmp_path / "metrics.json").read_text())["n_ctx"] == 8
    batch = next(iter(seen[0].train_dataloader()))
    assert batch["input_ids"].shape[1] == 8


def test_killed_run_resumes_from_last_checkpoint(smoke_data, tmp_path):
    """Kill a run right after its first checkpoint, restart it, and check it resumed.

    Its final metrics must equal those of an uninterrupted run: the resumed process restores
    weights, optimizer, schedule and metric history from the checkpoint.
    """
    params = write_params(tmp_path / "params.yaml", smoke_params(**{
        "lm_baseline.trainer.max_steps": 300, "lm_baseline.trainer.checkpoint_every_n_steps": 10,
        "lm_baseline.trainer.val_every_n_steps": 100,
        # One thread in the subprocesses too, as in this (xdist) process: both runs take one code path.
        "lm_baseline.trainer.threads": 1}))
    args = baseline_args(smoke_data, tmp_path / "killed", params)
    ckpt = tmp_path / "killed" / "run" / "checkpoints" / "last.ckpt"
    proc = subprocess.Popen([sys.executable, "-m", "common.stages.lm_baseline", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ckpt.is_file() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ckpt.is_file(), proc.stderr.read()
    state = json.loads((tmp_path / "killed" / "run" / "run_state.json").read_text())
    assert state["complete"] is False and not (tmp_path / "killed" / "metrics.json").exists()

    import torch
    killed_at = torch.load(ckpt, map_location="cpu", weights_only=False)["global_step"]
    assert 0 < killed_at < 300

    restarted = subprocess.run([sys.executable, "-m", "common.stages.lm_baseline", *args], cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    assert "resuming from" in restarted.stderr  # and the metrics below equal an uninterrupted run's

    lm_baseline.main(baseline_args(smoke_data, tmp_path / "straight", params))
    resumed = deterministic_part(tmp_path / "killed" / "metrics.json")
    straight = deterministic_part(tmp_path / "straight" / "metrics.json")
    assert resumed["final"]["step"] == 300
    assert resumed["final"] == pytest.approx(straight["final"], rel=1e-5)
