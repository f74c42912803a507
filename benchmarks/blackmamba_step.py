"""CPU training step of BlackMamba against a dense Mamba with the same active parameters.

Both are our `LanguageModel`s at the `tiny` width of the BlackMamba pipeline (d_model 128,
vocabulary 4096, context 256, batch 16): BlackMamba is `mamba,moe` with 8 SwiGLU experts and the
Sinkhorn router in training mode; the dense peer is `mamba,swiglu` with one expert's width, so a
token multiplies with exactly the same weights in both. A step is forward, backward and AdamW.
The two are timed round-robin so that load from other processes spreads over both; medians.

    python -m benchmarks.blackmamba_step [--reps 9] [--threads 2]
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see benchmarks/moe_speed.py

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from benchmarks import positive_int
from common.errors import ArgumentParser, exit_on_user_error
from common.eval.counting import count_lm  # noqa: E402
from common.io import write_json  # noqa: E402
from common.models.lm import LanguageModel, LMConfig  # noqa: E402
from papers.blackmamba.model import BlackMambaConfig, lm_config  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "blackmamba_step.json"


def configs(d_model: int, layers: int, d_ff: int, vocab: int, n_ctx: int) -> dict[str, LMConfig]:
    return {
        "blackmamba": lm_config(BlackMambaConfig(vocab_size=vocab, d_model=d_model, n_layers=layers, d_ff=d_ff,
                                                 n_ctx=n_ctx)),
        "dense_mamba": LMConfig(vocab_size=vocab, d_model=d_model, pattern="mamba,swiglu", repeat=layers // 2,
                                n_ctx=n_ctx, norm_eps=1e-5, final_norm="layernorm", blocks={"swiglu": {"d_ff": d_ff}}),
    }


@exit_on_user_error
def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=positive_int, default=9)
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--d-model", type=positive_int, default=128)
    parser.add_argument("--layers", type=positive_int, default=4)
    parser.add_argument("--d-ff", type=positive_int, default=344)
    parser.add_argument("--batch", type=positive_int, default=16)
    parser.add_argument("--n-ctx", type=positive_int, default=256)
    parser.add_argument("--out", type=Path, default=OUT, help="where the results go (a check run: elsewhere)")
    args = parser.parse_args()
    if args.layers % 2:
        parser.error(f"argument --layers: {args.layers} is odd; the models alternate a Mamba and an MLP block")
    if args.n_ctx < 2:
        parser.error(f"argument --n-ctx: {args.n_ctx} leaves no next token to predict; give at least 2")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vocab = 4096
    ids = torch.randint(0, vocab, (args.batch, args.n_ctx))
    models, optimizers, times = {}, {}, {}
    for name, cfg in configs(args.d_model, args.layers, args.d_ff, vocab, args.n_ctx).items():
        models[name] = LanguageModel(cfg).train()
        optimizers[name] = torch.optim.AdamW(models[name].parameters(), lr=1e-3)
        times[name] = []

    def step(name: str) -> float:
        model, opt = models[name], optimizers[name]
        start = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    for name in models:  # warm-up
        step(name)
        step(name)
    for _ in range(args.reps):
        for name in models:
            times[name].append(step(name))

    results = {}
    for name, cfg in configs(args.d_model, args.layers, args.d_ff, vocab, args.n_ctx).items():
        count = count_lm(cfg)
        results[name] = {"median_s": statistics.median(times[name]), "all_s": times[name],
                         "forward_params": count.forward_params, "params": count.params}
    ratio = results["blackmamba"]["median_s"] / results["dense_mamba"]["median_s"]
    environment = {"torch": torch.__version__, "threads": torch.get_num_threads(), "cpu": platform.machine(),
                   "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    config = {key: value for key, value in vars(args).items() if key != "out"}
    write_json(args.out, {"config": config, "environment": environment, "results": results,
                          "blackmamba_over_dense_mamba": ratio, "target": "<= 1.5"})
    print(f"BlackMamba {results['blackmamba']['median_s']:.3f} s, "
          f"dense Mamba {results['dense_mamba']['median_s']:.3f} s "
          f"per step: {ratio:.2f}x (target <= 1.5x); wrote {args.out}")


if __name__ == "__main__":
    main()
