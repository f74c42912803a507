"""The numbers behind each claim of `claims.yaml`, read from the Masked Mixers results. Each function
is an extractor named by a claim: it takes the results by name (and the claim's `args`) and returns
`Evidence`; the verdict is `common.claims.build`'s.

A model is named `stage:model` (`clm:mixer_flat`, `norms:mixer_flat`). Models of two stages are
paired by seed; the stages must have trained the same steps and seeds, or the results are refused."""

from __future__ import annotations

import math
import statistics

from common.claims.build import LR_CONTROL, Evidence, history_curves, learning_rates, on_common_seeds
from common.claims.rules import above_chance, gap_changes, paired_differences, run_above_chance, spread

TOP5 = 5
SPIKE = math.log(2)  # a rise of the training loss by this much over its lowest so far: perplexity doubled


def seed_values(model: dict, key: str = "val_loss") -> list[float]:
    """A trained model's value of `key`, one per seed."""
    return [run[key] for run in model["seeds"].values()]


def _shown(values: list[float], digits: int = 3, signed: bool = True) -> str:
    s = spread(values)
    return f"{s['mean']:{'+' if signed else ''}.{digits}f} ± {s['std']:.{digits}f}"


def _top1(values: list[float]) -> str:
    """Accuracies over seeds, which have no sign to show."""
    return _shown(values, signed=False)


def _model(results: dict, name: str) -> tuple[dict, dict | None]:
    """The stage's results and its model `stage:model` (None when the stage did not train it)."""
    stage, model = name.split(":")
    return results[stage], results[stage]["models"].get(model)


def _paired_stages(*stages: dict) -> None:
    if len({(s["steps"], tuple(s["seeds"])) for s in stages}) > 1:
        raise ValueError("results from stages of different steps or seeds are paired: rerun `dvc repro` for them")


def _learned(*arms: tuple[list[float], dict]) -> bool:
    """Each arm's validation losses (per seed) measurably below its stage's unigram loss (chance)."""
    return all(above_chance(values, stage["chance_loss"], higher_is_better=False) for values, stage in arms)


def _learning_rates(results: dict, *names: str) -> tuple[str, str | None, str | None]:
    """The rates of the models `stage:model` that a comparison section trained and `lr_check` checks,
    in words, the check as the row's control where it reads any of them, and a failure when one did
    better at another rate (`build.learning_rates`). Models of other sections (those that borrow
    clm's recipe: norms, mixer_variants, ...) are said unchecked, but the mixer variants train at
    their baseline's rate, so that model's check is read for them; results without the check (an
    earlier run's) leave every rate unchecked."""
    check = results.get("lr_check", {}).get("sections", {})
    said, failures, checked = [], [], False
    for stage in dict.fromkeys(name.split(":")[0] for name in names):
        models = [name.split(":")[1] for name in names if name.startswith(f"{stage}:")]
        section = results[stage]
        if "lr" not in section:  # results from before the rates were recorded
            continue
        own = {model: section["lr"][model] for model in models}
        if stage not in check:  # a section the check does not read
            said.append(", ".join(f"{stage}'s {model} at lr {lr:g}" for model, lr in own.items()) + ", unchecked")
            base = section.get("baseline", {}).get("name")
            if base is None or "clm" not in check or f"clm:{base}" in names:
                continue
            stage, section, own = "clm", results["clm"], {base: results["clm"]["lr"][base]}
            said[-1] += f", at the rate of {base}"
        seed = str(check[stage]["seed"])
        words, failure = learning_rates(check[stage], own,
                                        {model: section["models"][model]["seeds"][seed]["val_loss"] for model in own},
                                        {model: spread(seed_values(section["models"][model]))["std"] for model in own})
        said.append(words)
        failures += [failure] if failure else []
        checked |= bool(check[stage]["factors"])
    return "; ".join(said) or "rates unchecked", LR_CONTROL if checked else None, "; ".join(failures) or None


def loss_gap(results: dict, a: str, b: str, relative: bool = False) -> Evidence:
    """Validation loss a - b per seed at equal steps (`relative`: a / b - 1), with the gap's late
    movement for settling; facts: the steps, and each model's forward FLOPs per row over the
    mixer_variants baseline's where the stage counts them."""
    (stage_a, model_a), (stage_b, model_b) = _model(results, a), _model(results, b)
    if model_a is None or model_b is None:
        return Evidence(missing=f"{a if model_a is None else b} was not trained (a `-S` run with fewer models)")
    _paired_stages(stage_a, stage_b)
    model_a, model_b = on_common_seeds(model_a, model_b)
    va, vb = seed_values(model_a), seed_values(model_b)
    curves_a, curves_b = history_curves(model_a), history_curves(model_b)
    if relative:  # the gap as a share of b's loss, its curve read the same way
        difference = [x / y - 1 for x, y in zip(va, vb)]
        ratios = [[(step, loss / dict(b_curve)[step]) for step, loss in a_curve if step in dict(b_curve)]
                  for a_curve, b_curve in zip(curves_a, curves_b)]
        curves_a, curves_b = ratios, [[(step, 1.0) for step, _ in curve] for curve in ratios]
    else:
        difference = paired_differences(va, vb)
    facts = {"steps": stage_a["steps"]}
    for side, model in (("a", model_a), ("b", model_b)):
        if "forward_flops_per_row" in model:  # a mixer_variants model
            baseline = results["mixer_variants"]["baseline"]["forward_flops_per_row"]
            facts[f"{side}_cost"] = model["forward_flops_per_row"] / baseline
    rates, control, failure = _learning_rates(results, a, b)
    return Evidence(arms={a: va, b: vb}, difference=difference, changes=gap_changes(curves_a, curves_b),
                    learned=_learned((va, stage_a), (vb, stage_b)), chance=stage_a["chance_loss"],
                    control=control, failure=failure, facts={**facts, "learning_rates": rates})


def one_step_parity(results: dict) -> Evidence:
    """One-step completion, mixer - transformer, beside the same pair's causal gap."""
    evidence = loss_gap(results, "one_step:mixer_flat", "one_step:llama_h4")
    _paired_stages(results["one_step"], results["clm"])
    clm = results["clm"]["models"]
    causal = paired_differences(*(seed_values(model) for model in on_common_seeds(clm["mixer_flat"], clm["llama_h4"])))
    evidence.facts.update(prefix=results["one_step"]["prefix"], last=results["clm"]["sizes"]["n_ctx"] - 1,
                          causal=_shown(causal))
    return evidence


def gap_of_gaps(results: dict, a: str, b: str, c: str, d: str) -> Evidence:
    """(a - b) - (c - d) per seed: one pair's gap against another's, with both gaps' late movement."""
    first, second = loss_gap(results, a, b), loss_gap(results, c, d)
    if first.missing or second.missing:
        return first if first.missing else second
    (stage_a, _), (stage_c, _) = _model(results, a), _model(results, c)
    _paired_stages(stage_a, stage_c)
    gap_first, gap_second = first.difference, second.difference
    return Evidence(arms={"first gap": gap_first, "second gap": gap_second},
                    difference=paired_differences(gap_first, gap_second),
                    changes=paired_differences(first.changes, second.changes), learned=first.learned and second.learned,
                    chance=stage_a["chance_loss"], control=first.control or second.control,
                    failure="; ".join(filter(None, (first.failure, second.failure))) or None,
                    facts={"learning_rates": f"{first.facts['learning_rates']}; {second.facts['learning_rates']}",
                           "first_mean": statistics.fmean(gap_first), "first": _shown(gap_first),
                           "second": _shown(gap_second), "half_second": abs(statistics.fmean(gap_second)) / 2,
                           "steps": stage_a["steps"], "short": stage_a["sizes"]["n_ctx"],
                           "long": stage_c["sizes"]["n_ctx"], "short_batch": stage_a["batch_size"],
                           "long_batch": stage_c["batch_size"], "long_chance": stage_c["chance_loss"]})


def rebound(run: dict) -> float:
    """The largest rise of the logged training loss above its lowest value so far (nats); infinite
    if the loss stopped being finite. A rise of SPIKE or more is a loss spike."""
    low, worst = math.inf, 0.0
    for loss in (row["train/loss"] for row in run["history"] if "train/loss" in row):
        if not math.isfinite(loss):
            return math.inf
        worst, low = max(worst, loss - low), min(low, loss)
    return worst


def fires_on_spike() -> bool:
    """The spike detector's positive case: a constructed run whose loss falls to 1.5 and then rises
    by 2 ln 2. The detector decides a row only if it fires here."""
    losses = (3.0, 2.0, 1.5, 1.5 + 2 * SPIKE, 1.4)
    return rebound({"history": [{"train/loss": loss} for loss in losses]}) >= SPIKE


def loss_spikes(results: dict, model: str) -> Evidence:
    """Loss spikes of `model` trained without norms (norms stage), against the clm stage's run of the
    same model and seeds with norms, which must have none."""
    norms, clm = results["norms"], results["clm"]
    if model not in norms["models"]:
        return Evidence(missing=f"the norms stage trained no {model}")
    _paired_stages(norms, clm)
    bare, normed = on_common_seeds(norms["models"][model], clm["models"][model])  # clm may hold extra seeds
    without = [rebound(run) for run in bare["seeds"].values()]
    with_ = [rebound(run) for run in normed["seeds"].values()]
    history = next(iter(bare["seeds"].values()))["history"]
    logged = [row["step"] for row in history if "train/loss" in row]
    calm = all(r < SPIKE for r in with_)
    return Evidence(arms={f"{model} without norms": without, model: with_}, fires=[r >= SPIKE for r in without],
                    fires_on_positive=fires_on_spike(), learned=_learned((seed_values(bare), norms)),
                    chance=clm["chance_loss"],
                    failure=None if calm else f"the clm stage's {model} with norms, which must not spike, spiked",
                    facts={"steps": clm["steps"], "spike": SPIKE, "n_layers": clm["sizes"]["n_layers"],
                           "every": min((b - a for a, b in zip(logged, logged[1:])), default=1)})


def train_test_ratio(results: dict) -> Evidence:
    """§6.1 on the arms' own scale: validation over training loss, minus 1, on the same number of
    stories after several epochs; the mixer's minus the transformer's, per seed."""
    gap, clm = results["train_test_gap"], results["clm"]
    _paired_stages(gap, clm)

    def ratios(name: str) -> list[float]:
        return [run["scored_val_loss"] / run["scored_train_loss"] - 1 for run in gap["models"][name]["seeds"].values()]

    def one_pass(name: str) -> str:
        return _shown([run["val_loss"] - run["train_loss"] for run in clm["models"][name]["seeds"].values()])

    mixer, transformer = ratios("mixer_flat"), ratios("llama_h4")
    learned = all(above_chance([run["scored_val_loss"] for run in gap["models"][name]["seeds"].values()],
                               gap["chance_loss"], higher_is_better=False) for name in ("mixer_flat", "llama_h4"))
    return Evidence(arms={"mixer_flat": mixer, "llama_h4": transformer},
                    difference=paired_differences(mixer, transformer), learned=learned, chance=gap["chance_loss"],
                    facts={"eval_rows": gap["eval_rows"], "epochs": gap["epochs"], "train_rows": gap["train_rows"],
                           "rows": clm["batch_size"] * clm["steps"], "mixer_one_pass": one_pass("mixer_flat"),
                           "transformer_one_pass": one_pass("llama_h4"),
                           "mixer_gap": _shown([r["gap"] for r in gap["models"]["mixer_flat"]["seeds"].values()]),
                           "transformer_gap": _shown([r["gap"] for r in gap["models"]["llama_h4"]["seeds"].values()])})


def gap_along_training(results: dict) -> Evidence:
    """The mixer - Llama validation gap at five points along the clm runs, and the stories' lengths."""
    clm, lengths = results["clm"], results["context_length"]["story_tokens"]

    def by_step(model: dict) -> list[dict[int, float]]:
        return [{row["step"]: row["val/loss"] for row in run["history"] if "val/loss" in row}
                for run in model["seeds"].values()]

    runs_a, runs_b = by_step(clm["models"]["mixer_flat"]), by_step(clm["models"]["llama_h4"])
    steps = sorted(set.intersection(*(set(r) for r in runs_a + runs_b)))
    every = max(1, clm["steps"] // 5)
    shown = ", ".join(f"{statistics.fmean(x[s] - y[s] for x, y in zip(runs_a, runs_b)):.2f} at step {s}"
                      for s in steps if s % every == 0)
    longest = f"{'at least ' if lengths['longest'] >= lengths['row_tokens'] else ''}{lengths['longest']}"
    return Evidence(facts={"n_ctx": clm["sizes"]["n_ctx"], "seeds": len(clm["seeds"]), "shown": shown,
                           "longest": longest, "median": lengths["median"], "p95": lengths["p95"],
                           "stories": lengths["stories"]})


def hamming_near(results: dict, model: str) -> Evidence:
    """Untrained models' top-5 Hamming metric at the paper's size, per seed (0: input recovered)."""
    rep = results["representation"]
    size = rep["paper_size"]
    values = [row["full"]["hamming_top5"] for row in rep["results"][f"untrained/{size}"][model].values()]
    return Evidence(arms={"hamming_top5": values}, difference=values,
                    chance=1 - TOP5 / results["clm"]["vocab_size"], facts=_hamming_facts(rep, size))


def _hamming_facts(rep: dict, size: str) -> dict:
    return {"size": _readable(size), "n_inputs": rep["n_inputs"], "n_tokens": rep["n_tokens"]}


def _readable(size: str) -> str:
    """`d256_l8` (the stages' key for a size) -> `d_model 256, 8 layers`."""
    d_model, n_layers = size.removeprefix("d").split("_l")
    return f"d_model {d_model}, {n_layers} layers"


def hamming_gap(results: dict, state: str, target: str, key: str) -> Evidence:
    """The transformer's Hamming metric minus the flat mixer's, per seed (`state`: trained or
    untrained, at the clm stage's size or the paper's)."""
    rep, chance = results["representation"], 1 - TOP5 / results["clm"]["vocab_size"]
    size = next(k for k in rep["results"] if k.startswith("trained/")) if state == "trained" else \
        f"untrained/{rep['paper_size']}"
    rows = rep["results"][size]
    arms = {name: [row[target][key] for row in rows[name].values()] for name in ("llama_h4", "mixer_flat")}
    return Evidence(arms=arms, difference=paired_differences(arms["llama_h4"], arms["mixer_flat"]),
                    learned=above_chance(arms["mixer_flat"], chance, higher_is_better=False), chance=chance,
                    facts={**_hamming_facts(rep, size.split("/")[1])})


def expansion_effect(results: dict, key: str, side: int) -> Evidence:
    """Figures S1/S2: the share of parameters (or positions) cut off at each expansion factor on
    `side` of 1; the flat mixer (e = 1), the control, must show none."""
    exp = results["expansion"]
    rows, flat = exp["expansions"], exp["expansions"].get("1.0")
    measured = {f"e = {e}": rows[e][key] / (1 if key == "dead_fraction" else exp["n_ctx"])
                for e in rows if (float(e) - 1) * side > 0}
    facts = {"d_model": exp["d_model"], "n_ctx": exp["n_ctx"], "flat": flat[key] if flat else math.nan,
             "smallest": min(measured.values(), default=math.nan)}
    if not measured:
        return Evidence(facts=facts, missing="no expansion factor on this side of 1 was measured")
    failure = None if flat is not None and flat[key] == 0 else "the flat control (e = 1) is missing or shows the effect"
    return Evidence(arms={name: [value] for name, value in measured.items()}, failure=failure, facts=facts)


def expansion_gap(results: dict, target: str, key: str) -> Evidence:
    """The expanded mixer's Hamming metric minus the flat one's, per seed, untrained."""
    exp, chance = results["expansion"], 1 - TOP5 / results["clm"]["vocab_size"]
    rep = exp["representation"]
    arms = {name: [row[target][key] for row in rep[name].values()] for name in ("mixer_expanded", "mixer_flat")}
    return Evidence(arms=arms, difference=paired_differences(arms["mixer_expanded"], arms["mixer_flat"]),
                    learned=above_chance(arms["mixer_flat"], chance, higher_is_better=False), chance=chance,
                    facts={"size": _readable(exp["representation_size"]), "n_inputs": exp["n_inputs"],
                           "n_tokens": exp["n_tokens"]})


def ranking_top1(ret: dict, name: str, c: int, ranking: str = "cosine") -> list[float]:
    """Per seed, the top-1 of ranking candidates by `ranking` (cosine, l1 or l2) alone."""
    return [run[f"c{c}_{ranking}_top1"] for run in ret["sources"][name]["seeds"].values()]


def _retrieves(top1: list[float], ret: dict, c: int) -> bool:
    """Top-1 measurably above chance (1/c) in every seed, each by an exact binomial test on its
    `n_test` test pairs. An accuracy's chance level is known exactly, so each seed is tested on its
    own trials: an interval over three seeds' means calls a source that retrieves at 9 times chance
    in every seed "at chance" whenever one seed lags the others."""
    return all(run_above_chance(x, ret["n_test"], 1 / c) for x in top1)


def _model_top1(ret: dict, name: str, c: int) -> list[float]:
    return [run[f"c{c}"]["test_top1"] for run in ret["sources"][name]["seeds"].values()]


# The claims are judged on mean-pooled states; the paper's single positions are reported beside them.
POOLED = {"mixer_trained": "mixer_trained_mean", "transformer_trained": "transformer_trained_mean",
          "mixer_untrained": "mixer_untrained_mean"}
CONTROL = "mixer_trained_mean"  # the positive case: trained mixer states that the retrieval model learns from


def ranking_gap(results: dict, ranking: str) -> Evidence:
    """§4.2: top-1 of ranking by `ranking` (cosine, or the better of L1 and L2 per seed) minus the
    retrieval model's, both on the trained mixer's mean-pooled states; the same two on the paper's
    single position in the facts."""
    ret = results["retrieval"]
    c = ret["candidates"][0]

    def ranked(name: str) -> list[float]:
        if ranking == "cosine":
            return ranking_top1(ret, name, c)
        return [max(pair) for pair in zip(ranking_top1(ret, name, c, "l1"), ranking_top1(ret, name, c, "l2"))]

    trained = _model_top1(ret, CONTROL, c)
    return Evidence(arms={f"{ranking} ranking": ranked(CONTROL), "retrieval model": trained},
                    difference=paired_differences(ranked(CONTROL), trained),
                    learned=_retrieves(trained, ret, c), chance=1 / c,
                    control="the retrieval model on the same states (the positive control) retrieves above chance",
                    facts={"c": c, "steps": ret["steps"], "position_ranked": _top1(ranked("mixer_trained")),
                           "position_model": _top1(_model_top1(ret, "mixer_trained", c)),
                           **{f"per_seed_{r}": ", ".join(f"{x:.3f}" for x in ranking_top1(ret, CONTROL, c, r))
                              for r in ("l1", "l2")}})


def _curve(ret: dict) -> str:
    """The retrieval model's learning curve per source, in words: mean top-1 over seeds by step."""
    c = ret["candidates"][0]

    def points(name: str) -> str:
        runs = [run[f"c{c}"]["top1_curve"] for run in ret["sources"][name]["seeds"].values()]
        steps = sorted(runs[0], key=int)  # keys sorted as strings in the file ("10000" before "3000")
        return ", ".join(f"{statistics.fmean(run[s] for run in runs):.3f} at {s}" for s in steps)

    return (f"retrieval model top-1 by steps, c = {c}, {ret['n_train']} pairs, mean of {len(ret['seeds'])} seeds "
            f"(chance {1 / c:.3f}): " + "; ".join(f"{name} {points(name)}" for name in ret["sources"]))


def retrieval_gap(results: dict, a: str, b: str) -> Evidence:
    """Top-1 retrieval from `a`'s mean-pooled states minus `b`'s, per seed. One source above chance
    is enough: each claim expects its second source to retrieve worse, possibly at chance. The
    positive control (the trained mixer's mean-pooled states) must learn; the paper's single
    positions of the same models are in the facts."""
    ret = results["retrieval"]
    c = ret["candidates"][0]
    arms = {a: _model_top1(ret, POOLED[a], c), b: _model_top1(ret, POOLED[b], c)}
    control = _model_top1(ret, CONTROL, c)
    control_text = f"trained mixer mean-pooled top-1 {_top1(control)} over {len(control)} seeds"
    positions = "; ".join(f"{name} {_top1(_model_top1(ret, name, c))}" for name in (a, b) if name in ret["sources"])
    cosine = "; ".join(f"{name} {statistics.fmean(ranking_top1(ret, POOLED[name], c)):.3f}" for name in (a, b))
    return Evidence(arms=arms, difference=paired_differences(arms[a], arms[b]),
                    learned=any(_retrieves(v, ret, c) for v in arms.values()), chance=1 / c,
                    control="the trained mixer's mean-pooled states (the positive control) retrieve above chance",
                    failure=None if _retrieves(control, ret, c) else
                    f"the positive control is at chance ({control_text})",
                    facts={"c": c, "steps": ret["steps"], "control": control_text, "positions": positions,
                           "cosine": cosine, "curve": _curve(ret), "b_top1": statistics.fmean(arms[b])})


def single_position_retrieval(results: dict) -> Evidence:
    """The paper's embeddings (one position of the final hidden states) beside the mean-pooled
    states of the same trained models, for the row that says how they fare at this size."""
    ret = results["retrieval"]
    c = ret["candidates"][0]
    top1 = {name: _model_top1(ret, name, c) for name in ("mixer_trained", "transformer_trained", *POOLED.values())
            if name in ret["sources"]}
    at_chance = [name for name in ("mixer_trained", "transformer_trained") if not _retrieves(top1[name], ret, c)]
    return Evidence(facts={"c": c, "steps": ret["steps"], "n_train": ret["n_train"], "chance": 1 / c,
                           "seeds": len(ret["seeds"]), **{name: _top1(v) for name, v in top1.items()},
                           "at_chance": " and ".join(at_chance) or "neither", "curve": _curve(ret)})


def infonce_speedup(results: dict) -> Evidence:
    """Embeddings per second (extraction + training) over InfoNCE texts per second, per seed, in
    orders of magnitude above two."""
    ret = results["retrieval"]
    c = max(ret["throughput"]["candidates"])
    speedups = [run[f"speedup_c{c}"] for run in ret["infonce"]["seeds"].values()]
    return Evidence(arms={"speedup": speedups}, difference=[math.log10(s) - 2 for s in speedups], facts={"c": c})


def infonce_small_batch(results: dict) -> Evidence:
    """Cosine top-1 after InfoNCE tuning at a small batch minus the same model's before (each run
    records it, so that an InfoNCE seed beyond the retrieval sources' has its own), per seed."""
    ret = results["retrieval"]
    source, c = ret["infonce"]["source"], ret["candidates"][0]
    runs = list(ret["infonce"]["seeds"].values())
    after, before = [run[f"c{c}_cosine_top1"] for run in runs], [run[f"c{c}_cosine_top1_before"] for run in runs]
    batch, steps = ret["infonce"]["batch_size"], ret["infonce"]["steps"]
    ends = sorted(runs[0]["loss_curve"], key=int)  # keys sorted as strings in the file ("1024" before "128")
    return Evidence(arms={"after InfoNCE": after, "before (same model)": before},
                    difference=paired_differences(after, before), chance=1 / c,
                    control="the same model's ranking before tuning, on the same candidate sets; a finite loss",
                    failure=None if all(run["finite"] for run in runs) else "the loss became non-finite",
                    facts={"c": c, "batch": batch, "steps": steps, "source": source, "log_batch": math.log(batch),
                           "window": steps // len(ends),
                           "losses": ", ".join(f"{run['train_loss']:.2f}" for run in runs),
                           "curve": ", ".join(f"{statistics.fmean(run['loss_curve'][e] for run in runs):.2f}"
                                              for e in ends),
                           "peaks": ", ".join(f"{run['max_loss']:.1f}" for run in runs)})


def memory_ratio(results: dict) -> Evidence:
    mem = results["memory"]
    depth = max(r["depth"] for r in mem["rows"])
    n_ctx = max(r["n_ctx"] for r in mem["rows"] if r["depth"] == depth)
    ratios = mem["ratios"][f"depth{depth}/n_ctx{n_ctx}"]
    facts = {"depth": depth, "n_ctx": n_ctx, "device": mem.get("device", "cpu"), "batch": mem.get("batch", 1),
             "eager": ratios.get("mixer_over_transformer_eager", math.nan),
             "sdpa": ratios.get("mixer_over_transformer_sdpa", math.nan)}
    if "mixer_over_transformer_eager" not in ratios:
        return Evidence(facts=facts, missing="the eager-attention transformer was not measured")
    return Evidence(arms={"ratio": [facts["eager"]]}, facts=facts)


def clm_scale(results: dict) -> Evidence:
    """What the clm stage trained, for the rows that need the paper's scale."""
    clm = results["clm"]
    models, d = clm["models"], clm["sizes"]["d_model"]
    runs = [seed for model in models.values() for seed in model["seeds"].values()]
    mixer, llama = (statistics.fmean(seed_values(models[name])) for name in ("mixer_flat", "llama_h4"))

    def loss(name: str) -> str:
        v = spread(seed_values(models[name]))
        return f"{v['mean']:.3f} ± {v['std']:.3f}"

    return Evidence(facts={"d_model": d, "steps": clm["steps"], "seeds": len(clm["seeds"]), "runs": len(runs),
                           "head_width": d // 4,
                           "head_widths": ", ".join(str(d // h) for h in (2, 4, 8)),
                           "ahead": "Llama" if llama < mixer else "mixer", "gap": abs(mixer - llama),
                           **{f"loss_{name}": loss(name) for name in models}})
