"""How far BlackMamba's `train_compare` runs move between CPU code paths, and why the MoE models
move more than the dense ones. A measurement outside the pipeline; nothing in the ledger reads it.

torch picks its vectorised kernels by the CPU (AVX-512, AVX2, or none); `ATEN_CPU_CAPABILITY`
forces the narrower ones, so one machine can stand in for two. Each child process below runs under
one capability, single-threaded, and the parent compares:

1. routing: the same weights and batches, routed under each capability; how many routing decisions
   differ (training's Sinkhorn routing and eval's top-1), how many Sinkhorn iterations each layer
   took, and how many tokens' top-two margin lies within the rounding noise of the router's input;
2. training: each model of the stage, seed 0, trained under each capability (the two at once, a
   core each); the gap between the training-loss curves at each logged step.

    python -m sizing.cpu_paths --steps 300   # writes sizing/records/cpu_paths.json
    python -m sizing.cpu_paths_page          # the table of docs/pipelines.md, from that record

The record keeps how long it took (the `default` children, on torch's unvectorised kernels, are the
slow ones). Reads the root pipeline's `tokenize` and `train_tokenizer` outputs (`dvc repro
tokenize` first). The record names the machine, commit and date, as the other sizing records do.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from common.errors import ArgumentParser

CAPABILITIES = ("avx2", "default")
RECORD = Path(__file__).resolve().parent / "records" / "cpu_paths.json"
DATA, TOKENIZER = Path("data/tokenized/packed"), Path("data/tokenizer")
MODELS = ("blackmamba", "mamba_dense_mlp", "moe_transformer", "transformer")


def stage_setup(steps: int):
    """The stage's config at `tiny`, shortened to `steps`, and its model configs."""
    from common.config import load_yaml, stage_config
    from common.data.tokenized import load_tokenized
    from common.data.tokenizer import load_tokenizer
    from papers.blackmamba.compared_models import TrainCompareConfig, model_configs

    cfg = stage_config(load_yaml(Path("papers/blackmamba/params.yaml")), "train_compare", TrainCompareConfig, "tiny")
    cfg = replace(cfg, trainer=replace(cfg.trainer, max_steps=steps, log_every_n_steps=10, val_every_n_steps=steps,
                                       checkpoint_every_n_steps=steps, progress_bar=False))
    n_ctx = len(load_tokenized(DATA)["train"][0]["input_ids"])
    return cfg, model_configs(cfg, len(load_tokenizer(TOKENIZER)), n_ctx)


def child_train(model: str, steps: int, work: Path) -> dict:
    """Train one model, seed 0; its logged training losses and the weights' path."""
    import torch

    from common.models.lm import save_language_model
    from common.training.lm import train_language_model

    torch.set_num_threads(1)
    cfg, configs = stage_setup(steps)
    net, run = train_language_model(configs[model], DATA, cfg.data, cfg.optim, cfg.trainer, work / "run", seed=0)
    save_language_model(net, work / "model")
    return {"capability": torch.backends.cpu.get_cpu_capability(),
            "train_loss": {r["step"]: r["train/loss"] for r in run.history if "train/loss" in r}}


def child_route(model_dir: Path, batches: int) -> dict:
    """Route the same validation batches through every MoE layer of a saved model, in training mode
    (Sinkhorn) and eval mode (top-1): each token's expert, each layer's Sinkhorn iterations, and in
    eval each token's top-two margin of the router logits."""
    import torch

    from common.blocks.moe import MoE
    from common.data.tokenized import load_tokenized
    from common.models.lm import load_language_model

    torch.set_num_threads(1)
    net = load_language_model(model_dir)
    rows = torch.tensor(load_tokenized(DATA)["validation"]["input_ids"][: 16 * batches])
    layers = [m for m in net.modules() if isinstance(m, MoE)]
    seen: dict[str, list] = {"train": [], "eval": [], "iterations": [], "margin": [], "input_scale": []}

    def recording(layer: MoE):
        """The layer's own `route`, recording what it chose and on which logits."""
        route = layer.route

        def recorded(logits):
            idx, gates, probs = route(logits)
            seen["train" if layer.training else "eval"][-1] += idx[:, 0].tolist()
            if layer.training:
                seen["iterations"].append(layer.last_sinkhorn_iters)
            else:
                top2 = logits.double().topk(2, dim=-1).values
                seen["margin"] += (top2[:, 0] - top2[:, 1]).tolist()
                seen["input_scale"].append(logits.abs().max().item())
            return idx, gates, probs
        return recorded

    for layer in layers:
        layer.route = recording(layer)
    with torch.no_grad():
        for mode in ("train", "eval"):
            net.train(mode == "train")
            for batch in rows.split(16):
                seen[mode].append([])
                net(batch)
    return {"capability": torch.backends.cpu.get_cpu_capability(), **seen}


def run_child(capability: str, args: list[str]) -> dict:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "OMP_NUM_THREADS": "1"}
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "sizing.cpu_paths", "--child", *args, "--out", out.name],
                       env=env, check=True)
        return json.loads(Path(out.name).read_text())


def compare_training(models: list[str], steps: int, work: Path) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    results = {}
    for model in models:
        jobs = {c: ["train", model, str(steps), str(work / model / c)] for c in CAPABILITIES}
        with ThreadPoolExecutor(len(CAPABILITIES)) as pool:  # one child per core
            runs = dict(zip(CAPABILITIES, pool.map(run_child, jobs, jobs.values())))
        a, b = (runs[c]["train_loss"] for c in CAPABILITIES)
        gaps = {step: abs(a[step] - b[step]) for step in a}
        first = next((int(s) for s, g in gaps.items() if g > 0), None)
        results[model] = {"capabilities": {c: runs[c]["capability"] for c in CAPABILITIES},
                          "first_step_that_differs": first, "gap_by_step": gaps,
                          "final_loss": {c: runs[c]["train_loss"][max(runs[c]["train_loss"], key=int)]
                                         for c in CAPABILITIES}}
    return results


def compare_routing(model_dir: Path, batches: int) -> dict:
    a, b = (run_child(c, ["route", str(model_dir), str(batches)]) for c in CAPABILITIES)
    out = {}
    for mode in ("train", "eval"):
        pairs = [(x, y) for ba, bb in zip(a[mode], b[mode]) for x, y in zip(ba, bb)]
        out[f"{mode}_decisions"] = len(pairs)
        out[f"{mode}_decisions_that_differ"] = sum(x != y for x, y in pairs)
    out["sinkhorn_iterations"] = {c: sorted(set(r["iterations"])) for c, r in zip(CAPABILITIES, (a, b))}
    # A margin within about 1e-6 of the logits' scale is where float32 rounding can decide the expert.
    scale = max(a["input_scale"])
    out["eval_margins_below"] = {f"{k:g} x logit scale": sum(m < k * scale for m in a["margin"])
                                 for k in (1e-6, 1e-5, 1e-4)}
    out["eval_tokens"] = len(a["margin"])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS,
                        help="the models to train (blackmamba first: its weights are routed afterwards)")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--out", type=Path, default=RECORD, help="the record (default: %(default)s)")
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        result = child_train(rest[0], int(rest[1]), Path(rest[2])) if kind == "train" else \
            child_route(Path(rest[0]), int(rest[1]))
        args.out.write_text(json.dumps(result))
        return
    if args.steps < 10 or args.batches < 1:
        parser.error(f"--steps must be at least 10 (the logging interval) and --batches at least 1, got "
                     f"{args.steps} and {args.batches}")
    if not (DATA.is_dir() and TOKENIZER.is_dir()):
        parser.error(f"{DATA} or {TOKENIZER}: not found; run `dvc repro tokenize` first")
    from common.io import write_json
    from common.stage_times import git, machine

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        training = compare_training(args.models, args.steps, work)
        routing = compare_routing(work / "blackmamba" / CAPABILITIES[0] / "model", args.batches) \
            if "blackmamba" in args.models else None
    write_json(args.out, {"which": "cpu_paths", "steps": args.steps, "batches": args.batches, "training": training,
                          "routing": routing, "machine": machine(), "commit": git("rev-parse", "--short", "HEAD"),
                          "date": datetime.date.today().isoformat(), "seconds": time.perf_counter() - start})
    for model, r in training.items():
        print(model, "first differs at step", r["first_step_that_differs"], "final", r["final_loss"])
    if routing is not None:
        print("routing", routing)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
