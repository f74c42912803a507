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
