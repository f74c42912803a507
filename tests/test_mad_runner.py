"""The MAD runner: DataModule batches, scoring on exactly the scored positions, the compression
autoencoder, and training a registered model through the Lightning stack."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from common.data.mad import IGNORE_INDEX, MADTaskConfig, generate
from common.data.task_datamodules import MADDataModule
from common.models.lm import LMConfig
from common.training.mad import MADAutoEncoder, build_mad_model, evaluate_mad, train_on_mad
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig

ICR = MADTaskConfig(task="in-context-recall", vocab_size=16, seq_len=32, num_train_examples=40,
                    num_test_examples=30, seed=4)


def trainer(steps: int) -> TrainerConfig:
    return TrainerConfig(max_steps=steps, val_every_n_steps=steps, limit_val_batches=2, log_every_n_steps=4,
                         checkpoint_every_n_steps=steps, progress_bar=False)


# --- DataModule -------------------------------------------------------------------------------

def test_datamodule_serves_the_generated_splits():
    data = generate(ICR)  # the same seeded stream the DataModule draws from
    dm = MADDataModule(ICR, batch_size=8, seed=1)
    dm.setup()
    val = list(dm.val_dataloader())
    assert torch.equal(torch.cat([b["input_ids"] for b in val]), torch.as_tensor(data["test_inputs"]))
    assert torch.equal(torch.cat([b["labels"] for b in val]), torch.as_tensor(data["test_targets"]))
    assert val[0]["input_ids"].dtype == torch.long
    # One epoch of training batches is a permutation of the train rows.
    train = torch.cat([b["input_ids"] for b in dm.train_dataloader()])
    assert train.shape == data["train_inputs"].shape
    as_rows = lambda a: sorted(map(tuple, np.asarray(a).tolist()))  # noqa: E731
    assert as_rows(train) == as_rows(data["train_inputs"])
    assert not torch.equal(train, torch.as_tensor(data["train_inputs"]))  # shuffled


# --- scoring positions ------------------------------------------------------------------------

class RecallOracle(nn.Module):
    """Reads the answer off the inputs: at a key shown before, predict the value that followed it
    last time (keys are [0, 8), values [8, 16) at vocabulary 16). `lag` shifts the predictions."""

    def __init__(self, lag: int = 0):
        super().__init__()
        self.lag = lag
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        out = torch.zeros(*ids.shape, 16)
        for b, row in enumerate(ids.tolist()):
            last = {}
            for t, tok in enumerate(row):
                if tok < 8 and tok in last and t + self.lag < len(row):
                    out[b, t + self.lag, last[tok]] = 1.0
                if tok < 8 and t + 1 < len(row):
                    last[tok] = row[t + 1]
        return out


def test_evaluation_scores_exactly_the_recall_positions():
    dm = MADDataModule(ICR, batch_size=7)
    dm.setup()
    scores = evaluate_mad(RecallOracle(), dm.test_dataloader())
    assert scores["accuracy"] == 1.0 and scores["class_averaged_accuracy"] == 1.0
    assert scores["scored_positions"] == int((dm.data["test_targets"] != IGNORE_INDEX).sum())
    # Off by one position, the same answers are (almost) all wrong.
    assert evaluate_mad(RecallOracle(lag=1), dm.test_dataloader())["accuracy"] < 0.3


# --- compression --------------------------------------------------------------------------------

COMPRESSION = MADTaskConfig(task="compression", vocab_size=6, seq_len=5, num_train_examples=512,
                            num_test_examples=64, seed=0)
SMALL_LM = LMConfig(d_model=32, pattern="attn,swiglu", blocks={"attn": {"n_heads": 2}})


@pytest.mark.parametrize("pattern", ["attn,swiglu", "mamba"])
def test_compression_uses_the_autoencoder_around_any_backbone(pattern):
    lm = LMConfig(d_model=16, pattern=pattern)
    net = build_mad_model(lm, COMPRESSION)
    assert isinstance(net, MADAutoEncoder)
    ids = torch.tensor([[1, 2, 3, 4, 5], [4, 3, 2, 1, 5]])
    logits = net(ids)
    assert logits.shape == (2, 5, 6)
    # Every output position is decoded from the last position's state alone: changing an early
    # input changes all outputs, and two inputs with one last state give identical outputs.
    changed = ids.clone()
    changed[0, 0] = 0
    assert not torch.allclose(net(changed)[0], logits[0])
    net.encoder = nn.Identity()  # now the "state" at the last position is just its embedding id
    same_last = torch.rand(2, 5, 16)
    same_last[1, -1] = same_last[0, -1]
    out = net(same_last)
    assert torch.allclose(out[0], out[1])


@pytest.mark.usefixtures("one_thread")
def test_compression_trains_and_is_scored_on_every_position(tmp_path):
    scores = train_on_mad(SMALL_LM, COMPRESSION, trainer(200), tmp_path, optim=OptimConfig(lr=1e-2, warmup_steps=10))
    assert scores["scored_positions"] == 64 * 5  # targets = the whole input, nothing masked
    # Chance: 1/5 on the 4 content positions, the compression token itself is fixed: (4/5 + 1) / 5.
    assert scores["accuracy"] > 0.36 + 0.15, scores


@pytest.mark.usefixtures("one_thread")
def test_attention_model_learns_memorization(tmp_path):
    """A fixed key -> value map of 15 pairs: a small transformer must memorise it (chance is 1/15)."""
    task = MADTaskConfig(task="memorization", vocab_size=32, seq_len=16, num_train_examples=256,
                         num_test_examples=64, seed=0)
    scores = train_on_mad(SMALL_LM, task, trainer(120), tmp_path, optim=OptimConfig(lr=1e-2, warmup_steps=10),
                          batch_size=32)
    assert scores["steps"] == 120
    assert scores["accuracy"] > 0.95, scores
    assert scores["class_averaged_accuracy"] > 0.9 and scores["loss"] < 0.5
