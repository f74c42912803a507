"""Stage `report`: the claims ledger of the BlackMamba paper (`results/claims.json`), built by
`common.claims.build` from `claims.yaml` and the numbers `evidence` reads from results/*.json; its
headline numbers for `dvc metrics` (`results/metrics.json`); and the tables of the README and of
the notes page."""

from __future__ import annotations

from common.claims.ledger import claims_table
from common.claims.rules import LEVEL, interval, spread
from common.claims.stage import claims_report_main
from papers.blackmamba import evidence
from papers.blackmamba.evidence import seed_values

PAPER = "blackmamba"


def _sci(x: float) -> str:
    return f"{x:.2g}".replace("e+", "e")


def _m(x: float) -> str:
    return f"{x / 1e9:.2f}B" if x >= 1e9 else f"{x / 1e6:.0f}M"


def _pm(values: list[float], digits: int = 3) -> str:
    s = spread(values)
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"



# ---------------------------------------------------------------------------------------------
# README tables


def table1(res: dict) -> str:
    lines = ["| model | fwd params paper / ours | total params paper / ours | training FLOPs paper / ours (ratio) |",
             "|---|---|---|---|"]
    for row in res["rows"]:
        p, o, r = row["paper"], row["ours"], row["ratio_ours_over_paper"]
        note = f" ({row['note']})" if row["note"] else ""
        lines.append(f"| {row['model']}{note} | {_m(p['forward_params'])} / {_m(o['forward_params'])} | "
                     f"{_m(p['total_params'])} / {_m(o['total_params'])} | {_sci(p['training_flops'])} / "
                     f"{_sci(o['training_flops'])} ({r['training_flops']:.2f}) |")
    return "\n".join(lines)


def lr_check(res: dict) -> str:
    """The learning-rate check: each compared model's first seed at the rates besides its own."""
    if not res["rates"]:
        return "No rates checked at this profile: every model trains at its rate in params."
    rates = [f"{rate:g}" for rate in res["rates"]]
    lines = [f"Final validation loss of seed {res['seed']} at each rate. A model's own rate is `train_compare`'s "
             f"run (its seed {res['seed']} column there); the Figure 4 rows are gated when another rate does better. "
             "`blackmamba_deep` takes BlackMamba's rate.", "",
             "| model | own lr | " + " | ".join(f"at lr {rate}" for rate in rates) + " |",
             "|---|---|" + "---|" * len(rates)]
    for name, losses in res["final_val_loss"].items():
        own = f"{res['own_lr'][name]:g}"
        lines.append(f"| {name} | {own} | " + " | ".join("train_compare" if r == own else f"{losses[r]:.3f}"
                                                         for r in rates) + " |")
    edge = [name for name, own in res["own_lr"].items() if own in (min(res["rates"]), max(res["rates"]))]
    if edge:
        lines += ["", f"Own rate at the edge of the range, so a rate beyond it may do better: {', '.join(edge)}."]
    return "\n".join(lines)


def train_compare(res: dict) -> str:
    first = str(res["seeds"][0])
    lines = [f"Mean ± standard deviation over each model's seeds. Chance: the unigram validation loss, "
             f"{res['unigram_val_loss']:.3f}.", "",
             f"| model | fwd / total params | lr | seeds | final val loss | seed {first} |",
             "|---|---|---|---|---|---|"]
    for name, m in res["models"].items():
        lines.append(f"| {name} | {m['forward_params'] / 1e6:.2f}M / {m['params'] / 1e6:.2f}M | {m['lr']:g} | "
                     f"{len(m['seeds'])} | {_pm(seed_values(m, 'final_val_loss'))} | "
                     f"{m['seeds'][first]['final_val_loss']:.3f} |")
    lines += ["", "FLOPs to reach a loss: per pair, the worse of the two models' final losses over the seeds both "
                  "trained. Ratio = the baseline's FLOPs / BlackMamba's, per seed; the "
                  f"{LEVEL:.0%} interval is over seeds.", "",
              "| baseline | target loss | ratio per seed | mean ± std | interval |", "|---|---|---|---|---|"]
    for name, c in res["comparisons"].items():
        ratios = c["ratio_over_blackmamba"]
        low, high = interval(ratios)
        lines.append(f"| {name} | {c['target_val_loss']:.3f} | {', '.join(f'{r:.3f}' for r in ratios)} | "
                     f"{_pm(ratios)} | [{low:.3f}, {high:.3f}] |")
    return "\n".join(lines)


def latency(res: dict) -> str:
    first, last = res["growth_measured_from"], max(res["lengths"])
    lines = [f"Medians over {res['repeats']} timings, the models taking turns; growth: mean ± std over the "
             "timings.", "",
             f"| model | ms/token at {first} | ms/token at {last} | growth | cache at {last} |",
             "|---|---|---|---|---|"]
    for name, s in res["summary"].items():
        rows = res["models"][name]
        lines.append(f"| {name} | {rows[str(first)]['ms_per_token']:.2f} | {s['ms_per_token_at_last']:.2f} | "
                     f"{_pm(s['latency_growth_repeats'])} | {rows[str(last)]['cache_bytes'] / 2**20:.2f} MiB |")
    return "\n".join(lines)


def sinkhorn(res: dict) -> str:
    lines = ["| input | init | median iters (release's absolute test) | median iters (scale-free test) | "
             "max iters (scale-free) | agreement with converged after 1 iter (mean / worst) | "
             "worst max load after 1 iter |",
             "|---|---|---|---|---|---|---|"]
    for source, s in res["summary"].items():
        for init in ("blackmamba", "vanilla"):
            r = s[init]
            lines.append(f"| {source} | {init} | {r['median_iters_absolute']:g} | {r['median_iters_relative']:g} | "
                         f"{r['max_iters_relative']} | {r['mean_agreement_after_1']:.3f} / "
                         f"{r['min_agreement_after_1']:.3f} | {r['worst_max_load_after_1']:.2f}x mean |")
    return "\n".join(lines)


def routing(res: dict) -> str:
    lines = [f"Model `{res['model']}`. Busiest expert's load over the mean load, per MoE layer (first to last).", "",
             "| seed | routing | balanced layers | max load / mean per layer |", "|---|---|---|---|"]
    for seed, modes in res["seeds"].items():
        for mode, r in modes.items():
            loads = ", ".join(f"{layer['max_over_mean']:.2f}" for layer in r["layers"])
            lines.append(f"| {seed} | {mode} | {r['balanced_layers']} / {r['n_layers']} | {loads} |")
    return "\n".join(lines)


def zero_shot(res: dict) -> str:
    tasks, metric = res["tasks"], res["metric"]
    untrained = res["controls"]["untrained blackmamba"]
    lines = ["Each task's metric (`acc_norm` where the choices differ in length), mean ± standard deviation "
             f"over seeds; the untrained row is one model, {untrained['architecture']}'s architecture as "
             "initialised: the level a probe must rise above to see learning.", "",
             "| model | " + " | ".join(f"{t}, {metric[t].removesuffix(',none')} (chance {res['chance'][t]:.3g})"
                                      for t in tasks) + " | mean |",
             "|---|" + "---|" * (len(tasks) + 1)]
    for name, seeds in res["models"].items():
        cells = [_pm([s["tasks"][t][metric[t]] for s in seeds.values()]) for t in tasks]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_pm([s['mean_acc'] for s in seeds.values()])} |")
    cells = [f"{untrained['tasks'][t][metric[t]]:.3f}" for t in tasks]
    lines.append("| untrained blackmamba | " + " | ".join(cells) + f" | {untrained['mean_acc']:.3f} |")
    return "\n".join(lines)


TABLES = {"claims": claims_table, "table1": table1, "train_compare": train_compare, "lr_check": lr_check,
          "latency": latency, "sinkhorn": sinkhorn, "routing": routing, "zero_shot": zero_shot}


def main(argv: list[str] | None = None) -> None:
    claims_report_main(PAPER, evidence, TABLES, argv)


if __name__ == "__main__":
    main()
