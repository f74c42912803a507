"""Do two runs of the same pipelines agree? Compares every stage output recorded in two checkouts'
`dvc.lock` files (this one and OTHER, typically a fresh clone that ran `dvc repro`):

    python -m reruns.compare /tmp/fresh-clone --pipelines dvc.yaml papers/blackmamba/dvc.yaml

The lock files only list the outputs; each output is read from disk in both checkouts, so a stage
that DVC skipped and that was then run by hand is compared too. Files that differ are opened: JSON
leaf by leaf, weights tensor by tensor, and any other file by its bytes. JSON leaves that
measure time (keys such as `elapsed_s`, `ms_per_token`, `speedup`; ledger claims about latency or
throughput; in a file named for latency, everything but memory sizes) may differ, and so may a
figure named for latency; every other difference is a disagreement. Exit status 1 when there is one.
An output that neither checkout holds (data outside git that neither has made) is listed as not
compared.

Two CPUs of different kinds (AVX-512 against AVX2) round differently, so their runs agree only
within a tolerance (docs/pipelines.md, "Results across CPUs", says how large):

    python -m reruns.compare /tmp/other-cpu --rtol 0.05

With `--rtol R`, two numbers agree when they differ by at most R times the larger of them, and two
weights files when every entry of every tensor differs by at most R times the tensor's largest
entry; a figure or Markdown table that differs is then listed as redrawn from those numbers, not
judged. Text leaves, verdicts among them, must still be equal: a verdict that moves is a
disagreement at any tolerance; each ledger row whose verdict moved is listed with its margin in both.

With `--record FILE` the findings are also written as a record (reruns/records/ holds the committed
ones), from which `python -m reruns.page` generates the table of docs/pipelines.md:

    python -m reruns.compare /tmp/fresh-clone --record reruns/records/2026-11-30-manticore.json \
        --label "fresh clone, nothing else on the cores" --pipelines dvc.yaml papers/manticore/dvc.yaml
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from common.errors import ArgumentParser
from common.io import write_json

TIMING = re.compile(r"elapsed|seconds|(^|_)s$|per_s|ms_per|speedup|latency|throughput|faster", re.I)
MEMORY = re.compile(r"bytes|mib|memory", re.I)  # sizes in a timing file (a cache's bytes) must still agree
PIPELINES = ["dvc.yaml", "papers/blackmamba/dvc.yaml", "papers/manticore/dvc.yaml", "papers/masked_mixers/dvc.yaml"]


def locked_outputs(checkout: Path, pipeline: str) -> set[str]:
    """The output paths that the pipeline's lock file lists."""
    lock = checkout / Path(pipeline).with_suffix(".lock")
    try:
        stages = yaml.safe_load(lock.read_text())["stages"] if lock.is_file() else {}
        return {out["path"] for stage in stages.values() for out in stage.get("outs", [])}
    except (yaml.YAMLError, KeyError, TypeError, AttributeError):  # not YAML, or not a lock's shape
        print(f"error: {lock}: not a readable dvc.lock", file=sys.stderr)
        raise SystemExit(2) from None


def json_leaves(value, path=(), timed=False):
    """(path, value, measures time) for every leaf; a list item whose `id` names a timing claim is timed."""
    if isinstance(value, dict):
        timed = timed or bool(TIMING.search(str(value.get("id", ""))))
        for key, item in value.items():
            yield from json_leaves(item, (*path, key), timed or bool(TIMING.search(str(key))))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_leaves(item, (*path, index), timed)
    else:
        yield path, value, timed


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def close(x, y, rtol: float) -> bool:
    """Two numbers within `rtol` of the larger (NaN only with NaN)."""
    if x != x or y != y:
        return x != x and y != y
    return abs(x - y) <= rtol * max(abs(x), abs(y))


def compare_json(a: Path, b: Path, rtol: float = 0.0) -> tuple[list[str], int, int, tuple[float, str] | None]:
    """(differing leaves outside timing and beyond `rtol`, number of differing timing leaves, number
    of numbers that differ within `rtol`, the largest absolute difference between two numbers among
    the first with its leaf, or None). In a file that measures time (`latency.json`), every leaf is
    timing except memory sizes."""
    timed_file = bool(TIMING.search(a.stem))

    def leaves(path: Path) -> dict:
        return {p: (v, t or timed_file and not MEMORY.search(str(p[-1])))
                for p, v, t in json_leaves(json.loads(path.read_text()))}

    left, right = leaves(a), leaves(b)
    differing = [p for p in left.keys() | right.keys() if left.get(p, (None,))[0] != right.get(p, (None,))[0]]
    timed = [p for p in differing if left.get(p, right.get(p))[1]]
    both_numbers = [p for p in differing if p in left and p in right and is_number(left[p][0])
                    and is_number(right[p][0])]
    within = {p for p in both_numbers if p not in timed and rtol and close(left[p][0], right[p][0], rtol)}
    untimed = [p for p in differing if p not in timed and p not in within]
    numbers = [(abs(left[p][0] - right[p][0]), ".".join(map(str, p))) for p in both_numbers if p in untimed]
    return sorted(".".join(map(str, p)) for p in untimed), len(timed), len(within), max(numbers, default=None)


def same_weights(a: Path, b: Path, rtol: float = 0.0) -> bool:
    """Every tensor equal, or every entry within `rtol` times the tensor's largest entry (a tensor's
    scale, not each entry's: entries near zero would otherwise decide alone)."""
    from safetensors.torch import load_file

    left, right = load_file(a), load_file(b)

    def agree(x, y) -> bool:
        if not rtol:
            return bool(x.equal(y))
        if not x.numel():
            return True
        x, y = x.double(), y.double()
        return (x - y).abs().max().item() <= rtol * max(x.abs().max().item(), y.abs().max().item())

    # Same dtype and shape first: `equal` promotes, so fp16 and fp32 copies of one tensor would agree.
    return left.keys() == right.keys() and all(left[k].dtype == right[k].dtype and left[k].shape == right[k].shape
                                               and agree(left[k], right[k]) for k in left)


def digest(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def compare_file(a: Path, b: Path, name: str, rtol: float = 0.0) -> str | None:
    """None when the two files agree, "timing" when only timing values differ, "within" when numbers
    differ within `rtol`, "redrawn" for a figure or table that differs under a tolerance, "absent"
    when neither checkout has the file (nothing to compare: data that neither has made), else the
    disagreement."""
    if not a.is_file() and not b.is_file():
        return "absent"
    if not b.is_file() or not a.is_file():
        return f"{name}: only in {'this' if a.is_file() else 'the other'} checkout"
    if digest(a) == digest(b):
        return None
    if a.suffix == ".json":
        differing, timed, within, largest = compare_json(a, b, rtol)
        if differing:
            most = f"; largest numeric difference {largest[0]:.3g} at {largest[1]}" if largest else ""
            beyond = f" beyond rtol {rtol:g}" if rtol else ""
            return (f"{name}: {len(differing)} differing values outside timing{beyond} "
                    f"({', '.join(differing[:5])}){most}")
        return "within" if within else "timing" if timed else None
    if a.suffix == ".safetensors":
        if same_weights(a, b):
            return None
        return "within" if rtol and same_weights(a, b, rtol) else f"{name}: weights differ"
    if TIMING.search(a.stem):  # a figure of measured times
        return "timing"
    if rtol and a.suffix in (".png", ".md"):
        return "redrawn"
    return f"{name}: bytes differ"


def compare_output(here: Path, other: Path, path: str, rtol: float = 0.0) -> list[str]:
    """The findings of `compare_file` for an output, file by file when it is a directory."""
    a, b = here / path, other / path
    if a.is_dir() or b.is_dir():
        names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | \
                {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
        return [found for n in sorted(names) if (found := compare_file(a / n, b / n, f"{path}/{n}", rtol))]
    found = compare_file(a, b, path, rtol)
    return [found] if found else []


KINDS = {"timing": "differ only in timing", "within": "agree within rtol", "redrawn": "hold figures or tables redrawn"}


def moved_verdicts(here: Path, other: Path, pipeline: str) -> list[dict]:
    """The ledger rows of a paper's pipeline whose verdict differs between the two checkouts, with
    each side's verdict and margin (rows in one ledger only are left to the JSON comparison)."""
    ledger = Path(pipeline).parent / "results" / "claims.json"
    if pipeline == "dvc.yaml" or not (here / ledger).is_file() or not (other / ledger).is_file():
        return []
    left, right = ({row["id"]: row for row in json.loads((root / ledger).read_text())["claims"]}
                   for root in (here, other))
    return [{"paper": Path(pipeline).parent.name, "id": claim, "here": left[claim]["verdict"],
             "other": right[claim]["verdict"], "margin_here": left[claim].get("margin"),
             "margin_other": right[claim].get("margin")}
            for claim in left if claim in right and left[claim]["verdict"] != right[claim]["verdict"]]


def commit_of(checkout: Path) -> str | None:
    """The checkout's commit, "+" when its tracked files hold changes (a run rewrites results), or
    None outside git."""
    from common.stage_times import checkout as state

    try:
        commit, clean = state(checkout)
        return commit + ("" if clean else "+")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the other checkout, after its `dvc repro`")
    parser.add_argument("--here", type=Path, default=Path.cwd(), help="this checkout (default: the working directory)")
    parser.add_argument("--pipelines", nargs="+", default=PIPELINES, choices=PIPELINES)
    parser.add_argument("--rtol", type=float, default=0.0,
                        help="numbers and weights agree within this relative difference (default 0: exactly)")
    parser.add_argument("--record", type=Path, metavar="FILE", help="also write the findings here, as JSON")
    parser.add_argument("--label", default="", help="what the record compares, in a few words (with --record)")
    args = parser.parse_args(argv)
    if not 0 <= args.rtol < 1:
        parser.error(f"--rtol must be at least 0 and below 1, got {args.rtol:g}")
    if args.label and not args.record:
        parser.error("--label names a record: give --record FILE too")
    if args.record and (args.record.suffix != ".json" or not args.record.parent.is_dir()):
        parser.error(f"--record {args.record}: give a .json file in an existing folder")
    for checkout in (args.here, args.other):
        if not (checkout / "dvc.lock").is_file():
            parser.error(f"{checkout}: not a checkout of this project (no dvc.lock)")
    disagreements, record = 0, {}
    for pipeline in args.pipelines:
        outputs = sorted(locked_outputs(args.here, pipeline) | locked_outputs(args.other, pipeline))
        findings = {path: compare_output(args.here, args.other, path, args.rtol) for path in outputs}
        absent = [path for path, found in findings.items() if found == ["absent"]]
        problems = [f for found in findings.values() for f in found if f not in (*KINDS, "absent")]
        identical = sum(not found for found in findings.values())
        # An output counts under the weakest agreement among its files: timing, then within rtol, then redrawn.
        kinds = {kind: [path for path, found in findings.items() if found and set(found) <= set(KINDS)
                        and max(found, key=list(KINDS).index) == kind] for kind in KINDS}
        parts = [f"{len(paths)} {KINDS[kind]}{' (' + ', '.join(paths) + ')' if paths else ''}"
                 for kind, paths in kinds.items() if kind == "timing" or args.rtol]
        print(f"{pipeline}: {identical} outputs identical, {', '.join(parts)}, {len(problems)} disagreements"
              f"{f', {len(absent)} in neither checkout, not compared (' + ', '.join(absent) + ')' if absent else ''}")
        for problem in problems:
            print(f"  {problem}")
        moved = moved_verdicts(args.here, args.other, pipeline)
        for row in moved:
            print(f"  verdict moved: {row['id']}: {row['here']} here (margin {row['margin_here']}), "
                  f"{row['other']} in the other (margin {row['margin_other']})")
        disagreements += len(problems)
        record[pipeline] = {"identical": identical, **kinds, "disagreements": problems, "absent": absent,
                            "verdicts_moved": moved}
    if args.record:
        from common.stage_times import machine

        write_json(args.record, {"label": args.label, "date": datetime.date.today().isoformat(),
                                 "here": commit_of(args.here), "other": commit_of(args.other), "machine": machine(),
                                 "rtol": args.rtol, "pipelines": record})
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
