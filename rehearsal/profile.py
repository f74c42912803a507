"""The rehearsal's configs: every `paper` block with its run lengths cut, its shapes untouched.

`rehearsal_params(params)` returns a params file whose `paper` blocks are the `paper` profile's
merged values (base + paper) with the keys below cut, everything else kept: widths, depths,
context lengths, vocabularies, batch sizes, precision, accelerator and data sources. The cuts are
by key name, wherever the key sits in a section, so a new stage's `max_steps` is cut without
listing the stage here; a key that holds a length of training and is not listed would show up as
a slow rehearsal, never as a wrong one. Two cuts read what a section holds instead: the example
counts of MAD tasks (set in code, reached through `task_overrides`) and retrieval's candidate pools.

`batch_rows` also cuts every `batch_size` to that many rows: full `paper` batches cost minutes to
hours per step on 2 CPU cores (Manticore's LRA runs, 32 x 2048-4096 tokens, most), and a batch of 2 still has a
batch dimension that a squeeze or a reshape could get wrong. `precision` replaces every trainer's
precision (the paper's `bf16-mixed` is a GPU setting). A section whose tasks each run a whole
landscape runs it on its first such task only (`_cut_landscapes`).
"""

from __future__ import annotations

import copy
from typing import Any

from common.config import PROFILES, deep_merge
from common.data.mad import MADSelection

# Optimisation steps of any phase, and the step counts of a projector-budget sweep.
STEPS = 1
STEP_KEYS = {"max_steps", "steps", "projector_steps", "search_steps", "train_steps"}
# Every interval in steps: validate, log and checkpoint at each step, so those paths all run.
EVERY_STEP_KEYS = {"val_every_n_steps", "log_every_n_steps", "checkpoint_every_n_steps", "check_every"}
# Repetitions and evaluation batches: one of each.
# `validations` (mad_sizing's per run) must fit in a budget of STEPS.
ONE_KEYS = {"limit_val_batches", "eval_batches", "batches", "repeats", "warmup_steps", "n_inputs", "validations"}
# Rows and documents: at most this many. It is at least every `paper` batch size (128), so batch
# shapes stay full, and at most the rows of each data set stand-in (rehearsal.standins.N_ROWS).
ROWS = 256
ROW_KEYS = {"n_train", "n_validation", "n_val", "n_test", "n_projector", "items_per_task", "eval_rows", "train_rows"}
# Held-out rows, which stages score in full, outside the trainer's validation batches: with
# `batch_rows`, a few batches of them (256 rows of 512 tokens through a 255M-parameter hybrid cost
# minutes per run on 2 cores, and Manticore's specialists stage scores a dozen runs). Not `n_test`:
# Masked Mixers' retrieval draws its 32 candidates from it.
EVAL_ROW_KEYS = {"n_validation", "eval_rows"}
EVAL_BATCHES = 4
# Rows a stage generates token by token before anything trains on them (Manticore's completions:
# 256 prompts of 30 new tokens from two 125M models took 18.6 min): a few batches, as held-out rows.
GENERATED_ROW_KEYS = {"n_prompts"}
# MAD sections name their tasks' example counts in code (common.data.mad.SETTINGS), not in params: the
# cut goes in through each section's own `task_overrides`. Every run scores the whole test split
# (1,280 rows at paper), which made most of mad_experiments' 27 minutes.
MAD_EXAMPLE_KEYS = {"num_train_examples": "rows", "num_test_examples": "eval_rows"}
# A block with `candidates` (Masked Mixers' retrieval) draws each query's candidates from its train
# and from its test rows, and embeds every row with each source model at full width: both are cut to
# the largest candidate count, the fewest that still draw it.
CANDIDATE_POOL_KEYS = {"n_train", "n_test"}
# Examples scored after training, None meaning every validation row (lra_experiments): a few batches.
EVAL_EXAMPLE_KEYS = {"eval_examples"}
# The story corpus every paper samples from keeps all the stand-in's rows (rehearsal.standins.N_ROWS):
# a stage may draw ROWS held-out stories and its training stories from one split (specialists).
CORPUS_SECTIONS = {"stories"}
CORPUS_ROWS = 600
# Tokens read for pretraining text: enough for STEPS steps of 8 x 1024-token blocks, plus validation.
TOKENS = 65536
TOKEN_KEYS = {"train_tokens", "validation_tokens"}
# Sweeps: the points that exercise every code path (both ends and one inside, or the first point).
ENDS_AND_MIDDLE_KEYS = {"sweep_points"}
# `updates`, a search's update rules: a stage searches with every method under every rule, and each
# rule is one code path whatever the method. Every method still runs, and each rule runs in some
# stage (Manticore: alternating in specialists and nl_experiments, simultaneous in finetune_tasks
# and the MAD and LRA stages). It took 12 of specialists' 19 runs to 6.
FIRST_KEYS = {"seeds", "token_counts", "contexts", "depths", "updates"}
FIRST_TWO_KEYS = {"lengths"}
LAST_KEYS = {"untrained_sizes"}  # the last is the paper's own size


def _cut(key: str, value: Any, batch_rows: int | None, precision: str | None, rows: int, eval_rows: int) -> Any:
    if isinstance(value, dict):
        # Budgets per task (lra_sizing): each task's list is cut as budgets are.
        inner = {k: "budgets" if key == "budgets" else k for k in value}
        return {k: _cut(inner[k], v, batch_rows, precision, rows, eval_rows) for k, v in value.items()}
    if key == "precision" and precision is not None:
        return precision
    if key in EVAL_EXAMPLE_KEYS and (value is None or isinstance(value, int)):
        return eval_rows if value is None else min(value, eval_rows)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, list):
        if key in ENDS_AND_MIDDLE_KEYS:
            return sorted({value[0], value[len(value) // 2], value[-1]})
        if key == "budgets":  # steps of sizing runs or of projector pretraining: none (if listed), and some
            # A sizing budget one step past the tables' (STEPS): a budget equal to the tables' is their
            # own run, which mad_sizing refuses to train again and lra_sizing reads from the tables.
            return [0, STEPS] if 0 in value else [STEPS + 1]
        if key in STEP_KEYS:
            return [min(v, STEPS) for v in value[:1]]
        if key in FIRST_KEYS:
            return value[:1]
        if key in FIRST_TWO_KEYS:
            return value[:2]
        if key in LAST_KEYS:
            return value[-1:]
        return [_cut(key, v, batch_rows, precision, rows, eval_rows) for v in value]
    if isinstance(value, int):
        if key == "batch_size" and batch_rows is not None:
            return min(value, batch_rows)
        if key in STEP_KEYS:
            return min(value, STEPS)
        if key in EVERY_STEP_KEYS:
            return 1
        if key in ONE_KEYS:
            return min(value, 1)
        if key in EVAL_ROW_KEYS | GENERATED_ROW_KEYS:
            return min(value, eval_rows)
        if key in ROW_KEYS:
            return min(value, rows)
        if key in TOKEN_KEYS:
            return min(value, TOKENS)
    return value


def _cut_mad_examples(block: dict[str, Any], rows: int, eval_rows: int) -> dict[str, Any]:
    """A MAD section (one with `settings`) with every task's example counts cut through `task_overrides`."""
    if not isinstance(block.get("settings"), list):
        return block
    selection = MADSelection(block["settings"], block.get("overrides") or {}, block.get("task_overrides") or {})
    limits = {"rows": rows, "eval_rows": eval_rows}
    task_overrides = copy.deepcopy(selection.task_overrides)
    for task in selection.tasks().values():
        values = task_overrides.setdefault(task.task, {})
        for key, limit in MAD_EXAMPLE_KEYS.items():
            values[key] = min(getattr(task, key), limits[limit], values.get(key, limits[limit]))
    return {**block, "task_overrides": task_overrides}


def _cut_landscapes(block: dict[str, Any]) -> dict[str, Any]:
    """A section whose `tasks` run the whole landscape (`landscape: true`, Manticore's finetune_tasks)
    keeps it on the first such task only: every task still runs (its data loader, mixed with
    another source or not, components alone, search and retraining), and the landscape, which
    reads nothing of its task but the tokenized data, runs each of its paths once."""
    tasks = block.get("tasks")
    if not isinstance(tasks, dict):
        return block
    cut, kept = {}, False
    for name, task in tasks.items():
        if isinstance(task, dict) and task.get("landscape"):
            cut[name] = task if not kept else {**task, "landscape": False}
            kept = True
        else:
            cut[name] = task
    return {**block, "tasks": cut}


def _cut_candidate_pools(block: dict[str, Any]) -> dict[str, Any]:
    """The section's pools and those of its blocks with candidates of their own (retrieval's throughput)."""
    block = {k: _cut_candidate_pools(v) if isinstance(v, dict) else v for k, v in block.items()}
    if not isinstance(block.get("candidates"), list):
        return block
    largest = max(block["candidates"])
    return {**block, **{k: min(block[k], largest) for k in CANDIDATE_POOL_KEYS if isinstance(block.get(k), int)}}


def rehearsal_params(params: dict[str, Any], batch_rows: int | None = None,
                     precision: str | None = None) -> dict[str, Any]:
    """`params` (one params file, as loaded) with each section's `paper` block cut for the rehearsal;
    `batch_rows`: cut batch sizes too, `precision`: every trainer's precision (None keeps the paper's)."""
    out = copy.deepcopy(params)
    for section, block in params.items():
        if isinstance(block, dict) and set(block) <= {"base", *PROFILES} and "paper" in block:
            merged = deep_merge(block.get("base") or {}, block.get("paper") or {})
            rows = CORPUS_ROWS if section in CORPUS_SECTIONS else ROWS
            eval_rows = rows if batch_rows is None or section in CORPUS_SECTIONS else EVAL_BATCHES * batch_rows
            cut = _cut(section, merged, batch_rows, precision, rows, eval_rows)
            out[section]["paper"] = _cut_landscapes(_cut_candidate_pools(_cut_mad_examples(cut, rows, eval_rows)))
    if "profile" in out:
        out["profile"] = "paper"
    return out
