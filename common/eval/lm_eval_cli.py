"""lm-eval's own command line, with this project's models registered as `hybrid-lm`:

    python -m common.eval.lm_eval_cli run --model hybrid-lm \\
        --model_args model=data/blackmamba/models/blackmamba,tokenizer=data/tokenizer --tasks piqa

Every argument goes to the harness's CLI unchanged (`python -m common.eval.lm_eval_cli --help` is its
help). A wrapper rather than `lm_eval` itself because the harness registers only the models it
ships: ours are known once `common.eval.lm_eval_adapter` is imported, which this module does.
"""

from __future__ import annotations

import common.eval.lm_eval_adapter  # noqa: F401  (registers hybrid-lm)
from common.errors import exit_on_user_error
from common.standins import harness_datasets


@exit_on_user_error
def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    # Under HYBRID_STANDINS the harness's tasks read local stand-ins, as in the zero-shot stage.
    with harness_datasets():
        cli_evaluate()


if __name__ == "__main__":
    main()
