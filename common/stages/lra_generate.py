"""Stage `lra_generate`: Long Range Arena tasks as `.npy` arrays with a manifest, one directory per task.

    data/lra/<name>/{train,validation}_{input_ids,attention_mask,label}.npy + manifest.json

Each entry of `tasks` is an `LRATaskConfig` (`common/data/lra.py`): ListOps and Pathfinder are
generated from their seed; IMDb and CIFAR-10 (`paper` profile) come from the Hugging Face Hub.
`LRADataModule(task, data_dir=...)` reads a directory back and checks it was made from that config.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "out")

import logging
from dataclasses import dataclass, field

from common.config import check_names
from common.data.lra import LRATaskConfig, lra_splits, save_splits
from common.errors import ConfigError, exit_on_user_error
from common.io import atomic_dir

log = logging.getLogger("lra_generate")


@dataclass
class LRAGenerateConfig:
    tasks: dict[str, LRATaskConfig] = field(default_factory=dict)

    def check(self) -> None:
        if not self.tasks:
            raise ConfigError("tasks: empty; name at least one task, e.g. listops: {task: listops}")
        check_names(self.tasks, "tasks")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "lra_generate", LRAGenerateConfig)
    with atomic_dir(args.out) as tmp:
        for name, task in cfg.tasks.items():
            splits = lra_splits(task)
            save_splits(splits, tmp / name, task, stage="lra_generate")
            log.info("%s: %d train / %d validation sequences of length %d", name, len(splits["train"]["label"]),
                     len(splits["validation"]["label"]), splits["train"]["input_ids"].shape[1])
    log.info("wrote %s (%s profile)", args.out, profile)


if __name__ == "__main__":
    main()
