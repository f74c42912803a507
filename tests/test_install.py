"""`make install`'s recipe: the `gpu` extra's CUDA packages must build against the installed torch."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tomllib

import pytest

from tests.conftest import ROOT


def recipe(tmp_path, extras: str) -> list[str]:
    """The commands `make install` would run into a fresh virtual environment (`make -n`)."""
    out = subprocess.run(["make", "-n", "install", f"EXTRAS={extras}", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pip install" in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_gpu_packages_install_without_build_isolation(tmp_path):
    # mamba-ssm's setup.py imports torch and its build requirements leave torch out, so under pip's
    # default build isolation it cannot import the torch it must compile against.
    lines = recipe(tmp_path, "dev,gpu")
    assert any(line.endswith('-e ".[dev]"') for line in lines), lines
    gpu = [line for line in lines if "mamba-ssm" in line]
    assert len(gpu) == 1 and "--no-build-isolation" in gpu[0] and "-e " not in gpu[0]
    assert not any("mamba-ssm" in line for line in recipe(tmp_path, "dev,bench"))
    assert any(line.endswith('-e ".[dev,bench]"') for line in recipe(tmp_path, "dev,bench"))


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_gpu_install_line_names_the_gpu_extra(tmp_path):
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    (line,) = [line for line in recipe(tmp_path, "dev,gpu") if "--no-build-isolation" in line]
    assert shlex.split(line.split("--no-build-isolation", 1)[1]) == extra
