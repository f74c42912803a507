"""Stage `report`: the claims ledger of the Manticore paper (`results/claims.json`), its headline
numbers for `dvc metrics` (`results/metrics.json`), and the result tables of
papers/manticore/README.md, all from results/*.json (see `common.eval.report`).

The ledger holds the claims tested on specialist components over seeds (`specialists`); every
verdict there comes from the rules of `common.claims.rules`, with the unigram loss of the held-out
documents as the chance level and, on top of those rules, a settling rule: a ranking is
`inconclusive` when a compared run's validation loss still fell, over the last fifth of its
training, by as much as the gap judged. It also holds the MAD claims (Tables 2, 5, 6): `needs
paper scale` while the sizing runs (`mad_sizing`) find a compared network at chance at the tables'
budget, and the LRA claims (Tables 3, 7) likewise with `lra_sizing`. The other tables (single-seed
runs on components pretrained on the same stories) give readings, not verdicts.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.claims.ledger import check_ledger, claim_entry, claims_table
from common.claims.rules import (
    above_chance,
    boundaries,
    gap_changes,
    judge_difference,
    judge_equivalence,
    judge_non_inferiority,
    paired_differences,
    require,
    run_above_chance,
    settle,
    spread,
)
from common.errors import DataError
from common.eval import report

# The tables of single-seed runs on components pretrained on the same stories read their numbers but
# give no verdict: the claims ledger holds the verdicts.
SAME_STORIES = ("on components pretrained on the same stories (where no hybrid optimum can form; the specialist pair "
                "below is the setting that can): a reading, not a verdict.")
NO_VERDICT = f"One seed, {SAME_STORIES}"

# Table 4 of the paper: validation loss on its PTB completions after search and retraining.
PAPER_TABLE4 = {"darts_alternating": 1.2854, "darts_simultaneous": 1.3635, "dash_alternating": 2.5899,
                "dash_simultaneous": 2.5968}


def components(res: dict) -> str:
    corpora = sorted({c for comp in res["components"].values() for c in comp.get("heldout_loss", {})})
    lines = ["| component | source | corpus | blocks | width | parameters | tokenizer size | final val loss | "
             + " | ".join(f"held-out loss on {c}" for c in corpora) + " |",
             "|---|---|---|---|---|---|---|---|" + "---|" * len(corpora)]
    for name, c in res["components"].items():
        loss = f"{c['final_val_loss']:.3f}" if "final_val_loss" in c else "-"
        held = [f"{c['heldout_loss'][k]:.3f}" if "heldout_loss" in c else "-" for k in corpora]
        lines.append(f"| {name} | {c['source']} | {c.get('corpus', '-')} | {c.get('pattern', '-')} x "
                     f"{c.get('repeat', '-')} | {c.get('d_model', '-')} | {c['params'] / 1e6:.2f}M | {c['tokens']:,} | "
                     f"{loss} | " + " | ".join(held) + " |")
    if "specialists" in res:
        sp = res["specialists"]
        margins = ", ".join(f"{c} {m:.2f}" for c, m in sp["margins"].items())
        check = "not checked" if sp["min_margin"] is None else f"required at least {sp['min_margin']}"
        lines += ["", f"Specialist margins (nats; how much lower each corpus's own components score there than the "
                      f"best other component, on {sp['eval_rows']} held-out blocks): {margins}; {check}."]
    return "\n".join(lines)


def general_text(res: dict) -> str:
    lines = [f"Source `{res['source']}`, packed in {res['block_size']}-token blocks, once per hybrid tokenizer:", "",
             "| tokenizer of | train tokens | validation tokens |", "|---|---|---|"]
    lines += [f"| {name} | {c['train']:,} | {c['validation']:,} |" for name, c in res["tokens"].items()]
    return "\n".join(lines)


def nl_experiments(res: dict) -> str:
    names, summary = res["components"], res["summary"]
    sweep = res["sweep"]
    lines = [f"Fixed-alpha sweep (alpha = weight of `{names[1]}` per block; all weights fine-tuned):", "",
             "| alpha | " + " | ".join("/".join(f"{r[1]:.2f}" for r in s["alphas"]) for s in sweep) + " |",
             "|---|" + "---|" * len(sweep),
             "| val loss | " + " | ".join(f"{s['val_loss']:.4f}" for s in sweep) + " |", "",
             "Search, then rewind and retrain with the searched alphas frozen (paper: Table 4, PTB completions):", "",
             "| search | alternating? | searched alpha | val loss after retraining | paper (PTB) "
             "| in the sweep's best region? |",
             "|---|---|---|---|---|---|"]
    for label, r in res["searched"].items():
        method, update = label.split("_")
        alpha = "/".join(f"{row[1]:.2f}" for row in r["alphas"])
        lines.append(f"| {method.upper()} | {'yes' if update == 'alternating' else 'no'} | {alpha} "
                     f"| {r['val_loss']:.4f} | "
                     f"{PAPER_TABLE4.get(label, '-')} | {'yes' if summary['search_in_best_region'][label] else 'no'} |")
    alone = summary["component_alone"]
    best_component = min(alone.values()) if alone else float("nan")
    ens = res["ensemble"]
    lines += ["", "Against the components and the learned ensemble (paper: Table 8, and Figure 2 left):", "",
              "| " + " | ".join(f"{n} alone" for n in alone)
              + " | learned ensemble | Manticore (best of sweep and search) |",
              "|" + "---|" * (len(alone) + 2),
              "| " + " | ".join(f"{v:.4f}" for v in alone.values()) + f" | {ens['val_loss']:.4f} | "
              f"{summary['best_manticore_val_loss']:.4f} |"]
    in_region = [label for label, ok in summary["search_in_best_region"].items() if ok]
    beats = summary["best_manticore_val_loss"] < best_component
    readings = [
        ("search lands in the sweep's best region (within "
         f"{summary['best_region_threshold'] / summary['sweep_best']['val_loss'] - 1:.0%} of the best sweep loss)",
         f"holds for {', '.join(in_region)}" if in_region else "holds for no search variant"),
        ("Manticore beats both components", "holds" if beats else
         f"does not hold: best Manticore {summary['best_manticore_val_loss']:.4f} "
         f"vs best component {best_component:.4f}"),
        ("the learned ensemble falls below Manticore", "holds" if summary["ensemble_below_manticore"] else
         "does not hold: the ensemble's loss is not above Manticore's"),
    ]
    lines += ["", NO_VERDICT, "", "| claim | reading |", "|---|---|"]
    lines += [f"| {claim} | {reading} |" for claim, reading in readings]
    return "\n".join(lines)


# Table 2 (right) and Table 5 of the paper: test loss on Manticore's MAD settings.
PAPER_TABLE2 = {"in-context-recall": (4.0771, 4.1858, 4.0768), "fuzzy-in-context-recall": (4.4384, 4.8097, 4.2797),
                "noisy-in-context-recall": (4.1843, 4.2605, 4.1823), "selective-copying": (1.0470, 3.7765, 0.9478),
                "memorization": (4.6110, 5.2281, 4.1367)}
PAPER_TABLE5 = {"in-context-recall": (0.0068, 0.0081), "fuzzy-in-context-recall": (4.1764, 4.1729),
                "noisy-in-context-recall": (4.1628, 4.1614), "selective-copying": (0.0849, 0.0006),
                "memorization": (8.9416, 8.9402)}
# Table 6 (its middle columns and Manticore are Table 2 left): Striped Hyena Experts + MoE-MLP, striped
# MH-Hyena + MoE-MLP, Mambaformer, Manticore[striped MH-Hyena + MoE, GPT-Neo, Mamba]; test loss.
PAPER_TABLE6 = {"in-context-recall": (4.0315, 3.7153, 0.0020, 0.0048),
                "fuzzy-in-context-recall": (4.1749, 4.1714, 4.1712, 4.1750),
                "noisy-in-context-recall": (4.1640, 4.1643, 4.1646, 4.1607),
                "selective-copying": (2.1731, 1.8021, 0.0005, 0.0171),
                "memorization": (8.8537, 8.8353, 5.2179, 8.9254)}
PAPER_EXISTING_HYBRIDS = {"striped_hyena_experts_moe": 0, "striped_mh_hyena_moe": 1, "mambaformer": 2}
TABLE2_LEFT = ("striped_mh_hyena_moe", "mambaformer")  # Table 6 adds the Hyena-experts model


def mad_cell(r: dict | None, paper: float | None = None, loss: str = "loss") -> str:
    ours = "-" if r is None else f"{r[loss]:.3f} ({r['accuracy']:.2f})"
    return ours + (f" [{paper}]" if paper is not None else "")


def relative_gap(loss: float, other: float, paper: float | None = None) -> str:
    """`loss` against `other` as a relative difference (negative: lower), with the paper's in brackets."""
    return f"{loss / other - 1:+.1%}" + (f" [{paper:+.1%}]" if paper is not None else "")


def mad_experiments(res: dict) -> str:
    names = res["components"]
    lines = [f"Manticore[{', '.join(names)}] with {res['n_blocks']} Manticore block(s), "
             f"{'with' if res.get('projectors') else 'no'} projectors. Best test loss during training (final "
             "accuracy), as the paper reports it; the paper's loss in brackets (its settings are harder: "
             "`manticore` vs our `tiny` overrides):", "",
             "| task | " + " | ".join(names)
             + " | Manticore | Manticore discretized | alphas (per block) | Manticore vs better component |",
             "|---|" + "---|" * (len(names) + 4)]
    for entry, row in res["tasks"].items():
        task = entry.split("/")[1]
        paper2, paper5 = PAPER_TABLE2.get(task), PAPER_TABLE5.get(task)
        comps = [mad_cell(row[n], paper2[i] if paper2 else None, "best_loss") for i, n in enumerate(names)]
        alphas = "; ".join("/".join(f"{a:.2f}" for a in block) for block in row["manticore"]["alphas"])
        best = min(row[n]["best_loss"] for n in names)
        paper_gap = paper2[2] / min(paper2[:2]) - 1 if paper2 else None
        lines.append(f"| {entry} | " + " | ".join(comps)
                     + f" | {mad_cell(row['manticore'], paper2[2] if paper2 else None, 'best_loss')} | "
                     f"{mad_cell(row.get('manticore_discretized'), paper5[1] if paper5 else None, 'best_loss')} | "
                     f"{alphas} | {relative_gap(row['manticore']['best_loss'], best, paper_gap)} |")
    lines += ["", "The last column: Manticore's best test loss relative to the better component's (negative: "
                  "Manticore lower), the paper's Table 2 in brackets. One seed each, a reading and no verdict: the "
                  "claims table judges the claim against chance and over seeds of the sizing runs below."]
    for name, spec in res.get("hybrids", {}).items():
        lines += ["", *mad_hybrid_table(res, name, spec)]
    return "\n".join(lines)


def mad_sizing(res: dict) -> str:
    """Accuracy of every network trained alone, per task and budget; * marks above chance."""
    budgets, table_budget = res["summary"]["budgets"], res["summary"]["table_budget"]
    names = list(next(iter(res["tasks"].values()))["networks"])
    lines = [f"Test accuracy of each network trained alone for a budget of steps (one run each, seed {res['seed']}); "
             f"`*`: above chance (the majority-class rate of the scored targets; exact binomial test at "
             f"{res['config']['alpha']}). The MAD tables train {table_budget} steps.", "",
             "| task | chance | " + " | ".join(f"{n}, {b} steps" for n in names for b in budgets) + " |",
             "|---|---|" + "---|" * (len(names) * len(budgets))]
    for entry, row in res["tasks"].items():
        cells = [f"{r['accuracy']:.2f}{'*' if r['above_chance'] else ''}"
                 for n in names for r in (row["networks"][n]["runs"][str(b)] for b in budgets)]
        lines.append(f"| {entry} | {row['chance']:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def lra_sizing(res: dict) -> str:
    """Accuracy of every component trained alone, per task and budget; * marks above chance."""
    lines = [f"Validation accuracy of each component trained alone for a budget of steps (one run each, on the "
             f"examples the table scores); `*`: above chance (the majority-class rate; exact binomial test at "
             f"{res['alpha']}). The table's own budget is marked (table). Flat from: the smallest budget no larger "
             "one beats by more than two standard errors of a difference of two runs.", "",
             "| task | tokens | chance | component | accuracy by budget (steps: accuracy) | above chance from | "
             "flat from |",
             "|---|---|---|---|---|---|---|"]
    for name, row in res["tasks"].items():
        for component, net in row["networks"].items():
            cells = ", ".join(f"{b}{' (table)' if b == row['table_budget'] else ''}: {r['accuracy']:.3f}"
                              f"{'*' if r['above_chance'] else ''}" for b, r in ((b, net["runs"][str(b)])
                                                                                  for b in row["budgets"]))
            start, flat = net["above_chance_from"], net["flat_from"]
            lines.append(f"| {name} | {row['sequence_length']} | {row['chance']:.3f} | {component} | {cells} | "
                         f"{start if start is not None else 'none of them'} | "
                         f"{flat if flat is not None else 'none of them'} |")
    return "\n".join(lines)


def mad_hybrid_table(res: dict, name: str, spec: dict) -> list[str]:
    """Table 2 (left) and Table 6: existing hybrids trained alone against a further Manticore hybrid."""
    baselines = res["baselines"]
    runs = ["search", *spec["retrain"]]
    missing = [b for b in PAPER_EXISTING_HYBRIDS if b not in baselines]
    shown = missing + baselines  # the paper's Hyena-experts column too, unrun
    lines = [f"`{name}` = Manticore[{', '.join(spec['components'])}], {spec['n_blocks']} Manticore blocks, against "
             "existing hybrids trained alone. Final test loss (accuracy); in brackets the paper's: Table 6 for the "
             f"existing hybrids, Table 2 (left)'s Manticore beside the result compared (`{spec['compare']}`), "
             "Table 5's non-discretized / discretized beside the others:", "",
             "| task | " + " | ".join(shown) + " | " + " | ".join(f"Manticore {r}" for r in runs)
             + " | alphas searched (per block) | Manticore vs better existing hybrid |",
             "|---|" + "---|" * (len(shown) + len(runs) + 2)]
    tasks = [entry.split("/")[1] for entry in res["tasks"]]
    for (entry, row), task in zip(res["tasks"].items(), tasks):
        paper6, paper5 = PAPER_TABLE6.get(task), PAPER_TABLE5.get(task)
        hybrid = row["hybrids"][name]
        cells = [mad_cell(row["baselines"].get(b), paper6[PAPER_EXISTING_HYBRIDS[b]]
                          if paper6 and b in PAPER_EXISTING_HYBRIDS else None) for b in shown]
        paper = {}
        if paper5:
            paper["discretized"] = paper5[1]
            paper["frozen" if "frozen" in runs else "search"] = paper5[0]
        if paper6:
            paper[spec["compare"]] = paper6[3]
        cells += [mad_cell(hybrid[r], paper.get(r)) for r in runs]
        alphas = "; ".join("/".join(f"{a:.2f}" for a in block) for block in hybrid["search"]["alphas"])
        best = min(r["loss"] for r in row["baselines"].values())
        known = [PAPER_EXISTING_HYBRIDS[b] for b in baselines if b in PAPER_EXISTING_HYBRIDS]
        paper_gap = paper6[3] / min(paper6[c] for c in known) - 1 if paper6 and known else None
        lines.append(f"| {entry} | " + " | ".join(cells) + f" | {alphas} | "
                     f"{relative_gap(hybrid[spec['compare']]['loss'], best, paper_gap)} |")
    lines += ["", f"The last column: Manticore's test loss (`{spec['compare']}`) relative to the better of "
                  f"{', '.join(baselines)} (negative: Manticore lower), the paper's Table 6 in brackets over the "
                  "same columns. The paper's text: Manticore outperforms striped MH-Hyena + MoE and approaches "
                  "Mambaformer on all but one task. One seed each, a reading and no verdict: the claims table "
                  "judges the claim."]
    if missing:
        lines += ["", f"Not run: {', '.join(missing)}: `common/blocks` has no Hyena-experts block (a router over "
                      "Hyena experts), so that column holds the paper's number alone."]
    return lines


def programmed_arms(res: dict) -> dict[str, list[float]]:
    """Figure 2 (right)'s arms, one value per seed: the programmed hybrid, the better component alone
    and the better frankenmerge of that seed."""
    runs = res["runs"]
    return {"programmed": [r["programmed_val_loss"] for r in runs],
            "better component alone": [min(r["components_alone"].values()) for r in runs],
            "better frankenmerge": [min(r["frankenmerges"].values()) for r in runs]}


def programmed(res: dict) -> str:
    first, second = res["components"]
    summary, sweep = res["summary"], res["sweep"]
    points = sorted({s["alphas"][0][1] for s in sweep})
    loss = {tuple(row[1] for row in s["alphas"]): s["val_loss"] for s in sweep}
    lines = [f"Fixed-alpha landscape (rows: block 2's weight of `{second}`, columns: block 1's; all weights "
             f"fine-tuned on the completions; means over seeds {', '.join(map(str, res['seeds']))}):", "",
             "| block 2 / block 1 | " + " | ".join(f"{p:.2f}" for p in points) + " |",
             "|---|" + "---|" * len(points)]
    lines += [f"| {b2:.2f} | " + " | ".join(f"{loss[(b1, b2)]:.4f}" for b1 in points) + " |" for b2 in points]
    alphas = "; ".join("/".join(f"{a:.2f}" for a in block) for block in res["programmed"]["alphas"])
    lines += ["", "| hybrid | alphas (per block) | mean val loss |", "|---|---|---|"]
    lines += [f"| {name} alone | - | {v:.4f} |" for name, v in summary["components_alone"].items()]
    lines += [f"| frankenmerge: {name} | - | {v:.4f} |" for name, v in summary["frankenmerges"].items()]
    lines += [f"| programmed with MAD (mean of {len(res['mad_searched'])} tasks' searched alphas) | {alphas} | "
              f"{summary['programmed_val_loss']:.4f} |",
              f"| best grid point "
              f"| {'; '.join('/'.join(f'{a:.2f}' for a in b) for b in summary['sweep_best']['alphas'])} | "
              f"{summary['sweep_best']['val_loss']:.4f} |"]
    worst = max(summary["frankenmerges"].values())
    best = min(summary["frankenmerges"].values())
    reading = ("holds" if summary["beats_both_frankenmerges"] else
               f"does not hold: programmed {summary['programmed_val_loss']:.4f} vs frankenmerges "
               f"{best:.4f} and {worst:.4f}")
    if len(res["runs"]) > 1:
        spread = {name: statistics.stdev(values) for name, values in programmed_arms(res).items()}
        seeds = (f"Means over {len(res['runs'])} seeds; the seeds' standard deviation is {spread['programmed']:.4f} "
                 f"for the programmed hybrid, {spread['better frankenmerge']:.4f} for the better frankenmerge and "
                 f"{spread['better component alone']:.4f} for the better component alone, {SAME_STORIES}")
    else:
        seeds = NO_VERDICT
    return "\n".join(lines + ["", f"MAD-programmed alphas beat both naive frankenmerges: {reading}. {seeds}"])


def projector_budget(res: dict) -> str:
    rows, summary = res["budgets"], res["summary"]
    second = res["components"][1]
    points = [s["alphas"][0][1] for s in rows[0]["sweep"]]
    lines = [f"Validation loss after fine-tuning, per alpha of `{second}` (columns) and projector-pretraining budget "
             f"(rows; {res['sequence_length']}-token sequences):", "",
             "| tokens (steps) | " + " | ".join(f"{p:.2f}" for p in points) + " | best alpha |",
             "|---|" + "---|" * (len(points) + 1)]
    for r in rows:
        lines.append(f"| {r['tokens']:,} ({r['steps']}) | " + " | ".join(f"{s['val_loss']:.4f}" for s in r["sweep"]) +
                     f" | {r['best_alpha']:.2f} |")
    best = {r["best_alpha"] for r in rows}
    if len(best) == 1 and best <= {0.0, 1.0}:
        # A component alone wins at every budget: there is no hybrid optimum whose stability to judge.
        alone = res["components"][int(best.pop())]
        verdict = f"not testable here: {alone} alone is the best point at every budget, so no hybrid optimum forms"
    elif summary["stabilises_before_largest_budget"]:
        verdict = f"the best alpha is stable from {summary['stable_from_tokens']:,} tokens on"
    else:
        verdict = "not shown: the best alpha still moves at the largest budget"
    return "\n".join(lines + ["", "Paper: the optimum stabilises at about 70M of 100M tokens. Here: "
                                f"{verdict}. {NO_VERDICT}"])


# Table 1 of the paper: test loss after fine-tuning, Pythia-410M (A), Mamba-370M (B), Manticore[A, B].
PAPER_TABLE1 = {"PTB": (0.9099, 0.8397, 0.8600), "Alpaca": (2.5011, 2.2999, 2.1779), "ELI5": (4.1260, 3.9414, 3.9331)}


# Table 8 of the paper: test loss of Pythia-410M (A), Mamba-370M (B), their ensemble and Manticore's
# best sweep point, on Figure 3's sets (the five our `paper` profile runs; not NI non-En.).
PAPER_TABLE8 = {"es_alpaca": (1.819, 1.704, 2.172, 1.664), "zh_alpaca": (3.729, 3.447, 3.854, 3.369),
                "vi_alpaca": (2.130, 2.004, 2.173, 1.980), "xquad_ar": (0.205, 0.207, 0.533, 0.201),
                "openorca_ja": (1.570, 1.576, 1.756, 1.553)}


def figure3_tasks(res: dict) -> list[str]:
    """Figure 3 and Table 8 on the tasks that ran the landscape (none at `tiny`)."""
    a, b = res["components"]
    rows = {task: r for task, r in res["tasks"].items() if "landscape" in r}
    if not rows:
        return []
    labels = sorted({label for r in rows.values() for label in r["landscape"]["searched"]})
    lines = ["", "Figure 3 and Table 8: the sweep's best point, each search retrained, and the learned ensemble "
             "(held-out loss; components fine-tuned alone as in Table 1).", "",
             f"| task | {a} | {b} | ensemble | sweep best (alpha of {b}) | " + " | ".join(labels) +
             " | paper: A / B / ensemble / Manticore |", "|---" * (6 + len(labels)) + "|"]
    for task, r in rows.items():
        land = r["landscape"]
        best = land["summary"]["sweep_best"]
        alpha = "/".join(f"{row[1]:.2f}" for row in best["alphas"])
        paper = " / ".join(map(str, PAPER_TABLE8[task])) if task in PAPER_TABLE8 else "-"
        lines.append(f"| {task} | {r[a]:.4f} | {r[b]:.4f} | {land['ensemble']['val_loss']:.4f} | "
                     f"{best['val_loss']:.4f} ({alpha}) | " +
                     " | ".join(f"{land['searched'][x]['val_loss']:.4f}" if x in land["searched"] else "-"
                                for x in labels) + f" | {paper} |")
    lines.append("")
    for task, r in rows.items():
        s = r["landscape"]["summary"]
        lines.append(f"- {task}: searches beating both components: "
                     f"{', '.join(s['searches_beating_components']) or 'none'} (paper: at least two, on five of "
                     f"six sets); a search in the sweep's best region (loss at most {s['best_region_threshold']:.4f}): "
                     f"{'yes' if s['search_matches_sweep'] else 'no'}; the ensemble below Manticore: "
                     f"{'yes' if s['ensemble_below_manticore'] else 'no'} (paper: on every set).")
    return lines


def finetune_tasks(res: dict) -> str:
    a, b = res["components"]
    lines = [f"Held-out loss after fine-tuning; Manticore searched with {res['method'].upper()} "
             f"({res['update']} updates), rewound and retrained with its alphas frozen.", "",
             f"| task | {a} | {b} | Manticore[{a}, {b}] | searched alpha of {b} | Manticore vs components |",
             "|---|---|---|---|---|---|"]
    for task, r in res["tasks"].items():
        if "landscape" in r:  # Figure 3's sets: their table follows
            continue
        where = "beats both" if r["manticore_beats_both"] else "between" if r["manticore_between"] else "below both"
        alpha = "/".join(f"{row[1]:.2f}" for row in r["alphas"])
        lines.append(f"| {task} | {r[a]:.4f} | {r[b]:.4f} | {r['manticore']:.4f} | {alpha} | {where} |")
    lines += ["", "The paper (test loss; Pythia-410M, Mamba-370M): " + "; ".join(
        f"{task} {p[0]} / {p[1]} / {p[2]}" for task, p in PAPER_TABLE1.items()) +
        ": Manticore beats both on 2 of 3 tasks and falls between them on PTB."]
    s = res["summary"]
    said = f"Manticore beats both components on {s['manticore_beats_both']} of {s['tasks']} tasks (paper: 2 of 3)"
    return "\n".join(lines + ["", f"{said}. {NO_VERDICT}", *figure3_tasks(res)])


# Tables 3 and 7 of the paper: accuracy (%) from scratch of GPT-Neo, Mamba and Manticore[GPT-Neo, Mamba];
# None where GPT-Neo cannot read the sequence (N/A in the paper).
PAPER_TABLE3 = {"listops": (37.90, 20.65, 38.70), "imdb": (59.62, 87.74, 72.44), "cifar10": (39.37, 20.81, 43.15),
                "pathfinder32": (89.41, 85.76, 91.45)}
PAPER_TABLE7 = {(64, 6): (None, 80.40, 80.40), (64, 9): (None, 90.01, 90.01), (64, 14): (None, 86.87, 86.87),
                (128, 6): (None, 75.50, 75.50)}


def _lra_task(task: dict) -> tuple[str, tuple | None]:
    """A task's label and the paper's accuracies for it (Table 3, or Table 7 by canvas and paddles)."""
    if task["task"] == "pathfinder":
        label = f"Pathfinder {task['size']}x{task['size']}, {task['path_length']} paddles"
        if task["size"] == 32:
            return label, PAPER_TABLE3["pathfinder32"]
        return label, PAPER_TABLE7.get((task["size"], task["path_length"]))
    labels = {"listops": "ListOps", "imdb": "IMDb (bytes)", "cifar10": "CIFAR-10 (pixels)"}
    return labels[task["task"]], PAPER_TABLE3.get(task["task"])


def lra_experiments(res: dict) -> str:
    models = [*res["components"], "manticore"]
    lines = [f"Validation accuracy (%), mean ± sd over seeds {res['seeds']}, the paper's in brackets; chance is the "
             "majority-class rate. Searched: every component reads the sequence and the mixture weights are searched "
             "while training (Table 3). Programmed: a component that cannot read it (beyond its positions) gets weight "
             "0 in every block and never runs (Table 7, and Table 3's Pathfinder-X). Alphas: the hybrid's final "
             "mixture weights per block, mean over seeds.", "",
             "| task | tokens | steps | " + " | ".join(models[:-1]) + " | Manticore | alphas (per block) | chance |",
             "|---|---|---|" + "---|" * (len(models) + 2)]
    for row in res["tasks"].values():
        label, paper = _lra_task(row["task"])
        cells = []
        for i, m in enumerate(models):
            r = row["models"][m]
            cell = f"{100 * r['accuracy']:.1f} ± {100 * r['accuracy_std']:.1f}" if r["runs"] else "n/a"
            if paper is not None:
                cell += f" [{paper[i] if paper[i] is not None else 'N/A'}]"
            cells.append(cell)
        hybrid = row["models"]["manticore"]
        alphas = "; ".join("/".join(f"{a:.2f}" for a in block) for block in hybrid["alphas"])
        lines.append(f"| {label} | {row['sequence_length']} | {row['steps']} | " + " | ".join(cells) +
                     f" | {hybrid['mode']}: {alphas} | {100 * hybrid['majority_rate']:.1f} |")
    lines += ["", "The claims table judges Tables 3 and 7 task by task, from every seed's run and the sizing runs "
                  "below."]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The claims ledger: specialist components (Figure 3's setting: half the documents from a second genre)

PAPER = "manticore"
RESULTS = ("specialists", "components", "general_text", "nl_experiments", "mad_experiments", "mad_sizing", "programmed",
           "projector_budget", "lra_experiments", "lra_sizing", "finetune_tasks")
MATCH = 0.02  # "matches": within 2% of the reference's loss
# Projector pretraining has flattened when its loss fell by less than this fraction over its last fifth.
FLAT = 0.01
# Table 8, Spanish + Alpaca (the paper's setting closest to ours: one genre, half the documents Alpaca)
PAPER_TABLE8_ES = {"Pythia-410M": 1.819, "Mamba-370M": 1.704, "ensemble": 2.172, "Manticore": 1.664}


def _runs(res: dict, pair: str) -> list[dict]:
    return [r for r in res["runs"] if r["pair"] == pair]


def _mix(run: dict) -> float:
    return run["loss"]["mix"]


def late_movement(curve: list[list[float]]) -> float:
    """How much the validation loss fell over the last fifth of a run (0 if it rose); from the first
    validation when none came earlier."""
    final_step, final = curve[-1]
    then = next((loss for step, loss in reversed(curve) if step <= 0.8 * final_step), curve[0][1])
    return max(0.0, then - final)


def sweep_parts(run: dict) -> tuple[dict[str, dict], list[dict]]:
    """The sweep's corners (each component alone, by name) and its interior points."""
    corners, interior = {}, []
    for point in run["sweep"]:
        one_hot = [m for m in range(2) if all(row[m] == 1.0 for row in point["alphas"])]
        if one_hot:
            corners[run["components"][one_hot[0]]] = point
        else:
            interior.append(point)
    return corners, interior


def pair_summary(run: dict) -> dict:
    """One seed of one pair: the best component alone, the best hybrid of the sweep, the best
    search, and the runs behind each (for the settling rule)."""
    corners, interior = sweep_parts(run)
    component = min(corners.values(), key=_mix)
    hybrid = min(interior, key=_mix)
    summary = {"component": component, "hybrid": hybrid, "sweep_best": min(run["sweep"], key=_mix),
               "gain": _mix(component) - _mix(hybrid), "chance": run["chance"]["mix"]}
    if run["searched"]:
        summary["search_best"] = min(run["searched"].values(), key=_mix)
    return summary


def _settled(judge: Callable[[list[float]], tuple[str, str]], diff: list[float], runs_a: list[dict],
             runs_b: list[dict]) -> tuple[str, str]:
    """`judge` on the per-seed `diff` (a - b), settled on the gap between the two arms' runs' curves."""
    return settle(judge(diff), judge, diff, gap_changes([r["curve"] for r in runs_a], [r["curve"] for r in runs_b]))


def unflattened_projectors(runs: list[dict]) -> str | None:
    """Why the hybrids' starting point is not what the paper's method assumes, or None: every run's
    projectors must have been pretrained until their loss flattened."""
    moving = [(late_movement(r["projector_pretraining"]), r["projector_pretraining"][-1]) for r in runs]
    worst_fall, (steps, loss) = max(moving, key=lambda m: m[0] / m[1][1])
    if worst_fall <= FLAT * loss:
        return None
    return (f"projectors not pretrained to flattening: at step {steps:g} their loss still fell by {worst_fall:.3f} "
            f"over the last fifth (more than {FLAT:.0%} of {loss:.3f})")


def corner_offset(runs: list[dict]) -> tuple[float, str, int, float, float] | None:
    """The positive control's measurement: over `runs` (seeds of one pair), the largest relative gap
    between a sweep corner and the same component fine-tuned alone for the same steps on the same
    mix (the Table 1 stand-in's `mix` runs), as (gap, component, seed, corner's loss, component's),
    or None when no run fine-tuned the components alone."""
    if not all("tasks" in r for r in runs):
        return None
    gaps = []
    for r in runs:
        corners, _ = sweep_parts(r)
        for name, point in corners.items():
            bare = _mix(r["tasks"]["mix"]["alone"][name])
            gaps.append(((_mix(point) - bare) / bare, name, r["seed"], _mix(point), bare))
    return max(gaps, key=lambda gap: abs(gap[0]))


def corners_unlike_components(res: dict) -> str | None:
    """Why the sweep's corners are not its components, or None. At a one-hot alpha Manticore should be
    the component it selects: each corner (fine-tuned from the pretrained projectors and embeddings)
    must match, within MATCH of its loss, the same component fine-tuned alone in every seed
    (`corner_offset`). Where it does not, projector pretraining moved the hybrid's shared start by
    itself, and every hybrid arm with it."""
    worst = corner_offset(_runs(res, "specialists"))
    if worst is None:
        return ("no positive control: no component was fine-tuned alone for the corners' steps on the mix "
                "(pairs.specialists.tasks is off), so nothing shows that a corner is its component")
    off, name, seed, corner, bare = worst
    if abs(off) <= MATCH:
        return None
    return (f"positive control failed: at a one-hot alpha the hybrid is not its component ({name}'s corner "
            f"{corner:.3f} against {name} fine-tuned alone for the same steps on the same mix {bare:.3f}, "
            f"{off:+.0%} in seed {seed}; within {MATCH:.0%} needed), so projector pretraining moved every hybrid arm "
            "by itself")


def search_stayed_at_start(runs: list[dict]) -> str | None:
    """Why "search matches the sweep" shows nothing about search, or None. Searches start at uniform
    alphas; when the sweep's best point is that start and the best search ended within half a sweep
    step of it (closer than the sweep can resolve), a search that never moved would match as well."""
    for run in runs:
        best, searched = min(run["sweep"], key=_mix), min(run["searched"].values(), key=_mix)
        k = len(best["alphas"][0])
        grid = sorted({row[1] for point in run["sweep"] for row in point["alphas"]})
        half_step = min((b - a for a, b in zip(grid, grid[1:])), default=1.0) / 2  # one point: no resolution
        if not all(abs(a - 1 / k) < 1e-9 for row in best["alphas"] for a in row):
            continue
        moved = max(abs(a - 1 / k) for row in searched["alphas"] for a in row)
        if moved < half_step:
            return (f"the sweep's best point is the searches' uniform start, and the best search ended within "
                    f"{moved:.3f} of it (seed {run['seed']}; half a sweep step is {half_step:.3f}), so a search that "
                    f"never moved would match as well")
    return None


def _learned(values: list[list[float]], chance: float) -> bool:
    return all(above_chance(v, chance, higher_is_better=False) for v in values)


def _gain(runs: list[dict]) -> dict:
    return spread([pair_summary(r)["gain"] for r in runs])


def specialist_claims(res: dict) -> list[dict]:
    main = _runs(res, "specialists")
    names = main[0]["components"]
    seeds = [pair_summary(r) for r in main]
    chance = seeds[0]["chance"]
    common = {"paper": PAPER, "profile": res["profile"], "chance": chance}
    controls = []
    for pair, label in (("swapped", "genres swapped"), ("same_architecture", "same architecture")):
        if _runs(res, pair):
            g = _gain(_runs(res, pair))
            controls.append(f"{label} ({' + '.join(_runs(res, pair)[0]['components'])}): gain {g['mean']:.3f} ± "
                            f"{g['std']:.3f}")
    alone = [min(r["alone_at_hybrid_compute"].values(), key=_mix) for r in main if "alone_at_hybrid_compute" in r]
    if alone:
        a = spread([_mix(x) for x in alone])
        controls.append(f"the better component alone at the hybrid's compute ({alone[0]['steps']} steps): "
                        f"{a['mean']:.3f} ± {a['std']:.3f}")
    control = "; ".join(controls) or None
    entries = []

    # Figure 2 (left) / Figure 3: a region of the sweep beats both components.
    component, hybrid = [_mix(s["component"]) for s in seeds], [_mix(s["hybrid"]) for s in seeds]
    diff = [c - h for c, h in zip(component, hybrid)]
    verdict, why = _settled(lambda d: judge_difference(d, +1, above_chance_ok=_learned([component, hybrid], chance)),
                            diff, [s["component"] for s in seeds], [s["hybrid"] for s in seeds])
    entries.append(claim_entry(
        id="fig3-hybrid-beats-components", claim="A region of the mixture-weight sweep improves over both "
        "(fine-tuned) components on a mix of two genres", where="Figure 2 (left), Figure 3, Table 8",
        metric=f"mean held-out loss of the two genres, best component alone - best interior sweep point "
               f"(Manticore[{', '.join(names)}])",
        paper_value=PAPER_TABLE8_ES, arms={"best component": component, "best hybrid of the sweep": hybrid},
        difference=diff, control=control, verdict=verdict, why=why, **common))

    sweep_best = [_mix(s["sweep_best"]) for s in seeds]
    if main[0]["searched"]:
        # Figure 3: at least two of the NAS algorithms beat both components.
        methods = sorted({label.split("_")[0] for label in main[0]["searched"]})
        per_method = {}
        for method in methods:
            labels = [label for label in main[0]["searched"] if label.startswith(method + "_")]
            verdicts = {}
            for label in labels:
                searched = [_mix(r["searched"][label]) for r in main]
                d = [c - x for c, x in zip(component, searched)]
                ok = _learned([searched], chance)
                verdicts[label] = _settled(lambda d, ok=ok: judge_difference(d, +1, above_chance_ok=ok), d,
                                           [s["component"] for s in seeds], [r["searched"][label] for r in main])[0]
            per_method[method] = verdicts
        beat = ("reproduced", "direction reproduced")
        wins = [m for m, v in per_method.items() if any(x in beat for x in v.values())]
        losses = [m for m, v in per_method.items() if all(x == "not reproduced" for x in v.values())]
        listed = "; ".join(f"{label}: {v}" for verdicts in per_method.values() for label, v in verdicts.items())
        if len(wins) >= 2:
            verdict = "reproduced"
        elif len(methods) - len(losses) < 2:
            verdict = "not reproduced"
        else:
            verdict = "inconclusive"
        best_searched = [_mix(s["search_best"]) for s in seeds]
        entries.append(claim_entry(
            id="fig3-two-nas-beat-components", claim="At least two of the NAS algorithms (DARTS, DASH, GAEA) recover "
            "a hybrid that outperforms its components", where="Figure 3",
            metric="per search variant: best component alone - the searched and retrained hybrid (mean held-out loss)",
            paper_value="5 of 6 settings", arms={"best component": component, "best search": best_searched},
            control=control, verdict=verdict, why=f"{len(wins)} of {len(methods)} algorithms beat both ({listed})",
            **common))

        # Figure 3: some NAS algorithm matches or beats the sweep's best.
        advantage = [b - x for b, x in zip(sweep_best, best_searched)]
        margin = MATCH * statistics.fmean(sweep_best)
        ok = _learned([sweep_best, best_searched], chance)
        verdict, why = require(_settled(lambda d: judge_non_inferiority(d, margin, above_chance_ok=ok), advantage,
                                        [s["sweep_best"] for s in seeds], [s["search_best"] for s in seeds]),
                               search_stayed_at_start(main))
        entries.append(claim_entry(
            id="fig3-nas-matches-sweep", claim="At least one NAS algorithm outperforms or matches the best model "
            "found during the sweep", where="Figure 3", metric=f"best sweep point - best search (mean held-out "
            f"loss); a match is within {MATCH:.0%}", paper_value="5 of 6 settings",
            arms={"sweep best": sweep_best, "best search": best_searched},
            difference=advantage, bounds=boundaries("non_inferiority", margin), control=control, verdict=verdict,
            why=why, **common))

    # Table 8: the learned ensemble does worse than Manticore.
    if all("ensemble" in r for r in main):
        ensemble = [_mix(r["ensemble"]) for r in main]
        diff = [e - b for e, b in zip(ensemble, sweep_best)]
        ok = _learned([ensemble, sweep_best], chance)
        verdict, why = _settled(lambda d: judge_difference(d, +1, above_chance_ok=ok), diff,
                                [r["ensemble"] for r in main], [s["sweep_best"] for s in seeds])
        entries.append(claim_entry(
            id="table8-ensemble-below-manticore", claim="The ensemble of the components underperforms Manticore",
            where="Table 8, Section 4", metric="learned ensemble - best sweep point (mean held-out loss)",
            paper_value={"ensemble": PAPER_TABLE8_ES["ensemble"], "Manticore": PAPER_TABLE8_ES["Manticore"]},
            arms={"ensemble": ensemble, "Manticore (sweep best)": sweep_best}, difference=diff, control=control,
            verdict=verdict, why=why, **common))
        # The appendix's other half: "underperforms Manticore and the best component model on all tasks".
        diff = [e - c for e, c in zip(ensemble, component)]
        ok = _learned([ensemble, component], chance)
        verdict, why = _settled(lambda d: judge_difference(d, +1, above_chance_ok=ok), diff,
                                [r["ensemble"] for r in main], [s["component"] for s in seeds])
        entries.append(claim_entry(
            id="table8-ensemble-below-best-component", claim="The ensemble of the components also underperforms "
            "the best component model (the appendix: 'underperforms Manticore and the best component model on all "
            "tasks')", where="Appendix, Table 8", metric="learned ensemble - better component fine-tuned alone (mean "
            "held-out loss)",
            paper_value={"ensemble": PAPER_TABLE8_ES["ensemble"], "Mamba-370M": PAPER_TABLE8_ES["Mamba-370M"]},
            arms={"ensemble": ensemble, "best component": component}, difference=diff, control=control,
            verdict=verdict, why=why, **common))

    # Table 4: alternating DARTS updates help somewhat; DASH does not recover strong hybrids.
    searched = main[0]["searched"]
    if {"darts_alternating", "darts_simultaneous"} <= set(searched):
        alt = [_mix(r["searched"]["darts_alternating"]) for r in main]
        sim = [_mix(r["searched"]["darts_simultaneous"]) for r in main]
        diff = [b - a for a, b in zip(alt, sim)]
        ok = _learned([alt, sim], chance)
        verdict, why = _settled(lambda d: judge_difference(d, +1, above_chance_ok=ok), diff,
                                [r["searched"]["darts_simultaneous"] for r in main],
                                [r["searched"]["darts_alternating"] for r in main])
        entries.append(claim_entry(
            id="table4-alternating-helps", claim="Alternating DARTS updates are somewhat helpful compared with "
            "simultaneous ones", where="Appendix A, Table 4", metric="DARTS simultaneous - alternating, retrained "
            "(mean held-out loss)", paper_value={"alternating": 1.2854, "simultaneous": 1.3635},
            arms={"alternating": alt, "simultaneous": sim}, difference=diff, control=control, verdict=verdict,
            why=why, **common))
    darts = [k for k in searched if k.startswith("darts_")]
    dash = [k for k in searched if k.startswith("dash_")]
    if darts and dash:
        best_darts = [min(_mix(r["searched"][k]) for k in darts) for r in main]
        best_dash = [min(_mix(r["searched"][k]) for k in dash) for r in main]
        diff = [b - a for a, b in zip(best_darts, best_dash)]
        ok = _learned([best_darts, best_dash], chance)
        verdict, why = _settled(lambda d: judge_difference(d, +1, above_chance_ok=ok), diff,
                                [min((r["searched"][k] for k in dash), key=_mix) for r in main],
                                [min((r["searched"][k] for k in darts), key=_mix) for r in main])
        entries.append(claim_entry(
            id="table4-dash-below-darts", claim="DASH is unable to recover strong architectures in this search space "
            "(worse than DARTS)", where="Appendix A, Table 4", metric="best DASH - best DARTS variant, retrained "
            "(mean held-out loss)", paper_value={"DARTS": 1.2854, "DASH": 2.5899},
            arms={"DARTS": best_darts, "DASH": best_dash}, difference=diff, control=control, verdict=verdict,
            why=why, **common))
    entries += table1_claims(res, common)
    unflattened, unlike = unflattened_projectors(main), corners_unlike_components(res)
    for entry in entries:
        holds = [why for why in (unflattened, unlike if entry["id"] in AGAINST_COMPONENTS else None) if why]
        entry["verdict"], entry["why"] = require((entry["verdict"], entry["why"]), "; and ".join(holds) or None)
    return entries


TABLE1_TASKS = {"stories": "stories (the genre of the first component)",
                "instructions": "instructions (the genre of the second component)",
                "mix": "the even mix of both genres"}
# Rows that set Manticore against its components (or their ensemble), whose positive control is that
# a corner of the sweep is the component it selects; hybrid-against-hybrid rows (Table 4, search
# against sweep) compare arms with the same start and are not among them.
AGAINST_COMPONENTS = ("fig3-hybrid-beats-components", "fig3-two-nas-beat-components",
                      "table8-ensemble-below-manticore", "table8-ensemble-below-best-component",
                      "table1-beats-components-on-most-tasks",
                      *(f"table1-{task}-beats-components" for task in TABLE1_TASKS))


def task_arms(runs: list[dict], task: str) -> tuple[dict[str, list[float]], list[str]]:
    """Per seed, each component alone and Manticore fine-tuned on `task`, scored on that task's held-out
    documents; and the better component alone in each seed. "Beats both" is against that one, seed by
    seed: against the better by mean, a component that wins only some seeds would drop out."""
    arms = {name: [r["tasks"][task]["alone"][name]["loss"][task] for r in runs] for name in runs[0]["components"]}
    better = [min(arms, key=lambda name: arms[name][i]) for i in range(len(runs))]
    return {**arms, "manticore": [r["tasks"][task]["manticore"]["loss"][task] for r in runs]}, better


def better_alone(arms: dict[str, list[float]], better: list[str]) -> tuple[str, list[float]]:
    """The name of the better component alone (one name if it is the same in every seed) and its losses."""
    name = better[0] if len(set(better)) == 1 else "the better component in each seed"
    return name, [arms[b][i] for i, b in enumerate(better)]


def table1_claims(res: dict, common: dict) -> list[dict]:
    """Table 1's stand-in: per task, Manticore against the better of its components alone (paired by
    seed), and the summary "beats both on most tasks" (the paper: 2 of 3)."""
    main = _runs(res, "specialists")
    if not all("tasks" in r for r in main):
        return []
    entries, verdicts, compared = [], {}, {}
    for task, described in TABLE1_TASKS.items():
        arms, better = task_arms(main, task)
        name, alone = better_alone(arms, better)
        compared.update({f"{task}: {name} alone": alone, f"{task}: manticore": arms["manticore"]})
        diff = [c - m for c, m in zip(alone, arms["manticore"])]
        chance = main[0]["chance"][task]
        ok = _learned(list(arms.values()), chance)
        task_runs = [r["tasks"][task] for r in main]
        verdict, why = _settled(lambda d, ok=ok: judge_difference(d, +1, above_chance_ok=ok), diff,
                                [t["alone"][b] for t, b in zip(task_runs, better)], [t["manticore"] for t in task_runs])
        controls = []
        for pair, label in (("swapped", "genres swapped"), ("same_architecture", "same architecture")):
            runs = _runs(res, pair)
            if runs and all("tasks" in r for r in runs):
                c_arms, c_better = task_arms(runs, task)
                gain = spread([c - m for c, m in zip(better_alone(c_arms, c_better)[1], c_arms["manticore"])])
                controls.append(f"{label} ({' + '.join(runs[0]['components'])}): better component - Manticore "
                                f"{gain['mean']:.3f} ± {gain['std']:.3f}")
        verdicts[task] = verdict
        entries.append(claim_entry(
            id=f"table1-{task}-beats-components", claim=f"Fine-tuned on {described}, Manticore (DARTS search, "
            "rewind, retrain) beats both of its components fine-tuned alone (one of the stand-in's three tasks: "
            "the paper's Manticore beats both on two of its three, so one task may fall short)",
            where="Section 4.1, Table 1",
            metric=f"held-out loss on the task, better component alone ({name}) - Manticore"
                   f"[{', '.join(main[0]['components'])}]",
            paper_value={task: dict(zip(("Pythia-410M", "Mamba-370M", "Manticore"), p))
                         for task, p in PAPER_TABLE1.items()},
            arms=arms, difference=diff, control="; ".join(controls) or None, verdict=verdict, why=why,
            **{**common, "chance": chance}))
    beat = ("reproduced", "direction reproduced")
    wins = [t for t, v in verdicts.items() if v in beat]
    losses = [t for t, v in verdicts.items() if v == "not reproduced"]
    listed = "; ".join(f"{t}: {v}" for t, v in verdicts.items())
    verdict = "reproduced" if len(wins) >= 2 else "not reproduced" if len(verdicts) - len(losses) < 2 else \
        "inconclusive"
    entries.append(claim_entry(
        id="table1-beats-components-on-most-tasks", claim="Manticore outperforms its component models on most "
        "language fine-tuning tasks (the paper: on Alpaca and ELI5, between them on PTB)", where="Section 4.1, Table 1",
        metric="tasks on which Manticore beats the better component alone (the rows table1-<task>-beats-components)",
        paper_value="2 of 3 tasks", arms=compared, control=entries[0]["control"], verdict=verdict,
        why=f"{len(wins)} of {len(verdicts)} tasks beat both ({listed})", **common))
    return entries


# ---------------------------------------------------------------------------------------------
# The claims ledger: MAD and LRA from scratch (Tables 2, 3, 5, 6, 7). Their tables run one seed at a
# budget of their own; a claim is judged only once every network it compares is above chance there.

def _at_budget(row: dict, name: str, budget: int) -> bool:
    return row["networks"][name]["runs"][str(budget)]["above_chance"]


def mad_sizing_evidence(sizing: dict, networks: list[str]) -> tuple[bool, str]:
    """Whether every one of `networks` is above chance on every task at the tables' budget, and what
    the sizing runs measured, in words."""
    budget, budgets = sizing["summary"]["table_budget"], sizing["summary"]["budgets"]
    learned, parts = True, []
    for entry, row in sizing["tasks"].items():
        learned &= all(_at_budget(row, n, budget) for n in networks)
        needs = []
        for n in networks:
            start = row["networks"][n]["above_chance_from"]
            needs.append(f"{n} {start}" if start is not None else f"{n} >{budgets[-1]}")
        parts.append(f"{entry.split('/')[1]} (chance {row['chance']:.2f}): {', '.join(needs)}")
    at = sum(_at_budget(row, n, budget) for row in sizing["tasks"].values() for n in networks)
    total = len(sizing["tasks"]) * len(networks)
    text = (f"{at} of {total} runs above chance at the tables' {budget} steps; the budget from which each network is "
            f"above chance (one run per budget of {budgets}; >{budgets[-1]}: none of them): " + "; ".join(parts))
    return learned, text


def mad_claim(sizing: dict, networks: list[str], *, id: str, claim: str, where: str, metric: str, paper_value: Any,
              arms: dict[str, list[float]], not_run: str = "") -> dict:
    """A MAD claim: `needs paper scale` while a compared network is at chance at the tables' budget;
    with every one above chance, `inconclusive` until the tables run three seeds."""
    learned, evidence = mad_sizing_evidence(sizing, networks)
    budget = sizing["summary"]["table_budget"]
    common = {"paper": PAPER, "profile": sizing["profile"], "id": id, "claim": claim, "where": where,
              "metric": metric, "paper_value": paper_value}
    if not learned:
        return claim_entry(**common, verdict="needs paper scale", evidence=evidence, why=(
            f"networks trained alone sit at chance (the majority-class rate of the scored targets, binomial test) "
            f"at the tables' budget of {budget} steps, so their losses rank noise; the budgets at which they leave "
            f"chance, for three seeds of every network and hybrid on five tasks, are beyond this profile" + not_run))
    return claim_entry(**common, verdict="inconclusive", arms=arms,
                       control="chance: each task's majority-class rate, in results/mad_sizing.json",
                       why=f"every network is above chance at {budget} steps, but the tables run one seed; a verdict "
                           "needs three" + not_run)


def mad_claims(mad: dict, sizing: dict) -> list[dict]:
    tasks = {entry.split("/")[1]: row for entry, row in mad["tasks"].items()}
    names = mad["components"]
    entries = [mad_claim(
        sizing, names, id="table2-right-beats-components",
        claim=f"Manticore[{', '.join(names)}] (one Manticore block) outperforms its components on all of the MAD "
              "tasks, trained from scratch", where="Section 4.2, Table 2 (right)",
        metric="best test loss per task, better component - Manticore",
        paper_value={t: dict(zip(("GPT-Neo", "Mamba", "Manticore"), v)) for t, v in PAPER_TABLE2.items()},
        arms={t: [min(r[n]["best_loss"] for n in names) - r["manticore"]["best_loss"]] for t, r in tasks.items()})]
    for name, spec in mad.get("hybrids", {}).items():
        baselines = mad["baselines"]
        missing = [b for b in PAPER_EXISTING_HYBRIDS if b not in baselines]
        not_run = (f"; not run at any profile: {', '.join(missing)} (Table 6), as `common/blocks` has no Hyena-experts "
                   "block (a router over Hyena experts)") if missing else ""
        entries.append(mad_claim(
            sizing, list(dict.fromkeys([*baselines, *spec["components"]])), id="table2-left-matches-existing-hybrids",
            claim="A Manticore hybrid of striped MH-Hyena + MoE, GPT-Neo and Mamba (two Manticore blocks) outperforms "
                  "striped MH-Hyena + MoE and approaches Mambaformer on all but one MAD task, trained from scratch",
            where="Section 4.2, Table 2 (left), Table 6",
            metric=f"test loss per task, better existing hybrid - Manticore ({spec['compare']})",
            paper_value={t: dict(zip(("Striped Hyena Experts + MoE", "striped MH-Hyena + MoE", "Mambaformer",
                                      "Manticore"), v)) for t, v in PAPER_TABLE6.items()},
            arms={t: [min(b["loss"] for b in r["baselines"].values()) - r["hybrids"][name][spec["compare"]]["loss"]]
                  for t, r in tasks.items()}, not_run=not_run))
        if "discretized" in spec["retrain"]:
            entries.append(mad_claim(
                sizing, spec["components"], id="table5-discretization-marginal",
                claim="Discretizing the searched mixture weights and retraining often changes the test loss only "
                      "marginally, and sometimes improves it",
                where="Appendix A, Table 5", metric="test loss per task, discretized - searched (non-discretized)",
                paper_value={t: dict(zip(("non-discretized", "discretized"), v)) for t, v in PAPER_TABLE5.items()},
                arms={t: [r["hybrids"][name]["discretized"]["loss"] - r["hybrids"][name]["search"]["loss"]]
                      for t, r in tasks.items()}))
    return entries


def lra_sizing_reading(name: str, row: dict) -> str:
    """What the sizing runs measured on one task, in words."""
    def budget(b):
        return str(b) if b is not None else f">{row['budgets'][-1]}"

    starts = ", ".join(f"{c} {budget(net['above_chance_from'])}" for c, net in row["networks"].items())
    flats = ", ".join(f"{c} {budget(net['flat_from'])}" for c, net in row["networks"].items())
    return (f"{name} ({row['sequence_length']} tokens, chance {row['chance']:.2f}), one run per budget of "
            f"{row['budgets']} (>N: at none up to N): each component alone is above chance from {starts}; its "
            f"accuracy is flat from {flats}")


def lra_runs_above_chance(row: dict, alpha: float) -> dict[str, bool]:
    """Per network that ran on a task: whether every one of its runs (one per seed) is above chance,
    by the exact binomial test at `alpha` on its scored examples."""
    return {c: all(run_above_chance(r["accuracy"], r["n"], r["majority_rate"], alpha) for r in m["seeds"])
            for c, m in row["models"].items() if m["runs"]}


LRA_CONTROL = "chance: the majority-class rate of the scored examples"


def _seed_accuracies(row: dict) -> dict[str, list[float]]:
    return {c: [r["accuracy"] for r in m["seeds"]] for c, m in row["models"].items() if m["runs"]}


def table3_claim(name: str, row: dict, profile: str, sizing: dict) -> dict | None:
    """Table 3 on one searched task: Manticore against the better component (by mean over seeds),
    paired by seed. Judged only when every run of every network is above chance; otherwise
    `needs paper scale` when no budget lra_sizing measured takes every component above chance, and
    `inconclusive` naming the budget that would, when one does. None for a task not in Table 3."""
    label, paper = _lra_task(row["task"])
    if paper is None:
        return None
    effect = (paper[2] - max(paper[:2])) / 100
    above = lra_runs_above_chance(row, sizing["alpha"])
    steps, chance = row["steps"], row["models"]["manticore"]["majority_rate"]
    entry = {"paper": PAPER, "profile": profile, "id": f"table3-lra-{name}",
             "claim": f"Trained from scratch on {label}, Manticore[GPT-Neo, Mamba] "
                      + ("outperforms the better of its components" if effect > 0 else
                         "scores below the better of its components (the one task the paper names as an exception)"),
             "where": "Section 4.2, Table 3", "metric": "validation accuracy, Manticore - better component (by mean)",
             "paper_value": dict(zip(("GPT-Neo", "Mamba", "Manticore"), paper))}
    reading = (f"{name} at {steps} steps, {len(row['seeds'])} seed(s): "
               + ", ".join(f"{c} {m['accuracy']:.3f} ± {m['accuracy_std']:.3f}" for c, m in row["models"].items()
                           if m["runs"]) + f"; chance {chance:.3f}")
    sized = sizing["tasks"].get(name)
    if sized is not None:
        reading += "; " + lra_sizing_reading(name, sized)
    measured = {"arms": _seed_accuracies(row), "chance": chance, "control": LRA_CONTROL}
    if not all(above.values()):
        at_chance = ", ".join(c for c, ok in above.items() if not ok)
        if sized is not None and sized["all_above_chance_from"] is None:
            return claim_entry(**entry, **measured, verdict="needs paper scale", evidence=reading, why=(
                f"{at_chance} at chance at the table's {steps} steps, and no budget measured here takes every "
                "component above chance, so the task needs the paper's budgets (5,000 to 62,500 steps at widths 64 "
                "to 512)"))
        later = (f"; every component is above chance from {sized['all_above_chance_from']} steps, so the table at "
                 "that budget with three seeds can decide it" if sized is not None else "")
        return claim_entry(**entry, **measured, verdict="inconclusive", evidence=reading,
                           why=f"{at_chance} not above chance in every run at the table's {steps} steps{later}")
    flat = sized["all_flat_from"] if sized is not None else steps
    if flat is None:
        return claim_entry(**entry, **measured, verdict="needs paper scale", evidence=reading, why=(
            f"every run is above chance at the table's {steps} steps, but some component's accuracy still rises "
            f"by more than noise up to the largest budget measured ({sized['budgets'][-1]} steps), so a comparison "
            "at any budget here ranks networks still learning"))
    if flat > steps:
        return claim_entry(**entry, **measured, verdict="inconclusive", evidence=reading,
                           difference=row["manticore_minus_best"],
                           why=f"every run is above chance at the table's {steps} steps, but the components' accuracy "
                               f"still rises by more than noise until {flat} steps (lra_sizing), so the table at that "
                               "budget with three seeds can decide it")
    verdict, why = judge_difference(row["manticore_minus_best"], 1 if effect > 0 else -1, paper_effect=effect)
    return claim_entry(**entry, verdict=verdict, why=why, evidence=reading, arms=_seed_accuracies(row),
                       difference=row["manticore_minus_best"], chance=chance,
                       control=f"chance: the majority-class rate of the scored examples; every run of every network "
                               f"is above it (exact binomial test at {sizing['alpha']})")


def table7_claim(name: str, row: dict, profile: str, sizing: dict, margin: float) -> dict:
    """Table 7 on one programmed task: the hybrid with the unreadable component at 0 scores as the
    component that reads the task, alone (an equivalence within `margin`), judged only when every
    run is above chance."""
    readers = [c for c, m in row["models"].items() if m["runs"] and c != "manticore"]
    above = lra_runs_above_chance(row, sizing["alpha"])
    chance = row["models"]["manticore"]["majority_rate"]
    reading = (f"{name} ({row['sequence_length']} tokens, {row['steps']} steps, {len(row['seeds'])} seed(s), "
               f"{', '.join(row['excluded'])} programmed out): "
               + ", ".join(f"{c} {m['accuracy']:.3f}{'' if above[c] else ' (at chance)'}"
                           for c, m in row["models"].items() if m["runs"]) + f"; chance {chance:.3f}")
    entry = {"paper": PAPER, "profile": profile, "id": f"table7-programmed-hybrid-{name}",
             "claim": "Where GPT-Neo cannot read the sequence (Pathfinder-X), the hybrid with GPT-Neo programmed out "
                      "reduces to Mamba and scores as Mamba alone",
             "where": "Section 4.3, Table 7 (one accuracy for Mamba and Manticore per Pathfinder size)",
             "metric": "validation accuracy, programmed hybrid - Mamba alone",
             "paper_value": {f"{s}x{s}, {k} paddles": v[1] for (s, k), v in PAPER_TABLE7.items()}}
    accuracies = _seed_accuracies(row)
    measured = {"arms": accuracies, "chance": chance, "control": LRA_CONTROL}
    if not all(above.values()):
        sized = "; ".join(lra_sizing_reading(n, r) for n, r in sizing["tasks"].items())
        return claim_entry(**entry, **measured, verdict="needs paper scale", evidence=f"{reading}; {sized}", why=(
            "a run here is at chance at the table's budget; the evidence adds where the components leave chance "
            "on the sized tasks (the paper trains 50,000 steps on 160,000 images)"))
    difference = paired_differences(accuracies["manticore"], accuracies[readers[0]])
    verdict, why = judge_equivalence(difference, margin)
    return claim_entry(**entry, **measured, verdict=verdict, why=why, evidence=reading, difference=difference)


def lra_claims(lra: dict, sizing: dict) -> list[dict]:
    """Tables 3 and 7 (LRA from scratch), one row per task: Table 3 where the mixture weights were
    searched, Table 7 where a component was programmed out."""
    entries = []
    for name, row in lra["tasks"].items():
        if row["programmed"]:
            entries.append(table7_claim(name, row, lra["profile"], sizing, lra["equivalence_margin"]))
        elif (entry := table3_claim(name, row, lra["profile"], sizing)) is not None:
            entries.append(entry)
    return entries


def programmed_claim(res: dict, mad: dict, sizing: dict) -> dict:
    """Figure 2 (right): alphas programmed from MAD searches. The programmed alphas are the mean of the
    MAD searches' alphas, so they say something only where those searches learned their tasks
    (accuracy above chance, exact binomial test); the comparison itself is on components pretrained
    on the same stories, so at best a reading."""
    summary = res["summary"]
    # Keyed by setting/task: the setting is the profile's (mad_baseline at tiny, manticore_as_run at paper).
    searches = {t: mad["tasks"][t]["programming"] for t in res["mad_searched"]}
    if unsized := [t for t in searches if t not in sizing["tasks"]]:
        raise DataError(f"mad_sizing.json has no chance level for {', '.join(unsized)}; rerun mad_sizing with "
                        "mad_experiments' settings")
    chance = {t: sizing["tasks"][t]["chance"] for t in searches}
    learned = {t: run_above_chance(r["accuracy"], r["scored_positions"], chance[t], sizing["config"]["alpha"])
               for t, r in searches.items()}
    searched = "; ".join(f"{t.split('/')[1]} {r['accuracy']:.3f} (chance {chance[t]:.3f}, "
                         f"{'above' if learned[t] else 'at'})" for t, r in searches.items())
    at_chance = [t.split("/")[1] for t, ok in learned.items() if not ok]
    steps = {r["steps"] for r in searches.values()}
    arms = programmed_arms(res)
    # The programmed hybrid's advantage over the better component alone, per seed. The control: the
    # MAD searches that program the alphas learned their tasks, else their mean alphas are not MAD's answer.
    diff = paired_differences(arms["better component alone"], arms["programmed"])
    verdict, why = judge_difference(diff, +1, above_chance_ok=_learned(list(arms.values()), summary["chance"]),
                                    control_ok=not at_chance)
    why += (f"; the MAD searches that program the alphas sit at chance on {len(at_chance)} of {len(learned)} tasks at "
            f"{'/'.join(map(str, sorted(steps)))} steps ({', '.join(at_chance)})" if at_chance else "")
    why += ("; the landscape is on components pretrained on the same stories, where no hybrid optimum can form: "
            "deciding it needs the MAD searches run to above chance (see mad_sizing) and the two-block landscape "
            "on the specialist pair")
    return claim_entry(
        id="fig2-right-mad-programmed-hybrid", paper=PAPER, profile=res["profile"],
        claim="Alphas programmed by averaging the mixture weights searched on the MAD tasks give a two-block hybrid "
              "that outperforms its components and substantially outperforms the naive frankenmerges",
        where="Section 4.3, Figure 2 (right), Appendix J",
        metric="held-out loss on the completions after fine-tuning, the better component alone - the programmed "
               "hybrid (the frankenmerges beside them)",
        paper_value="beats both components and both frankenmerges (a figure, no numbers)",
        arms=arms, difference=diff, chance=summary["chance"],
        control=f"MAD programming searches above chance on every task: {searched}",
        context=f"the frankenmerges ({', '.join(summary['frankenmerges'])})", verdict=verdict, why=why)


def projector_budget_claim(res: dict) -> dict:
    """Figure 4: where the sweep's optimum stops moving as projector pretraining grows. The stage runs
    one seed on the same-story pair; three seeds on the specialist pair are past this profile's
    budget, so the row says what the cheapest runs show."""
    reading = ", ".join(f"{r['best_alpha']:.2f} at {r['tokens']:,} tokens" for r in res["budgets"])
    best = {r["best_alpha"] for r in res["budgets"]}
    if len(best) == 1 and best <= {0.0, 1.0}:
        shows = f"{res['components'][int(best.pop())]} alone is the best point at every budget: no hybrid optimum forms"
    else:
        shows = f"the best alpha is stable from {res['summary']['stable_from_tokens']:,} tokens"
    return claim_entry(
        id="fig4-optimum-stabilises", paper=PAPER, profile=res["profile"], trained=False, verdict="needs paper scale",
        claim="The sweep's optimum stops moving as projector pretraining grows (at about 70M of 100M tokens)",
        where="Appendix A, Figure 4", metric="best alpha of the fixed-alpha sweep, by projector-pretraining tokens",
        paper_value="stable from about 70M of 100M FineWeb tokens",
        why="an optimum to track needs a pair whose landscape has one: the specialist pair's sweep after six "
            "projector budgets (0 to 3,200 steps, and 30 fine-tuning runs) took 19.1-19.7 CPU-minutes a seed on "
            "this machine (10.2-10.8 min on 2 cores, 2026-11-27), so its three seeds as a stage would add about half "
            "an hour to a pipeline already far past its 35 minutes",
        evidence=f"the stage, one seed on components pretrained on the same stories "
                 f"(Manticore[{', '.join(res['components'])}]): best alpha {reading}; {shows}; the specialist pair's "
                 "landscape by budget, three seeds outside the pipeline, under the stage's design, is the README's "
                 "sizing table (`python -m sizing.manticore_specialists budgets --seed S --out FILE`)")


def build_ledger(results: dict[str, dict]) -> list[dict]:
    entries = specialist_claims(results["specialists"])
    entries += mad_claims(results["mad_experiments"], results["mad_sizing"])
    entries += lra_claims(results["lra_experiments"], results["lra_sizing"])
    entries.append(programmed_claim(results["programmed"], results["mad_experiments"], results["mad_sizing"]))
    entries.append(projector_budget_claim(results["projector_budget"]))
    check_ledger(entries)
    return entries


def _cell(values: list[float]) -> str:
    s = spread(values)
    return f"{s['mean']:.3f} ± {s['std']:.3f}"


def specialists(res: dict) -> str:
    """Per pair, mean ± sd over seeds of the mean held-out loss of the two genres, and per genre."""
    lines = []
    for pair in dict.fromkeys(r["pair"] for r in res["runs"]):
        runs = _runs(res, pair)
        names = runs[0]["components"]
        chance = runs[0]["chance"]
        lines += [f"**{pair}**: Manticore[{', '.join(names)}], seeds {[r['seed'] for r in runs]}; chance (unigram) "
                  f"stories {chance['stories']:.2f}, instructions {chance['instructions']:.2f}. Alpha is the weight "
                  f"of `{names[1]}`; the corners are the hybrid at a one-hot alpha, fine-tuned from the "
                  "pretrained start.", "",
                  "| model | mix (mean of genres) | stories | instructions | fall over the last fifth |",
                  "|---|---|---|---|---|"]
        rows = [(f"sweep alpha {'/'.join(f'{row[1]:.2f}' for row in p['alphas'])}", [r["sweep"][k] for r in runs])
                for k, p in enumerate(runs[0]["sweep"])]
        rows += [(f"{label} (searched alpha {_cell([r['searched'][label]['alphas'][0][1] for r in runs])})",
                  [r["searched"][label] for r in runs]) for label in runs[0]["searched"]]
        if "ensemble" in runs[0]:
            rows.append(("learned ensemble", [r["ensemble"] for r in runs]))
        for name in runs[0].get("alone_at_hybrid_compute", {}):
            steps = runs[0]["alone_at_hybrid_compute"][name]["steps"]
            rows.append((f"{name} alone, {steps} steps (the hybrid's compute)",
                         [r["alone_at_hybrid_compute"][name] for r in runs]))
        for label, entries in rows:
            lines.append(f"| {label} | " + " | ".join(_cell([e["loss"][k] for e in entries])
                                                      for k in ("mix", "stories", "instructions"))
                         + f" | {statistics.fmean(late_movement(e['curve']) for e in entries):.3f} |")
        g = _gain(runs)
        per_seed = ", ".join(f"{pair_summary(r)['gain']:.3f}" for r in runs)
        lines += ["", f"Gain of the best interior sweep point over the better component: {g['mean']:.3f} ± "
                      f"{g['std']:.3f} (per seed: {per_seed})."]
        falls = [late_movement(r["projector_pretraining"]) / r["projector_pretraining"][-1][1] for r in runs]
        lines.append(f"Projector pretraining ({runs[0]['projector_pretraining'][-1][0]:g} steps): its loss fell by "
                     f"{min(falls):.2%}-{max(falls):.2%} over the last fifth.")
        if (worst := corner_offset(runs)) is not None:
            off, name, seed, corner, bare = worst
            lines.append(f"Positive control, each corner against its component fine-tuned alone for the same steps on "
                         f"the mix: the largest gap is {off:+.1e} of the component's loss ({name}, seed {seed}: "
                         f"{corner:.4f} against {bare:.4f}).")
        lines.append("")
    return "\n".join(lines).rstrip()


def specialist_tasks(res: dict) -> str:
    """Table 1's stand-in: per pair and task, the held-out loss on the task of each component alone and
    of Manticore, mean ± sd over seeds."""
    lines = []
    for pair in dict.fromkeys(r["pair"] for r in res["runs"]):
        runs = _runs(res, pair)
        if not all("tasks" in r for r in runs):
            continue
        a, b = runs[0]["components"]
        lines += [f"**{pair}** (seeds {[r['seed'] for r in runs]}):", "",
                  f"| task | {a} alone | {b} alone | Manticore[{a}, {b}] | searched alpha of {b} | "
                  "better component - Manticore |", "|---|---|---|---|---|---|"]
        for task in TABLE1_TASKS:
            arms, better = task_arms(runs, task)
            gain = [c - m for c, m in zip(better_alone(arms, better)[1], arms["manticore"])]
            alpha = _cell([r["tasks"][task]["manticore"]["alphas"][0][1] for r in runs])
            lines.append(f"| {task} | {_cell(arms[a])} | {_cell(arms[b])} | {_cell(arms['manticore'])} | {alpha} | "
                         f"{_cell(gain)} |")
        lines.append("")
    return "\n".join(lines).rstrip() or "No pair ran the tasks."


# A table's name is its results file's, or (results file, table) where one file feeds two tables.
TABLES = {"claims": claims_table, "specialists": specialists, "specialist_tasks": ("specialists", specialist_tasks),
          "components": components, "general_text": general_text, "nl_experiments": nl_experiments,
          "mad_experiments": mad_experiments, "mad_sizing": mad_sizing, "programmed": programmed,
          "projector_budget": projector_budget,
          "lra_experiments": lra_experiments, "lra_sizing": lra_sizing, "finetune_tasks": finetune_tasks}


def render(readme: str, results_dir: Path) -> str:
    return report.render(readme, results_dir, TABLES, "run `dvc repro papers/manticore/dvc.yaml` first")


def main(argv: list[str] | None = None) -> None:
    report.ledger_report_main(PAPER, RESULTS, build_ledger, TABLES, argv)


if __name__ == "__main__":
    main()
