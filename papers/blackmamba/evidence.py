"""The numbers behind each claim of `claims.yaml`, read from the BlackMamba results. Each function is
an extractor named by a claim: it takes the results by name (and the claim's `args`) and returns
`Evidence`; the verdict is `common.claims.build`'s."""

from __future__ import annotations

import numpy as np

from common.claims.build import LR_CONTROL, Evidence, history_curves, learning_rates, on_common_seeds
from common.claims.rules import above_chance, gap_changes, interval, paired_differences, spread


def seed_values(model: dict, key: str) -> list[float]:
    """A trained model's value of `key`, one per seed."""
    return [run[key] for run in model["seeds"].values()]


def _learned(train: dict, *names: str) -> bool:
    """Every named model's final validation loss measurably below the unigram loss (chance)."""
    return all(above_chance(seed_values(train["models"][name], "final_val_loss"), train["unigram_val_loss"],
                            higher_is_better=False) for name in names)


def table1_sizes(results: dict) -> Evidence:
    rows = [row for row in results["table1"]["rows"] if row["model"].startswith("BlackMamba")]
    ratios = {f"{row['model']}, {kind}": [row["ratio_ours_over_paper"][kind]] for row in rows
              for kind in ("forward_params", "total_params")}
    return Evidence(arms=ratios, facts={
        f"{kind}_off": max(abs(row["ratio_ours_over_paper"][f"{kind}_params"] - 1) for row in rows)
        for kind in ("forward", "total")})


def table1_flops(results: dict) -> Evidence:
    rows = {row["model"]: row for row in results["table1"]["rows"]}
    bm, mamba = rows["BlackMamba 342M/1.5B"], rows["Mamba 343M"]
    ours = bm["ours"]["training_flops"] / mamba["ours"]["training_flops"]
    paper = bm["paper"]["training_flops"] / mamba["paper"]["training_flops"]
    return Evidence(arms={"ours": [ours]}, facts={"ours": ours, "paper": paper, "off_paper": abs(ours - paper)})


def sinkhorn_iterations(results: dict) -> Evidence:
    """Iterations to converge from each initialisation, on the paper's sigmoid inputs when studied."""
    s = results["sinkhorn"]["summary"]
    source = "sigmoid" if "sigmoid" in s else next(iter(s))
    bm, vanilla = s[source]["blackmamba"], s[source]["vanilla"]
    raw = s.get("logits", s[source])["vanilla"]
    return Evidence(
        arms={f"{src}, {init}: median iterations (scale-free test)": [s[src][init]["median_iters_relative"]]
              for src in s for init in ("blackmamba", "vanilla")},
        facts={"source": source, "blackmamba_median": bm["median_iters_relative"],
               "blackmamba_max": bm["max_iters_relative"], "agreement_after_1": bm["min_agreement_after_1"],
               "vanilla_median": vanilla["median_iters_relative"], "vanilla_max": vanilla["max_iters_relative"],
               "share_fewer": s[source]["share_blackmamba_fewer_iters_relative"],
               "share_at_most": s[source]["share_blackmamba_at_most_vanilla_relative"],
               "raw_vanilla_median": raw["median_iters_relative"], "raw_vanilla_max": raw["max_iters_relative"]})


def _learning_rates(results: dict, *names: str) -> tuple[str, str | None]:
    """The compared models' rates and what `lr_check` found (`build.learning_rates`)."""
    train, check = results["train_compare"], results["lr_check"]
    seed = str(check["seed"])
    models = {name: train["models"][name] for name in names}
    return learning_rates(check, {name: model["lr"] for name, model in models.items()},
                          {name: model["seeds"][seed]["final_val_loss"] for name, model in models.items()},
                          {name: spread(seed_values(model, "final_val_loss"))["std"] for name, model in models.items()})


def flops_saving(results: dict, baseline: str) -> Evidence:
    """The baseline's FLOPs to the pair's worse final loss over BlackMamba's, minus 1, per seed."""
    train = results["train_compare"]
    comparison = train["comparisons"][baseline]
    rates, failure = _learning_rates(results, "blackmamba", baseline)
    return Evidence(arms={m: comparison["flops_to_target"][m] for m in ("blackmamba", baseline)},
                    difference=[r - 1 for r in comparison["ratio_over_blackmamba"]],
                    learned=_learned(train, "blackmamba", baseline), chance=train["unigram_val_loss"],
                    control=LR_CONTROL if results["lr_check"]["rates"] else None, failure=failure,
                    facts={"target_loss": comparison["target_val_loss"], "learning_rates": rates})


def loss_gap(results: dict, worse: str, better: str) -> Evidence:
    """Final validation loss, `worse` - `better`, per seed, with the gap's late movement."""
    train = results["train_compare"]
    a, b = on_common_seeds(train["models"][worse], train["models"][better])
    rates, failure = _learning_rates(results, worse, better)
    return Evidence(arms={worse: seed_values(a, "final_val_loss"), better: seed_values(b, "final_val_loss")},
                    difference=paired_differences(seed_values(a, "final_val_loss"), seed_values(b, "final_val_loss")),
                    changes=gap_changes(history_curves(a), history_curves(b)), learned=_learned(train, worse, better),
                    chance=train["unigram_val_loss"], control=LR_CONTROL if results["lr_check"]["rates"] else None,
                    failure=failure, facts={"learning_rates": rates})


def _latency_facts(latency: dict) -> dict:
    return {"first": latency["growth_measured_from"], "last": max(latency["lengths"]),
            "tolerance": latency["flat_tolerance"], "timings": latency["repeats"]}


def latency_growth(results: dict) -> Evidence:
    """BlackMamba's per-token latency growth over each timing, minus the flat tolerance."""
    latency = results["latency"]
    growth = latency["summary"]["blackmamba"]["latency_growth_repeats"]
    return Evidence(arms={"blackmamba": growth}, difference=[g - latency["flat_tolerance"] for g in growth],
                    facts=_latency_facts(latency))


def over_blackmamba(results: dict, key: str, baselines: list[str]) -> Evidence:
    """Each baseline's timed value minus BlackMamba's, timing by timing (the models took turns, so the
    i-th timings pair): `latency_growth_repeats`, or `ms_per_token_repeats` at the longest length."""
    latency = results["latency"]
    last = str(max(latency["lengths"]))
    timed = {name: latency["summary"][name][key] if key in latency["summary"][name] else
             latency["models"][name][last][key] for name in ("blackmamba", *baselines) if name in latency["summary"]}
    speeds = ", ".join(f"{name} {s['ms_per_token_at_last']:.2f}" for name, s in latency["summary"].items())
    return Evidence(arms=timed, parts={f"{name} - blackmamba": paired_differences(timed[name], timed["blackmamba"])
                                       for name in baselines if name in timed},
                    facts={**_latency_facts(latency), "speeds": speeds})


def cache_growth(results: dict) -> Evidence:
    latency = results["latency"]
    rows, last, first = latency["models"], str(max(latency["lengths"])), str(latency["growth_measured_from"])
    growth = {name: rows[name][last]["cache_bytes"] / rows[name][first]["cache_bytes"]
              for name in ("blackmamba", "transformer")}
    return Evidence(arms={name: [g] for name, g in growth.items()},
                    facts={**_latency_facts(latency), **{f"{name}_growth": g for name, g in growth.items()}})


def random_router_loads(tokens: int, experts: int, threshold: float, draws: int = 2000) -> tuple[float, float]:
    """Chance for the routing rows: a router that ignores its input and sends each of `tokens` tokens
    to one of `experts` at random. Returns its mean busiest-expert load / mean load, and the share of
    such layers at or under `threshold` (seeded Monte Carlo over `draws` layers)."""
    loads = np.random.default_rng(0).multinomial(tokens, [1 / experts] * experts, size=draws)
    ratio = loads.max(axis=1) / (tokens / experts)
    return float(ratio.mean()), float((ratio <= threshold).mean())


def _routing(results: dict) -> tuple[list[dict], list[dict], bool, dict]:
    routing, train = results["routing"], results["train_compare"]
    inference = [seed["inference (argmax)"] for seed in routing["seeds"].values()]
    training = [seed["training (Sinkhorn)"] for seed in routing["seeds"].values()]
    layer = inference[0]["layers"][0]
    threshold = routing["config"]["balanced_max_over_mean"]
    random_ratio, random_share = random_router_loads(layer["tokens"], len(layer["tokens_per_expert"]), threshold)
    facts = {"model": routing["model"], "threshold": threshold, "n_layers": inference[0]["n_layers"],
             "late_layers": inference[0]["late_layers"], "tokens": layer["tokens"],
             "experts": len(layer["tokens_per_expert"]), "random_ratio": random_ratio, "random_share": random_share}
    return inference, training, _learned(train, routing["model"]), facts


def balanced_share(results: dict) -> Evidence:
    """The share of MoE layers balanced under inference routing, minus one half ('most'), per seed."""
    inference, training, learned, facts = _routing(results)
    shares, balanced = [s["share_balanced"] for s in inference], [s["share_balanced"] for s in training]
    return Evidence(arms={"inference (argmax)": shares, "training (Sinkhorn)": balanced},
                    difference=[s - 0.5 for s in shares], learned=learned, chance=facts["random_share"], facts=facts,
                    control="training-mode Sinkhorn routing of the same batches, balanced by construction, reads as "
                            "balanced in most layers on every seed",
                    failure=None if min(balanced) > 0.5 else "the probe does not read the Sinkhorn-balanced "
                                                             "training-mode routing as balanced")


def late_imbalance(results: dict) -> Evidence:
    inference, training, learned, facts = _routing(results)
    late = [s["late_minus_early_max_over_mean"] for s in inference]
    if None in late:
        return Evidence(facts=facts, missing="this model has one MoE layer: no layer is late")
    balanced = [s["late_minus_early_max_over_mean"] for s in training]
    return Evidence(arms={"inference (argmax)": late, "training (Sinkhorn)": balanced}, difference=late,
                    learned=learned, facts=facts,
                    control="training-mode Sinkhorn routing of the same batches, balanced by construction, shows no "
                            "late imbalance",
                    failure=None if interval(balanced)[0] <= 0 else "the probe shows late imbalance in the "
                                                                   "Sinkhorn-balanced training-mode routing")


def task_scores(results: dict, baseline: str) -> Evidence:
    """Mean accuracy over the tasks that can see learning, BlackMamba - `baseline`, per seed.

    A task sees learning when the trained models' scores, every model and seed pooled, are
    measurably above both its chance level and the untrained BlackMamba's score (the positive
    control); the others are named and left out. Learned when both models are above chance on each task kept."""
    zero_shot = results["zero_shot"]
    models, tasks, chance = zero_shot["models"], zero_shot["tasks"], zero_shot["chance"]
    if "controls" not in zero_shot:
        return Evidence(missing="zero_shot.json predates the untrained control: rerun the zero_shot stage")
    metric, untrained = zero_shot["metric"], zero_shot["controls"]["untrained blackmamba"]["tasks"]

    def acc(name: str, task: str, seeds: list[str] | None = None) -> list[float]:
        return [models[name][seed]["tasks"][task].get(metric[task], float("nan")) for seed in seeds or models[name]]

    def sees_learning(task: str) -> bool:
        pooled = [value for name in models for value in acc(name, task)]
        return chance[task] is not None and above_chance(pooled, max(chance[task], untrained[task][metric[task]]))

    kept = [t for t in tasks if sees_learning(t)]
    facts = {"tasks": ", ".join(f"{t} ({metric[t].removesuffix(',none')})" for t in kept) or "no task",
             "chance_per_task": ", ".join(f"{t} {chance[t]:.3g}" for t in kept),
             "left_out": "; ".join(f"{t} left out: the trained models are not measurably above both chance "
                                   f"({chance[t]}) and the untrained model ({untrained[t][metric[t]]:.3g})"
                                   for t in tasks if t not in kept) or "no task left out"}
    if "blackmamba" not in models or baseline not in models:
        return Evidence(facts=facts, missing=f"the zero_shot stage scored no {baseline} or no blackmamba")
    # With no task kept the numbers over all tasks are still shown, and the failure decides the row.
    used = kept or tasks

    paired = [seed for seed in models["blackmamba"] if seed in models[baseline]]

    def mean_over_used(name: str) -> list[float]:
        return list(np.mean([acc(name, t, paired) for t in used], axis=0))

    ours, theirs = mean_over_used("blackmamba"), mean_over_used(baseline)
    learned = all(chance[t] is not None and above_chance(acc(name, t), chance[t])
                  for name in ("blackmamba", baseline) for t in used)
    known = [chance[t] for t in used if chance[t] is not None]
    return Evidence(arms={"blackmamba": ours, baseline: theirs}, difference=paired_differences(ours, theirs),
                    learned=learned, chance=float(np.mean(known)) if len(known) == len(used) else None, facts=facts,
                    control="the untrained BlackMamba: a task counts only where the trained models score measurably "
                            "above it and chance",
                    failure=None if kept else "no task's probe sees learning: " + facts["left_out"])


def training_scale(results: dict) -> Evidence:
    train = results["train_compare"]
    bm = train["models"]["blackmamba"]
    steps = next(iter(bm["seeds"].values()))["steps"]
    counts = sorted({len(train["models"][name]["seeds"]) for name in train["compared"]})
    return Evidence(facts={"forward_params_m": bm["forward_params"] / 1e6,
                           "tokens_m": steps * train["tokens_per_step"] / 1e6,
                           "seeds": " to ".join(str(n) for n in dict.fromkeys((counts[0], counts[-1])))})
