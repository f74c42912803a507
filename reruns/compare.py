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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import yaml

from common.errors import ArgumentParser

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


def compare_json(a: Path, b: Path) -> tuple[list[str], int, tuple[float, str] | None]:
    """(differing leaves outside timing, number of differing timing leaves, the largest absolute
    difference between two numbers among the former with its leaf, or None). In a file that measures
    time (`latency.json`), every leaf is timing except memory sizes."""
    timed_file = bool(TIMING.search(a.stem))

    def leaves(path: Path) -> dict:
        return {p: (v, t or timed_file and not MEMORY.search(str(p[-1])))
                for p, v, t in json_leaves(json.loads(path.read_text()))}

    left, right = leaves(a), leaves(b)
    differing = [p for p in left.keys() | right.keys() if left.get(p, (None,))[0] != right.get(p, (None,))[0]]
    timed = [p for p in differing if left.get(p, right.get(p))[1]]
    untimed = [p for p in differing if p not in timed]
    numbers = [(abs(left[p][0] - right[p][0]), ".".join(map(str, p))) for p in untimed
               if p in left and p in right and all(isinstance(side[p][0], (int, float))
                                                   and not isinstance(side[p][0], bool) for side in (left, right))]
    return sorted(".".join(map(str, p)) for p in untimed), len(timed), max(numbers, default=None)


def same_weights(a: Path, b: Path) -> bool:
    from safetensors.torch import load_file

    left, right = load_file(a), load_file(b)
    # Same dtype and shape first: `equal` promotes, so fp16 and fp32 copies of one tensor would agree.
    return left.keys() == right.keys() and all(left[k].dtype == right[k].dtype and left[k].shape == right[k].shape
                                               and left[k].equal(right[k]) for k in left)


def digest(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def compare_file(a: Path, b: Path, name: str) -> str | None:
    """None when the two files agree, "timing" when only timing values differ, "absent" when neither
    checkout has the file (nothing to compare: data that neither has made), else the disagreement."""
    if not a.is_file() and not b.is_file():
        return "absent"
    if not b.is_file() or not a.is_file():
        return f"{name}: only in {'this' if a.is_file() else 'the other'} checkout"
    if digest(a) == digest(b):
        return None
    if a.suffix == ".json":
        differing, timed, largest = compare_json(a, b)
        if differing:
            most = f"; largest numeric difference {largest[0]:.3g} at {largest[1]}" if largest else ""
            return f"{name}: {len(differing)} differing values outside timing ({', '.join(differing[:5])}){most}"
        return "timing" if timed else None
    if a.suffix == ".safetensors":
        return None if same_weights(a, b) else f"{name}: weights differ"
    if TIMING.search(a.stem):  # a figure of measured times
        return "timing"
    return f"{name}: bytes differ"


def compare_output(here: Path, other: Path, path: str) -> list[str]:
    """The findings of `compare_file` for an output, file by file when it is a directory."""
    a, b = here / path, other / path
    if a.is_dir() or b.is_dir():
        names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | \
                {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
        return [found for n in sorted(names) if (found := compare_file(a / n, b / n, f"{path}/{n}"))]
    found = compare_file(a, b, path)
    return [found] if found else []


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the other checkout, after its `dvc repro`")
    parser.add_argument("--here", type=Path, default=Path.cwd(), help="this checkout (default: the working directory)")
    parser.add_argument("--pipelines", nargs="+", default=PIPELINES, choices=PIPELINES)
    args = parser.parse_args(argv)
    for checkout in (args.here, args.other):
        if not (checkout / "dvc.lock").is_file():
            parser.error(f"{checkout}: not a checkout of this project (no dvc.lock)")
    disagreements = 0
    for pipeline in args.pipelines:
        outputs = sorted(locked_outputs(args.here, pipeline) | locked_outputs(args.other, pipeline))
        findings = {path: compare_output(args.here, args.other, path) for path in outputs}
        timing = [path for path, found in findings.items() if found and set(found) == {"timing"}]
        absent = [path for path, found in findings.items() if found == ["absent"]]
        problems = [f for found in findings.values() for f in found if f not in ("timing", "absent")]
        identical = sum(not found for found in findings.values())
        print(f"{pipeline}: {identical} outputs identical, {len(timing)} differ only in timing"
              f"{' (' + ', '.join(timing) + ')' if timing else ''}, {len(problems)} disagreements"
              f"{f', {len(absent)} in neither checkout, not compared (' + ', '.join(absent) + ')' if absent else ''}")
        for problem in problems:
            print(f"  {problem}")
        disagreements += len(problems)
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
