"""The CUDA paths, checked against the CPU and pure-PyTorch paths they replace. CI has no GPU, so
every test here is skipped there; they run on a GPU machine (`pytest tests/test_cuda.py`), and the
mamba-ssm tests only where `mamba-ssm` and `causal-conv1d` are installed with their kernels."""

from __future__ import annotations

import pytest
import torch

from common.blocks import BLOCKS, build_block
from common.blocks.mamba import Mamba, _mamba_ssm_ops
from common.blocks.moe import MoE
from common.data.mad import MADTaskConfig
from common.models.lm import LanguageModel, LMConfig
from common.models.mamba import mamba_language_model
from common.training.mad import train_on_mad
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_kernels = pytest.mark.skipif(_mamba_ssm_ops() is None, reason="needs mamba-ssm and causal-conv1d kernels")

D, T = 32, 40
KWARGS = {"hf_decoder": {"family": "llama", "config": {"num_attention_heads": 4, "intermediate_size": 64}}}


@pytest.fixture(autouse=True)
def exact_fp32():
    # TF32 would make CUDA fp32 differ from the CPU in the third decimal; these tests compare paths.
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def make(name: str, **options):
    torch.manual_seed(0)
    return build_block(name, D, layer_idx=1, shared={"n_ctx": 64}, **{**KWARGS.get(name, {}), **options})


def grads(module: torch.nn.Module, x: torch.Tensor, out: torch.Tensor) -> list[torch.Tensor]:
    params = [p for p in module.parameters() if p.requires_grad]
    return list(torch.autograd.grad(out.float().pow(2).mean(), [x, *params], allow_unused=True))


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_every_block_on_cuda_matches_the_cpu(name):
    """fp32 forward and gradients on CUDA (fused SDPA, cuFFT, CUDA scans) against the CPU."""
    cpu = make(name).train()
    gpu = make(name).cuda().train()
    gpu.load_state_dict(cpu.state_dict())
    x = torch.randn(2, T, D, requires_grad=True)
    xg = x.detach().cuda().requires_grad_()
    if isinstance(cpu, MoE):  # the router's Sinkhorn iterations stop at a tolerance: route once, on CPU
        gpu.train(False), cpu.train(False)
    out, out_g = cpu(x), gpu(xg)
    torch.testing.assert_close(out_g.cpu(), out, rtol=1e-4, atol=1e-4)
    for a, b in zip(grads(cpu, x, out), grads(gpu, xg, out_g)):
        if a is not None:
            torch.testing.assert_close(b.cpu(), a, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_every_block_trains_in_bf16_autocast(name):
    block = make(name).cuda().train()
    x = torch.randn(4, T, D, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = block(x)
    assert torch.isfinite(out).all()
    assert all(g is None or torch.isfinite(g).all() for g in grads(block, x, out))


@needs_kernels
def test_auto_picks_the_mamba_ssm_kernels_on_cuda():
    block = Mamba(D).cuda()
    assert block._backend(torch.zeros(1, 2, D, device="cuda"), None) == "cuda"
    assert block._backend(torch.zeros(1, 2, D), None) == "chunked"


@needs_kernels
def test_mamba_ssm_kernels_match_our_scans():
    """The same weights through mamba-ssm's fused kernels, our chunked scan and the reference loop."""
    blocks = {scan: Mamba(D, d_state=8, scan=scan).cuda() for scan in ("cuda", "chunked", "reference")}
    for block in blocks.values():
        block.load_state_dict(blocks["reference"].state_dict())
    x = torch.randn(2, 70, D, device="cuda")
    results = {}
    for scan, block in blocks.items():
        xi = x.clone().requires_grad_()
        out = block(xi)
        results[scan] = [out.detach(), *grads(block, xi, out)]
    for scan in ("cuda", "chunked"):
        for got, want in zip(results[scan], results["reference"]):
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-5)


@needs_kernels
def test_cached_generation_with_the_kernels_matches_recomputing():
    """The prompt through mamba-ssm's scan (which returns its last state into the cache), then our
    cached steps, gives the tokens that full recomputation picks."""
    torch.manual_seed(0)
    model = mamba_language_model(64, D, 2).cuda().eval()
    prompt = torch.randint(0, 64, (3, 9), device="cuda")
    with torch.no_grad():
        cached = model.generate(prompt, 12, use_cache=True)
        ids = prompt
        for _ in range(12):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(cached, ids)


def test_grouped_mm_experts_match_the_loop_in_bf16():
    """The default expert path on CUDA bf16 (`torch._grouped_mm`) against the per-expert loop."""
    loop = make("moe", n_experts=4, expert_impl="loop").cuda().bfloat16().train()
    auto = make("moe", n_experts=4, expert_impl="auto").cuda().bfloat16().train()
    auto.load_state_dict(loop.state_dict())
    x = torch.randn(2, T, D, device="cuda", dtype=torch.bfloat16)
    assert auto._impl(x) == "grouped_mm"
    loop.train(False), auto.train(False)  # one routing rule for both: no Sinkhorn stopping at a tolerance
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    out_a, out_b = loop(xa), auto(xb)
    torch.testing.assert_close(out_b, out_a, rtol=2e-2, atol=2e-2)
    for a, b in zip(grads(loop, xa, out_a), grads(auto, xb, out_b)):
        if a is not None:
            torch.testing.assert_close(b.float(), a.float(), rtol=5e-2, atol=5e-2)


def test_moe_under_bf16_autocast_takes_grouped_mm_and_matches_autograd():
    """`bf16-mixed` keeps fp32 weights and activations: the block must still pick the fused path."""
    ref = make("moe", n_experts=4, expert_impl="autograd").cuda().eval()
    auto = make("moe", n_experts=4).cuda().eval()
    auto.load_state_dict(ref.state_dict())
    x = torch.randn(2, T, D, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert auto._impl(x) == "grouped_mm"
        out_ref, out = ref(x), auto(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, out_ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("d_ff", [172, 683])
def test_default_experts_run_at_shapes_grouped_mm_rejects(d_ff):
    """d_ff = 683 failed in `torch._grouped_mm` on an H100 (rows must span multiples of 16 bytes);
    172 is BlackMamba's routing model. The default path must take the autograd loop there."""
    block = build_block("moe", 64, n_experts=4, d_ff=d_ff).cuda().train()
    x = torch.randn(2, T, 64, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert block._impl(x) == "autograd"
        out = block(x)
    out.float().sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("pattern", ["attn,swiglu", "mamba,moe", "mixer,swiglu"])
def test_training_entry_point_learns_on_cuda_in_bf16_mixed(tmp_path, pattern):
    """`train_on_mad` on the GPU in `bf16-mixed`, the `paper` profile's trainer settings: the model
    must learn in-context recall past what untrained models score (0.0 to 0.11 on CPU, where the
    same runs in fp32 reach 0.35 after 300 steps)."""
    task = MADTaskConfig(task="in-context-recall", vocab_size=16, seq_len=32, num_train_examples=2048,
                         num_test_examples=256, seed=0)
    trainer = TrainerConfig(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=300,
                            val_every_n_steps=300, limit_val_batches=4, log_every_n_steps=50,
                            checkpoint_every_n_steps=300, progress_bar=False)
    lm = LMConfig(d_model=64, pattern=pattern, repeat=2, n_ctx=task.seq_len - 1)
    scores = train_on_mad(lm, task, trainer, tmp_path / "run", OptimConfig(lr=3e-3, warmup_steps=20),
                          batch_size=32, seed=0)
    assert scores["accuracy"] > 0.2, scores


def test_language_model_is_the_same_on_cuda_and_cpu():
    cfg = LMConfig(vocab_size=50, d_model=D, n_ctx=64, pattern="attn,mamba,moe,swiglu")
    torch.manual_seed(0)
    cpu = LanguageModel(cfg).eval()
    gpu = LanguageModel(cfg).cuda().eval()
    gpu.load_state_dict(cpu.state_dict())
    ids = torch.randint(0, 50, (2, 30))
    with torch.no_grad():
        torch.testing.assert_close(gpu(ids.cuda()).cpu(), cpu(ids), rtol=1e-4, atol=1e-4)


# --- work outside Lightning's fit: on the GPU when there is one, the same numbers as on the CPU ---

def small_lm(pattern: str = "attn,mlp") -> LanguageModel:
    torch.manual_seed(0)
    return LanguageModel(LMConfig(vocab_size=50, d_model=D, n_ctx=64, pattern=pattern))


def test_heldout_loss_scores_on_cuda_and_leaves_the_network_where_it_was():
    from common.eval.heldout import heldout_loss

    net = small_lm()
    rows = [{"input_ids": torch.randint(0, 50, (20,)).tolist(), "attention_mask": [1] * n + [0] * (20 - n)}
            for n in (20, 7, 13)]
    total, count = 0.0, 0
    with torch.no_grad():  # the oracle: on the CPU, one row at a time
        for r in rows:
            n = sum(r["attention_mask"])
            logits = net(torch.tensor([r["input_ids"]]))[0, :n - 1]
            labels = torch.tensor(r["input_ids"][1:n])
            total += torch.nn.functional.cross_entropy(logits, labels, reduction="sum").item()
            count += n - 1
    expected = total / count
    assert heldout_loss(net, rows, batch_size=2) == pytest.approx(expected, rel=1e-4)
    assert net.embed.weight.device.type == "cpu"


def test_retrieval_embeds_and_trains_on_cuda():
    from papers.masked_mixers.retrieval import RetrievalTraining, embed_texts, sequence_embedding, train_retrieval

    model = small_lm("mixer")
    ids = torch.randint(1, 50, (10, 12))
    with torch.no_grad():
        expected = sequence_embedding(model.eval(), ids, -1, "mean", 0)
    got = embed_texts(model, ids, -1, "mean", 0, batch_size=4)
    assert got.device.type == "cpu"
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    queries, targets = torch.randn(40, D), torch.randn(40, D)
    result = train_retrieval(queries, targets, queries, targets, 4, RetrievalTraining(steps=5, batch_size=8,
                                                                                     eval_batches=2), seed=0)
    assert result["chance_top1"] == 0.25 and 0 <= result["test_top1"] <= 1


def test_infonce_trains_on_cuda():
    from papers.masked_mixers.retrieval import InfoNCEConfig, train_infonce

    model = small_lm("mixer")
    ids = torch.randint(1, 50, (16, 12))
    result = train_infonce(model, ids, ids.flip(1), -1, InfoNCEConfig(steps=3, batch_size=4), seed=0)
    assert result["finite"] and next(model.parameters()).device.type == "cuda"


def test_representation_recovery_on_cuda_matches_the_cpu(monkeypatch):
    from papers.masked_mixers import input_representation
    from papers.masked_mixers.input_representation import recover_input, representation_accuracy
    from papers.masked_mixers.models import hidden_states

    tokens, mask = torch.randint(0, 50, (2, 8)), torch.ones(2, 8, dtype=torch.bool)
    settings = {"steps": 30, "lr_start": 0.02, "lr_end": 0.002, "seed": 0, "last_token_only": False}
    with monkeypatch.context() as patch:
        patch.setattr(input_representation, "compute_device", lambda: torch.device("cpu"))
        on_cpu = representation_accuracy(small_lm("mixer"), tokens, mask, **settings)
    model = small_lm("mixer")
    got = representation_accuracy(model, tokens, mask, **settings)
    assert next(model.parameters()).device.type == "cuda"
    # Fractions of 16 positions (14 for the earlier ones): at most one may decode otherwise.
    assert got == pytest.approx(on_cpu, abs=1 / 14)
    cpu = small_lm("mixer").eval()
    with torch.no_grad():
        e = cpu.embed(tokens)
        target = hidden_states(cpu, e)
    x_cpu = recover_input(lambda x: hidden_states(cpu, x), target, tuple(e.shape), 30, 0.02, 0.002, 0)
    x_gpu = recover_input(lambda x: hidden_states(model, x), target.cuda(), tuple(e.shape), 30, 0.02, 0.002, 0)
    torch.testing.assert_close(x_gpu.cpu(), x_cpu, rtol=1e-3, atol=1e-3)


def test_greedy_completions_on_cuda_equal_the_cpus():
    from papers.manticore.completions import CompletionsConfig, complete_all

    class Words:  # a tokenizer of one token per word of a fixed list
        eos_token_id = 0
        words = ["<eos>", *"once upon a time tom saw the dog cat sat".split()]

        def encode(self, text, add_special_tokens=False):
            return [self.words.index(w) for w in text.split()]

        def decode(self, ids):
            return " " + " ".join(self.words[i % len(self.words)] for i in ids)

    texts = ["once upon a time", "tom saw the dog", "the cat sat"]
    cfg = CompletionsConfig(max_new_tokens=5)
    cpu = complete_all(small_lm("mamba,mlp").eval(), Words(), texts, cfg, greedy=True, seed=0)
    gpu = complete_all(small_lm("mamba,mlp").eval().cuda(), Words(), texts, cfg, greedy=True, seed=0)
    assert gpu == cpu


def test_routing_counts_on_cuda_equal_the_cpus(monkeypatch):
    from papers.blackmamba import routing
    from papers.blackmamba.routing import count_tokens

    ids = torch.randint(0, 50, (4, 32))
    with monkeypatch.context() as patch:
        patch.setattr(routing, "compute_device", lambda: torch.device("cpu"))
        cpu = count_tokens(small_lm("mamba,moe"), [{"input_ids": ids}], batches=1, train_mode=False)
    gpu = count_tokens(small_lm("mamba,moe").cuda(), [{"input_ids": ids}], batches=1, train_mode=False)
    assert all(g.device.type == "cpu" for g in gpu)
    for a, b in zip(cpu, gpu):
        torch.testing.assert_close(b, a)


def test_lra_scores_on_cuda_equal_the_cpus(monkeypatch):
    from common.training import lra
    from common.training.mad import lm_backbone
    from common.training.modules import SequenceClassificationModule

    torch.manual_seed(0)
    module = SequenceClassificationModule(lm_backbone(LMConfig(vocab_size=50, d_model=D, n_ctx=64, pattern="attn,mlp")),
                                          D, num_classes=3)
    loader = [{"input_ids": torch.randint(0, 50, (4, 20)), "attention_mask": torch.ones(4, 20, dtype=torch.long),
               "label": torch.randint(0, 3, (4,))} for _ in range(3)]
    with monkeypatch.context() as patch:
        patch.setattr(lra, "compute_device", lambda: torch.device("cpu"))
        cpu = lra.evaluate_classifier(module, loader)
    gpu = lra.evaluate_classifier(module, loader)
    assert next(module.parameters()).device.type == "cpu", "left where it was"
    assert gpu["accuracy"] == cpu["accuracy"] and gpu["loss"] == pytest.approx(cpu["loss"], rel=1e-4)
