"""CPU speed of the MoE block (common/blocks/moe.py) against two references, forward + backward.

- dense: one SwiGLU MLP of the same *active* size (one expert, hidden F) over the same tokens, the
  floor that a top-1 MoE can only approach (same matmul FLOPs, plus routing and gather/scatter);
- loop: the dispatch design of the released BlackMamba SwitchMLP, written here from its
  description: separate nn.Linear experts, and for each expert `idx = (argmax == e).nonzero()`,
  `out[idx] = expert(x[idx])`, then `out * gate`. Its backward materialises a full-size gradient
  for every expert's gather and scatter, so its overhead grows with the number of experts.

Ours ("ours_sigmoid") is timed with the sigmoid router, the same routing as the loop, so that the
difference is the dispatch alone; also with the Sinkhorn router in training mode (what BlackMamba
trains with), with the expert loop left to autograd instead of the hand-written backward, and with
`torch._grouped_mm` where this torch has it on CPU. Implementations are timed round-robin in every
repetition so that load from other processes spreads over all of them; medians are reported.

    python -m benchmarks.moe_speed [--threads 2,1] [--reps 7] [--quick]
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

# On a shared machine, libgomp's default spin-waiting makes 2-thread timings bimodal: a matmul
# either gets both cores or waits a scheduler slice for a descheduled worker (measured here: 150
# vs 8 GFLOP/s for the same 128-row matmul). Passive waiting gives steady numbers. It must be set
# before torch loads libgomp; an explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from torch import nn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import nonnegative_int, positive_int, positive_ints  # noqa: E402
from common.blocks.moe import MoE, default_d_ff, load_balance_stats  # noqa: E402
from common.errors import ArgumentParser, exit_on_user_error  # noqa: E402
from common.io import write_json  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "moe_speed.json"


class DenseSwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, 2 * d_ff, bias=False)
        self.fc2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        gate, up = self.fc1(x).chunk(2, dim=-1)
        return self.fc2(F.silu(gate) * up)


class LoopSwitchMLP(nn.Module):
    """The released SwitchMLP's dispatch: a gather/scatter per expert by boolean match."""

    def __init__(self, d_model: int, d_ff: int, n_experts: int):
        super().__init__()
        self.router = nn.Linear(d_model, n_experts)
        self.experts = nn.ModuleList(DenseSwiGLU(d_model, d_ff) for _ in range(n_experts))
        self.last_counts = torch.zeros(n_experts, dtype=torch.long)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        gate, choice = torch.sigmoid(self.router(x)).max(dim=1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            idx = (choice == e).nonzero()
            self.last_counts[e] = idx.shape[0]
            # Cast: under autocast the expert returns bf16 into the fp32 buffer (a no-op otherwise).
            out[idx, :] = expert(x[idx, :]).to(out.dtype)
        return (out * gate.unsqueeze(-1)).reshape(shape)


def grouped_mm_works() -> bool:
    if not hasattr(torch, "_grouped_mm"):
        return False
    try:
        m = MoE(16, n_experts=2, d_ff=16, expert_impl="grouped_mm")
        m(torch.randn(8, 16, requires_grad=True)).sum().backward()
        return True
    except (RuntimeError, NotImplementedError):
        return False


def bench_config(n_tokens: int, d_model: int, n_experts: int, d_ff: int, reps: int, warmup: int) -> dict:
    torch.manual_seed(0)
    impls: dict[str, nn.Module] = {
        "dense": DenseSwiGLU(d_model, d_ff),
        "ours_sigmoid": MoE(d_model, n_experts=n_experts, d_ff=d_ff, router="sigmoid", expert_impl="loop"),
        "ours_sinkhorn": MoE(d_model, n_experts=n_experts, d_ff=d_ff, router="sinkhorn", expert_impl="loop"),
        "ours_autograd": MoE(d_model, n_experts=n_experts, d_ff=d_ff, router="sigmoid", expert_impl="autograd"),
        "loop": LoopSwitchMLP(d_model, d_ff, n_experts),
    }
    if grouped_mm_works():
        impls["ours_grouped_mm"] = MoE(d_model, n_experts=n_experts, d_ff=d_ff, router="sigmoid",
                                       expert_impl="grouped_mm")
    for m in impls.values():
        m.train()
    x = torch.randn(n_tokens, d_model)
    upstream = torch.randn(n_tokens, d_model)  # a dense gradient, as from the next layer

    def run(m: nn.Module) -> float:
        m.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_(True)
        t0 = time.perf_counter()
        m(xi).backward(upstream)
        return time.perf_counter() - t0

    times: dict[str, list[float]] = {name: [] for name in impls}
    for rep in range(warmup + reps):
        for name, m in impls.items():
            t = run(m)
            if rep >= warmup:
                times[name].append(t)

    med = {name: statistics.median(ts) for name, ts in times.items()}
    loads = {name: load_balance_stats(m.last_tokens_per_expert)["max_over_mean"]
             for name, m in impls.items() if isinstance(m, MoE)}
    loads["loop"] = load_balance_stats(impls["loop"].last_counts)["max_over_mean"]
    result = {
        "n_tokens": n_tokens, "d_model": d_model, "n_experts": n_experts, "d_ff": d_ff, "top_k": 1,
        "median_s": med,
        "min_s": {name: min(ts) for name, ts in times.items()},
        "all_s": times,
        "load_max_over_mean": loads,
        "ratios": {
            "ours_sinkhorn_over_dense": med["ours_sinkhorn"] / med["dense"],
            "ours_sigmoid_over_dense": med["ours_sigmoid"] / med["dense"],
            "loop_over_ours_sigmoid": med["loop"] / med["ours_sigmoid"],
            "loop_over_ours_sinkhorn": med["loop"] / med["ours_sinkhorn"],
            "ours_autograd_over_ours_sigmoid": med["ours_autograd"] / med["ours_sigmoid"],
        },
        "sinkhorn_iters": impls["ours_sinkhorn"].last_sinkhorn_iters,
    }
    if "ours_grouped_mm" in med:
        result["ratios"]["ours_grouped_mm_over_dense"] = med["ours_grouped_mm"] / med["dense"]
        result["ratios"]["loop_over_ours_grouped_mm"] = med["loop"] / med["ours_grouped_mm"]
    return result


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=positive_ints, default="2,1",
                        help="comma-separated thread counts; 2 is the reference, 1 a control that is "
                             "insensitive to other processes stealing a core")
    parser.add_argument("--reps", type=positive_int, default=7)
    parser.add_argument("--warmup", type=nonnegative_int, default=2)
    parser.add_argument("--quick", action="store_true", help="only the main 256-wide, 8-expert size")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    # The target size first (BlackMamba's 8 experts, top-1), then wider, then more and smaller
    # experts: the loop design's per-expert overhead grows with E while the matmul work stays put.
    sizes = [(4096, 256, 8), (4096, 512, 8), (4096, 256, 64), (4096, 64, 64)]
    if args.quick:
        sizes = sizes[:1]
    runs = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        load_before = os.getloadavg()
        configs = []
        for n_tokens, d_model, n_experts in sizes:
            r = bench_config(n_tokens, d_model, n_experts, default_d_ff(d_model), args.reps, args.warmup)
            configs.append(r)
            ms = {k: round(v * 1e3, 1) for k, v in r["median_s"].items()}
            print(f"threads={threads} N={n_tokens} d={d_model} E={n_experts} F={r['d_ff']}: median ms {ms}")
            print("   ratios " + ", ".join(f"{k}={v:.2f}" for k, v in r["ratios"].items()), flush=True)
        runs.append({"threads": threads, "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                     "configs": configs})

    payload = {
        "benchmark": "moe_speed",
        "what": "forward+backward wall time per call, fp32, CPU; medians over reps after warm-up",
        "reps": args.reps, "warmup": args.warmup, "cpu_count": os.cpu_count(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version(),
                     "platform": platform.platform(), "processor": platform.processor()},
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "targets": {"ours_over_dense_at_most": 1.3, "loop_over_ours_at_least": 2.0},
        "runs": runs,
    }
    write_json(args.out, payload)  # atomic: temp file + os.replace
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
