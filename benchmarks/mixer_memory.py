"""CPU peak memory and time of a masked-mixer LM against a Llama of the same width and depth,
forward + backward, at growing context lengths (the paper's memory tables S10/S11, on CPU).

Models (d_model 256, 4 layers, vocab 4096, batch 1, fp32, untied embeddings):

- mixer: embedding -> [x + mixer(LN(x)); x + FF(LN(x))] x 4 -> head. The flat masked mixer of
  `common/blocks/masked_mixer.py` (k = 1, n_ctx = the context), FF = Linear, GELU, Linear at 4d.
  No final norm, as in the paper's `LanguageMixer`.
- llama_eager / llama_sdpa: `transformers.LlamaForCausalLM`, 4 heads (head dim 64), intermediate
  4d (SwiGLU), with `attn_implementation="eager"` (materialises the T x T scores and softmax) and
  `"sdpa"` (PyTorch's fused attention).

How peak memory is measured, and why this way: each (model, context) runs in a fresh subprocess,
so peaks never carry over. The child resets the kernel's resident-memory high-water mark
(`echo 5 > /proc/self/clear_refs`, which zeroes VmHWM) after importing torch and transformers,
notes the current resident size (VmRSS) as its baseline, builds the model, resets the mark again,
runs the steps and reads VmHWM. `peak_mib` = VmHWM - baseline: parameters + gradients +
activations + the temporaries of the worst moment, which is what a GPU's max_memory_allocated
counts (minus its allocator rounding). `step_mib` = VmHWM - VmRSS after building: what the
training step adds on top of the model. Resetting matters: ru_maxrss is a high-water mark since
process start, so a transient peak while importing would hide the first MiB of the step.
glibc would keep freed large blocks in its heap and grow its mmap threshold, making RSS a worse
proxy for live bytes; the child fixes `MALLOC_MMAP_THRESHOLD_` so every large tensor is its own
mmap, returned to the OS when freed.
Time: the median and the minimum of the timed steps after one warm-up step (2 threads, OpenMP
waiting passive); ratios use the minimum, the better estimate of a step's own cost when other
processes share the CPU. Such load adds noise to times, not to memory: the 1-minute load average
is recorded with every row.

What the mixer's memory is made of: its n_ctx x n_ctx weights (16 MiB per layer at 2048), their
gradients, and the same embeddings/FF/logits activations as the transformer; nothing grows with
T^2 per head. Two choices in `masked_mixer.py` keep it there: backward re-applies the mask instead
of keeping a masked copy of every weight (`MaskedMix`), and the bool mask is one tensor shared by
all layers. The target checked in the JSON: mixer peak at 2048 <= half the eager transformer's.

    python -m benchmarks.mixer_memory [--contexts 512 1024 2048 4096] [--reps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import positive_int
from common.errors import ArgumentParser, exit_on_user_error
from common.eval.memory import memory_mib, reset_peak
from common.io import write_json

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "mixer_memory.json"
MODELS = ("mixer", "llama_eager", "llama_sdpa")
D_MODEL, N_LAYERS, N_HEADS, VOCAB, BATCH, THREADS = 256, 4, 4, 4096, 1, 2


# ------------------------------------------------------------------------------- child process

def build_mixer(n_ctx: int):
    import torch.nn.functional as F
    from torch import nn

    from common.blocks.masked_mixer import MaskedMixer

    class MixerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, D_MODEL)
            self.mix_norms = nn.ModuleList(nn.LayerNorm(D_MODEL) for _ in range(N_LAYERS))
            self.mixers = nn.ModuleList(MaskedMixer(D_MODEL, i, n_ctx=n_ctx) for i in range(N_LAYERS))
            self.ff_norms = nn.ModuleList(nn.LayerNorm(D_MODEL) for _ in range(N_LAYERS))
            self.ffs = nn.ModuleList(nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(),
                                                   nn.Linear(4 * D_MODEL, D_MODEL)) for _ in range(N_LAYERS))
            self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

        def forward(self, ids):
            x = self.embed(ids)
            for mix_norm, mixer, ff_norm, ff in zip(self.mix_norms, self.mixers, self.ff_norms, self.ffs):
                x = x + mixer(mix_norm(x))
                x = x + ff(ff_norm(x))
            # The loss as Hugging Face's causal-LM loss computes it: logits at every position, the
            # shifted labels padded with -100, so neither model pays for a sliced copy of the logits.
            labels = F.pad(ids[:, 1:], (0, 1), value=-100)
            return F.cross_entropy(self.head(x).flatten(0, 1), labels.flatten(), ignore_index=-100)

    return MixerLM()


def build_llama(n_ctx: int, attn: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=4 * D_MODEL,
                         num_hidden_layers=N_LAYERS, num_attention_heads=N_HEADS, num_key_value_heads=N_HEADS,
                         max_position_embeddings=n_ctx, tie_word_embeddings=False, attn_implementation=attn)
    model = LlamaForCausalLM(config)
    return lambda ids: model(input_ids=ids, labels=ids).loss, model


def child(model_name: str, n_ctx: int, reps: int) -> dict:
    # Everything either model imports comes before the baseline, so that module memory (tens of
    # MiB for transformers' lazily loaded Llama, or for our block registry) counts for neither.
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: F401

    from common.blocks.masked_mixer import MaskedMixer  # noqa: F401

    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    reset_peak()
    base = memory_mib()["VmRSS"]
    if model_name == "mixer":
        model = build_mixer(n_ctx)
        loss_fn = model
    else:
        loss_fn, model = build_llama(n_ctx, model_name.removeprefix("llama_"))
    model.train()
    ids = torch.randint(0, VOCAB, (BATCH, n_ctx))
    after_build = memory_mib()["VmRSS"]
    reset_peak()
    times = []
    for i in range(1 + reps):
        start = time.perf_counter()
        loss_fn(ids).backward()
        elapsed = time.perf_counter() - start
        model.zero_grad(set_to_none=True)
        if i > 0:
            times.append(elapsed)
    peak = memory_mib()["VmHWM"]
    return {"model": model_name, "n_ctx": n_ctx, "params": sum(p.numel() for p in model.parameters()),
            "model_mib": round(after_build - base, 1), "peak_mib": round(peak - base, 1),
            "step_mib": round(peak - after_build, 1),
            "time_s": round(statistics.median(times), 3), "time_min_s": round(min(times), 3),
            "load_avg_1min": round(os.getloadavg()[0], 2)}


# ------------------------------------------------------------------------------ parent process

def run_child(model_name: str, n_ctx: int, reps: int) -> dict:
    # Passive OpenMP waiting: on a shared machine, spinning worker threads made 2-thread steps
    # 5-10x slower than 1-thread ones; sleeping threads change no work, only the waste.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024), "OMP_NUM_THREADS": str(THREADS),
           "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "benchmarks.mixer_memory", "--child", model_name, str(n_ctx), "--reps", str(reps)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{model_name} @ {n_ctx} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@exit_on_user_error
def main(argv=None) -> dict:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=positive_int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--reps", type=positive_int, default=2, help="timed steps after one warm-up step")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "N_CTX"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.reps)))
        return {}

    started = time.perf_counter()
    rows = []
    for n_ctx in args.contexts:
        for model_name in MODELS:
            row = run_child(model_name, n_ctx, args.reps)
            rows.append(row)
            print(f"{model_name:12s} n_ctx {n_ctx:5d}  peak {row['peak_mib']:8.1f} MiB  "
                  f"step {row['step_mib']:8.1f} MiB  {row['time_s']:7.3f} s/step", flush=True)
    by = {(r["model"], r["n_ctx"]): r for r in rows}
    ratios = {}
    for n_ctx in args.contexts:
        mixer = by[("mixer", n_ctx)]
        ratios[str(n_ctx)] = {
            f"mixer_over_{name.removeprefix('llama_')}_{key}": round(mixer[key] / by[(name, n_ctx)][key], 3)
            for name in ("llama_eager", "llama_sdpa") for key in ("peak_mib", "step_mib", "time_min_s")
        }
    payload = {
        "benchmark": "masked mixer vs Llama, CPU forward + backward",
        "config": {"d_model": D_MODEL, "n_layers": N_LAYERS, "llama_heads": N_HEADS, "vocab": VOCAB,
                   "batch": BATCH, "threads": THREADS, "dtype": "float32", "timed_steps": args.reps,
                   "torch": __import__("torch").__version__, "transformers": __import__("transformers").__version__,
                   "machine": platform.machine(), "cpus": os.cpu_count()},
        "method": "fresh subprocess per row; VmHWM reset via /proc/self/clear_refs after imports; "
                  "peak_mib = VmHWM after the steps - VmRSS after imports (params + grads + activations + "
                  "temporaries); model_mib = VmRSS after building - VmRSS after imports; step_mib = peak "
                  "over the model; MALLOC_MMAP_THRESHOLD_=131072 so freed large tensors leave RSS; "
                  "OMP_WAIT_POLICY=PASSIVE; time = median and min of the timed steps after one warm-up "
                  "(ratios use min)",
        "results": rows,
        "ratios": ratios,
        "target": {"mixer_peak_at_most_half_of_eager_at_2048":
                   (ratios["2048"]["mixer_over_eager_peak_mib"] <= 0.5) if "2048" in ratios else None},
        "wall_s": round(time.perf_counter() - started, 1),
    }
    write_json(args.out, payload)
    print(json.dumps(ratios, indent=1))
    return payload


if __name__ == "__main__":
    main()
