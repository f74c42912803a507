"""DVC stage entry points of the root pipeline; `python -m common.stages.<name> --help`.

Each stage reads its own section of a params file, resolved for the active profile, takes its input
and output paths as required arguments (`stage_cli`; `dvc.yaml` is the one place they are
written), writes outputs atomically, and reports a user error as one line with exit status 2.

Paper pipelines (`papers/<paper>/dvc.yaml`) run their stages from the repository root
(`wdir: ../..`) and keep their sections in `papers/<paper>/params.yaml`. That file has no
`profile` key: the one switch stays in the root `params.yaml`, which `load_stage` reads for it.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from common.config import active_profile, load_yaml, stage_config
from common.errors import ArgumentParser, ConfigError
from common.logs import configure_logging

T = TypeVar("T")


@dataclass(frozen=True)
class StageCLI:
    """A stage's command line: `--params` (unless `params=False`), one required `--<name>` per path,
    and `options`, each an `--option` with its `argparse` keywords. Paths are written once, in
    `dvc.yaml`; a stage has no defaults that could drift from them."""

    doc: str
    paths: tuple[str, ...]
    params: bool = True
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def parser(self) -> argparse.ArgumentParser:
        parser = ArgumentParser(description=self.doc, formatter_class=argparse.RawDescriptionHelpFormatter)
        if self.params:
            parser.add_argument("--params", type=Path, required=True, metavar="PATH",
                                help="params file with the stage's section (a paper's takes its profile from the "
                                     "root params.yaml)")
        for name in self.paths:
            parser.add_argument(f"--{name}", type=Path, required=True, metavar="PATH")
        for flag, keywords in self.options.items():
            parser.add_argument(flag, **keywords)
        return parser

    def parse(self, argv: list[str] | None) -> argparse.Namespace:
        """The parsed arguments; a path with a file among its parents can be neither read nor written,
        so it is refused here, before any work (an output's parent is otherwise made only at the end),
        and so is an existing directory where a file with a suffix (`metrics.json`, `loss.png`) goes."""
        args = self.parser().parse_args(argv)
        for name in self.paths:
            path = getattr(args, name.replace("-", "_"))
            if (blocker := file_in_the_way(path)) is not None:
                raise ConfigError(f"--{name} {path}: {blocker} is a file, not a directory")
            if path.suffix and path.is_dir():
                raise ConfigError(f"--{name} {path}: a directory stands where this file goes; "
                                  "remove it or name another path")
        return args


def file_in_the_way(path: Path) -> Path | None:
    """The file among `path`'s parents, if one is there: nothing can be read or written below it."""
    nearest = next((p for p in path.absolute().parents if p.exists()), None)
    return nearest if nearest is not None and not nearest.is_dir() else None


def stage_cli(module: str, doc: str | None, *paths: str, params: bool = True,
              options: dict[str, dict[str, Any]] | None = None) -> StageCLI:
    """Declare a stage's command line at the top of its module, before its other imports:
    `CLI = stage_cli(__name__, __doc__, "data", "out")`. When the module runs as a script with
    `-h`/`--help`, the help is printed and the process exits here, before the imports of torch and
    Lightning (about 10 s on a loaded 2-core machine) that the stage's work needs."""
    cli = StageCLI(doc or "", paths, params, options or {})
    if module == "__main__" and {"-h", "--help"} & set(sys.argv[1:]):
        cli.parse(sys.argv[1:])  # prints the help and exits
    return cli


ROOT_PARAMS = Path("params.yaml")


def compute_summary() -> str:
    """Where this process computes: `cpu, 2 torch threads` or `cuda x2 (NVIDIA H100), ...`. Which
    kernel each block family runs is logged by the blocks themselves, once, at first use."""
    import torch

    threads = f"{torch.get_num_threads()} torch threads"
    if not torch.cuda.is_available():
        return f"cpu, {threads}"
    return f"cuda x{torch.cuda.device_count()} ({torch.cuda.get_device_name(0)}), {threads}"


def load_stage(params_path: Path, section: str, cls: type[T],
               shared: tuple[str, type] | None = None) -> tuple[T, str, dict[str, Any]]:
    """Validate the stage's section for the active profile: (config, profile, raw params).

    The profile comes from `params_path` when it names one, else from the root `params.yaml` in
    the working directory (the case of a paper's params file; DVC runs paper stages from the
    repository root). A root file that is missing, empty or without `profile` is an error: a stage
    never guesses its profile. `shared`: a section it reads too (see `common.config.stage_config`)."""
    configure_logging()
    params = load_yaml(params_path)
    if "profile" not in params and Path(params_path).resolve() != ROOT_PARAMS.resolve():
        if not ROOT_PARAMS.is_file():
            raise ConfigError(f"{ROOT_PARAMS.resolve()}: not found; {params_path} takes its profile from the root "
                              "params.yaml, so run the stage from the repository root")
        params = {**params, "profile": active_profile(load_yaml(ROOT_PARAMS), where=str(ROOT_PARAMS))}
    profile = active_profile(params, where=str(params_path))
    logging.getLogger("stage").info("%s at profile %s on %s", section, profile, compute_summary())
    return stage_config(params, section, cls, profile, shared), profile, params
