"""Every project module a DVC stage imports is one of the stage's deps.

DVC only reruns a stage when a listed dep changes. A module the stage imports but does not list
(a helper in `common/`, a sibling module in the paper's package, a package's `__init__.py`) can
change the results without DVC noticing, so the lock would claim results that the code no longer
produces. The imports are found statically, from the source: no stage module is imported or run,
and no data is needed.

Not seen: modules named only at run time (`importlib.import_module` on a block path from params,
`python -m` in a subprocess command); a stage doing that must list them by hand.
"""

from __future__ import annotations

import ast
import json
import posixpath
import shlex
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

DVC_FILES = ["dvc.yaml", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("papers/*/dvc.yaml"))]


# --- The stages, read from dvc.yaml -----------------------------------------------------------

def _join(*parts: str) -> str:
    """A repository-relative posix path, `` for the root itself."""
    path = posixpath.normpath(posixpath.join(*parts))
    return "" if path == "." else path


def _paths(entries: list) -> list[str]:
    """Paths of a deps/outs/metrics/plots list, whose entries are `path` or `{path: options}`."""
    return [e if isinstance(e, str) else next(iter(e)) for e in entries]


def load_stages() -> dict[str, dict]:
    """{`dvc file:stage`: stage} with `wdir`, `deps` and `outs` (outs, metrics and plots) as
    repository-relative paths. DVC resolves a stage's wdir against its dvc.yaml's directory, and the
    stage's paths against the wdir."""
    stages = {}
    for dvc_file in DVC_FILES:
        data = yaml.safe_load((ROOT / dvc_file).read_text())
        for name, stage in data["stages"].items():
            wdir = _join(posixpath.dirname(dvc_file), stage.get("wdir", "."))
            deps = [_join(wdir, p) for p in _paths(stage.get("deps", []))]
            outs = [_join(wdir, p) for key in ("outs", "metrics", "plots") for p in _paths(stage.get(key, []))]
            stages[f"{dvc_file}:{name}"] = {**stage, "wdir": wdir, "deps": deps, "outs": outs}
    return stages


def entry_module(cmd: str | list[str]) -> str:
    """The module a stage command runs: `python -m X ...` -> X."""
    words = shlex.split(cmd if isinstance(cmd, str) else " && ".join(cmd))
    assert "-m" in words, f"stage command does not run a module with `python -m`: {cmd!r}"
    return words[words.index("-m") + 1]


# --- The import walker --------------------------------------------------------------------------

class ImportWalker:
    """Finds, from the source alone, the project files a module executes when it is run."""

    def __init__(self, root: Path):
        self.root = root
        # Names importable from the root (the `python -m` working directory, first on sys.path):
        # packages with an `__init__.py`, and top-level modules.
        self.top_level = {p.parent.name for p in root.glob("*/__init__.py")} | {p.stem for p in root.glob("*.py")}
        self._imports: dict[str, list[str]] = {}

    def module_file(self, name: str) -> str | None:
        """The root-relative file that defines module `name`, or None if no project file does."""
        base = self.root.joinpath(*name.split("."))
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate.relative_to(self.root).as_posix()
        return None

    def import_chain(self, name: str) -> list[str]:
        """Files executed by `import name`: every parent package's `__init__.py`, then the module.
        Stops at the first prefix that is no project module: a name imported from a module
        (`from a.b import function`) arrives here as `a.b.function`."""
        parts = name.split(".")
        if parts[0] not in self.top_level:
            return []
        files = []
        for i in range(1, len(parts) + 1):
            path = self.module_file(".".join(parts[:i]))
            if path is None:
                break
            files.append(path)
        return files

    def imported_names(self, path: str) -> list[str]:
        """Absolute names of every module (or module attribute) the file imports anywhere: at the
        top, inside functions, under `if TYPE_CHECKING:`, in `try:` blocks. Over-counting a lazy
        import only adds a dep; missing one lets stale results through."""
        if path not in self._imports:
            parts = path[: -len(".py")].split("/")
            # The package relative imports start from: the file's own package for __init__.py.
            package = parts[:-1]
            names = []
            for node in ast.walk(ast.parse((self.root / path).read_text(), filename=path)):
                if isinstance(node, ast.Import):
                    names.extend(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    if node.level:  # `from ..x import y`: each dot past the first climbs one package
                        anchor = package[: len(package) - (node.level - 1)]
                        base = ".".join([*anchor, *([node.module] if node.module else [])])
                    else:
                        base = node.module
                    names.append(base)
                    # `from a import b` also imports the submodule a.b when b is one.
                    names.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
            self._imports[path] = names
        return self._imports[path]

    def reachable_files(self, module: str) -> set[str]:
        """Every project file that `python -m module` executes, following imports transitively."""
        start = self.import_chain(module)
        assert start and start[-1] == self.module_file(module), f"{module}: not a module of this repository"
        if start[-1].endswith("__init__.py"):  # `python -m package` runs its __main__.py
            start.append(start[-1].replace("__init__.py", "__main__.py"))
        seen: set[str] = set()
        todo = [f for f in start if (self.root / f).is_file()]
        while todo:
            path = todo.pop()
            if path not in seen:
                seen.add(path)
                for name in self.imported_names(path):
                    todo.extend(self.import_chain(name))
        return seen


WALKER = ImportWalker(ROOT)
WALKERS = {"": WALKER}  # one per stage wdir, each parsing a file once


# --- The tests ----------------------------------------------------------------------------------

def covered(path: str, deps: list[str]) -> bool:
    return any(path == dep or path.startswith(dep.rstrip("/") + "/") for dep in deps)


STAGES = load_stages()


@pytest.mark.parametrize("stage_id", list(STAGES))
def test_stage_deps_cover_every_imported_module(stage_id):
    stage = STAGES[stage_id]
    module = entry_module(stage["cmd"])
    # `python -m` puts the working directory, the stage's wdir, first on sys.path.
    walker = WALKERS.setdefault(stage["wdir"], ImportWalker(ROOT / stage["wdir"]))
    imported = {_join(stage["wdir"], f) for f in walker.reachable_files(module)}
    missing = sorted(f for f in imported if not covered(f, stage["deps"]))
    if missing:
        pytest.fail(f"{stage_id}: `python -m {module}` imports project files that are not deps of the stage; "
                    "add them (or their directory) to its deps:\n  " + "\n  ".join(missing), pytrace=False)


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
            wdir = _join(posixpath.dirname(dvc_file), stage.get("wdir", "."))
            for path in _paths(stage.get("metrics", [])):
                file = ROOT / _join(wdir, path)
                if file.is_file():
                    columns |= set(_flat_keys(json.loads(file.read_text())))
    assert 0 < len(columns) < 200, sorted(columns)
