"""Per-token generation latency and cache memory against generated length, CPU.

Mamba (recurrent state) against a Llama-style transformer with a KV cache, both as our
`LanguageModel` with the same width and depth, batch 1, greedy. Latency and memory are measured
by `common.eval.generation.generation_profile`. Writes
`benchmarks/results/generation.json`.

    python -m benchmarks.generation [--lengths 256 1024 4096] [--threads 2]
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch
import transformers

from benchmarks import positive_int
from common.errors import ArgumentParser, exit_on_user_error
from common.eval.generation import generation_profile
from common.io import write_json
from common.models.lm import LanguageModel, LMConfig

OUT = Path(__file__).resolve().parent / "results" / "generation.json"


@exit_on_user_error
def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--lengths", type=positive_int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--d-model", type=positive_int, default=256)
    parser.add_argument("--layers", type=positive_int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n_ctx = max(args.lengths) + 1
    models = {
        "mamba": LMConfig(vocab_size=4096, d_model=args.d_model, pattern="mamba", repeat=args.layers, n_ctx=n_ctx),
        "transformer_kv_cache": LMConfig(vocab_size=4096, d_model=args.d_model, pattern="attn,swiglu",
                                         repeat=args.layers, n_ctx=n_ctx, blocks={"attn": {"n_heads": 4}}),
    }
    results = {name: generation_profile(LanguageModel(cfg).eval(), args.lengths) for name, cfg in models.items()}
    first, last = str(min(args.lengths)), str(max(args.lengths))
    for rows in results.values():
        rows["latency_growth_first_to_last"] = rows[last]["ms_per_token"] / rows[first]["ms_per_token"]
        rows["cache_growth_first_to_last"] = rows[last]["cache_bytes"] / rows[first]["cache_bytes"]
    results["transformer_over_mamba_ms_per_token_at_last"] = (
        results["transformer_kv_cache"][last]["ms_per_token"] / results["mamba"][last]["ms_per_token"])
    environment = {"torch": torch.__version__, "transformers": transformers.__version__,
                   "threads": torch.get_num_threads(), "cpu": platform.machine()}
    write_json(OUT, {"config": vars(args), "environment": environment, "results": results})
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
