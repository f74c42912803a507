"""Stage `nl_experiments`: the paper's Figure 2 (left), Table 4 and Table 8 on the completions set.

1. Projector pretraining: a Manticore[GPT-Neo, Mamba] with frozen components trains its projectors
   and embeddings on general text (the `general_text` stage's: stories at `tiny`, FineWeb at
   `paper`) for `projector_steps` batches, with uniform mixture weights. Every later run starts
   from these weights.
2. Sweep: for each fixed alpha on a grid (the weight of the second component per block), train
   everything for `train_steps` on the completions and record the validation loss: the landscape.
   The grid's ends are the components alone (a one-hot alpha turns the projectors off).
3. Search: for each method (DARTS = softmax, DASH = Gumbel-softmax, GAEA = exponentiated gradient
   on the simplex) and update rule (alternating, simultaneous), search the alphas for
   `search_steps` while everything trains, then rewind the weights to step 1's, freeze the
   searched alphas and retrain for `train_steps`.
4. Ensemble: the components' output distributions mixed by learned weights, trained likewise.

Steps 2-4 are `papers.manticore.landscape`, which `finetune_tasks` also runs on the
paper's Figure 3 sets.

Claims checked: does search land in the sweep's best region, and does the ensemble fall below
Manticore? Writes `results/nl_experiments.json` and the landscape plot with the searched alphas.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "completions", "general", "run-dir", "out", "plot")

import logging

from common.errors import exit_on_user_error
from common.io import write_json
from papers.manticore.finetune import Runner, hybrid_inputs, plot_landscape, write_not_trained
from papers.manticore.landscape import LandscapeConfig, landscape

log = logging.getLogger("nl_experiments")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "nl_experiments", LandscapeConfig)
    if not cfg.train:
        write_not_trained(args, profile, cfg.components, {"trained": False})
        return
    components, tokenizer, general = hybrid_inputs(args, cfg, "nl_experiments", [args.completions])
    runner = Runner(cfg, components, len(tokenizer), args.run_dir)
    start, projector_history = runner.pretrain_projectors(general, cfg.projector_steps)
    result = landscape(runner, cfg, start, args.completions)
    write_json(args.out, {"profile": profile, "components": cfg.components, **result,
                          "projector_pretraining": projector_history})
    plot_landscape(result["sweep"], result["searched"], cfg.components, args.plot)
    log.info("wrote %s: %s", args.out, result["summary"])


if __name__ == "__main__":
    main()
