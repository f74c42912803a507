"""Inference cost of a Manticore hybrid against the sum of its components' forward passes, CPU.

The paper argues (its Appendix D) that a hybrid costs about its components together, the
projectors adding little. Components: a GPT-Neo-style transformer and a Mamba of the same width
(8 blocks each); the hybrid has `--blocks` Manticore blocks with projectors and alpha = 0.5 (both
components and every projector run). Forward passes without gradients, round-robin, medians.

    python -m benchmarks.manticore_overhead [--reps 9] [--threads 2]
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see benchmarks/moe_speed.py

import torch  # noqa: E402

from benchmarks import positive_int
from common.errors import ArgumentParser, exit_on_user_error
from common.io import write_json  # noqa: E402
from common.models.lm import LanguageModel, LMConfig  # noqa: E402
from papers.manticore.hybrid import Manticore, ManticoreConfig  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "manticore_overhead.json"


@exit_on_user_error
def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=positive_int, default=9)
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--d-model", type=positive_int, default=256)
    parser.add_argument("--blocks", type=positive_int, default=2)
    parser.add_argument("--batch", type=positive_int, default=8)
    parser.add_argument("--n-ctx", type=positive_int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    V, D, T = 4096, args.d_model, args.n_ctx
    gpt_neo = LanguageModel(LMConfig(vocab_size=V, d_model=D, pattern="attn_neo,mlp", repeat=4, n_ctx=T,
                                     norm="layernorm", final_norm="layernorm", pos_embedding="learned",
                                     blocks={"attn_neo": {"n_heads": 4}})).eval()
    mamba = LanguageModel(LMConfig(vocab_size=V, d_model=D, pattern="mamba", repeat=8, n_ctx=T)).eval()
    hybrid = Manticore([gpt_neo, mamba], ManticoreConfig(n_blocks=args.blocks, vocab_size=V, alpha_mode="fixed")).eval()
    models = {"gpt_neo": gpt_neo, "mamba": mamba, "manticore": hybrid}
    ids = torch.randint(0, V, (args.batch, T))
    times = {name: [] for name in models}
    with torch.no_grad():
        for model in models.values():  # warm-up
            model(ids)
        for _ in range(args.reps):
            for name, model in models.items():
                start = time.perf_counter()
                model(ids)
                times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(t) for name, t in times.items()}
    ratio = medians["manticore"] / (medians["gpt_neo"] + medians["mamba"])
    projector_params = sum(p.numel() for p in hybrid.projector_parameters())
    environment = {"torch": torch.__version__, "threads": torch.get_num_threads(), "cpu": platform.machine()}
    write_json(OUT, {"config": vars(args), "environment": environment, "median_s": medians, "all_s": times,
                     "manticore_over_sum_of_components": ratio, "target": "<= 1.15",
                     "projector_params": projector_params,
                     "component_params": {n: sum(p.numel() for p in m.parameters()) for n, m in models.items()
                                          if n != "manticore"}})
    print(f"Manticore {medians['manticore'] * 1e3:.1f} ms, GPT-Neo {medians['gpt_neo'] * 1e3:.1f} ms + Mamba "
          f"{medians['mamba'] * 1e3:.1f} ms: {ratio:.2f}x the sum (target <= 1.15x); wrote {OUT}")


if __name__ == "__main__":
    main()
