"""CPU speed of our Mamba (chunked scan) against Hugging Face's slow path, mambapy and GPT-Neo.

One training step (forward + backward of the next-token loss) of a 4-layer, d_model=256 language
model on a batch of 8 x 256 tokens, 2 threads. Writes benchmarks/results/mamba_speed.json.
Generation latency is in benchmarks/generation.py, against a transformer with a KV cache.

    .venv/bin/python benchmarks/mamba_speed.py [--reps 7] [--hf-reps 2] [--out PATH]

The fast models are timed round-robin (one step of each in turn) so that load from other
processes on the machine hits them alike; the ratios are therefore more trustworthy than the
absolute seconds. The HF slow path is timed separately (1 warm-up + --hf-reps steps).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import positive_int  # noqa: E402
from common.errors import ArgumentParser, exit_on_user_error  # noqa: E402
from common.io import write_json  # noqa: E402
from common.models.mamba import mamba_language_model  # noqa: E402

VOCAB, D_MODEL, N_LAYERS, BATCH, SEQ, THREADS = 4096, 256, 4, 8, 256, 2


def ours():
    return mamba_language_model(VOCAB, D_MODEL, N_LAYERS, scan="chunked")


def hf_slow():
    from transformers import MambaConfig, MambaForCausalLM

    cfg = MambaConfig(vocab_size=VOCAB, hidden_size=D_MODEL, num_hidden_layers=N_LAYERS, state_size=16, expand=2,
                      conv_kernel=4, use_mambapy=False)
    model = MambaForCausalLM(cfg)
    return _Logits(model)


class _MambapyLM(nn.Module):
    """mambapy's `Mamba` backbone between an embedding and a tied head with a final RMSNorm.
    (mambapy.lm.LM itself imports mamba_ssm's Triton kernels for Mamba-2, so it does not import here.)"""

    def __init__(self):
        super().__init__()
        from mambapy.mamba import Mamba, MambaConfig, RMSNorm

        self.embedding = nn.Embedding(VOCAB, D_MODEL)
        self.mamba = Mamba(MambaConfig(d_model=D_MODEL, n_layers=N_LAYERS, d_state=16, expand_factor=2, d_conv=4,
                                       pscan=True))
        self.norm_f = RMSNorm(D_MODEL)

    def forward(self, ids):
        return F.linear(self.norm_f(self.mamba(self.embedding(ids))), self.embedding.weight)


def mambapy():
    return _MambapyLM()


class _Logits(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids).logits


def gptneo():
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    cfg = GPTNeoConfig(vocab_size=VOCAB, hidden_size=D_MODEL, num_layers=N_LAYERS, num_heads=8,
                       attention_types=[[["global"], N_LAYERS]], max_position_embeddings=SEQ, window_size=SEQ,
                       bos_token_id=0, eos_token_id=0)
    return _Logits(GPTNeoForCausalLM(cfg))


def train_step(model, ids):
    model.zero_grad(set_to_none=True)
    logits = model(ids[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
    loss.backward()
    return loss.item()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_training(reps: int, hf_reps: int) -> dict:
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1))
    builders = {"ours": ours, "mambapy": mambapy, "gptneo": gptneo}
    models = {name: build().train() for name, build in builders.items()}
    times = {name: [] for name in models}
    for model in models.values():  # warm-up
        train_step(model, ids)
    for _ in range(reps):
        for name, model in models.items():
            times[name].append(timed(lambda model=model: train_step(model, ids)))
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    attn_impl = models["gptneo"].model.config._attn_implementation
    del models

    hf = hf_slow().train()
    params["hf_slow"] = sum(p.numel() for p in hf.parameters())
    train_step(hf, ids)
    hf_step = partial(train_step, hf, ids)
    times["hf_slow"] = [timed(hf_step) for _ in range(hf_reps)]
    del hf, hf_step
    med = {name: statistics.median(ts) for name, ts in times.items()}
    return {
        "seconds_per_step": med,
        "all_seconds": times,
        "params": params,
        "gptneo_attn_implementation": attn_impl,
        "ratios": {
            "hf_slow/ours": med["hf_slow"] / med["ours"],
            "mambapy/ours": med["mambapy"] / med["ours"],
            "ours/gptneo": med["ours"] / med["gptneo"],
        },
    }


@exit_on_user_error
def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=positive_int, default=7)
    parser.add_argument("--hf-reps", type=positive_int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "mamba_speed.json")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(THREADS)

    from importlib.metadata import version

    import transformers

    load_before = os.getloadavg()
    training = bench_training(args.reps, args.hf_reps)
    result = {
        "config": {"vocab": VOCAB, "d_model": D_MODEL, "n_layers": N_LAYERS, "batch": BATCH, "seq_len": SEQ,
                   "d_state": 16, "expand": 2, "d_conv": 4, "gptneo_heads": 8, "dtype": "float32",
                   "step": "forward + backward of the next-token cross-entropy"},
        "threads": torch.get_num_threads(),
        "training": training,
        "targets": {"hf_slow/ours >= 30": training["ratios"]["hf_slow/ours"] >= 30,
                    "mambapy/ours >= 2": training["ratios"]["mambapy/ours"] >= 2,
                    "ours/gptneo <= 3": training["ratios"]["ours/gptneo"] <= 3},
        "mambapy_variant": "mambapy.mamba.Mamba (pscan=True) + our embedding/RMSNorm/tied head",
        "hf_variant": "transformers MambaForCausalLM, use_mambapy=False, train mode, no CUDA kernels (slow_forward)",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "mambapy": version("mambapy"), "python": platform.python_version()},
        "machine": {"cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                    "load_average_before": load_before, "load_average_after": os.getloadavg()},
    }
    write_json(args.out, result)
    print(json.dumps({k: result[k] for k in ("training", "targets")}, indent=2))


if __name__ == "__main__":
    main()
