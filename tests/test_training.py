"""The shared Lightning stack, each piece checked against an independent computation."""

from __future__ import annotations

import copy
import json
import math
import time

import lightning as L
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from common.data.datamodule import collate_lm
from common.errors import DataError, TrainingDiverged
from common.models.lm import LanguageModel, LMConfig
from common.training.callbacks import MetricsJSON, WallClockBudget
from common.training.modules import CausalLMModule, SequenceClassificationModule, token_cross_entropy
from common.training.optim import OptimConfig, lr_factor, param_groups
from common.training.trainer import TrainerConfig, build_trainer

V = 11


class TinyLM(nn.Module):
    def __init__(self, vocab=V, d=8, poison=False, delay=0.0):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.norm = nn.LayerNorm(d)
        self.proj = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.poison, self.delay = poison, delay

    def forward(self, ids):
        time.sleep(self.delay)
        h = self.proj(self.norm(self.emb(ids)))
        out = self.head(h)
        return out * float("nan") if self.poison else out


def lm_loader(n=16, t=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        ids = torch.randint(0, V, (t,), generator=g)
        length = int(torch.randint(2, t + 1, (1,), generator=g))
        mask = torch.arange(t) < length
        rows.append({"input_ids": ids.tolist(), "attention_mask": mask.long().tolist()})
    return DataLoader(rows, batch_size=4, collate_fn=collate_lm)


def test_token_cross_entropy_matches_a_loop():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, V)
    labels = torch.randint(0, V, (2, 5))
    labels[0, 3:] = -100
    total, count = 0.0, 0
    for b in range(2):
        for t in range(4):
            target = int(labels[b, t + 1])
            if target != -100:
                total += -math.log(torch.softmax(logits[b, t].double(), -1)[target].item())
                count += 1
    assert token_cross_entropy(logits, labels).item() == pytest.approx(total / count, rel=1e-5)


def test_collate_masks_padding_only():
    batch = collate_lm([{"input_ids": [5, 2, 2, 2], "attention_mask": [1, 1, 0, 0]}])
    assert batch["labels"].tolist() == [[5, 2, -100, -100]]  # the first </s> is a real target


def test_weight_decay_groups():
    net = TinyLM()
    decay, keep = param_groups(net, 0.1)
    assert decay["weight_decay"] == 0.1 and keep["weight_decay"] == 0.0
    assert {id(p) for p in decay["params"]} == {id(net.proj.weight)}
    expected_keep = {id(net.emb.weight), id(net.norm.weight), id(net.norm.bias), id(net.proj.bias)}
    assert {id(p) for p in keep["params"]} == expected_keep
    assert len(keep["params"]) == 4  # the tied head weight is not counted twice


def test_mamba_state_matrix_and_skip_are_not_decayed():
    # mamba-ssm exempts A_log and D; A_log is a matrix, so the ndim rule alone would decay it.
    from common.blocks.mamba import Mamba

    block = copy.deepcopy(Mamba(16))  # copies (as Manticore makes) keep the exemption
    decay, keep = param_groups(block, 0.1)
    decayed = {id(p) for p in decay["params"]}
    assert id(block.A_log) not in decayed and id(block.D) not in decayed
    assert {id(block.A_log), id(block.D)} <= {id(p) for p in keep["params"]}
    assert {id(block.in_proj.weight), id(block.x_proj.weight), id(block.out_proj.weight)} <= decayed


def test_lr_schedule_by_hand():
    cfg = OptimConfig(warmup_steps=10, schedule="cosine", min_lr_ratio=0.1)
    assert lr_factor(0, cfg, 110) == pytest.approx(0.1)
    assert lr_factor(9, cfg, 110) == pytest.approx(1.0)
    assert lr_factor(60, cfg, 110) == pytest.approx(0.1 + 0.9 * 0.5)  # half way down the cosine
    assert lr_factor(110, cfg, 110) == pytest.approx(0.1)
    linear = OptimConfig(warmup_steps=0, schedule="linear", min_lr_ratio=0.0)
    assert lr_factor(25, linear, 100) == pytest.approx(0.75)
    assert lr_factor(5, OptimConfig(warmup_steps=0, schedule="constant"), 100) == 1.0


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_classification_pooling_matches_manual(pooling):
    torch.manual_seed(0)
    module = SequenceClassificationModule(nn.Identity(), d_model=3, num_classes=2, pooling=pooling)
    hidden = torch.randn(2, 4, 3)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    pooled = module.pool(hidden, mask)
    if pooling == "last":
        expected = torch.stack([hidden[0, 1], hidden[1, 3]])
    else:
        expected = torch.stack([hidden[0, :2].mean(0), hidden[1].mean(0)])
    torch.testing.assert_close(pooled, expected)


def _trainer(tmp_path, callbacks=(), **overrides):
    cfg = TrainerConfig(max_steps=overrides.pop("max_steps", 8), val_every_n_steps=4, limit_val_batches=2,
                        log_every_n_steps=2, checkpoint_every_n_steps=4, progress_bar=False, **overrides)
    return build_trainer(cfg, tmp_path, callbacks=list(callbacks))


def test_causal_lm_module_trains_and_writes_metrics(tmp_path):
    L.seed_everything(0, verbose=False)
    metrics = MetricsJSON(tmp_path / "m.json", extra={"note": "x"})
    trainer = _trainer(tmp_path, [metrics], max_steps=8)
    module = CausalLMModule(TinyLM(), vocab_size=V, optim=OptimConfig(lr=1e-2, warmup_steps=1))
    trainer.fit(module, train_dataloaders=lm_loader(), val_dataloaders=lm_loader(seed=1))
    out = json.loads((tmp_path / "m.json").read_text())
    assert out["note"] == "x" and out["final"]["step"] == 8 and out["world_size"] == 1
    vals = [row for row in out["history"] if "val/loss" in row]
    assert [row["step"] for row in vals] == [4, 8]
    assert out["best"]["val/loss"] == min(row["val/loss"] for row in vals)
    # Perplexity is exp of the token-weighted validation loss, recomputed here by hand.
    net = module.net.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i, batch in enumerate(lm_loader(seed=1)):
            if i == 2:
                break
            n = int((batch["labels"][:, 1:] != -100).sum())
            total += token_cross_entropy(net(batch["input_ids"]), batch["labels"]).item() * n
            count += n
    assert out["final"]["val/loss"] == pytest.approx(total / count, rel=1e-5)
    assert out["final"]["val/ppl"] == pytest.approx(math.exp(total / count), rel=1e-5)
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


class HandCountedAccuracy(CausalLMModule):
    """Records every step's accuracy, computed by hand, and how often the module's metric ran."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.by_hand: dict[int, float] = {}
        self.metric_calls = 0
        update = self.train_acc.update

        def counted_update(*args, **kwargs):
            self.metric_calls += 1
            return update(*args, **kwargs)

        self.train_acc.update = counted_update

    def training_step(self, batch, batch_idx):
        with torch.no_grad():
            logits, labels = self.net(batch["input_ids"])[:, :-1], batch["labels"][:, 1:]
            scored = labels != -100
            hits = (logits.argmax(-1) == labels) & scored
            self.by_hand[self.trainer.global_step + 1] = hits.sum().item() / scored.sum().item()
        return super().training_step(batch, batch_idx)


def test_train_accuracy_is_computed_only_on_the_steps_it_is_recorded(tmp_path):
    """11 steps, logged every 3: rows at 3, 6 and 9 and the final metrics (step 11) hold the
    accuracy of their own step's batch, and the metric ran on those four steps only."""
    L.seed_everything(0, verbose=False)
    metrics = MetricsJSON(tmp_path / "m.json")
    cfg = TrainerConfig(max_steps=11, val_every_n_steps=100, limit_val_batches=1, log_every_n_steps=3,
                        checkpoint_every_n_steps=100, progress_bar=False)
    trainer = build_trainer(cfg, tmp_path, callbacks=[metrics])
    module = HandCountedAccuracy(TinyLM(), vocab_size=V, optim=OptimConfig(lr=1e-2, warmup_steps=1))
    trainer.fit(module, train_dataloaders=lm_loader(n=64), val_dataloaders=lm_loader(seed=1))
    out = json.loads((tmp_path / "m.json").read_text())
    rows = {row["step"]: row["train/acc"] for row in out["history"] if "train/acc" in row}
    assert sorted(rows) == [3, 6, 9]
    for step, value in rows.items():
        assert value == pytest.approx(module.by_hand[step], abs=1e-6)
    assert out["final"]["train/acc"] == pytest.approx(module.by_hand[11], abs=1e-6)
    assert len(set(module.by_hand.values())) > 2  # the batches differ, so a stale value would show
    assert module.metric_calls == 4


def test_nan_loss_stops_with_clear_error(tmp_path):
    trainer = _trainer(tmp_path)
    module = CausalLMModule(TinyLM(poison=True), vocab_size=V)
    with pytest.raises(TrainingDiverged, match=r"train/loss became nan at step 0; lower optim.lr"):
        trainer.fit(module, train_dataloaders=lm_loader(), val_dataloaders=lm_loader())


def test_wall_clock_budget_stops_early(tmp_path):
    trainer = _trainer(tmp_path, [WallClockBudget(0.3)], max_steps=10_000)
    module = CausalLMModule(TinyLM(delay=0.02), vocab_size=V)
    start = time.monotonic()
    trainer.fit(module, train_dataloaders=lm_loader(n=4000), val_dataloaders=lm_loader())
    assert 1 <= trainer.global_step < 100
    assert time.monotonic() - start < 10


def test_sequence_classification_learns_a_separable_task(tmp_path):
    """Label = whether token 1 occurs in the unpadded part. A causal running sum of embeddings,
    pooled at the last real token, separates it linearly, so accuracy must reach 1; pooling that
    read the padding (token 1 for negatives) would fail."""

    class RunningSum(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 4)

        def forward(self, ids):
            return self.emb(ids).cumsum(dim=1)

    L.seed_everything(0, verbose=False)
    g = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(64):
        ids = torch.randint(2, V, (8,), generator=g)
        length = int(torch.randint(3, 9, (1,), generator=g))
        label = int(torch.rand(1, generator=g) < 0.5)
        if label:
            ids[int(torch.randint(0, length, (1,), generator=g))] = 1
        ids[length:] = 1 - label  # padding that would flip the answer if it leaked into pooling
        rows.append({"input_ids": ids, "attention_mask": (torch.arange(8) < length).long(), "label": label})
    loader = DataLoader(rows, batch_size=16)
    module = SequenceClassificationModule(RunningSum(), d_model=4, num_classes=2, pooling="last",
                                          optim=OptimConfig(lr=0.05, warmup_steps=0, schedule="constant"))
    trainer = _trainer(tmp_path, max_steps=150)
    trainer.fit(module, train_dataloaders=loader, val_dataloaders=loader)
    assert trainer.callback_metrics["val/acc"].item() == 1.0


# Networks that cannot take `lm_loader`'s rows (6 tokens, ids 0..10), and the error each gets.
MISFITS = {
    "ids_beyond_vocab": (dict(vocab_size=8, pattern="mamba", n_ctx=6),
                         "token ids 0..10, but the model's vocabulary has 8"),
    "rows_shorter_than_a_mixer_window": (dict(vocab_size=V, pattern="mixer", n_ctx=12), "rows of 6 tokens .* n_ctx=12"),
    "rows_shorter_than_learned_positions": (dict(vocab_size=V, pattern="mamba", n_ctx=12, pos_embedding="learned"),
                                            "rows of 6 tokens .* n_ctx=12"),
}


@pytest.mark.parametrize("case", MISFITS)
def test_data_the_network_was_not_built_for_is_refused_before_a_step(tmp_path, case):
    """A vocabulary smaller than the data's ids, or a window longer than the rows in a network with
    weights per position trained from scratch (`full_window`), is one DataError, raised before any
    weight moves."""
    config, match = MISFITS[case]
    net = LanguageModel(LMConfig(d_model=8, **config))
    before = copy.deepcopy(net.state_dict())
    with pytest.raises(DataError, match=match):
        _trainer(tmp_path).fit(CausalLMModule(net, vocab_size=config["vocab_size"], full_window=True),
                               train_dataloaders=lm_loader(), val_dataloaders=lm_loader())
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


@pytest.mark.parametrize("pattern, full_window", [("mamba", True), ("attn,swiglu", True), ("mixer", False)])
def test_rows_shorter_than_the_window_train_where_no_position_goes_untrained(tmp_path, pattern, full_window):
    """The controls: the same short rows train networks whose weights serve every position, and a
    network with weights per position that is not trained from scratch (fine-tuning a pretrained
    one on shorter rows leaves the later positions as they were)."""
    net = LanguageModel(LMConfig(vocab_size=V, d_model=8, pattern=pattern, n_ctx=12,
                                 blocks={"attn": {"n_heads": 2}} if "attn" in pattern else {}))
    before = copy.deepcopy(net.state_dict())
    trainer = _trainer(tmp_path, max_steps=2)
    trainer.fit(CausalLMModule(net, vocab_size=V, full_window=full_window),
                train_dataloaders=lm_loader(), val_dataloaders=lm_loader())
    assert trainer.global_step == 2
    after = net.state_dict()
    if full_window:  # every weight serves every position, so every one trained
        assert [k for k in before if torch.equal(before[k], after[k])] == []
    else:  # the mixer's output positions 6-11 never see a 6-token row: their weights only decay
        w0, w1 = before["blocks.0.conv.weight"], after["blocks.0.conv.weight"]
        torch.testing.assert_close(w1[6:], w0[6:] * (w1[6, 0, 0] / w0[6, 0, 0]))
        assert not torch.allclose(w1[:6], w0[:6] * (w1[6, 0, 0] / w0[6, 0, 0]))
        assert torch.equal(before["blocks.0.conv.bias"][6:], after["blocks.0.conv.bias"][6:])
