"""DVC stage entry points of the root pipeline; `python -m common.stages.<name> --help`.

Each stage reads its own section of a params file (default `params.yaml`), resolved for the active
profile, takes its input and output paths as arguments, writes outputs atomically, and reports a
user error as one line with exit status 2.
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


def load_stage(params_path: Path, section: str, cls: type[T]) -> tuple[T, str, dict[str, Any]]:
    """Validate the stage's section for the active profile: (config, profile, raw params)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    params = load_yaml(params_path)
    profile = active_profile(params)
    return stage_config(params, section, cls, profile), profile, params
