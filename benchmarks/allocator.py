"""Training steps with glibc's default malloc against `keep_freed_memory` (what `run_training` sets).

glibc maps every allocation above 32 MB from the kernel and unmaps it on free, so a training step
touches its largest tensors (the logits, their gradients) in fresh pages every time. The peer is
glibc's default; each setting runs in its own fresh process, one after the other, one torch thread
(as stage workers run), on the `tiny` shapes of three pipelines:

- `blackmamba`: BlackMamba's `train_compare` network (d_model 128, 4 layers, 8 experts), 16 x 256 tokens;
- `mixer_flat`: Masked Mixers' flat mixer of `clm` (d_model 64, 4 layers), 16 x 128 tokens;
- `manticore_specialists`: Manticore's `specialists` hybrid (its `gpt_neo` and `mamba_instructions`
  components, d_model 64, one block with projectors), 16 x 64 tokens, logits under glibc's 32 MB;

plus zero-filling one 67 MB tensor (16 x 256 x 4096 floats, a blackmamba batch's logits). A step is
forward, cross-entropy, backward and AdamW on random tokens. Reported: median ms per step, minor
page faults per step, and whether both settings computed the same losses, bit for bit.

    python -m benchmarks.allocator [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TypeVar

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see benchmarks/moe_speed.py

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from benchmarks import positive_int
from common.config import from_dict, load_yaml, stage_config  # noqa: E402
from common.errors import ArgumentParser, exit_on_user_error
from common.io import write_json  # noqa: E402
from common.models.lm import LanguageModel, LMConfig  # noqa: E402
from common.training.trainer import keep_freed_memory  # noqa: E402
from papers.blackmamba.train_compare import TrainCompareConfig, model_configs  # noqa: E402
from papers.manticore.components import ComponentsConfig  # noqa: E402
from papers.manticore.hybrid import Manticore, ManticoreConfig  # noqa: E402
from papers.masked_mixers.models import ModelsConfig, build_model  # noqa: E402

T = TypeVar("T")

OUT = Path(__file__).resolve().parent / "results" / "allocator.json"
PAPERS = Path(__file__).resolve().parents[1] / "papers"
VOCAB = 4096


def tiny(paper: str, section: str, cls: type[T]) -> T:
    """A section of a paper's params.yaml at the `tiny` profile: the networks the stages train."""
    return stage_config(load_yaml(PAPERS / paper / "params.yaml"), section, cls, "tiny")


def blackmamba() -> tuple[LanguageModel, dict]:
    cfg = tiny("blackmamba", "train_compare", TrainCompareConfig)
    shape = {"d_model": cfg.blackmamba.d_model, "layers": cfg.blackmamba.n_layers, "experts": cfg.blackmamba.n_experts}
    return LanguageModel(model_configs(cfg, VOCAB, 256)["blackmamba"]), shape


def mixer_flat() -> tuple[nn.Module, dict]:
    sizes = tiny("masked_mixers", "models", ModelsConfig)
    return build_model(sizes.spec("mixer_flat"), sizes, VOCAB), {"d_model": sizes.d_model, "layers": sizes.n_layers}


def manticore_specialists() -> tuple[Manticore, dict]:
    cfg = tiny("manticore", "components", ComponentsConfig)
    names = ("gpt_neo", "mamba_instructions")
    components = [LanguageModel(from_dict(LMConfig, {**cfg.models[name], "vocab_size": VOCAB, "n_ctx": cfg.data.n_ctx},
                                          where=name)) for name in names]
    shape = {"d_model": components[0].cfg.d_model, "blocks": 1, "components": list(names)}
    return Manticore(components, ManticoreConfig(n_blocks=shape["blocks"], vocab_size=VOCAB)), shape


# name -> (what builds it and its shape, batch, tokens per row), as the stages' `tiny` runs; the page
# reads each network's shape from the results, so it names what ran
NETWORKS = {
    "blackmamba": (blackmamba, 16, 256),
    "mixer_flat": (mixer_flat, 16, 128),
    "manticore_specialists": (manticore_specialists, 16, 64),
}
SETTINGS = ("glibc_default", "keep_freed_memory")


def shape(build) -> dict:
    network, facts = build()
    return {**facts, "parameters": sum(p.numel() for p in network.parameters())}


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def time_zero_fill(reps: int = 20) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        torch.zeros(16, 256, VOCAB)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def time_training(build, batch: int, n_ctx: int, steps: int) -> dict:
    torch.manual_seed(0)
    model = build()[0].train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, VOCAB, (batch, n_ctx + 1))
    losses, times, warmup = [], [], 3
    for step in range(warmup + steps):
        if step == warmup:
            faults = minor_faults()
        start = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return {"ms_per_step": statistics.median(times[warmup:]) * 1e3,
            "minor_faults_per_step": (minor_faults() - faults) / steps, "losses": losses}


def child(setting: str, steps: int) -> None:
    torch.set_num_threads(1)
    if setting == "keep_freed_memory":
        keep_freed_memory()
    out = {"zero_fill_67mb_ms": time_zero_fill()}
    out.update({name: time_training(build, batch, n_ctx, steps) for name, (build, batch, n_ctx) in NETWORKS.items()})
    print(json.dumps(out))


@exit_on_user_error
def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=positive_int, default=20)
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.steps)
    runs = {}
    for setting in SETTINGS:
        done = subprocess.run([sys.executable, "-m", "benchmarks.allocator", "--child", setting, "--steps",
                               str(args.steps)], check=True, capture_output=True, text=True)
        runs[setting] = json.loads(done.stdout.strip().splitlines()[-1])
    base, kept = (runs[s] for s in SETTINGS)
    out = {
        "config": {"steps": args.steps, "threads": 1, "networks": {n: {"batch": b, "n_ctx": t, **shape(build)}
                                                                    for n, (build, b, t) in NETWORKS.items()}},
        "environment": {"cpus": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version(),
                        "libc": "-".join(platform.libc_ver()), "load_average_after": os.getloadavg()},
        "zero_fill_67mb_ms": {s: runs[s]["zero_fill_67mb_ms"] for s in SETTINGS},
        "zero_fill_speedup": base["zero_fill_67mb_ms"] / kept["zero_fill_67mb_ms"],
        "training": {name: {**{s: {k: v for k, v in runs[s][name].items() if k != "losses"} for s in SETTINGS},
                            "speedup": base[name]["ms_per_step"] / kept[name]["ms_per_step"],
                            "identical_losses": base[name]["losses"] == kept[name]["losses"]}
                     for name in NETWORKS},
    }
    write_json(OUT, out)
    print(f"zero-fill 67 MB: {base['zero_fill_67mb_ms']:.1f} -> {kept['zero_fill_67mb_ms']:.1f} ms "
          f"({out['zero_fill_speedup']:.1f}x)")
    for name, row in out["training"].items():
        print(f"{name}: {row['glibc_default']['ms_per_step']:.0f} -> {row['keep_freed_memory']['ms_per_step']:.0f} "
              f"ms/step ({row['speedup']:.2f}x), identical losses: {row['identical_losses']}")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
