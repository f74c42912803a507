"""lm-eval's own command line, with this project's models registered as `hybrid-lm`:

    python -m common.eval.lm_eval_cli run --model hybrid-lm \\
        --model_args model=data/blackmamba/models/blackmamba,tokenizer=data/tokenizer --tasks piqa

Every argument goes to the harness's CLI unchanged (`python -m common.eval.lm_eval_cli --help` is its
help). A wrapper rather than `lm_eval` itself because the harness registers only the models it
ships: ours are known once `common.eval.lm_eval_adapter` is imported, which this module does.
"""

from __future__ import annotations

import common.eval.lm_eval_adapter  # noqa: F401  (registers hybrid-lm)
from common.errors import ConfigError, exit_on_user_error
from common.standins import harness_datasets

MISSING_TASKS = "Tasks not found: "  # the harness's own ValueError for a task name it does not know


@exit_on_user_error
def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    # Under HYBRID_STANDINS the harness's tasks read local stand-ins, as in the zero-shot stage.
    with harness_datasets():
        try:
            cli_evaluate()
        except ValueError as err:  # a misspelt task is the user's input: one line, not a traceback
            if not str(err).startswith(MISSING_TASKS):
                raise
            raise ConfigError(f"--tasks: {str(err)[len(MISSING_TASKS):]}: not lm-eval tasks; list them with "
                              "`python -m common.eval.lm_eval_cli ls tasks`") from None


if __name__ == "__main__":
    main()
