"""The code deps of every DVC stage, generated from the modules the stage imports.

    python -m common.stages.deps            # exit 1, naming each stage whose deps are not current
    python -m common.stages.deps --write    # rewrite the deps lists of every dvc.yaml

DVC reruns a stage only when a listed dep changes, so a module the stage runs but does not list
could change its results unseen, and the lock would claim results the code no longer makes. A
stage's code deps are the project files that `python -m <its module>` executes, found from the
source alone (imports at the top, inside functions, under `if TYPE_CHECKING:`, in `try:` blocks;
nothing is imported or run). Files under `DIRECTORIES` are listed as their directory: blocks are
also built by name from params at run time, which no import shows. Deps that are not code (data,
results, claims.yaml) stay as written, after the code; `tests/test_dvc_deps.py` fails when a list is
not what `--write` would make.
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
import sys
from pathlib import Path

import yaml

from common.errors import ArgumentParser

ROOT = Path(__file__).resolve().parent.parent.parent
DIRECTORIES = ("common/blocks", "common/training")


def dvc_files(root: Path = ROOT) -> list[str]:
    return ["dvc.yaml", *sorted(p.relative_to(root).as_posix() for p in root.glob("papers/*/dvc.yaml"))]


def join(*parts: str) -> str:
    """A repository-relative posix path, `` for the root itself."""
    path = posixpath.normpath(posixpath.join(*parts))
    return "" if path == "." else path


def paths(entries: list) -> list[str]:
    """Paths of a deps/outs/metrics/plots list, whose entries are `path` or `{path: options}`."""
    return [e if isinstance(e, str) else next(iter(e)) for e in entries]


def load_stages(root: Path = ROOT) -> dict[str, dict]:
    """{`dvc file:stage`: stage} with `wdir`, `deps` and `outs` (outs, metrics and plots) as
    repository-relative paths. DVC resolves a stage's wdir against its dvc.yaml's directory, and the
    stage's paths against the wdir."""
    stages = {}
    for dvc_file in dvc_files(root):
        data = yaml.safe_load((root / dvc_file).read_text())
        for name, stage in data["stages"].items():
            wdir = join(posixpath.dirname(dvc_file), stage.get("wdir", "."))
            deps = [join(wdir, p) for p in paths(stage.get("deps", []))]
            outs = [join(wdir, p) for key in ("outs", "metrics", "plots") for p in paths(stage.get(key, []))]
            stages[f"{dvc_file}:{name}"] = {**stage, "wdir": wdir, "deps": deps, "outs": outs}
    return stages


def entry_module(cmd: str | list[str]) -> str:
    """The module a stage command runs: `python -m X ...` -> X."""
    words = shlex.split(cmd if isinstance(cmd, str) else " && ".join(cmd))
    if "-m" not in words:
        raise ValueError(f"stage command does not run a module with `python -m`: {cmd!r}")
    return words[words.index("-m") + 1]


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


def is_code(dep: str) -> bool:
    return dep.endswith(".py") or dep in DIRECTORIES


def code_deps(files: set[str]) -> list[str]:
    """`files` as deps: each under a directory of `DIRECTORIES` as that directory; sorted."""
    listed = {next((d for d in DIRECTORIES if f.startswith(d + "/")), f) for f in files}
    return sorted(listed)


def generated_deps(stage: dict, walkers: dict[str, ImportWalker], root: Path = ROOT) -> list[str]:
    """The stage's deps as `--write` writes them (repository-relative): its code, then the rest as listed."""
    walker = walkers.setdefault(stage["wdir"], ImportWalker(root / stage["wdir"]))
    # `python -m` puts the working directory, the stage's wdir, first on sys.path.
    files = {join(stage["wdir"], f) for f in walker.reachable_files(entry_module(stage["cmd"]))}
    return code_deps(files) + [dep for dep in stage["deps"] if not is_code(dep)]


DEPS_BLOCK = re.compile(r"^(  (?P<stage>[\w-]+):\n(?:(?!  \S).*\n)*?    deps:\n)((?:      - .*\n)+)", re.M)


def rewrite(dvc_file: str, stages: dict[str, dict], walkers: dict[str, ImportWalker], root: Path = ROOT) -> str:
    """The text of `dvc_file` with every stage's deps list generated; all else as written."""
    text = (root / dvc_file).read_text()

    def replace(match: re.Match) -> str:
        stage = stages[f"{dvc_file}:{match['stage']}"]
        wdir_prefix = stage["wdir"]
        deps = [posixpath.relpath(dep, wdir_prefix or ".") for dep in generated_deps(stage, walkers, root)]
        return match.group(1) + "".join(f"      - {dep}\n" for dep in deps)

    return DEPS_BLOCK.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m common.stages.deps", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the dvc.yaml files (default: only check)")
    args = parser.parse_args(argv)
    stages, walkers, stale = load_stages(), {}, []
    for dvc_file in dvc_files():
        text = rewrite(dvc_file, stages, walkers)
        if text != (ROOT / dvc_file).read_text():
            stale.append(dvc_file)
            if args.write:
                (ROOT / dvc_file).write_text(text)
    if stale and not args.write:
        print(f"deps not generated from the imports in {', '.join(stale)}; run `python -m common.stages.deps --write`",
              file=sys.stderr)
        return 1
    print(f"{'rewrote' if stale else 'current'}: {', '.join(stale) or 'every dvc.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
