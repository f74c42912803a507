"""Stage `mad_experiments`: the paper's MAD tables from scratch: Table 2 (right) and Table 5, and
Table 2 (left) with Table 6, and the MAD searches that program Figure 2 (right).

Table 2 (right), Table 5. For every MAD task: a GPT-Neo-style transformer alone, a Mamba alone, and
Manticore[GPT-Neo, Mamba] built from fresh copies of the same two (`n_blocks` Manticore blocks, one
in the paper; each component's depth a multiple of it), trained as the paper's MAD pipeline does:
everything at once, mixture weights with their own optimizer, simultaneous updates, no projectors
(the paper's from-scratch hybrids have none). The paper reports each model's best test loss during
training, its models overfitting: validation reads the test split, and `best_loss` is the lowest
loss any validation (or the final scoring) saw. Then (`retrain`) the searched alphas are discretized
(argmax per block), the weights rewound to their initial values, and the discretized hybrid
retrained; or the searched alphas are frozen as they are and the rewound hybrid retrained.

Table 2 (left), Table 6. Existing hybrids trained alone (`baselines`: e.g. the MAD paper's striped
multi-head Hyena + MoE-MLP and Mambaformer, any `LanguageModel` pattern), against further
Manticore hybrids (`hybrids`) whose components are any of the `components` and `baselines` (the
paper's: striped MH-Hyena + MoE, GPT-Neo and Mamba, two blocks each, two Manticore blocks),
searched the same way and retrained; `compare` names the result that enters the comparison.

Figure 2 (right). `programming`: a search of Manticore[components] with the paper's appendix E.3
settings (its own block count and mixture-weight rate); `programmed` averages its alphas.

Every network trained alone, and every search with its retrainings, is one job for the worker
processes (`workers`; `common.parallel`), once per seed of `mad_tasks.seeds`. The claims (Table 2
right and left, Table 5) are judged in the claims ledger by the `report` stage, over the seeds and
against chance (each network alone must score above it on every seed); this stage writes losses and
accuracies only, no verdicts. Compression is not part of it (the official pipeline did not run it either).
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "run-dir", "out")

import logging
from dataclasses import asdict

from common.data.mad import sequence_length
from common.errors import exit_on_user_error
from common.io import write_json
from common.parallel import run_jobs
from papers.manticore.mad_config import MAD_TASKS, MADExperimentsConfig, baseline_configs, component_configs
from papers.manticore.mad_runs import job_cost, run_job, table_row

log = logging.getLogger("mad_experiments")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "mad_experiments", MADExperimentsConfig, shared=MAD_TASKS)
    tasks = cfg.tasks()

    jobs = []
    for entry, task in tasks.items():
        n_ctx = sequence_length(task)
        alone = [*component_configs(cfg, task.vocab_size, n_ctx), *baseline_configs(cfg, task.vocab_size, n_ctx)]
        searches = [("manticore", "manticore"), *([("programming", "programming")] if cfg.programming else []),
                    *(("hybrid", name) for name in cfg.hybrids)]
        jobs += [{"kind": kind, "name": name, "entry": entry, "seed": seed, "cfg": cfg,
                  "run_root": args.run_dir / entry.replace("/", "_") / f"seed{seed}"}
                 for seed in cfg.seeds for kind, name in [*(("alone", name) for name in alone), *searches]]
    done = {(job["entry"], job["seed"], job["name"]): result
            for job, result in zip(jobs, run_jobs(run_job, jobs, cfg.trainer.job_workers(cfg.workers), cost=job_cost))}

    results = {}
    for entry in tasks:
        results[entry] = {"seeds": {str(seed): table_row(cfg, {name: result for (e, s, name), result in done.items()
                                                                if (e, s) == (entry, seed)})
                                    for seed in cfg.seeds}}
        for seed, row in results[entry]["seeds"].items():
            log.info("%s, seed %s: test loss %s", entry, seed,
                     {**{k: round(v["loss"], 3) for k, v in row.items() if isinstance(v, dict) and "loss" in v},
                      **{k: round(v["loss"], 3) for k, v in row.get("baselines", {}).items()},
                      **{k: round(v[cfg.hybrids[k].compare]["loss"], 3) for k, v in row.get("hybrids", {}).items()}})

    write_json(args.out, {"profile": profile, "seeds": cfg.seeds, "steps": cfg.trainer.max_steps,
                          "lr": cfg.run_rates(),
                          "components": list(cfg.components), "n_blocks": cfg.n_blocks,
                          "projectors": cfg.projectors,
                          "programming": None if cfg.programming is None else asdict(cfg.programming),
                          "baselines": list(cfg.baselines),
                          "hybrids": {name: asdict(spec) for name, spec in cfg.hybrids.items()},
                          "tasks": results})
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
