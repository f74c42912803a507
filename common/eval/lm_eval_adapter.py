"""Any `LanguageModel` as an EleutherAI lm-evaluation-harness model (`pip install .[eval]`).

    from common.eval.lm_eval_adapter import LanguageModelEval, evaluate
    scores = evaluate(LanguageModelEval(model, tokenizer), ["hellaswag", "piqa"])

Importing this module also registers it with the harness as `hybrid-lm`, built from a directory
written by `save_language_model` and a tokenizer directory:

    lm_eval.simple_evaluate(model="hybrid-lm", tasks=["hellaswag"],
                            model_args="model=data/blackmamba/models/blackmamba,tokenizer=data/tokenizer")

From the harness's own command line, `python -m common.eval.lm_eval_cli` registers it first (see there).

The adapter answers the harness's three request types:

- `loglikelihood(context, continuation)`: the summed log-probability of the continuation's tokens
  given the context, and whether greedy decoding would have produced exactly them;
- `loglikelihood_rolling(text)`: the log-probability of a whole text, in windows of the model's
  context length that each condition on up to `n_ctx` previous tokens;
- `generate_until(context, {until, max_gen_toks, ...})`: greedy continuation, cut at the first stop
  string.

Every sequence starts with the end-of-text token, which is how documents are separated in our
packed training data. Context and continuation are tokenized separately (trailing spaces of the
context move to the continuation), so the continuation's tokens are exactly the ones scored.
The harness is imported lazily: the rest of the library does not need it.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import torch
import torch.nn.functional as F

from common.errors import ConfigError
from common.models.lm import LanguageModel
from common.standins import harness_datasets

try:
    from lm_eval.api.model import LM as _HarnessLM
    from lm_eval.api.registry import register_model
except ImportError:  # the `eval` extra is optional; constructing the adapter then raises
    _HarnessLM = object

    def register_model(*names):
        return lambda cls: cls


@register_model("hybrid-lm")
class LanguageModelEval(_HarnessLM):
    def __init__(self, model: LanguageModel, tokenizer, max_gen_toks: int = 64):
        if _HarnessLM is object:
            raise ImportError("lm-eval is not installed; install the extra with `pip install .[eval]`")
        super().__init__()
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_gen_toks = max_gen_toks
        self.prefix_id = tokenizer.eos_token_id
        self.n_ctx = model.cfg.n_ctx

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None) -> LanguageModelEval:
        """`model_args` as the harness's CLI and `simple_evaluate` pass them: `model` (a
        `save_language_model` directory), `tokenizer` (a tokenizer directory) and optionally
        `max_gen_toks`. Of the harness's own settings only `device` is used: requests are scored one
        at a time, so its batch sizes are ignored."""
        from common.data.tokenizer import load_tokenizer
        from common.models.lm import load_language_model

        allowed = {"model", "tokenizer", "max_gen_toks"}
        unknown, missing = sorted(set(arg_dict) - allowed), sorted({"model", "tokenizer"} - set(arg_dict))
        problems = [f"{what} {', '.join(keys)}" for what, keys in (("unknown", unknown), ("missing", missing)) if keys]
        if problems:
            raise ConfigError(f"hybrid-lm model_args: {'; '.join(problems)}; "
                             "allowed: model=<dir>, tokenizer=<dir>, max_gen_toks=<int>")
        model = load_language_model(arg_dict["model"])
        device = (additional_config or {}).get("device")
        # The harness's CLI asks for cuda unless told otherwise; like its own `hf` model, use the CPU
        # when there is no GPU.
        if device and device.startswith("cuda") and not torch.cuda.is_available():
            logging.getLogger(__name__).warning("hybrid-lm: device %s is not available; using the CPU", device)
        elif device:
            model = model.to(device)
        return cls(model, load_tokenizer(arg_dict["tokenizer"]), int(arg_dict.get("max_gen_toks", 64)))

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> LanguageModelEval:
        """`model=<dir>,tokenizer=<dir>[,max_gen_toks=<int>]`; see `create_from_arg_obj`."""
        args = dict(item.split("=", 1) if "=" in item else (item, "") for item in arg_string.split(",") if item)
        return cls.create_from_arg_obj(args, additional_config)

    # -- scoring ----------------------------------------------------------------------------------

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        stripped = context.rstrip(" ")
        continuation = context[len(stripped):] + continuation
        context_ids = [self.prefix_id] + self.tokenizer.encode(stripped, add_special_tokens=False)
        return context_ids, self.tokenizer.encode(continuation, add_special_tokens=False)

    @torch.no_grad()
    def _score(self, context_ids: list[int], continuation_ids: list[int]) -> tuple[float, bool]:
        """Log-probability of `continuation_ids` after `context_ids`, and whether every token is the
        argmax. Continuations longer than n_ctx are scored in windows of n_ctx tokens, each window
        conditioned on the n_ctx tokens before its last one."""
        device = self.model.embed.weight.device
        ids = context_ids + continuation_ids
        first = len(context_ids)  # index in `ids` of the first scored token
        total, greedy = 0.0, True
        for start in range(first, len(ids), self.n_ctx):
            end = min(start + self.n_ctx, len(ids))
            inputs = ids[max(0, end - 1 - self.n_ctx):end - 1]
            logits = self.model(torch.tensor([inputs], device=device))[0, -(end - start):].float()
            target = torch.tensor(ids[start:end], device=device)
            total += F.log_softmax(logits, dim=-1).gather(1, target[:, None]).sum().item()
            greedy &= bool((logits.argmax(dim=-1) == target).all())
        return total, greedy

    def loglikelihood(self, requests) -> list[tuple[float, bool]]:
        return [self._score(*self._encode_pair(*req.args)) for req in requests]

    def loglikelihood_rolling(self, requests) -> list[float]:
        return [self._score([self.prefix_id], self.tokenizer.encode(req.args[0], add_special_tokens=False))[0]
                for req in requests]

    # -- generation -------------------------------------------------------------------------------

    @torch.no_grad()
    def generate_until(self, requests) -> list[str]:
        out = []
        for req in requests:
            context, kwargs = req.args
            until = kwargs.get("until") or [self.tokenizer.eos_token]
            until = [until] if isinstance(until, str) else list(until)
            max_new = int(kwargs.get("max_gen_toks", self.max_gen_toks))
            ids = [self.prefix_id] + self.tokenizer.encode(context, add_special_tokens=False)
            ids = ids[-max(1, self.n_ctx - max_new):]
            device = self.model.embed.weight.device
            generated = self.model.generate(torch.tensor([ids], device=device), max_new_tokens=max_new)
            new = generated[0, len(ids):].tolist()
            if self.tokenizer.eos_token_id in new:
                new = new[:new.index(self.tokenizer.eos_token_id)]
            text = self.tokenizer.decode(new)
            for stop in until:
                if stop and stop in text:
                    text = text[:text.index(stop)]
            out.append(text)
        return out


@functools.cache
def task_manager(include_path: str | None):
    """One lm-eval `TaskManager` per task directory and process: building one indexes every task the
    harness knows (about 37 s here), so a stage evaluating many models builds it once."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=include_path)


def evaluate(adapter: LanguageModelEval, tasks: list[str], include_path: str | Path | None = None,
             limit: int | None = None, num_fewshot: int | None = None, seed: int = 0,
             bootstrap_iters: int = 100_000) -> dict:
    """Run harness tasks (built-in names, or YAML tasks under `include_path`); returns its results dict.

    `bootstrap_iters` is the harness's own (its default): 0 skips every standard error, which a
    caller that does not report them should ask for. Bootstrapping one (perplexity's) starts a
    process pool per call, about 12 s per model on a 2-core machine."""
    from lm_eval import simple_evaluate

    manager = task_manager(str(include_path) if include_path else None)
    with harness_datasets():
        return simple_evaluate(model=adapter, tasks=tasks, task_manager=manager, limit=limit, num_fewshot=num_fewshot,
                               random_seed=seed, numpy_random_seed=seed, torch_random_seed=seed,
                               fewshot_random_seed=seed, bootstrap_iters=bootstrap_iters, log_samples=False)
