"""The committed dvc.lock files describe this checkout, and stages track only their profile's params.

Both checks go through DVC's own stage loading, templating, hashing (which honours .dvcignore, so
bytecode never counts) and params comparison, and neither needs data: a fresh clone has none.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from dvc.dependency import ParamsDependency
from dvc.repo import Repo
from dvc.utils import strictyaml
from dvc.utils.serialize import _yaml

from common.config import PROFILES
from tests.conftest import ROOT

DVC_FILES = ["dvc.yaml", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("papers/*/dvc.yaml"))]
PARAMS_FILES = ["params.yaml", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("papers/*/params.yaml"))]


@pytest.fixture(autouse=True, scope="module")
def parse_each_yaml_text_once():
    """DVC parses a params file again for every params dep it reads, with pure-Python ruamel here
    (0.2 s for a paper's params.yaml): these tests took a minute. The same text always parses to the
    same data, so each text is parsed once and handed out as a copy, since DVC mutates what it loads."""
    parse, parsed = _yaml.parse_yaml, {}

    def parse_once(text, path, typ="safe"):
        if (text, typ) not in parsed:
            parsed[text, typ] = parse(text, path, typ)
        return copy.deepcopy(parsed[text, typ])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_yaml, "parse_yaml", parse_once)
        patch.setattr(strictyaml, "parse_yaml", parse_once)
        yield


def load_stages(repo: Repo, dvc_file: Path) -> list:
    # An absolute path: DVC reads a relative one from the working directory, not from the repo's root.
    return repo.stage.load_file(str(dvc_file))


def params_deps(stage) -> list[ParamsDependency]:
    return [d for d in stage.deps if isinstance(d, ParamsDependency)]


def file_deps(stage) -> list:
    return [d for d in stage.deps if not isinstance(d, ParamsDependency)]


# --- The locks are fresh for code and params ------------------------------------------------------

@pytest.fixture(scope="module")
def repo():
    with Repo(str(ROOT)) as repo:
        yield repo


@pytest.fixture(scope="module")
def code_paths(repo) -> set[str]:
    """Paths whose content is code: tracked by git and produced by no stage. Data deps (untracked,
    under data/) and committed results (tracked, but some stage's output) are what a fresh clone
    cannot reproduce without running the pipelines, so their hashes are not checked here."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    tracked = set(filter(None, listing.stdout.split("\0")))
    tracked |= {str(parent) for path in tracked for parent in Path(path).parents} - {"."}
    outs = {os.path.relpath(o.fs_path, ROOT) for f in DVC_FILES for s in load_stages(repo, ROOT / f) for o in s.outs}
    return tracked - outs


def lock_problems(repo: Repo, dvc_file: str, code_paths: set[str]) -> list[str]:
    """One line per difference between what dvc.yaml and the checkout say and what dvc.lock records."""
    lock_file = ROOT / dvc_file.replace("dvc.yaml", "dvc.lock")
    locked_stages = (yaml.safe_load(lock_file.read_text()) or {}).get("stages", {}) if lock_file.is_file() else {}
    stages = load_stages(repo, ROOT / dvc_file)
    problems = [f"{dvc_file}:{name}: in dvc.lock, but no such stage in dvc.yaml"
                for name in sorted(set(locked_stages) - {s.name for s in stages})]
    for stage in stages:
        where = f"{dvc_file}:{stage.name}"
        locked = locked_stages.get(stage.name)
        if locked is None:
            problems.append(f"{where}: not in dvc.lock")
            continue
        if stage.cmd_changed:
            problems.append(f"{where}: cmd differs from dvc.lock")

        # DVC's status calls a dep added to dvc.yaml "modified" and says nothing of a removed one,
        # so the lists are compared here, data deps included: comparing lists needs no data.
        listed = {d.def_path for d in file_deps(stage)}
        recorded = {d["path"] for d in locked.get("deps", [])}
        problems += [f"{where}: dep {p}: in dvc.yaml, not in dvc.lock" for p in sorted(listed - recorded)]
        problems += [f"{where}: dep {p}: in dvc.lock, no longer in dvc.yaml" for p in sorted(recorded - listed)]
        for dep in file_deps(stage):
            if dep.def_path in recorded and os.path.relpath(dep.fs_path, ROOT) in code_paths:
                problems += [f"{where}: dep {dep.def_path}: {state} since dvc.lock" for state in dep.status().values()]

        # Likewise a params key (or file) dropped from dvc.yaml is invisible to DVC's status.
        recorded_params = locked.get("params") or {}
        listed_files = {d.def_path for d in params_deps(stage)}
        problems += [f"{where}: params file {f}: in dvc.lock, no longer in dvc.yaml"
                     for f in sorted(set(recorded_params) - listed_files)]
        for dep in params_deps(stage):
            if dep.def_path not in recorded_params:
                problems.append(f"{where}: params file {dep.def_path}: in dvc.yaml, not in dvc.lock")
                continue
            if dep.params:  # no keys listed means the whole file, with no key list to compare
                keys, locked_keys = set(dep.params), set(recorded_params[dep.def_path])
                problems += [f"{where}: param {dep.def_path}:{k}: in dvc.yaml, not in dvc.lock"
                             for k in sorted(keys - locked_keys)]
                problems += [f"{where}: param {dep.def_path}:{k}: in dvc.lock, no longer in dvc.yaml"
                             for k in sorted(locked_keys - keys)]
            for status in dep.status().values():
                if isinstance(status, str):  # the params file itself is gone
                    problems.append(f"{where}: params file {dep.def_path}: {status}")
                    continue
                problems += [f"{where}: param {dep.def_path}:{k}: "
                             + ("value differs from dvc.lock" if state == "modified" else "missing from the file")
                             for k, state in status.items() if state in ("modified", "deleted")]
    return problems


@pytest.mark.parametrize("dvc_file", DVC_FILES)
def test_lock_matches_the_checkouts_code_and_params(repo, code_paths, dvc_file):
    problems = lock_problems(repo, dvc_file, code_paths)
    if problems:
        pytest.fail(f"{dvc_file.replace('dvc.yaml', 'dvc.lock')} is stale; rerun the stages below (or `dvc commit` "
                    "them, having checked that their outputs would not change):\n  " + "\n  ".join(problems),
                    pytrace=False)


def downstream_problems(repo: Repo) -> list[str]:
    """One line per stage whose lock records an input other than what the producing stage's lock
    records as its output: the producer was rerun and this stage was not. Locks alone decide it, so
    it holds for data a fresh clone does not have."""
    stages = [(f, s) for f in DVC_FILES for s in load_stages(repo, ROOT / f)]
    produced = {o.fs_path: (f"{f}:{s.name}", o.hash_info.value) for f, s in stages for o in s.outs}
    problems = []
    for f, stage in stages:
        for dep in file_deps(stage):
            producer, value = produced.get(dep.fs_path, (None, None))
            if producer and dep.hash_info.value != value:
                problems.append(f"{f}:{stage.name}: dep {dep.def_path}: recorded {dep.hash_info.value}, "
                                f"but {producer} recorded {value}")
    return problems


def test_each_stage_ran_on_what_its_upstream_stages_last_wrote(repo):
    problems = downstream_problems(repo)
    if problems:
        pytest.fail("stages ran on older outputs of the stages they read; rerun them (or `dvc commit` them, "
                    "having checked that what they read did not change):\n  " + "\n  ".join(problems),
                    pytrace=False)


# --- A stage depends only on its profile's params --------------------------------------------------

def pipeline_definitions(root: Path, profile: str) -> Path:
    """The dvc.yaml and params files alone, switched to `profile`: all DVC needs to resolve the
    stages' templating and read their params, without git, code or data."""
    for name in (".dvc/config", *DVC_FILES, *PARAMS_FILES):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump({**params, "profile": profile}, sort_keys=False))
    return root


def edit_profile_blocks(root: Path, profiles: list[str]) -> None:
    """Add a value to the blocks of `profiles` in every section of every params file."""
    for name in PARAMS_FILES:
        params = yaml.safe_load((root / name).read_text())
        for blocks in params.values():
            if isinstance(blocks, dict) and set(blocks) & set(PROFILES):
                for profile in profiles:
                    blocks[profile] = {**(blocks.get(profile) or {}), "edited_by_test": True}
        (root / name).write_text(yaml.safe_dump(params, sort_keys=False))


def tracked_params(repo: Repo, root: Path) -> dict[str, dict[str, ParamsDependency]]:
    """{stage: {params file: params dep}}, as DVC resolves the stages from `root` right now."""
    return {f"{f}:{s.name}": {d.def_path: d for d in params_deps(s)} for f in DVC_FILES
            for s in load_stages(repo, root / f)}


def params_changes(root: Path, recorded: dict[str, dict[str, dict]]) -> list[str]:
    """The params `dvc status` would list as changed, one line each, had the locks recorded `recorded`."""
    changes = []
    with Repo(str(root), config={"core": {"no_scm": True}}) as repo:
        for stage, deps in tracked_params(repo, root).items():
            for path, dep in deps.items():
                dep.fill_values(recorded[stage].get(path, {}))  # what loading dvc.lock does
                for status in dep.status().values():
                    changes += [f"{stage}: param {path}:{key}: {state}" for key, state in status.items()]
    return changes


@pytest.mark.parametrize("profile", PROFILES)
def test_stages_track_only_the_active_profiles_params(tmp_path, profile):
    root = pipeline_definitions(tmp_path, profile)
    with Repo(str(root), config={"core": {"no_scm": True}}) as repo:
        # The params `dvc repro` would record in the locks now. get_hash also fails on a key that
        # is missing, such as `<section>.${profile}` for a section without a block for this profile.
        recorded = {stage: {path: dep.get_hash().value for path, dep in deps.items()}
                    for stage, deps in tracked_params(repo, root).items()}
    assert params_changes(root, recorded) == []

    others = [p for p in PROFILES if p != profile]
    edit_profile_blocks(root, others)
    # Editing, say, a `paper:` value must not mark the results of the tiny profile as stale.
    stale = params_changes(root, recorded)
    if stale:
        pytest.fail(f"at profile {profile}, editing only the {' and '.join(others)} blocks changes what these "
                    "stages track; list `<section>.base` and `<section>.${profile}`, not whole sections:\n  "
                    + "\n  ".join(stale), pytrace=False)

    # The control: the active profile's values are still tracked, by every stage that reads a section.
    edit_profile_blocks(root, [profile])
    reads_a_section = {stage for stage, files in recorded.items() if any(set(v) - {"profile"} for v in files.values())}
    noticed = {line.split(": param ")[0] for line in params_changes(root, recorded)}
    assert reads_a_section and reads_a_section <= noticed, f"{profile} edits unnoticed by {reads_a_section - noticed}"
