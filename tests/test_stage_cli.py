"""Thin stages: every `dvc.yaml` command passes every argument its stage requires (paths are
written only there), and no stage script is imported by other code (shared code lives in modules
named for what they hold)."""

from __future__ import annotations

import argparse
import ast
import importlib
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

PIPELINES = [ROOT / "dvc.yaml", *sorted((ROOT / "papers").glob("*/dvc.yaml"))]


def stages() -> list[tuple[str, str, list[str]]]:
    out = []
    for path in PIPELINES:
        for name, stage in yaml.safe_load(path.read_text())["stages"].items():
            words = shlex.split(stage["cmd"])
            assert words[:2] == ["python", "-m"], f"{path}:{name}: a stage runs `python -m <module>`"
            out.append((f"{path.relative_to(ROOT)}:{name}", words[2], words[3:]))
    return out


STAGES = stages()


def parse_only(module: str, argv: list[str]) -> argparse.Namespace:
    """`module.main(argv)` up to its own parser's result, stopping before it does anything."""
    parse = argparse.ArgumentParser.parse_args

    class Parsed(Exception):
        pass

    def parse_then_stop(self, args=None, namespace=None):
        raise Parsed(parse(self, args, namespace))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
        try:
            importlib.import_module(module).main(argv)
        except Parsed as parsed:
            return parsed.args[0]
    raise AssertionError(f"{module}.main never parsed its arguments")


@pytest.mark.parametrize(("stage", "module", "argv"), STAGES, ids=[s[0] for s in STAGES])
def test_the_dvc_command_gives_every_required_argument(stage, module, argv):
    """Parse the command's arguments with the stage's own parser, and stop right there."""
    assert all(value is not None for value in vars(parse_only(module, argv)).values())


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_stage_script_is_imported_by_other_code():
    """Library code never imports a stage script. (Benchmarks may read a stage's config class, to time
    exactly what the stage generates, and so may the `paper_work.py` declarations, which no stage
    imports: they read each stage's config at `paper` for the rehearsal's readiness tables.)"""
    stage_modules = {module for _, module, _ in STAGES}
    offenders = []
    for folder in ("common", "papers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "paper_work.py":
                continue
            for name in imported_modules(path) & stage_modules:
                offenders.append(f"{path.relative_to(ROOT)} imports the stage script {name}")
    assert not offenders, "\n".join(offenders)


HELP_PROBE = """
import contextlib, io, runpy, sys
module = sys.argv[1]
sys.argv = [module, "--help"]
shown = io.StringIO()
try:
    with contextlib.redirect_stdout(shown):
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    code = "no exit"
except SystemExit as done:
    code = done.code
print(code, [name for name in ("torch", "lightning") if name in sys.modules], shown.getvalue().startswith("usage:"))
"""


@pytest.mark.parametrize("module", sorted({module for _, module, _ in STAGES}))
def test_help_answers_before_torch_and_lightning_load(module):
    """`python -m <stage> --help` prints the usage and exits 0 without importing torch or Lightning,
    which take about 10 s to load on a busy 2-core machine (the issue measured 30 s for `--help`)."""
    done = subprocess.run([sys.executable, "-c", HELP_PROBE, module], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 [] True", done.stdout  # exit 0, neither module loaded, usage shown
