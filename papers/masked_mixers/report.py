"""Stage `report`: the claims ledger of the Masked Mixers report and blog (`results/claims.json`),
built by `common.claims.build` from `claims.yaml` and the numbers `evidence` reads from
results/*.json; its headline numbers for `dvc metrics` (`results/metrics.json`); and the README's
tables."""

from __future__ import annotations

import math
import statistics

from common.claims.ledger import claims_table
from common.claims.rules import spread
from common.claims.stage import claims_report_main
from papers.masked_mixers import evidence
from papers.masked_mixers.evidence import ranking_top1, seed_values

PAPER = "masked_mixers"


# ---------------------------------------------------------------------------------------------
# README tables


NOT_TRAINED = "Not trained at `{}` (the section's `models: []`): its claims read their earlier run (the ledger)."


def losses(res: dict) -> str:
    if not res["models"]:
        return NOT_TRAINED.format(res["profile"])
    s = res["sizes"]
    extra = "".join(f", {name} also {seeds}" for name, seeds in res.get("extra_seeds", {}).items())
    lines = [f"d_model {s['d_model']}, {s['n_layers']} layers, n_ctx {s['n_ctx']}, batch {res['batch_size']}, "
             f"{res['steps']} steps, seeds {res['seeds']}{extra}; unigram (chance) loss {res['chance_loss']:.3f}.", "",
             "| model | parameters | validation loss | fall over the last fifth | s/step (throughput only) |",
             "|---|---|---|---|---|"]
    for name, model in res["models"].items():
        val, late = spread(seed_values(model)), spread(seed_values(model, "late_movement"))
        step_s = statistics.fmean(seed_values(model, "seconds_per_step"))
        lines.append(f"| {name} | {model['n_params']:,} | {val['mean']:.3f} ± {val['std']:.3f} | "
                     f"{late['mean']:.3f} | {step_s:.3f} |")
    return "\n".join(lines)


def variants(var: dict) -> str:
    base = var["baseline"]["forward_flops_per_row"]
    flops = [f"{var['baseline']['name']} {base / 1e6:.1f}M"] + [
        f"{name} {m['forward_flops_per_row'] / 1e6:.1f}M ({m['forward_flops_per_row'] / base:.2f}x)"
        for name, m in var["models"].items()]
    return "\n".join([losses(var), "", f"Forward FLOPs per full-window row, counted by torch: {'; '.join(flops)}."])


def train_test_gap(gap: dict) -> str:
    if not gap["models"]:
        return NOT_TRAINED.format(gap["profile"])
    lines = [f"{gap['train_rows']:,} training stories, {gap['steps']} steps of {gap['batch_size']} rows: "
             f"{gap['epochs']} epochs; losses on {gap['eval_rows']} of those stories and {gap['eval_rows']} "
             f"validation stories, mean ± std over seeds {gap['seeds']}; unigram (chance) loss "
             f"{gap['chance_loss']:.3f}.", "",
             "| model | training loss | validation loss | gap (validation - training) |", "|---|---|---|---|"]
    for name, model in gap["models"].items():
        cells = [spread(seed_values(model, key)) for key in ("scored_train_loss", "scored_val_loss", "gap")]
        lines.append(f"| {name} | " + " | ".join(f"{c['mean']:.3f} ± {c['std']:.3f}" for c in cells) + " |")
    return "\n".join(lines)


def representation(rep: dict) -> str:
    lines = [f"Top-5 normalized Hamming metric (0: input fully recovered, 1: none), mean ± std over seeds "
             f"{rep['seeds']}; {rep['n_inputs']} inputs of {rep['n_tokens']} tokens, {rep['steps']} steps.", "",
             "| state / size | model | full hidden layer | last token only |", "|---|---|---|---|"]
    for state, models in rep["results"].items():
        for name, rows in models.items():
            cells = []
            for target in ("full", "last_token"):
                values = [row[target]["hamming_top5"] for row in rows.values() if target in row]
                cells.append(f"{statistics.fmean(values):.3f} ± {spread(values)['std']:.3f}" if values else "-")
            lines.append(f"| {state} | {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def retrieval(ret: dict) -> str:
    cs = ret["candidates"]
    # results from before the inputs could be standardized read them as they are
    inputs = ("standardized per dimension with the training pairs' mean and spread" if ret.get("standardized")
              else "as they are")
    lines = [f"Top-1 accuracy on {ret['n_test']} test pairs, mean ± std over seeds {ret['seeds']}; chance "
             + ", ".join(f"{1 / c:.3f} (c = {c})" for c in cs) + ". InfoNCE source: "
             f"`{ret['infonce']['source']}`. The retrieval model reads the states {inputs}; the rankings read "
             "them as they are.", "",
             "| source | model | weights | embedding | " + " | ".join(f"top-1, c = {c}" for c in cs)
             + "".join(f" | {label} ranking top-1, c = {cs[0]}" for label in ("cosine", "L1", "L2")) + " |",
             "|---|---|---|---|" + "---|" * (len(cs) + 3)]
    for name, src in ret["sources"].items():
        embedding = "mean over tokens" if src["pooling"] == "mean" else f"position {src['position']}"
        cells = []
        for c in cs:
            top1 = spread([run[f"c{c}"]["test_top1"] for run in src["seeds"].values()])
            cells.append(f"{top1['mean']:.3f} ± {top1['std']:.3f}")
        for ranking in ("cosine", "l1", "l2"):
            ranked = spread(ranking_top1(ret, name, cs[0], ranking))
            cells.append(f"{ranked['mean']:.3f} ± {ranked['std']:.3f}")
        lines.append(f"| {name} | {src['model']} | {src['weights']} | {embedding} | " + " | ".join(cells) + " |")
    steps = sorted(next(iter(next(iter(ret["sources"].values()))["seeds"].values()))[f"c{cs[0]}"]["top1_curve"],
                   key=int)
    lines += ["", f"Learning curve of the retrieval model, c = {cs[0]}, {ret['n_train']} training pairs, top-1 by "
                  "training step (mean over seeds; the same candidate sets at every step):", "",
              "| source | " + " | ".join(f"{s} steps" for s in steps) + " |", "|---|" + "---|" * len(steps)]
    for name, src in ret["sources"].items():
        curves = [run[f"c{cs[0]}"]["top1_curve"] for run in src["seeds"].values()]
        lines.append(f"| {name} | " + " | ".join(f"{statistics.fmean(c[s] for c in curves):.3f}" for s in steps) + " |")
    info = ret["infonce"]
    runs, c = list(info["seeds"].values()), cs[0]
    cosine = spread([run[f"c{c}_cosine_top1"] for run in runs])
    before = spread(ranking_top1(ret, info["source"], c))
    final = spread([run["train_loss"] for run in runs])
    lines += ["", f"InfoNCE tuning of `{info['source']}`, {info['steps']} steps of batch {info['batch_size']} "
                  f"(temperature {info['tau']}): cosine-similarity top-1 at c = {c} {cosine['mean']:.3f} ± "
                  f"{cosine['std']:.3f} after, {before['mean']:.3f} ± {before['std']:.3f} before; final training "
                  f"loss {final['mean']:.3f} ± {final['std']:.3f} (chance ln {info['batch_size']} = "
                  f"{math.log(info['batch_size']):.3f}), peak {max(run['max_loss'] for run in runs):.2f}; "
                  f"{statistics.fmean(run['texts_per_s'] for run in runs):.1f} texts/s; the embedding route "
                  f"({ret['throughput']['steps']} timed steps on {ret['throughput']['n_train']} pairs, embedding "
                  "included) " + ", ".join(f"{statistics.fmean(run[f'speedup_c{c}'] for run in runs):.0f}x as many "
                                           f"embeddings/s at c = {c}" for c in ret["throughput"]["candidates"]) + "."]
    return "\n".join(lines)


def lr_check(res: dict) -> str:
    """The learning-rate check, per comparison section: each model's first seed at multiples of its rate."""
    checked = {name: section for name, section in res["sections"].items() if section["factors"] and
               section["final_val_loss"]}
    if not checked:
        return f"No rates checked at `{res['profile']}`: every model trains at its section's rate in params."
    lines = []
    for name, section in checked.items():
        factors = section["factors"]
        lines += [f"`{name}`: final validation loss of seed {section['seed']} at each multiple of the model's own "
                  f"rate; at x1 it is `{name}`'s run of that seed.", "",
                  "| model | own lr | " + " | ".join(f"x{factor:g}" for factor in factors) + " |",
                  "|---|---|" + "---|" * len(factors)]
        for model, losses in section["final_val_loss"].items():
            own = section["own_lr"][model]
            cells = [name if factor == 1 else f"{losses[f'{own * factor:g}']:.3f} (lr {own * factor:g})"
                     for factor in factors]
            lines.append(f"| {model} | {own:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines + ["A model that does better at another rate, by more than its seeds' spread at its own, "
                               "gates the claims that compare it (the ledger says which); the mixer variants train "
                               "at the flat mixer's rate."])


def generation(gen: dict) -> str:
    ms = gen["ms_per_token"]
    chosen = "; ".join(f"{role} `{c['model']}` at step {c['step']}, validation loss {c['val_loss']:.3f}"
                       for role, c in gen["checkpoints"].items())
    lines = [f"Greedy, {gen['new_tokens']} new tokens, clm seed {gen['seed']}, checkpoints at equal validation loss: "
             f"{chosen}. ms/token: mixer (fixed window) {ms['mixer_fixed_window']}, transformer (KV cache) "
             f"{ms['transformer_kv_cache']}.", ""]
    for sample in gen["samples"]:
        lines += [f"- prompt: `{sample['prompt']!r}`", f"  - mixer: `{sample['mixer']!r}`",
                  f"  - transformer: `{sample['transformer']!r}`"]
    return "\n".join(lines)


TABLES = {"claims": claims_table, "clm": losses, "norms": losses, "mixer_variants": variants,
          "train_test_gap": train_test_gap, "one_step": losses, "context_length": losses, "autoencoders": losses,
          "bidirectional": losses, "lr_check": lr_check, "representation": representation, "retrieval": retrieval,
          "generation": generation}


def main(argv: list[str] | None = None) -> None:
    claims_report_main(PAPER, evidence, TABLES, argv)


if __name__ == "__main__":
    main()
