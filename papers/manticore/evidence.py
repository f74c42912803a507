"""The numbers behind each claim of `claims.yaml`, read from the Manticore results. Each function is an
extractor named by a claim: it takes the results by name (and the claim's `args`) and returns
`Evidence`; the verdict is `common.claims.build`'s.

The specialist rows (Figure 3's setting: two components pretrained on different genres) compare the
best losses of runs paired by seed, settle on the gap between the runs' validation curves, and hold
two computed checks: the projectors were pretrained until their loss flattened, and (for a row that
sets Manticore against its components) at a one-hot alpha the hybrid is the component it selects."""

from __future__ import annotations

import statistics

from common.claims.build import LR_CONTROL, Evidence, learning_rates
from common.claims.rules import above_chance, gap_changes, paired_differences, run_above_chance, spread
from common.errors import DataError

MATCH = 0.02  # "matches": within 2% of the reference's loss
FLAT = 0.01  # projector pretraining has flattened when its loss fell by less than this share over its last fifth
SETTLED = 0.75  # Figure 4's "stable from about 70M of 100M tokens": the budget nearest 70% of the whole


def pair_runs(res: dict, pair: str) -> list[dict]:
    """The runs of one pair (specialists, swapped, same_architecture), one per seed."""
    return [r for r in res["runs"] if r["pair"] == pair]


def _mix(run: dict) -> float:
    return run["loss"]["mix"]


def _curves(runs: list[dict]) -> list:
    return [r["curve"] for r in runs]


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
    """One seed of one pair: the best component alone, the best hybrid of the sweep, the best point
    of the sweep and the best search (the runs, with their curves)."""
    corners, interior = sweep_parts(run)
    component, hybrid = min(corners.values(), key=_mix), min(interior, key=_mix)
    summary = {"component": component, "hybrid": hybrid, "sweep_best": min(run["sweep"], key=_mix),
               "gain": _mix(component) - _mix(hybrid), "chance": run["chance"]["mix"]}
    if run["searched"]:
        summary["search_best"] = min(run["searched"].values(), key=_mix)
    return summary


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
    the component it selects: each corner must match, within MATCH of its loss, the same component
    fine-tuned alone in every seed. Where it does not, projector pretraining moved the hybrid's shared
    start by itself, and every hybrid arm with it."""
    worst = corner_offset(pair_runs(res, "specialists"))
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


def _control(against_components: bool) -> str:
    """The computed checks of a specialist row (`_failure`), in words."""
    return "projectors pretrained until their loss flattened" + (
        "; at a one-hot alpha the hybrid is the component it selects" if against_components else "")


def _failure(res: dict, against_components: bool, *more: str | None) -> str | None:
    """The computed checks a specialist row holds, joined: projectors flattened; for a row against
    the components, corners that are their components; and any `more`."""
    checks = [unflattened_projectors(pair_runs(res, "specialists")),
              corners_unlike_components(res) if against_components else None, *more]
    return "; and ".join(c for c in checks if c) or None


def _controls(res: dict) -> str:
    """The gain of the same sweep on the control pairs, and the better component at the hybrid's compute."""
    parts = []
    for pair, label in (("swapped", "genres swapped"), ("same_architecture", "same architecture")):
        if runs := pair_runs(res, pair):
            g = spread([pair_summary(r)["gain"] for r in runs])
            parts.append(f"{label} ({' + '.join(runs[0]['components'])}): gain {g['mean']:.3f} ± {g['std']:.3f}")
    main = pair_runs(res, "specialists")
    alone = [min(r["alone_at_hybrid_compute"].values(), key=_mix) for r in main if "alone_at_hybrid_compute" in r]
    if alone:
        a = spread([_mix(x) for x in alone])
        parts.append(f"the better component alone at the hybrid's compute ({alone[0]['steps']} steps): "
                     f"{a['mean']:.3f} ± {a['std']:.3f}")
    return "; ".join(parts) or "no control pair was run"


def _compare(res: dict, worse: list[dict], better: list[dict], names: tuple[str, str],
             against_components: bool, *more: str | None) -> Evidence:
    """Mixed-genre loss of `worse` - `better` runs per seed, settled on their curves' gap."""
    main = pair_runs(res, "specialists")
    a, b = [_mix(r) for r in worse], [_mix(r) for r in better]
    chance = main[0]["chance"]["mix"]
    return Evidence(arms=dict(zip(names, (a, b))), difference=paired_differences(a, b),
                    changes=gap_changes(_curves(worse), _curves(better)), learned=_learned([a, b], chance),
                    chance=chance, control=_control(against_components),
                    failure=_failure(res, against_components, *more),
                    facts={"components": ", ".join(main[0]["components"]), "controls": _controls(res),
                           "per_seed": per_seed(paired_differences(a, b))})


def per_seed(values: list[float]) -> str:
    """A difference's values, one per seed, for a row's text."""
    return ", ".join(f"{v:+.4f}" for v in values)


def hybrid_over_components(results: dict) -> Evidence:
    """Best component alone - best interior sweep point, per seed (Figure 3's region of the sweep)."""
    res = results["specialists"]
    seeds = [pair_summary(r) for r in pair_runs(res, "specialists")]
    return _compare(res, [s["component"] for s in seeds], [s["hybrid"] for s in seeds],
                    ("best component", "best hybrid of the sweep"), True)


def nas_over_components(results: dict) -> Evidence:
    """Per search variant and seed, 1 when the searched and retrained hybrid ends below the best
    component alone, else 0: whether the search landed in the region of the landscape that beats both
    components. Counted over seeds, not averaged: the searches of one seed land together, on one side
    of the landscape or the other, so their losses are a mixture of two clusters, not a spread around a
    mean. The variants of one algorithm (DARTS, DASH, GAEA) are grouped: one passing is the algorithm's."""
    res = results["specialists"]
    main = pair_runs(res, "specialists")
    if not main[0]["searched"]:
        return Evidence(missing="no search was run")
    component = [_mix(pair_summary(r)["component"]) for r in main]
    labels = list(main[0]["searched"])
    searched = {label: [_mix(r["searched"][label]) for r in main] for label in labels}
    chance = main[0]["chance"]["mix"]
    parts = {label: [float(s < c) for s, c in zip(runs, component)] for label, runs in searched.items()}
    counts = ", ".join(f"{label} {sum(hits):g}" for label, hits in parts.items())
    return Evidence(arms={"best component": component, **searched}, parts=parts,
                    groups={method: [label for label in labels if label.startswith(method + "_")]
                            for method in sorted({label.split("_")[0] for label in labels})},
                    learned=_learned([component, *searched.values()], chance),
                    chance=chance, control=_control(True), failure=_failure(res, True),
                    facts={"controls": _controls(res), "counts": f"{counts} of {len(component)}"})


def search_over_sweep(results: dict) -> Evidence:
    """Best sweep point - best search, per seed; a match is within MATCH of the sweep's loss."""
    res = results["specialists"]
    main = pair_runs(res, "specialists")
    if not main[0]["searched"]:
        return Evidence(missing="no search was run")
    seeds = [pair_summary(r) for r in main]
    evidence = _compare(res, [s["sweep_best"] for s in seeds], [s["search_best"] for s in seeds],
                        ("sweep best", "best search"), False, search_stayed_at_start(main))
    evidence.facts.update(margin=MATCH * statistics.fmean(evidence.arms["sweep best"]), match=MATCH)
    return evidence


def ensemble_gap(results: dict, against: str) -> Evidence:
    """The learned ensemble - the sweep's best point (`against: manticore`) or the better component
    alone (`component`), per seed."""
    res = results["specialists"]
    main = pair_runs(res, "specialists")
    if not all("ensemble" in r for r in main):
        return Evidence(missing="no ensemble was trained")
    seeds = [pair_summary(r) for r in main]
    other = [s["sweep_best" if against == "manticore" else "component"] for s in seeds]
    return _compare(res, [r["ensemble"] for r in main], other,
                    ("ensemble", "Manticore (sweep best)" if against == "manticore" else "best component"), True)


def search_variants(results: dict, worse: list[str], better: list[str]) -> Evidence:
    """The best of the `worse` search variants - the best of the `better` ones, per seed (Table 4)."""
    res = results["specialists"]
    main = pair_runs(res, "specialists")
    searched = set(main[0]["searched"])
    if not (set(worse) & searched and set(better) & searched):
        return Evidence(missing=f"the searches {', '.join(worse + better)} were not all run")

    def best(labels: list[str]) -> list[dict]:
        return [min((r["searched"][k] for k in labels if k in searched), key=_mix) for r in main]

    return _compare(res, best(worse), best(better), (" or ".join(worse), " or ".join(better)), False)


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


def task_gain(results: dict, task: str) -> Evidence:
    """Table 1's stand-in on one task: the better component alone - Manticore, per seed, on the task's
    held-out documents; beside it, the same on the control pairs."""
    res = results["specialists"]
    main = pair_runs(res, "specialists")
    if not all("tasks" in r for r in main):
        return Evidence(missing="no component was fine-tuned alone on the tasks (pairs.specialists.tasks is off)")
    arms, better = task_arms(main, task)
    name, alone = better_alone(arms, better)
    chance = main[0]["chance"][task]
    task_runs = [r["tasks"][task] for r in main]
    controls = []
    for pair, label in (("swapped", "genres swapped"), ("same_architecture", "same architecture")):
        runs = pair_runs(res, pair)
        if runs and all("tasks" in r for r in runs):
            c_arms, c_better = task_arms(runs, task)
            gain = spread(paired_differences(better_alone(c_arms, c_better)[1], c_arms["manticore"]))
            controls.append(f"{label} ({' + '.join(runs[0]['components'])}): better component - Manticore "
                            f"{gain['mean']:.3f} ± {gain['std']:.3f}")
    difference = paired_differences(alone, arms["manticore"])
    return Evidence(arms=arms, difference=difference,
                    changes=gap_changes([t["alone"][b]["curve"] for t, b in zip(task_runs, better)],
                                        [t["manticore"]["curve"] for t in task_runs]),
                    learned=_learned(list(arms.values()), chance), chance=chance, control=_control(True),
                    failure=_failure(res, True),
                    facts={"better": name, "components": ", ".join(main[0]["components"]),
                           "per_seed": per_seed(difference),
                           "controls": "; ".join(controls) or "no control pair was fine-tuned on the tasks"})


# ---------------------------------------------------------------------------------------------
# MAD and LRA from scratch (Tables 2, 3, 5, 6, 7): the MAD tables run every network on every seed of
# mad_tasks; the sizing runs say from which budget each network is above chance.

def mad_seed_rows(mad: dict, entry: str) -> list[dict]:
    """Task `entry`'s rows of the MAD tables, one per seed, in the order of the stage's seeds."""
    if "seeds" not in mad:  # results before the tables ran seeds (one row per task): earlier runs' records
        return [mad["tasks"][entry]]
    return [mad["tasks"][entry]["seeds"][str(seed)] for seed in mad["seeds"]]


def first_seed_row(mad: dict, entry: str) -> dict:
    """Task `entry`'s row of the first seed: the one whose search programs Figure 2 (right), as the
    paper ran one search per task."""
    return mad_seed_rows(mad, entry)[0]


def _alone(row: dict, name: str) -> dict:
    return row[name] if name in row else row["baselines"][name]


def mad_learned(results: dict, networks: list[str]) -> tuple[bool, str]:
    """Whether every one of `networks` (each trained alone) is above chance on every task and seed of
    the tables (the exact binomial test on the task's scored test positions, against the
    majority-class rate mad_sizing measured), and that reading in words, with the sizing runs'."""
    mad, sizing = results["mad_experiments"], results["mad_sizing"]
    alpha, learned, parts = sizing["config"]["alpha"], True, []
    for entry in mad["tasks"]:
        if entry not in sizing["tasks"]:
            raise DataError(f"mad_sizing.json has no chance level for {entry}; rerun mad_sizing with mad_tasks' "
                            "settings")
        task = sizing["tasks"][entry]
        cells = []
        for name in networks:
            accuracy = [_alone(row, name)["accuracy"] for row in mad_seed_rows(mad, entry)]
            at_chance = sum(not run_above_chance(a, task["scored_positions"], task["chance"], alpha) for a in accuracy)
            learned &= not at_chance
            cells.append(f"{name} {statistics.mean(accuracy):.2f}"
                         + (f" ({at_chance} of {len(accuracy)} seeds at chance)" if at_chance else ""))
        largest = max(sizing["summary"]["budgets"], default=0)
        sized = ", ".join(f"{n} {net['above_chance_from'] if net['above_chance_from'] is not None else f'>{largest}'}"
                          for n, net in task["networks"].items() if n in networks)
        parts.append(f"{entry.split('/')[1]} (chance {task['chance']:.2f}): {', '.join(cells)}"
                     + (f"; above chance from (sizing runs, seed {sizing['seed']}, budgets "
                        f"{sizing['summary']['budgets']}): {sized}" if sized else ""))
    text = (f"test accuracy of each network alone at the tables' {mad['steps']} steps, mean of {len(mad['seeds'])} "
            f"seeds: " + "; ".join(parts))
    return learned, text


def run_best_loss(row: dict, name: str) -> float:
    """The best test loss of run `name` of a table row: a network alone, Manticore's search, or a hybrid's."""
    if name == "manticore":
        return row["manticore"]["best_loss"]
    if name in row.get("hybrids", {}):
        return row["hybrids"][name]["search"]["best_loss"]
    return _alone(row, name)["best_loss"]


def mad_learning_rates(results: dict, runs: list[str]) -> tuple[str, str | None]:
    """The tables' rate and what `mad_lr_check` found for `runs` on each task, in words, and a failure
    naming each run and task whose best test loss is lower at another rate (`build.learning_rates`)."""
    mad, check = results["mad_experiments"], results.get("mad_lr_check")
    if check is None:  # an earlier run's results, before the check
        return "rates unchecked", None
    said, failures = [], []
    for entry, by_rate in check["tasks"].items():
        # Results from before per-run rates trained every run at the tables' rate.
        checked = {name: check.get("lr", {}).get(entry, {}).get(name, check["own_lr"]) for name in runs}
        trained = {name: mad.get("lr", {}).get(entry, {}).get(name, check["own_lr"]) for name in runs}
        row = mad["tasks"][entry]["seeds"][str(check["seed"])]
        # The check's rows are keyed by the tables' rate times a factor; each run trained at its own times it.
        factors = {rate: float(rate) / check["own_lr"] for rate in by_rate}
        task = {"seed": check["seed"], "factors": check["factors"], "own_lr": checked,
                "final_val_loss": {name: {f"{checked[name] * factors[rate]:g}": run_best_loss(other, name)
                                          for rate, other in by_rate.items()} for name in runs}}
        seeds = mad_seed_rows(mad, entry)
        words, failure = learning_rates(task, trained, {name: run_best_loss(row, name) for name in runs},
                                        {name: spread([run_best_loss(r, name) for r in seeds])["std"] for name in runs})
        said.append(f"{entry.split('/')[1]}: {words}")
        failures += [f"{entry.split('/')[1]}: {failure}"] if failure else []
    return "; ".join(said), "; ".join(failures) or None


def _mad(results: dict, networks: list[str], parts: dict[str, list[float]], runs: list[str]) -> Evidence:
    learned, reading = mad_learned(results, networks)
    rates, failure = mad_learning_rates(results, runs)
    # chance per task: the majority-class rate of its scored targets, as the sizing stage measured it
    chance = {entry.split("/")[1]: row["chance"] for entry, row in results["mad_sizing"]["tasks"].items()}
    control = LR_CONTROL if results.get("mad_lr_check", {}).get("factors") else None
    return Evidence(arms=parts, parts=parts, learned=learned, chance=chance, control=control, failure=failure,
                    facts={"reading": reading, "budget": results["mad_experiments"]["steps"], "learning_rates": rates})


def mad_over_components(results: dict) -> Evidence:
    """Table 2 (right), per task: the better component's best test loss - Manticore's, per seed."""
    mad = results["mad_experiments"]
    names = mad["components"]
    return _mad(results, names, {entry.split("/")[1]: [min(r[n]["best_loss"] for n in names) -
                                                       r["manticore"]["best_loss"] for r in mad_seed_rows(mad, entry)]
                                 for entry in mad["tasks"]}, [*names, "manticore"])


def _hybrid(mad: dict) -> tuple[str, dict] | None:
    return next(iter(mad.get("hybrids", {}).items()), None)


def mad_over_hybrids(results: dict) -> Evidence:
    """Table 2 (left), per task: the better existing hybrid's test loss - the Manticore hybrid's, per seed."""
    mad = results["mad_experiments"]
    if (hybrid := _hybrid(mad)) is None:
        return Evidence(missing="no Manticore hybrid of existing hybrids was trained")
    name, spec = hybrid
    evidence = _mad(results, list(dict.fromkeys([*mad["baselines"], *spec["components"]])),
                    {entry.split("/")[1]: [min(b["loss"] for b in r["baselines"].values()) -
                                           r["hybrids"][name][spec["compare"]]["loss"]
                                           for r in mad_seed_rows(mad, entry)]
                     for entry in mad["tasks"]}, [*mad["baselines"], name])
    evidence.facts["compare"] = spec["compare"]
    return evidence


def mad_discretized(results: dict) -> Evidence:
    """Table 5, per task: the discretized and retrained hybrid's test loss over the searched one's,
    - 1, per seed."""
    mad = results["mad_experiments"]
    if (hybrid := _hybrid(mad)) is None or "discretized" not in hybrid[1]["retrain"]:
        return Evidence(missing="no discretized hybrid was retrained")
    name, spec = hybrid
    return _mad(results, spec["components"],
                {entry.split("/")[1]: [r["hybrids"][name]["discretized"]["loss"] /
                                       r["hybrids"][name]["search"]["loss"] - 1 for r in mad_seed_rows(mad, entry)]
                 for entry in mad["tasks"]}, [name])


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


def _lra(results: dict, task: str) -> tuple[dict, dict, bool, str, dict | None] | None:
    lra, sizing = results["lra_experiments"], results["lra_sizing"]
    if task not in lra["tasks"]:
        return None
    row = lra["tasks"][task]
    above = lra_runs_above_chance(row, sizing["alpha"])
    reading = (f"{task} at {row['steps']} steps, {len(row['seeds'])} seed(s): "
               + ", ".join(f"{c} {m['accuracy']:.3f} ± {m['accuracy_std']:.3f}{'' if above[c] else ' (at chance)'}"
                           for c, m in row["models"].items() if m["runs"])
               + f"; chance {row['models']['manticore']['majority_rate']:.3f}")
    sized = sizing["tasks"].get(task)
    if sized is not None:
        reading += "; " + lra_sizing_reading(task, sized)
    accuracies = {c: [r["accuracy"] for r in m["seeds"]] for c, m in row["models"].items() if m["runs"]}
    return row, accuracies, all(above.values()), reading, sized


def lra_searched(results: dict, task: str) -> Evidence:
    """Table 3 on one task: Manticore's validation accuracy - the better component's (by mean), per
    seed; the components must have stopped rising by the table's budget (lra_sizing)."""
    if (lra := _lra(results, task)) is None:
        return Evidence(missing=f"the lra_experiments stage did not run {task}")
    row, accuracies, learned, reading, sized = lra
    flat = sized["all_flat_from"] if sized is not None else row["steps"]
    rising = (f"some component's accuracy still rises by more than noise up to {sized['budgets'][-1]} steps"
              if flat is None else f"the components' accuracy still rises until {flat} steps (lra_sizing)"
              if flat > row["steps"] else None)
    return Evidence(arms=accuracies, difference=row["manticore_minus_best"], learned=learned,
                    chance=row["models"]["manticore"]["majority_rate"], failure=rising, facts={"reading": reading})


def lra_programmed(results: dict, task: str) -> Evidence:
    """Table 7 on one task: the hybrid with the unreadable component programmed out - the component
    that reads the task alone, per seed."""
    if (lra := _lra(results, task)) is None:
        return Evidence(missing=f"the lra_experiments stage did not run {task}")
    row, accuracies, learned, reading, _ = lra
    reader = next(c for c in accuracies if c != "manticore")
    sized = "; ".join(lra_sizing_reading(n, r) for n, r in results["lra_sizing"]["tasks"].items())
    return Evidence(arms=accuracies, difference=paired_differences(accuracies["manticore"], accuracies[reader]),
                    learned=learned, chance=row["models"]["manticore"]["majority_rate"],
                    facts={"reading": f"{reading}; {', '.join(row['excluded'])} programmed out; {sized}",
                           "margin": results["lra_experiments"]["equivalence_margin"]})


def programmed_arms(res: dict) -> dict[str, list[float]]:
    """Figure 2 (right)'s arms, one value per seed: the programmed hybrid, the better component alone
    and the better frankenmerge of that seed."""
    runs = res["runs"]
    return {"programmed": [r["programmed_val_loss"] for r in runs],
            "better component alone": [min(r["components_alone"].values()) for r in runs],
            "better frankenmerge": [min(r["frankenmerges"].values()) for r in runs]}


def programmed_hybrid(results: dict) -> Evidence:
    """Figure 2 (right): the better component alone - the MAD-programmed hybrid, per seed. The
    programmed alphas are the mean of the MAD searches' alphas, so they say something only where those
    searches learned their tasks (accuracy above chance, exact binomial test): the computed check."""
    res, mad, sizing = results["programmed"], results["mad_experiments"], results["mad_sizing"]
    searches = {t: first_seed_row(mad, t)["programming"] for t in res["mad_searched"]}
    if unsized := [t for t in searches if t not in sizing["tasks"]]:
        raise DataError(f"mad_sizing.json has no chance level for {', '.join(unsized)}; rerun mad_sizing with "
                        "mad_experiments' settings")
    chance = {t: sizing["tasks"][t]["chance"] for t in searches}
    learned = {t: run_above_chance(r["accuracy"], r["scored_positions"], chance[t], sizing["config"]["alpha"])
               for t, r in searches.items()}
    at_chance = [t.split("/")[1] for t, ok in learned.items() if not ok]
    steps = "/".join(map(str, sorted({r["steps"] for r in searches.values()})))
    arms = programmed_arms(res)
    summary = res["summary"]
    return Evidence(arms=arms, difference=paired_differences(arms["better component alone"], arms["programmed"]),
                    learned=_learned(list(arms.values()), summary["chance"]), chance=summary["chance"],
                    failure=(f"the MAD searches that program the alphas sit at chance on {len(at_chance)} of "
                             f"{len(learned)} tasks at {steps} steps ({', '.join(at_chance)})") if at_chance else None,
                    facts={"frankenmerges": ", ".join(summary["frankenmerges"]),
                           "searched": "; ".join(f"{t.split('/')[1]} {r['accuracy']:.3f} (chance {chance[t]:.3f}, "
                                                 f"{'above' if learned[t] else 'at'})" for t, r in searches.items())})


def projector_budgets(results: dict) -> Evidence:
    """Figure 4's reading: the sweep's best alpha at each projector-pretraining budget."""
    res = results["projector_budget"]
    best = {r["best_alpha"] for r in res["budgets"]}
    shows = (f"{res['components'][int(next(iter(best)))]} alone is the best point at every budget: no hybrid optimum "
             "forms" if len(best) == 1 and best <= {0.0, 1.0} else
             f"the best alpha is stable from {res['summary']['stable_from_tokens']:,} tokens")
    return Evidence(facts={"components": ", ".join(res["components"]), "shows": shows,
                           "reading": ", ".join(f"{r['best_alpha']:.2f} at {r['tokens']:,} tokens"
                                                for r in res["budgets"])})


def best_alpha(sweep: list[dict]) -> tuple[float, ...]:
    """The sweep's best point, as the second component's weight in each block."""
    return tuple(row[1] for row in min(sweep, key=_mix)["alphas"])


def settled_from(row: dict) -> tuple[int, bool]:
    """One seed of Figure 4: the first projector budget from which the sweep's best alpha stays what it
    is at the last, and whether it was ever anything else (else there is nothing that settled)."""
    best = [(budget["steps"], best_alpha(budget["sweep"])) for budget in row["budgets"]]
    final = best[-1][1]
    first = next(step for i, (step, _) in enumerate(best) if all(alpha == final for _, alpha in best[i:]))
    return first, any(alpha != final for _, alpha in best)


def figure4_optima(results: dict) -> Evidence:
    """Figure 4, per seed: 1 when the sweep's best alpha moved with projector pretraining and is the
    same from SETTLED of it to the end, else 0. Counted over seeds, not averaged: the best alpha
    moves on the sweep's grid, so a seed's budget of settling is one of a few values."""
    rows = results["specialists"].get("figure4") or []
    if not rows:
        return Evidence(missing="the specialists stage ran no Figure 4 (figure4.pair is null)")
    hits, reading, shares, moves = [], [], [], []
    for row in rows:
        first, moved = settled_from(row)
        last = row["budgets"][-1]["steps"]
        hits.append(moved and first <= SETTLED * last)
        shares.append(first / last)
        moves.append(moved)
        path = " -> ".join(", ".join(f"{a:g}" for a in best_alpha(b["sweep"])) for b in row["budgets"])
        reading.append(f"seed {row['seed']}: {path}" + (f" (settled from {first:,} of {last:,} steps)" if moved else
                                                          " (never moved)"))
    # Each point of each budget's sweep below each seed's unigram loss, over the seeds.
    points = zip(*[[_mix(p) - row["chance"]["mix"] for b in row["budgets"] for p in b["sweep"]] for row in rows])
    learned = all(above_chance(list(gaps), 0.0, higher_is_better=False) for gaps in points)
    never = None if any(moves) else "the best alpha never moved with projector pretraining in any seed: nothing settled"
    budgets = ", ".join(f"{b['steps']:,}" for b in rows[0]["budgets"])
    return Evidence(arms={"settled from (share of the projector steps)": shares}, hits=sum(hits), n=len(rows),
                    learned=learned, chance=rows[0]["chance"]["mix"],
                    control="projectors pretrained until their loss flattened; the best alpha moved in some seed",
                    failure="; and ".join(c for c in (unflattened_projectors(rows), never) if c) or None,
                    facts={"components": " + ".join(rows[0]["components"]), "budgets": budgets,
                           "reading": "; ".join(reading), "settled": f"{SETTLED:.0%}",
                           "count": f"{sum(hits)} of {len(rows)}"})
