"""Stage `report`: the result tables of papers/manticore/README.md, generated from results/*.json
(see `common.eval.report`). Verdicts are computed here from the numbers."""

from __future__ import annotations

from pathlib import Path

from common.eval import report

# Table 4 of the paper: validation loss on its PTB completions after search and retraining.
PAPER_TABLE4 = {"darts_alternating": 1.2854, "darts_simultaneous": 1.3635, "dash_alternating": 2.5899,
                "dash_simultaneous": 2.5968}


def components(res: dict) -> str:
    lines = ["| component | source | blocks | width | parameters | final val loss |", "|---|---|---|---|---|---|"]
    for name, c in res["components"].items():
        loss = f"{c['final_val_loss']:.3f}" if "final_val_loss" in c else "-"
        lines.append(f"| {name} | {c['source']} | {c.get('pattern', '-')} x {c.get('repeat', '-')} | "
                     f"{c.get('d_model', '-')} | {c['params'] / 1e6:.2f}M | {loss} |")
    return "\n".join(lines)


def nl_experiments(res: dict) -> str:
    names, summary = res["components"], res["summary"]
    sweep = res["sweep"]
    lines = [f"Fixed-alpha sweep (alpha = weight of `{names[1]}` per block; all weights fine-tuned):", "",
             "| alpha | " + " | ".join("/".join(f"{r[1]:.2f}" for r in s["alphas"]) for s in sweep) + " |",
             "|---|" + "---|" * len(sweep),
             "| val loss | " + " | ".join(f"{s['val_loss']:.4f}" for s in sweep) + " |", "",
             "Search, then rewind and retrain with the searched alphas frozen (paper: Table 4, PTB completions):", "",
             "| search | alternating? | searched alpha | val loss after retraining | paper (PTB) | in the sweep's best region? |",
             "|---|---|---|---|---|---|"]
    for label, r in res["searched"].items():
        method, update = label.split("_")
        alpha = "/".join(f"{row[1]:.2f}" for row in r["alphas"])
        lines.append(f"| {method.upper()} | {'yes' if update == 'alternating' else 'no'} | {alpha} | {r['val_loss']:.4f} | "
                     f"{PAPER_TABLE4.get(label, '-')} | {'yes' if summary['search_in_best_region'][label] else 'no'} |")
    alone = summary["component_alone"]
    best_component = min(alone.values()) if alone else float("nan")
    ens = res["ensemble"]
    lines += ["", "Against the components and the learned ensemble (paper: Table 8, and Figure 2 left):", "",
              "| " + " | ".join(f"{n} alone" for n in alone) + " | learned ensemble | Manticore (best of sweep and search) |",
              "|" + "---|" * (len(alone) + 2),
              "| " + " | ".join(f"{v:.4f}" for v in alone.values()) + f" | {ens['val_loss']:.4f} | "
              f"{summary['best_manticore_val_loss']:.4f} |"]
    in_region = [label for label, ok in summary["search_in_best_region"].items() if ok]
    beats = summary["best_manticore_val_loss"] < best_component
    verdicts = [
        ("search lands in the sweep's best region (within "
         f"{summary['best_region_threshold'] / summary['sweep_best']['val_loss'] - 1:.0%} of the best sweep loss)",
         f"reproduced for {', '.join(in_region)}" if in_region else "not reproduced for any search variant"),
        ("Manticore beats both components", "reproduced" if beats else
         f"not reproduced: best Manticore {summary['best_manticore_val_loss']:.4f} vs best component {best_component:.4f}"),
        ("the learned ensemble falls below Manticore", "reproduced" if summary["ensemble_below_manticore"] else
         "not reproduced: the ensemble's loss is not above Manticore's"),
    ]
    lines += ["", "| claim | verdict |", "|---|---|"] + [f"| {claim} | {verdict} |" for claim, verdict in verdicts]
    return "\n".join(lines)


# Table 2 (right) and Table 5 of the paper: test loss on Manticore's MAD settings.
PAPER_TABLE2 = {"in-context-recall": (4.0771, 4.1858, 4.0768), "fuzzy-in-context-recall": (4.4384, 4.8097, 4.2797),
                "noisy-in-context-recall": (4.1843, 4.2605, 4.1823), "selective-copying": (1.0470, 3.7765, 0.9478),
                "memorization": (4.6110, 5.2281, 4.1367)}
PAPER_TABLE5 = {"in-context-recall": (0.0068, 0.0081), "fuzzy-in-context-recall": (4.1764, 4.1729),
                "noisy-in-context-recall": (4.1628, 4.1614), "selective-copying": (0.0849, 0.0006),
                "memorization": (8.9416, 8.9402)}


def mad_experiments(res: dict) -> str:
    names = res["components"]
    lines = ["Test loss (accuracy), paper's loss in brackets (its settings are harder: `manticore` vs our "
             "`tiny` overrides):", "",
             "| task | " + " | ".join(names) + " | Manticore | Manticore discretized | alphas (per block) | matches best? |",
             "|---|" + "---|" * (len(names) + 4)]
    for entry, row in res["tasks"].items():
        task = entry.split("/")[1]
        paper2, paper5 = PAPER_TABLE2.get(task), PAPER_TABLE5.get(task)

        def cell(r, paper=None):
            return f"{r['loss']:.3f} ({r['accuracy']:.2f})" + (f" [{paper}]" if paper is not None else "")

        comps = [cell(row[n], paper2[i] if paper2 else None) for i, n in enumerate(names)]
        alphas = "; ".join("/".join(f"{a:.2f}" for a in block) for block in row["manticore"]["alphas"])
        lines.append(f"| {entry} | " + " | ".join(comps) + f" | {cell(row['manticore'], paper2[2] if paper2 else None)} | "
                     f"{cell(row['manticore_discretized'], paper5[1] if paper5 else None)} | {alphas} | "
                     f"{'yes' if row['manticore_matches_best_component'] else 'no'} |")
    s = res["summary"]
    verdict = (f"reproduced: Manticore matches or beats the better component on {s['manticore_matches_or_beats_best_component']}"
               f" of {s['tasks']} tasks" if s["on_most_tasks"] else
               f"not reproduced: Manticore matches or beats the better component on only "
               f"{s['manticore_matches_or_beats_best_component']} of {s['tasks']} tasks")
    return "\n".join(lines + ["", f"**Verdict** (within {s['match_tolerance']:.0%} of the better component's loss): "
                                   f"{verdict}."])


TABLES = {"components": components, "nl_experiments": nl_experiments, "mad_experiments": mad_experiments}


def render(readme: str, results_dir: Path) -> str:
    return report.render(readme, results_dir, TABLES, "run `dvc repro papers/manticore/dvc.yaml` first")


if __name__ == "__main__":
    report.report_main("manticore", TABLES)
