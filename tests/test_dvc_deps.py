"""Every project module a DVC stage imports is one of the stage's deps, as `python -m
common.stages.deps --write` generates them from the imports (see that module for why and how).

Not seen: modules named only at run time (`importlib.import_module` on a block path from params,
`python -m` in a subprocess command); `common.stages.deps.DIRECTORIES` covers the blocks.
"""

from __future__ import annotations

import json
import posixpath

import pytest
import yaml

from common.stages.deps import ImportWalker, dvc_files, entry_module, generated_deps, join, load_stages, paths, rewrite
from tests.conftest import ROOT

DVC_FILES = dvc_files(ROOT)
WALKER = ImportWalker(ROOT)
WALKERS = {"": WALKER}  # one per stage wdir, each parsing a file once


def covered(path: str, deps: list[str]) -> bool:
    return any(path == dep or path.startswith(dep.rstrip("/") + "/") for dep in deps)


# --- The tests ----------------------------------------------------------------------------------

STAGES = load_stages(ROOT)


@pytest.mark.parametrize("dvc_file", DVC_FILES)
def test_every_deps_list_is_the_generated_one(dvc_file):
    if rewrite(dvc_file, STAGES, WALKERS, ROOT) != (ROOT / dvc_file).read_text():
        stale = [sid for sid, stage in STAGES.items() if sid.startswith(f"{dvc_file}:")
                 and sorted(generated_deps(stage, WALKERS, ROOT)) != sorted(stage["deps"])]
        pytest.fail(f"{dvc_file}: deps of {', '.join(stale) or 'some stage (order)'} are not generated from the "
                    "imports; run `python -m common.stages.deps --write`", pytrace=False)


@pytest.mark.parametrize("stage_id", list(STAGES))
def test_stage_deps_cover_every_imported_module(stage_id):
    """The generated list, checked again by coverage: a generator that dropped a file would fail here."""
    stage = STAGES[stage_id]
    module = entry_module(stage["cmd"])
    walker = WALKERS.setdefault(stage["wdir"], ImportWalker(ROOT / stage["wdir"]))
    imported = {join(stage["wdir"], f) for f in walker.reachable_files(module)}
    missing = sorted(f for f in imported if not covered(f, stage["deps"]))
    assert not missing, f"{stage_id}: imports files that are not deps: {missing}"


@pytest.mark.parametrize("stage_id", list(STAGES))
def test_stage_code_deps_exist(stage_id):
    # A module moved or deleted but still listed makes `dvc repro` stop on a missing dep. Only data
    # (under data/, absent from a fresh clone) and other stages' outputs may be missing.
    outputs = {out for stage in STAGES.values() for out in stage["outs"]}
    missing = [d for d in STAGES[stage_id]["deps"]
               if not (ROOT / d).exists() and not d.startswith("data/") and d not in outputs]
    if missing:
        pytest.fail(f"{stage_id}: deps that no longer exist:\n  " + "\n  ".join(missing), pytrace=False)


def test_walker_follows_imports_transitively():
    # lm_baseline reaches the trainer only through other modules, and every stage runs package
    # __init__ files: if the walker missed either, every stage above would pass vacuously.
    files = WALKER.reachable_files("common.stages.lm_baseline")
    assert {"common/stages/lm_baseline.py", "common/training/trainer.py", "common/__init__.py",
            "common/stages/__init__.py", "common/config.py"} <= files
    # Third-party modules (torch, transformers) are nobody's dep.
    assert all(f.split("/")[0] in WALKER.top_level for f in files)


def test_walker_resolves_relative_lazy_and_type_checking_imports(tmp_path):
    # No project module uses relative imports today; a scratch package checks the rules the
    # project's modules do not exercise, so a later `from . import x` is not silently missed.
    files = {
        "pkg/__init__.py": "",
        "pkg/main.py": "from pkg.sub import sibling\n",
        "pkg/sub/__init__.py": "from . import sibling\n",
        "pkg/sub/sibling.py": "def f():\n    from ..helpers import thing\n",
        "pkg/helpers.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.typed\nthing = 1\n",
        "pkg/typed.py": "",
        "pkg/unused.py": "",
        "other.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert ImportWalker(tmp_path).reachable_files("pkg.main") == {
        "pkg/__init__.py", "pkg/main.py", "pkg/sub/__init__.py", "pkg/sub/sibling.py", "pkg/helpers.py",
        "pkg/typed.py"}


def test_a_directory_dep_covers_its_files_only():
    assert covered("common/blocks/moe.py", ["common/blocks"])
    assert covered("common/blocks/moe.py", ["common/blocks/moe.py"])
    assert not covered("common/blocks_extra.py", ["common/blocks"])


# --- Metrics: headline numbers only ------------------------------------------------------------

def _flat_keys(value, prefix: str = "") -> list[str]:
    """The columns `dvc metrics show` makes of a JSON value: one per leaf, lists as one."""
    if isinstance(value, dict):
        return [key for name, item in value.items() for key in _flat_keys(item, f"{prefix}{name}.")]
    return [prefix.rstrip(".")]


def test_dvc_metrics_show_stays_readable():
    """The declared metrics of every pipeline, flattened as `dvc metrics show` does, make fewer than
    200 columns (detail lives in results JSON that are plain outputs, and in the claims ledgers)."""
    columns = set()
    for dvc_file in DVC_FILES:
        data = yaml.safe_load((ROOT / dvc_file).read_text())
        for stage in data["stages"].values():
            wdir = join(posixpath.dirname(dvc_file), stage.get("wdir", "."))
            for path in paths(stage.get("metrics", [])):
                file = ROOT / join(wdir, path)
                if file.is_file():
                    columns |= set(_flat_keys(json.loads(file.read_text())))
    assert 0 < len(columns) < 200, sorted(columns)
