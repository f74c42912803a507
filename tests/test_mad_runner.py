"""The MAD runner trains a registered model on a task and scores it with MAD's metrics."""

from __future__ import annotations

import pytest

from common.data.mad import MADTaskConfig
from common.models.lm import LMConfig
from common.training.mad import train_on_mad
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig


@pytest.mark.usefixtures("one_thread")
def test_attention_model_learns_memorization(tmp_path):
    """A fixed key -> value map of 15 pairs: a small transformer must memorise it (chance is 1/15)."""
    task = MADTaskConfig(task="memorization", vocab_size=32, seq_len=16, num_train_examples=256,
                         num_test_examples=64, seed=0)
    trainer = TrainerConfig(max_steps=120, val_every_n_steps=120, limit_val_batches=2, log_every_n_steps=4,
                            checkpoint_every_n_steps=120, progress_bar=False)
    scores = train_on_mad(LMConfig(d_model=32, pattern="attn,swiglu", repeat=1, blocks={"attn": {"n_heads": 2}}),
                          task, trainer, tmp_path, optim=OptimConfig(lr=1e-2, warmup_steps=10), batch_size=32)
    assert scores["steps"] == 120
    assert scores["accuracy"] > 0.95, scores
    assert scores["class_averaged_accuracy"] > 0.9 and scores["loss"] < 0.5
