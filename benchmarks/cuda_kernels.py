"""GPU speed of our kernels' choices against named peers, in one process on one CUDA device.

- mamba: a Mamba LM training step (forward + backward) with our chunked scan, with mamba-ssm's fused
  kernels through our block (`scan="cuda"`, where mamba-ssm and causal-conv1d are installed), and
  Hugging Face's `MambaForCausalLM`, which takes the same kernels where they import and its PyTorch
  path otherwise (so its PyTorch path is measured in a run without the kernels).
- attention: the masked mixer against a Llama with eager attention (the T x T scores materialised)
  and with SDPA (PyTorch's fused kernels), training step time and peak memory per context length;
  the same models as `benchmarks/mixer_memory.py`, which measures them on CPU.
- moe: our MoE (Sinkhorn router; its default expert path under bf16 autocast on CUDA,
  `torch._grouped_mm`, and the per-expert loop through autograd, its path there before) against the
  released BlackMamba SwitchMLP's dispatch (one gather/scatter per expert; `benchmarks/moe_speed.py`'s
  `LoopSwitchMLP`) and a dense SwiGLU of the active size.

Every step runs under bf16 autocast with fp32 weights, as `precision: bf16-mixed` trains. Medians
of `--reps` timed steps after `--warmup`, each synchronised; peaks from `torch.cuda.max_memory_allocated`.
A peer that fails (out of memory, a missing kernel) is recorded with its error, not dropped. The
Mamba section is written as `mamba_with_kernels` or `mamba_without_kernels`; a later run on the same
device replaces the sections it runs and keeps the others (and the file's `notes`).

    python -m benchmarks.cuda_kernels [--sections mamba attention moe] [--reps 10] [--out PATH]
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import nonnegative_int, positive_int  # noqa: E402
from benchmarks.mixer_memory import D_MODEL, N_LAYERS, VOCAB, build_llama, build_mixer  # noqa: E402
from benchmarks.moe_speed import DenseSwiGLU, LoopSwitchMLP  # noqa: E402
from common.blocks.mamba import _mamba_ssm_ops  # noqa: E402
from common.blocks.moe import MoE  # noqa: E402
from common.errors import ArgumentParser, exit_on_user_error  # noqa: E402
from common.io import write_json  # noqa: E402
from common.models.mamba import mamba_language_model  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "cuda_kernels.json"
SECTIONS = ("mamba", "attention", "moe")
# Mamba-130M's width; 4 of its 24 layers keep the Hugging Face PyTorch path (a loop over time) affordable.
MAMBA = {"vocab": 8192, "d_model": 768, "n_layers": 4, "batch": 8, "seq": 1024}
CONTEXTS = (2048, 4096, 8192)
# (tokens, d_model, d_ff, experts): the CPU benchmark's tokens and width at d_ff = 683 (8/3 x 256 unrounded,
# which `_grouped_mm` rejects; the CPU benchmark's default is 704), and BlackMamba 1.5B's layer.
MOE_SIZES = ((4096, 256, 683, 8), (16384, 1152, 3072, 8))


def measure(step: Callable[[], None], warmup: int, reps: int) -> dict:
    """Median seconds of one `step` and the peak memory it allocates; an error instead if it fails."""
    try:
        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return {"median_s": statistics.median(times), "min_s": min(times),
                "peak_mib": (torch.cuda.max_memory_allocated() - before) / 2**20}
    except (RuntimeError, AssertionError, NotImplementedError) as err:  # OOM is a RuntimeError
        return {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}
    finally:
        torch.cuda.empty_cache()


def training_step(loss_fn: Callable[[], torch.Tensor], params) -> Callable[[], None]:
    params = list(params)

    def step():
        for p in params:
            p.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn()
        loss.backward()
    return step


def lm_loss(model: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: F.cross_entropy(model(ids)[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())


def bench_mamba(warmup: int, reps: int) -> dict:
    from transformers import MambaConfig, MambaForCausalLM

    c = MAMBA
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device="cuda")
    results = {}
    scans = ["chunked"] + (["cuda"] if _mamba_ssm_ops() is not None else [])
    for scan in scans:
        torch.manual_seed(0)
        model = mamba_language_model(c["vocab"], c["d_model"], c["n_layers"], scan=scan).cuda()
        results[f"ours_{scan}"] = measure(training_step(lm_loss(model, ids), model.parameters()), warmup, reps)
        del model
    if "cuda" not in scans:
        results["ours_cuda"] = {"error": "mamba-ssm with causal-conv1d kernels not installed"}
    hf = MambaForCausalLM(MambaConfig(vocab_size=c["vocab"], hidden_size=c["d_model"],
                                      num_hidden_layers=c["n_layers"], state_size=16, expand=2, conv_kernel=4,
                                      use_mambapy=False)).cuda()
    # transformers binds mamba-ssm's kernels wherever they import, and its PyTorch path otherwise:
    # run this benchmark without them installed (or hidden from PYTHONPATH) for the second peer.
    hf_name = "hf_mamba_ssm_kernels" if "cuda" in scans else "hf_pytorch_path"
    results[hf_name] = measure(training_step(lm_loss(lambda x: hf(x).logits, ids), hf.parameters()),
                               1, max(2, reps // 3))
    ours = results["ours_chunked"].get("median_s")
    ratios = {f"{name}_over_ours_chunked": r["median_s"] / ours
              for name, r in results.items() if "median_s" in r and ours and name != "ours_chunked"}
    return {"config": c, "results": results, "ratios": ratios}


def bench_attention(warmup: int, reps: int) -> dict:
    out = {}
    for n_ctx in CONTEXTS:
        ids = torch.randint(0, VOCAB, (1, n_ctx), device="cuda")
        row = {}
        torch.manual_seed(0)
        mixer = build_mixer(n_ctx).cuda()
        row["mixer"] = measure(training_step(lambda m=mixer, ids=ids: m(ids), mixer.parameters()), warmup, reps)
        del mixer
        for attn in ("eager", "sdpa"):
            torch.manual_seed(0)
            loss, model = build_llama(n_ctx, attn)
            model.cuda()
            step = training_step(lambda f=loss, ids=ids: f(ids), model.parameters())
            row[f"llama_{attn}"] = measure(step, warmup, reps)
            del loss, model
        out[str(n_ctx)] = row
    return {"d_model": D_MODEL, "n_layers": N_LAYERS, "batch": 1, "results": out}


def bench_moe(warmup: int, reps: int) -> dict:
    out = []
    for n_tokens, d_model, d_ff, n_experts in MOE_SIZES:
        torch.manual_seed(0)
        impls = {
            "dense": DenseSwiGLU(d_model, d_ff),
            "ours_sinkhorn_auto": MoE(d_model, n_experts=n_experts, d_ff=d_ff, router="sinkhorn"),
            "ours_sinkhorn_autograd": MoE(d_model, n_experts=n_experts, d_ff=d_ff, router="sinkhorn",
                                          expert_impl="autograd"),
            "ours_sigmoid_auto": MoE(d_model, n_experts=n_experts, d_ff=d_ff, router="sigmoid"),
            "released_loop": LoopSwitchMLP(d_model, d_ff, n_experts),
        }
        x = torch.randn(n_tokens, d_model, device="cuda")
        upstream = torch.randn(n_tokens, d_model, device="cuda")
        row = {}
        for name, module in impls.items():
            module.cuda().train()
            if isinstance(module, LoopSwitchMLP):
                module.last_counts = module.last_counts.cuda()

            def loss(m=module, x=x, upstream=upstream):
                xi = x.clone().requires_grad_()
                return (m(xi).float() * upstream).sum()
            row[name] = measure(training_step(loss, module.parameters()), warmup, reps)
            if isinstance(module, MoE):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    row[name]["expert_impl"] = module._impl(x)
        med = {name: r.get("median_s") for name, r in row.items()}
        ratios = {}
        if med["released_loop"] and med["ours_sigmoid_auto"]:
            ratios["released_loop_over_ours_sigmoid_auto"] = med["released_loop"] / med["ours_sigmoid_auto"]
        if med["dense"] and med["ours_sinkhorn_auto"]:
            ratios["ours_sinkhorn_auto_over_dense"] = med["ours_sinkhorn_auto"] / med["dense"]
        if med["ours_sinkhorn_autograd"] and med["ours_sinkhorn_auto"]:
            ratios["ours_sinkhorn_autograd_over_auto"] = med["ours_sinkhorn_autograd"] / med["ours_sinkhorn_auto"]
        out.append({"n_tokens": n_tokens, "d_model": d_model, "d_ff": d_ff, "n_experts": n_experts, "top_k": 1,
                    "results": row, "ratios": ratios})
    return {"sizes": out}


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--warmup", type=nonnegative_int, default=3)
    parser.add_argument("--reps", type=positive_int, default=10)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: benchmarks.cuda_kernels: no CUDA device; this benchmark runs on a GPU machine only",
              file=sys.stderr)
        raise SystemExit(2)
    benches = {"mamba": bench_mamba, "attention": bench_attention, "moe": bench_moe}
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "python": platform.python_version(),
              "precision": "bf16 autocast, fp32 weights", "warmup": args.warmup, "reps": args.reps}
    # Sections of earlier runs on the same device stay (with their notes): the Mamba section is run
    # once with the kernels installed and once without, each under its own key.
    earlier = json.loads(args.out.read_text()) if args.out.is_file() else {}
    if earlier.get("device") == result["device"]:
        result = {**earlier, **result}
    for section in args.sections:
        key = section
        if section == "mamba":
            key = "mamba_with_kernels" if _mamba_ssm_ops() is not None else "mamba_without_kernels"
        t0 = time.perf_counter()
        result[key] = {**benches[section](args.warmup, args.reps), "date": date.today().isoformat()}
        result[key]["seconds"] = time.perf_counter() - t0
        write_json(args.out, result)  # after each section, so a run cut short keeps what it measured
        print(f"{key}: {time.perf_counter() - t0:.0f} s", flush=True)
    return result


if __name__ == "__main__":
    main()
