"""Every paper's ledger, built by one function from its `claims.yaml` and its results.

A paper declares its claims as data in `papers/<paper>/claims.yaml`: for each claim its id, the
paper's wording and where it says it, the paper's number, the metric, the extractor that reads its
numbers, the judge, the chance level, the control and the seed count declared before the run. A
paper's code only extracts numbers: an extractor is a function of the paper's `evidence` module,
named in the YAML, that takes the paper's results (and the claim's `args`) and returns `Evidence`.
`build_ledger` hands those numbers to the rules of `common.claims.rules`; nothing else sets a
verdict. The YAML's text fields are format strings over the extractor's `facts` and the claim's
`args` (`{target_loss:.3f}`), so that numbers in the prose come from the results.

The judges:

- `difference`: a claimed sign (`sign: +1` larger, `-1` smaller) of the per-seed difference, and the
  paper's size where it is comparable with ours (`paper_effect`, `size_tolerance`; without them the
  row judges direction only, and its `size` says why). With `parts`, several differences, each
  judged so: the row holds when all do, or when `at_least` of them (or of the extractor's groups) do:
  a number, `most` (more than half) or `all but N`, the last two for claims worded so, whose parts
  differ between profiles (the MAD tasks one profile runs).
  `size_when` conditions over the facts (as for `exact`) must also hold for `reproduced`; where one
  fails, the row is `direction reproduced` when every seed points the paper's way.
- `equivalence` and `non_inferiority`, with their `margin` (a number, or the name of a fact).
- `within`: a value claimed to lie in a `band` (near one end of its `scale`), on its seeds' interval.
- `k_of_n`: an outcome in more than `share` of the seeds; with `parts` (per part, 1 or 0 per seed),
  each part counted so and the parts counted as for `difference`.
- `detector`: an event that happens (`claimed: true`) or never happens in every run, read by a
  detector that must fire on its constructed positive case.
- `count`: a claim that holds on `at_least` of the claims it names (`of`: "most tasks").
- `exact`: counts and structural properties, no seeds: `reproduced_when` conditions over the facts
  (`"forward_off <= 0.02"`), then `direction_when`; else `not reproduced`.
- `needs_paper_scale`: its `why` and the cheapest `evidence` measured here.

Every trained row is settled on its gap's curve when the extractor gives the per-seed `changes`,
gated on its `control` (an earlier claim's id) and on the extractor's computed check (its `control`,
failed as `failure`), which the ledger names as the row's control where the claim names none.
A row declared `judged_at` some profiles is `needs paper scale` below them, with its `why` and
`evidence`; so is a row whose `earlier_run` stage (or model of it) trained nothing at this profile,
its text formatted with the facts of that stage's last run (`common.claims.earlier`). A claim scoped
to some profiles' experiments (`profiles`) has no row at the others. A probe that can only refute
a claim says why in `cannot_confirm` (its `reproduced` is then `inconclusive`), one that can only
confirm it in `cannot_refute`. A claim reads the first `seeds` seeds it declared, and fewer make it
`inconclusive`.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from common.claims import rules
from common.claims.ledger import check_ledger, claim_entry
from common.errors import ConfigError

JUDGES = ("difference", "equivalence", "non_inferiority", "within", "k_of_n", "detector", "exact", "count",
          "needs_paper_scale")
KEYS = {"id", "claim", "where", "paper_value", "metric", "extract", "args", "judge", "sign", "paper_effect",
        "size_tolerance", "size", "margin", "share", "claimed", "what", "reproduced_when", "direction_when",
        "chance", "control", "context", "note", "seeds", "trained", "why", "evidence", "judged_at", "band", "scale",
        "size_when", "cannot_confirm", "cannot_refute", "at_least", "of", "profiles", "earlier_run"}
REQUIRED = {"id", "claim", "where", "judge"}
OPERATORS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "<": operator.lt, ">": operator.gt}
CONDITION = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|>=|==|<|>)\s*(\S+)\s*$")


@dataclass
class Evidence:
    """The numbers an extractor reads from a paper's results for one claim. `arms`: each compared
    model's value per seed; `difference`: the per-seed difference the judge reads (ours minus the
    comparison); `parts`: several such differences, each judged (`part_changes`: their own gaps'
    movement; `groups`: parts of which one passing is enough, as the variants of one algorithm);
    `changes`: per seed, how much the gap moved over the last fifth of its curve
    (`rules.gap_changes`), for settling; `learned`: every model measurably above chance;
    `control`: the computed check that gates the row, in words, whether it passed or not (the
    ledger's control where the claim names no claim); `failure`: that check failed, in words;
    `hits` of `n` seeds for `k_of_n`; `fires` per run and `fires_on_positive` for a detector;
    `facts`: named numbers for the claim's text and `exact` conditions; `missing`: why this
    configuration measured nothing for the claim (a smoke run with one MoE layer)."""

    arms: dict[str, list[float]] = field(default_factory=dict)
    difference: list[float] | None = None
    parts: dict[str, list[float]] | None = None
    part_changes: dict[str, list[float]] | None = None
    groups: dict[str, list[str]] | None = None
    changes: list[float] | None = None
    learned: bool = True
    chance: float | dict[str, float] | None = None
    control: str | None = None
    failure: str | None = None
    hits: int | None = None
    n: int | None = None
    fires: list[bool] | None = None
    fires_on_positive: bool | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None

    def first(self, n: int) -> Evidence:
        """The evidence of the first `n` seeds only: a claim reads the seeds it declared, whatever
        more its stage ran for other claims."""
        def cut(values):
            return None if values is None else list(values)[:n]

        def cut_all(by_name):
            return None if by_name is None else {name: list(values)[:n] for name, values in by_name.items()}

        return replace(self, arms=cut_all(self.arms), difference=cut(self.difference), parts=cut_all(self.parts),
                       part_changes=cut_all(self.part_changes), changes=cut(self.changes), fires=cut(self.fires))


def history_curves(model: dict, key: str = "val/loss") -> list[list[tuple[int, float]]]:
    """Each seed's curve of `key`, (step, value), from a trained model's results as the training
    entry point logs them (`model["seeds"][seed]["history"]`): the curves `rules.gap_changes` reads."""
    return [[(row["step"], row[key]) for row in run["history"] if key in row] for run in model["seeds"].values()]


def on_common_seeds(*models: dict) -> list[dict]:
    """Each model (a results entry with `seeds`, by seed) with only the seeds all of them trained, in
    seed order: a model with extra seeds pairs with another on the seeds both have."""
    common = sorted(set.intersection(*(set(model["seeds"]) for model in models)), key=int)
    return [{**model, "seeds": {seed: model["seeds"][seed] for seed in common}} for model in models]


LR_CONTROL = "lr_check: no compared model does better at another of the checked rates by more than its seeds' spread"


def learning_rates(check: dict, own_lr: dict[str, float], own_loss: dict[str, float],
                   own_spread: dict[str, float]) -> tuple[str, str | None]:
    """The rates the models trained at and what a learning-rate check found, in words, and a
    failure when a model did better at a checked rate than at its own, or the check was of another
    rate than the model trained at. `check`: the check's seed, its `rates` (or `factors` of each
    model's own rate), each model's `own_lr` and its `final_val_loss` at each other rate (keyed by
    the rate; a paper's `lr_check` stage writes these); `own_lr`, `own_loss` and `own_spread`: each
    compared model's rate, its final validation loss at the check's seed and the standard deviation
    of that loss over the comparison's seeds, as the comparison trained it. The check trains one
    seed, so a rate counts as better only where its loss is lower by more than that spread: a
    smaller difference is what another seed at the same rate could give. A model the check did not
    train is said to be unchecked."""
    trained = ", ".join(f"{name} at lr {lr:g}" for name, lr in own_lr.items())
    tried = check.get("factors") or check.get("rates")
    if not tried:
        return trained + ", rates unchecked", None
    unchecked = [name for name in own_lr if name not in check["own_lr"]]
    if stale := [name for name in own_lr if name not in unchecked and check["own_lr"][name] != own_lr[name]]:
        return trained, f"lr_check checked {stale[0]} against another rate than it trained at; rerun it"
    worse, close = [], []
    for name in [name for name in own_lr if name not in unchecked]:
        losses = {float(lr): loss for lr, loss in check["final_val_loss"][name].items()}
        rate = min(losses, key=losses.get)
        gain = own_loss[name] - losses[rate]
        if gain > own_spread[name]:
            worse.append(f"{name} does better at lr {rate:g} than at its {own_lr[name]:g} (by {gain:.3g}, more than "
                         f"its seeds' spread {own_spread[name]:.3g})")
        elif gain > 0:
            close.append(f"{name} at lr {rate:g} by {gain:.3g}, within its seeds' spread {own_spread[name]:.3g}")
    rates = ", ".join(f"{rate:g}" for rate in tried) + (" times its rate" if "factors" in check else "")
    found = f"checked at {rates}" if worse else f"each its best of {rates}"
    said = f"{trained}, {found} at seed {check['seed']}"
    if unchecked:
        checked = [name for name in own_lr if name not in unchecked]
        said = (f"{trained}; {', '.join(checked)} {found} at seed {check['seed']}; {', '.join(unchecked)} unchecked"
                if checked else f"{trained}, unchecked")
    if close:
        said += f" (lower but not better: {'; '.join(close)})"
    return said, "; ".join(worse) + " (lr_check)" if worse else None


def load_spec(path: Path) -> dict[str, Any]:
    """A paper's `claims.yaml`, checked: a spec error is one line naming the claim and the key."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such claims file")
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("claims"), list) or not isinstance(spec.get("paper"), str):
        raise ConfigError(f"{path}: must hold `paper` (a name), `results` and `claims` (a list)")
    if not isinstance(spec.get("results"), list) or not all(isinstance(r, str) for r in spec["results"]):
        raise ConfigError(f"{path}: `results` must list the results files the claims read, by name")
    seen: set[str] = set()
    for number, claim in enumerate(spec["claims"]):
        name = claim.get("id", f"#{number}") if isinstance(claim, dict) else f"#{number}"
        check_claim(claim, name, seen, path)
        seen.add(name)
    return spec


def check_claim(claim: Any, name: str, earlier: set[str], path: Path) -> None:
    def fail(problem: str) -> None:
        raise ConfigError(f"{path}: claim {name}: {problem}")

    if not isinstance(claim, dict):
        fail("not a mapping of keys")
    if unknown := sorted(set(claim) - KEYS):
        fail(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    if missing := sorted(k for k in REQUIRED if not claim.get(k)):
        fail(f"missing {', '.join(missing)}")
    if name in earlier:
        fail("the id repeats")
    judge = claim["judge"]
    if judge not in JUDGES:
        fail(f"judge {judge!r}; allowed: {', '.join(JUDGES)}")
    if judge == "needs_paper_scale" or claim.get("judged_at") or claim.get("earlier_run"):
        if not claim.get("why") or not claim.get("evidence"):
            fail("a row at paper scale gives `why` and the cheapest `evidence` measured here")
    if (where := claim.get("earlier_run")) is not None and (
            not isinstance(where, dict) or not {"commit", "stage"} <= set(where) <= {"commit", "stage", "model"}):
        fail("earlier_run is {commit: <hash>, stage: <the stage that trained it>, model: <optional: one model>}")
    if judge == "needs_paper_scale":
        return
    if judge == "count":
        if not isinstance(claim.get("of"), list) or not set(claim["of"]) <= earlier:
            fail("judge count names the claims it counts in `of`, each declared above it")
        if not isinstance(claim.get("at_least"), int) or not 1 <= claim["at_least"] <= len(claim["of"]):
            fail(f"judge count needs `at_least`, a whole number from 1 to {len(claim['of'])}")
    elif not claim.get("extract"):
        fail("a judged claim names its `extract` function")
    if not claim.get("metric"):
        fail("a judged claim names its `metric`")
    if judge != "count" and claim.get("at_least") is not None:
        try:
            parts_needed(claim["at_least"], 1_000)
        except ValueError:
            fail(f"at_least must be a whole number of at least 1, `most` or `all but N`, got {claim['at_least']!r}")
    if judge == "difference" and claim.get("sign") not in (1, -1):
        fail(f"sign must be +1 (larger) or -1 (smaller), got {claim.get('sign')!r}")
    if judge == "difference" and claim.get("paper_effect") is None and not claim.get("size"):
        fail("a difference without a comparable `paper_effect` says in `size` why it judges direction only")
    if judge == "within" and not (isinstance(claim.get("band"), list) and len(claim["band"]) == 2):
        fail("judge within needs its `band`, [low, high]")
    if judge in ("equivalence", "non_inferiority") and claim.get("margin") is None:
        fail(f"judge {judge} needs a `margin`")
    if judge == "detector" and (not isinstance(claim.get("claimed"), bool) or not claim.get("what")):
        fail("judge detector needs `claimed` (true or false) and `what` it detects")
    for key in ("reproduced_when", "direction_when", "size_when"):
        for condition in claim.get(key) or []:
            if not isinstance(condition, str) or not CONDITION.match(condition):
                fail(f"{key}: {condition!r} is not `<fact> <op> <number>` with op one of {', '.join(OPERATORS)}")
    if judge == "exact" and not claim.get("reproduced_when"):
        fail("judge exact needs `reproduced_when` conditions")
    if claim.get("size_when") and judge != "difference":
        fail("`size_when` is for judge difference")
    if claim.get("trained", True) and judge != "exact" and not isinstance(claim.get("seeds"), int):
        fail("a trained claim declares its `seeds` (a whole number), before the run")
    if (control := claim.get("control")) is not None and control not in earlier:
        fail(f"control {control!r} is not a claim declared above it")


def text(template: str | None, values: dict[str, Any], name: str) -> str | None:
    """A text field with its `{fact}` fields filled; an unknown field is one line naming both."""
    if template is None:
        return None
    try:
        return str(template).format_map(values)
    except (KeyError, IndexError, ValueError) as err:
        raise ConfigError(f"claim {name}: the text {str(template)[:50]!r} names {err}, which its extractor does "
                          f"not give (it gives: {', '.join(sorted(values))})") from None


def read_conditions(claim: dict[str, Any], conditions: list[str], facts: dict[str, Any]) -> tuple[bool, str]:
    """Whether every condition (`<fact> <op> <number>`) holds over the facts, and each one read."""
    held, shown = [], []
    for condition in conditions:
        fact, op, bound = CONDITION.match(condition).groups()
        if fact not in facts:
            raise ConfigError(f"claim {claim['id']}: condition {condition!r} names {fact!r}, which its extractor "
                              f"does not give (it gives: {', '.join(sorted(facts))})")
        held.append(OPERATORS[op](facts[fact], float(bound)))
        shown.append(f"{fact} = {facts[fact]:.4g} ({op} {bound}: {'holds' if held[-1] else 'fails'})")
    return all(held), "; ".join(shown)


def judge_exact(claim: dict[str, Any], facts: dict[str, Any]) -> rules.Judgement:
    """`reproduced` when every `reproduced_when` condition holds, `direction reproduced` when every
    `direction_when` one does, else `not reproduced`; why shows each condition read."""
    reproduced, why = read_conditions(claim, claim["reproduced_when"], facts)
    if reproduced:
        return "reproduced", why
    if claim.get("direction_when"):
        direction, why_direction = read_conditions(claim, claim["direction_when"], facts)
        if direction:
            return "direction reproduced", f"{why}; in direction, {why_direction}"
    return "not reproduced", why


def judge_size(judgement: rules.Judgement, claim: dict[str, Any], evidence: Evidence) -> rules.Judgement:
    """A `reproduced` difference whose `size_when` conditions fail: `direction reproduced` when every
    seed points the paper's way, else `inconclusive`."""
    verdict, why = judgement
    if verdict != "reproduced" or not claim.get("size_when"):
        return judgement
    holds, shown = read_conditions(claim, claim["size_when"], evidence.facts)
    if holds:
        return verdict, f"{why}; {shown}"
    if all(d * claim["sign"] > 0 for d in evidence.difference):
        return "direction reproduced", f"{why}, but not its size: {shown}"
    return "inconclusive", f"{why}, but not its size ({shown}), and not every seed points the paper's way"


def one_sided(judgement: rules.Judgement, claim: dict[str, Any]) -> rules.Judgement:
    """A probe that can only refute (`cannot_confirm`) or only confirm (`cannot_refute`) its claim:
    the verdict it cannot reach is `inconclusive`, with the claim's reason."""
    verdict, why = judgement
    if verdict in rules.PASSING and claim.get("cannot_confirm"):
        return "inconclusive", f"{claim['cannot_confirm']}; the rules alone would say {verdict}: {why}"
    if verdict == "not reproduced" and claim.get("cannot_refute"):
        return "inconclusive", f"{claim['cannot_refute']}; the rules alone would say {verdict}: {why}"
    return judgement


def interval_judge(claim: dict[str, Any], evidence: Evidence,
                   margin: float | None) -> tuple[Callable[[list[float]], rules.Judgement], tuple[float, ...]]:
    """The judge of a row read on an interval, as a function of the per-seed differences, and its
    decision boundaries."""
    kind = claim["judge"]
    if kind == "within":
        scale = tuple(claim.get("scale", (-math.inf, math.inf)))
        return (lambda d: rules.judge_within(d, tuple(claim["band"]), scale)), tuple(claim["band"])
    if kind == "difference":
        return (lambda d: rules.judge_difference(d, claim["sign"], above_chance_ok=evidence.learned,
                                                 paper_effect=claim.get("paper_effect"),
                                                 size_tolerance=claim.get("size_tolerance", 0.5))), (0.0,)
    if kind == "equivalence":
        return (lambda d: rules.judge_equivalence(d, margin, above_chance_ok=evidence.learned)), \
            rules.boundaries(kind, margin)
    return (lambda d: rules.judge_non_inferiority(d, margin, above_chance_ok=evidence.learned)), \
        rules.boundaries(kind, margin)


def judge_parts(judge: Callable[[list[float]], rules.Judgement], evidence: Evidence, bounds: tuple[float, ...],
                at_least: int | str | None) -> tuple[rules.Judgement, float | None]:
    """Each part judged on its interval (and settled on its own curve where the evidence gives one),
    then the parts counted by `judge_groups`. The margin is the smallest of the parts', for a row that
    needs them all."""
    judged = {}
    for name, values in evidence.parts.items():
        judged[name] = judge(values)
        if name in (evidence.part_changes or {}):
            judged[name] = rules.settle(judged[name], judge, values, evidence.part_changes[name])
    judgement, needed, groups = judge_groups(judged, evidence.groups, at_least)
    margins = [rules.margin(*rules.interval(values), bounds) for values in evidence.parts.values()]
    known = [m for m in margins if m is not None]
    return judgement, (min(known) if len(known) == len(margins) and needed == len(groups) else None)


def judge_groups(judged: dict[str, rules.Judgement], groups: dict[str, list[str]] | None,
                 at_least: int | str | None) -> tuple[rules.Judgement, int, dict[str, list[str]]]:
    """Parts already judged, counted: a group of parts passes when one of its parts does and fails
    when all do not reproduce (each part is its own group unless `groups` says otherwise); the row
    needs `at_least` passing groups (all, by default): `reproduced` when it has them (`direction
    reproduced` when one of them passes only in direction), `not reproduced` when too few can still
    pass, else `inconclusive`. Also the groups needed and the groups."""
    named = groups or {name: [name] for name in judged}
    needed = parts_needed(at_least, len(named))
    passing = [g for g, names in named.items() if any(judged[n][0] in rules.PASSING for n in names)]
    failing = [g for g, names in named.items() if all(judged[n][0] == "not reproduced" for n in names)]
    if len(passing) >= needed:
        sized = sum(any(judged[n][0] == "reproduced" for n in named[g]) for g in passing)
        verdict = "reproduced" if sized >= needed else "direction reproduced"
    elif len(named) - len(failing) < needed:
        verdict = "not reproduced"
    else:
        verdict = "inconclusive"
    why = "; ".join(f"{name}: {why}" for name, (_, why) in judged.items())
    if needed < len(named) or groups:
        why = f"{len(passing)} of {len(named)} pass, at least {needed} needed ({why})"
    return (verdict, why), needed, named


def parts_needed(at_least: int | str | None, n: int) -> int:
    """How many of `n` parts a row needs: all (None), a number, `most` (more than half) or `all but N`."""
    if at_least is None:
        return n
    if isinstance(at_least, int) and not isinstance(at_least, bool) and at_least >= 1:
        return at_least
    if at_least == "most":
        return n // 2 + 1
    count = at_least.removeprefix("all but ") if isinstance(at_least, str) else ""
    if at_least != count and count.isdigit() and int(count) >= 1:
        return max(1, n - int(count))
    raise ValueError(f"at_least: {at_least!r}")


def judge_count(claim: dict[str, Any], verdicts: dict[str, str]) -> rules.Judgement:
    """A claim that holds on `at_least` of the claims it counts (`of`, "most tasks"): `reproduced` when
    that many pass, `not reproduced` when too few can still pass, else `inconclusive`."""
    counted = {name: verdicts.get(name, "not judged here") for name in claim["of"]}
    passing = [name for name, verdict in counted.items() if verdict in rules.PASSING]
    failing = [name for name, verdict in counted.items() if verdict == "not reproduced"]
    needed = claim["at_least"]
    verdict = ("reproduced" if len(passing) >= needed else
               "not reproduced" if len(counted) - len(failing) < needed else "inconclusive")
    listed = "; ".join(f"{name}: {v}" for name, v in counted.items())
    return verdict, f"{len(passing)} of {len(counted)} pass, at least {needed} needed ({listed})"


def seed_count(evidence: Evidence) -> int | None:
    """How many seeds (or runs) the evidence holds, the fewest over its parts."""
    counts = [len(v) for v in (evidence.parts or {}).values()]
    if evidence.difference is not None:
        counts.append(len(evidence.difference))
    if evidence.n is not None:
        counts.append(evidence.n)
    if evidence.fires is not None:
        counts.append(len(evidence.fires))
    if not counts:
        counts = [len(v) for v in evidence.arms.values()]
    return min(counts) if counts else None


def judge_claim(claim: dict[str, Any], evidence: Evidence,
                verdicts: dict[str, str]) -> tuple[rules.Judgement, float | None]:
    """The verdict on one claim from its evidence, and its margin (None for a row not read on an
    interval). `verdicts`: those of the claims above it, for its control."""
    kind, name = claim["judge"], claim["id"]
    values = evidence.facts
    margin_value = claim.get("margin")
    if isinstance(margin_value, str):  # the name of a fact: a margin the experiment measured
        if margin_value not in values:
            raise ConfigError(f"claim {name}: margin {margin_value!r} is neither a number nor a fact its extractor "
                              f"gives (it gives: {', '.join(sorted(values))})")
        margin_value = values[margin_value]
    margin = None
    declared, held = claim.get("seeds"), seed_count(evidence)
    if kind == "exact":
        judgement = judge_exact(claim, evidence.facts)
    elif kind == "count":
        judgement = judge_count(claim, verdicts)
    elif kind == "k_of_n" and evidence.parts is not None:  # per part, a 1 or 0 per seed: the outcome or not
        share = claim.get("share", 0.5)
        judged = {name: (rules.judge_k_of_n(int(sum(hits)), len(hits), share)[0], f"{int(sum(hits))} of {len(hits)}")
                  for name, hits in evidence.parts.items()}
        verdict, why = judge_groups(judged, evidence.groups, claim.get("at_least"))[0]
        judgement = verdict, (f"{why}; each part's count by the exact binomial test against a rate of {share:.0%}, "
                              f"which a unanimous count decides from {rules.seeds_to_decide(share)} seeds")
    elif kind == "k_of_n":
        judgement = rules.judge_k_of_n(evidence.hits, evidence.n, claim.get("share", 0.5))
    elif kind == "detector":
        judgement = rules.judge_detector(evidence.fires, claim["claimed"], bool(evidence.fires_on_positive),
                                         claim["what"], above_chance_ok=evidence.learned)
    else:
        judge, bounds = interval_judge(claim, evidence, margin_value)
        if evidence.parts is not None:
            judgement, margin = judge_parts(judge, evidence, bounds, claim.get("at_least"))
        else:
            judgement = judge(evidence.difference)
            low_high = rules.interval(evidence.difference)
            if kind == "within":
                low_high = rules.clipped_interval(evidence.difference, tuple(claim.get("scale", (-math.inf, math.inf))))
            margin = rules.margin(*low_high, bounds)
            if evidence.changes is not None:
                judgement = rules.settle(judgement, judge, evidence.difference, evidence.changes)
            if kind == "difference":
                judgement = judge_size(judgement, claim, evidence)
    if kind == "k_of_n" and not evidence.learned:  # a count of outcomes of models at chance says nothing
        judgement = rules.require(judgement, "a model is not measurably above chance")
    judgement = one_sided(judgement, claim)
    if declared is not None and held is not None and held < declared:
        judgement = rules.require(judgement, f"{held} of the {declared} seeds declared for this claim")
    judgement = rules.require(judgement, evidence.failure)
    if evidence.failure and evidence.failure not in judgement[1]:  # undecided already: say the check failed too
        judgement = (judgement[0], f"{judgement[1]}; and {evidence.failure}")
    if claim.get("control"):
        judgement = rules.gate(judgement, claim["control"], verdicts.get(claim["control"], "not judged here"))
    return judgement, margin


def build_ledger(spec: dict[str, Any], results: dict[str, dict], extractors: ModuleType,
                 profile: str) -> list[dict]:
    """Every claim of `spec` (a loaded `claims.yaml`) as a ledger entry, judged on what its extractor
    in `extractors` reads from `results`, in the spec's order."""
    entries, verdicts = [], {}
    for claim in spec["claims"]:
        name, kind = claim["id"], claim["judge"]
        if claim.get("profiles") and profile not in claim["profiles"]:
            continue  # a claim of another profile's experiments (a task only the paper profile runs)
        fields = dict(id=name, paper=spec["paper"], profile=profile, claim=claim["claim"], where=claim["where"],
                      paper_value=claim.get("paper_value"), trained=claim.get("trained", kind != "exact"))
        earlier = earlier_run(claim, results)
        at_scale = (kind == "needs_paper_scale" or (claim.get("judged_at") and profile not in claim["judged_at"])
                    or earlier is not None)
        evidence = Evidence(facts=earlier) if earlier is not None else (
            extract(claim, extractors, results) if claim.get("extract") else Evidence())
        if claim.get("seeds") and (seed_count(evidence) or 0) > claim["seeds"]:
            evidence = evidence.first(claim["seeds"])  # never more seeds than declared before the run
        values = {"profile": profile, **claim.get("args", {}), **evidence.facts}
        if not evidence.missing:  # with nothing measured the claim's facts are absent: its text stays as declared
            fields["claim"] = text(claim["claim"], values, name)
        if at_scale and not evidence.missing:
            metric = earlier["earlier_metric"] if earlier is not None else text(claim.get("metric"), values, name)
            entry = claim_entry(**fields, metric=metric or "-",
                                verdict="needs paper scale", why=text(claim["why"], values, name),
                                evidence=text(claim["evidence"], values, name))
        elif evidence.missing:  # nothing measured: the text's facts are absent too
            entry = claim_entry(**fields, metric=claim.get("metric", "-"), verdict="inconclusive", why=evidence.missing,
                                chance=claim.get("chance"), control=claim.get("control") or evidence.control,
                                seeds_declared=claim.get("seeds"))
        else:
            (verdict, why), margin = judge_claim(claim, evidence, verdicts)
            if note := text(claim.get("note"), values, name):
                why = f"{why}; {note}"
            if verdict == "reproduced" and kind == "difference" and claim.get("paper_effect") is None:
                why = f"{why}. Direction only: {text(claim['size'], values, name)}"
            chance = claim["chance"] if "chance" in claim else evidence.chance
            entry = claim_entry(**fields, metric=text(claim["metric"], values, name), verdict=verdict, why=why,
                                arms=evidence.arms, difference=evidence.difference, chance=chance,
                                control=claim.get("control") or evidence.control,
                                context=text(claim.get("context"), values, name),
                                margin_value=margin, seeds_declared=claim.get("seeds"))
        verdicts[name] = entry["verdict"]
        entries.append(entry)
    check_ledger(entries)
    return entries


def earlier_run(claim: dict[str, Any], results: dict[str, dict]) -> dict[str, Any] | None:
    """The facts of the claim's earlier run where its `earlier_run` stage trained nothing this time
    (its results hold no models), or not its `model`; else None."""
    where = claim.get("earlier_run")
    if not where:
        return None
    trained = trained_units(results.get(where["stage"], {}))
    if trained is None or (where["model"] in trained if where.get("model") else trained):
        return None
    record = results.get("earlier_runs", {}).get("claims", {})
    if claim["id"] not in record:
        raise ConfigError(f"claim {claim['id']}: stage {where['stage']} trained nothing and its earlier run is not "
                          "recorded; run python -m common.claims.earlier <paper> and list earlier_runs in results")
    return record[claim["id"]]


# What a stage's results list as trained, by the first of these keys they hold: models, a retrieval
# stage's embedding sources, tasks, seeds' runs, budgets.
TRAINED_UNITS = ("models", "sources", "tasks", "runs", "budgets")


def trained_units(stage: dict) -> dict | list | None:
    """What `stage`'s results trained (empty where it trained nothing), or None where they say neither."""
    return next((stage[key] for key in TRAINED_UNITS if key in stage), None)


def extract(claim: dict[str, Any], extractors: ModuleType, results: dict[str, dict]) -> Evidence:
    """The claim's evidence from its named extractor."""
    function = getattr(extractors, claim["extract"], None)
    if not callable(function):
        raise ConfigError(f"claim {claim['id']}: extract {claim['extract']!r} is not a function of "
                          f"{extractors.__name__}")
    evidence = function(results, **claim.get("args", {}))
    if not isinstance(evidence, Evidence):
        raise TypeError(f"claim {claim['id']}: {claim['extract']} returned {type(evidence).__name__}, not Evidence")
    return evidence
