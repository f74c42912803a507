"""Stage `memory`: peak memory of one forward + backward pass for masked mixers and transformers
at several depths and context lengths (the report's Tables S10/S11: GPU memory at batch 16).
`device` picks CPU (the default; batch 1 at smoke and tiny) or CUDA (`auto` at paper, batch 16).

On CUDA: `model_mib` = allocated memory after building - before; `step_mib` = peak allocated
memory (`max_memory_allocated`, reset first) during the measured pass - allocated before it. A row
that runs out of GPU memory is skipped and listed under `failed`.

On CPU, measured with `common/eval/memory.py`: the resident-memory high-water mark
(VmHWM) is reset through `/proc/self/clear_refs`, and `MALLOC_MMAP_THRESHOLD_` is set so that freed
tensors leave the process. Per row: `model_mib` = resident size after building - before building;
then one unmeasured warm-up pass (what it leaves for good, such as thread pools and heap growth,
would otherwise count for the first row only), gradients freed, mark reset, and the measured pass:
`step_mib` = high-water mark - resident size before it (gradients, activations, temporaries);
`peak_mib` = `model_mib` + `step_mib`, what a GPU's max_memory_allocated counts. The benchmark
starts a subprocess per row; here one subprocess measures every row (each model's smallest first),
because starting Python and torch per row costs more time than the small profiles have.
The models are this paper's (`models` section) at the stage's width:

- `mixer`: the flat masked mixer (`mixer_flat`);
- `transformer_sdpa`: our Llama-style transformer (`llama_h4`), whose attention is PyTorch's
  fused `scaled_dot_product_attention` (no T x T matrix kept);
- `transformer_eager`: a `transformers` Llama of the same size with eager attention, which keeps
  the T x T scores per head as the report's 2024 transformers did.

A row whose subprocess fails (out of memory, say) is listed under `failed`, as the paper's "OOM".
"""

from __future__ import annotations

import argparse

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "out", options={"--child": {"action": "store_true", "help": argparse.SUPPRESS}})

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass, field, replace
from typing import Literal

from common.config import bounded
from common.errors import ConfigError, exit_on_user_error
from common.eval.memory import memory_mib, reset_peak
from common.io import write_json
from papers.masked_mixers.shared import load_paper_stage, resolve_device

log = logging.getLogger("mm_memory")
MODELS = {"mixer": "mixer_flat", "transformer_sdpa": "llama_h4", "transformer_eager": "llama_h4"}


@dataclass
class MemoryConfig:
    d_model: int = bounded(128, ge=2)
    depths: list[int] = field(default_factory=lambda: [2, 4])
    contexts: list[int] = field(default_factory=lambda: [256, 512, 1024, 2048])
    models: list[str] = field(default_factory=lambda: list(MODELS))
    vocab_size: int = bounded(4096, ge=2)
    threads: int = bounded(2, ge=1)
    batch_size: int = bounded(1, ge=1)
    device: Literal["cpu", "cuda", "auto"] = "cpu"

    def check(self) -> None:
        unknown = sorted(set(self.models) - set(MODELS))
        if unknown:
            raise ConfigError(f"models: {unknown[0]!r} is not measured here; allowed: {', '.join(MODELS)}")


def child(cfg: MemoryConfig, sizes, device: str) -> list[dict]:
    """Every (model, depth, context) row, each model's smallest first, in this one process."""
    import gc

    import torch

    torch.set_num_threads(cfg.threads)
    rows = []
    for model in cfg.models:
        for depth in sorted(cfg.depths):
            for n_ctx in sorted(cfg.contexts):
                sizes_here = replace(sizes, n_layers=depth, n_ctx=n_ctx)
                try:
                    rows.append(measure(model, depth, n_ctx, cfg, sizes_here, device))
                except torch.cuda.OutOfMemoryError:
                    # A CPU run out of memory is killed instead; the parent lists either as failed.
                    print(f"out of GPU memory: {model} depth {depth} n_ctx {n_ctx}", file=sys.stderr)
                gc.collect()
                if device == "cuda":
                    torch.cuda.empty_cache()
    return rows


def measure(model: str, depth: int, n_ctx: int, cfg: MemoryConfig, sizes, device: str = "cpu") -> dict:
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM

    from common.blocks import build_block
    from papers.masked_mixers.models import build_model

    cuda = device == "cuda"
    torch.manual_seed(0)
    if cuda:
        base = torch.cuda.memory_allocated() / 2**20
    else:
        reset_peak()
        base = memory_mib()["VmRSS"]
    if model == "transformer_eager":
        heads = sizes.spec(MODELS[model]).blocks["attn"]["n_heads"]
        net = LlamaForCausalLM(LlamaConfig(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, num_hidden_layers=depth,
            num_attention_heads=heads, num_key_value_heads=heads,
            intermediate_size=build_block("swiglu", cfg.d_model).up_proj.out_features,  # as our SwiGLU
            max_position_embeddings=n_ctx, tie_word_embeddings=False, attn_implementation="eager"))
        forward = lambda ids: net(input_ids=ids).logits  # noqa: E731
    else:
        net = forward = build_model(sizes.spec(MODELS[model]), replace(sizes, d_model=cfg.d_model), cfg.vocab_size)
    net.to(device)
    ids = torch.randint(0, cfg.vocab_size, (cfg.batch_size, n_ctx), device=device)
    model_mib = (torch.cuda.memory_allocated() / 2**20 if cuda else memory_mib()["VmRSS"]) - base

    def step() -> None:  # flatten(0, 1) is a view at batch 1: the CPU rows measure what they did before
        F.cross_entropy(forward(ids)[:, :-1].flatten(0, 1), ids[:, 1:].flatten()).backward()

    # A warm-up pass first: what it leaves behind for good (thread pools, kernels' one-time
    # buffers, heap growth) would otherwise count for the first row only. Its gradients are freed,
    # so the measured pass allocates them again, on top of the resident size after the warm-up.
    step()
    net.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() / 2**20
        step()
        torch.cuda.synchronize()
        step_mib = torch.cuda.max_memory_allocated() / 2**20 - before
    else:
        reset_peak()
        before = memory_mib()["VmRSS"]
        step()
        step_mib = memory_mib()["VmHWM"] - before
    return {"model": model, "depth": depth, "n_ctx": n_ctx, "params": sum(p.numel() for p in net.parameters()),
            "peak_mib": round(model_mib + step_mib, 1), "model_mib": round(model_mib, 1),
            "step_mib": round(step_mib, 1)}


def run_child(argv: list[str], threads: int) -> list[dict]:
    """This stage's own command line again, with `--child`: the measuring process."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024), "OMP_NUM_THREADS": str(threads),
           "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [sys.executable, "-m", "papers.masked_mixers.memory", *argv, "--child"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        log.warning("measuring failed (out of memory?): %s", done.stderr.strip().splitlines()[-1:])
        return []
    return json.loads(done.stdout.strip().splitlines()[-1])


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, sizes, profile = load_paper_stage(args.params, "memory", MemoryConfig)
    # Resolved in the parent too: a config error in the child would only show as failed rows.
    device = "cpu" if cfg.device == "cpu" else resolve_device(cfg.device, "memory.device")  # cpu: no torch import
    if args.child:
        print(json.dumps(child(cfg, sizes, device)))
        return
    rows = run_child(["--params", str(args.params), "--out", str(args.out)], cfg.threads)
    for row in rows:
        log.info("%-18s depth %d n_ctx %5d peak %8.1f MiB", row["model"], row["depth"], row["n_ctx"], row["peak_mib"])
    measured = {(r["model"], r["depth"], r["n_ctx"]) for r in rows}
    failed = [{"model": m, "depth": d, "n_ctx": t} for m in cfg.models for d in cfg.depths for t in cfg.contexts
              if (m, d, t) not in measured]
    by = {(r["model"], r["depth"], r["n_ctx"]): r["peak_mib"] for r in rows}
    ratios = {f"depth{d}/n_ctx{t}": {f"mixer_over_{m}": round(by[("mixer", d, t)] / by[(m, d, t)], 3)
                                      for m in cfg.models
                                      if m != "mixer" and by.get((m, d, t)) and ("mixer", d, t) in by}
              for d in cfg.depths for t in cfg.contexts}
    method = ("peak_mib = model_mib (allocated growth when building) + step_mib (max_memory_allocated over "
              "allocated in a forward + backward after a warm-up pass)" if device == "cuda" else
              "peak_mib = model_mib (RSS growth when building) + step_mib (VmHWM over RSS in a forward + backward "
              "after a warm-up pass)")
    write_json(args.out, {"profile": profile, "d_model": cfg.d_model, "vocab_size": cfg.vocab_size,
                          "batch": cfg.batch_size, "device": device,
                          "method": f"{method}; see papers/masked_mixers/memory.py",
                          "rows": rows, "failed": failed, "ratios": ratios})


if __name__ == "__main__":
    main()
