"""DVC stage entry points of the root pipeline; `python -m common.stages.<name> --help`.

Each stage reads its own section of a params file (default `params.yaml`), resolved for the active
profile, takes its input and output paths as arguments, writes outputs atomically, and reports a
user error as one line with exit status 2.

Paper pipelines (`papers/<paper>/dvc.yaml`) run their stages from the repository root
(`wdir: ../..`) and keep their sections in `papers/<paper>/params.yaml`. That file has no
`profile` key: the one switch stays in the root `params.yaml`, which `load_stage` reads for it.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any, TypeVar

from common.config import active_profile, load_yaml, stage_config

T = TypeVar("T")


def stage_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    return parser


ROOT_PARAMS = Path("params.yaml")


def load_stage(params_path: Path, section: str, cls: type[T]) -> tuple[T, str, dict[str, Any]]:
    """Validate the stage's section for the active profile: (config, profile, raw params).

    The profile comes from `params_path` when it names one, else from the root `params.yaml` in
    the working directory (the case of a paper's params file)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    params = load_yaml(params_path)
    if "profile" not in params and Path(params_path).resolve() != ROOT_PARAMS.resolve() and ROOT_PARAMS.is_file():
        params = {**params, "profile": active_profile(load_yaml(ROOT_PARAMS))}
    profile = active_profile(params)
    return stage_config(params, section, cls, profile), profile, params
