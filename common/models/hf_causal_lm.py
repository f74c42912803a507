"""Any `LanguageModel` as a `transformers` causal LM, so the ecosystem's tools load and run it.

A model the pipelines saved (`save_language_model`, e.g. `data/blackmamba/models/blackmamba/seed0`)
becomes such a directory with

    python -m common.models.hf_causal_lm data/blackmamba/models/blackmamba/seed0 my-model --tokenizer data/tokenizer

and in Python:

    from common.models.hf_causal_lm import save_pretrained
    save_pretrained(model, "my-model", tokenizer=tokenizer)      # model: a LanguageModel

    from transformers import AutoModelForCausalLM, pipeline
    hf = AutoModelForCausalLM.from_pretrained("my-model", trust_remote_code=True)
    pipeline("text-generation", model="my-model", trust_remote_code=True)("Once upon a time")
    lm_eval --model hf --model_args pretrained=my-model,trust_remote_code=True --tasks ...

The directory holds `config.json` (model type `hybrid_lm`, the `LMConfig` under `lm_config`, the
dtype), `model.safetensors` with the `LanguageModel`'s own tensor names under `model.`, the
tokenizer when given, and `modeling_hybrid_lm.py`, two lines that import the classes below. That
file is how a process that never imported this project finds them: `transformers` runs it under
`trust_remote_code=True`, and it works wherever this project is installed. A process that imported
this module needs no flag (the classes are registered with the Auto classes on import).

`HybridLMForCausalLM` runs the wrapped model unchanged: the same logits, in the saved dtype.
Generation through `generate` recomputes the window of the last `n_ctx` tokens for every new token
(no cache crosses the `transformers` boundary); `LanguageModel.generate` is the fast path in this
project. The model has no attention mask: a batch padded on the left is refused, right padding is
harmless to a causal model.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from common.config import from_dict
from common.errors import ArgumentParser, DataError, exit_on_user_error
from common.io import atomic_dir
from common.models.lm import HF_MODEL_TYPE, LanguageModel, LMConfig

SHIM = "modeling_hybrid_lm"
SHIM_SOURCE = (
    '"""Loads this directory\'s model with the hybrid-mixers-repro project, which must be installed."""\n'
    "from common.models.hf_causal_lm import HybridLMConfig, HybridLMForCausalLM  # noqa: F401\n"
)


class HybridLMConfig(PretrainedConfig):
    model_type = HF_MODEL_TYPE

    def __init__(self, lm_config: dict | None = None, **kwargs):
        self.lm_config = dict(lm_config or {})
        if self.lm_config:
            kwargs.setdefault("vocab_size", self.lm_config.get("vocab_size"))
            kwargs.setdefault("max_position_embeddings", self.lm_config.get("n_ctx"))
            kwargs.setdefault("tie_word_embeddings", self.lm_config.get("tie_embeddings", True))
        super().__init__(**kwargs)

    def language_model_config(self) -> LMConfig:
        return from_dict(LMConfig, self.lm_config, where="config.json:lm_config")


class HybridLMForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = HybridLMConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _tied_weights_keys = {"model.head.weight": "model.embed.weight"}

    def __init__(self, config: HybridLMConfig, model: LanguageModel | None = None):
        super().__init__(config)
        self.model = model if model is not None else LanguageModel(config.language_model_config())
        self.post_init()

    def _init_weights(self, module):
        # The wrapped model initialises itself, and every weight is read from the checkpoint.
        pass

    @classmethod
    def from_language_model(cls, model: LanguageModel, **config_kwargs) -> HybridLMForCausalLM:
        """Wrap `model` (its weights are shared, not copied)."""
        config = HybridLMConfig(lm_config=asdict(model.cfg), architectures=[cls.__name__], **config_kwargs)
        config.dtype = model.embed.weight.dtype
        return cls(config, model)

    @classmethod
    def from_pretrained(cls, *args, **kwargs) -> HybridLMForCausalLM:
        """`PreTrainedModel.from_pretrained`, then the buffers no checkpoint holds (rotary
        frequencies, a mixer's causal mask, MoE counters), which `transformers` leaves uninitialised."""
        model = super().from_pretrained(*args, **kwargs)
        model.restore_buffers()
        return model

    @torch.no_grad()
    def restore_buffers(self) -> None:
        """Recompute the non-persistent buffers as the wrapped model's constructor makes them, cast
        as `Module.to(dtype)` would cast them."""
        weight = self.model.embed.weight
        fresh = LanguageModel(self.config.language_model_config())
        for prefix, module in fresh.named_modules():
            target = self.model.get_submodule(prefix)
            for name in module._non_persistent_buffers_set:
                buffer = getattr(module, name)
                dtype = weight.dtype if buffer.is_floating_point() else buffer.dtype
                target.register_buffer(name, buffer.to(device=weight.device, dtype=dtype), persistent=False)

    def get_input_embeddings(self):
        return self.model.embed

    def get_output_embeddings(self):
        return self.model.head

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                labels: torch.LongTensor | None = None, **kwargs) -> CausalLMOutput:
        """Logits `[B, T, vocab]`; with `labels`, the mean next-token loss (`-100` is ignored), as
        every `transformers` causal LM computes it."""
        if attention_mask is not None and _left_padded(attention_mask):
            raise ValueError("hybrid_lm: a row of attention_mask starts with padding; this model has no "
                             "attention mask, so pad on the right (or batch rows of one length)")
        logits = self.model(input_ids)
        loss = None
        if labels is not None:
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids: torch.LongTensor, attention_mask=None, **kwargs) -> dict:
        # No cache: every step reads the last n_ctx tokens, as `LanguageModel.generate` does without one.
        n_ctx = self.model.cfg.n_ctx
        mask = attention_mask[:, -n_ctx:] if attention_mask is not None else None
        return {"input_ids": input_ids[:, -n_ctx:], "attention_mask": mask}


def _left_padded(mask: torch.Tensor) -> bool:
    """Whether some row has a 0 before a 1."""
    mask = mask.long()
    one_later = mask.flip(1).cummax(dim=1).values.flip(1)  # 1 where this or a later position holds a token
    return bool(((mask == 0) & (one_later == 1)).any())


AutoConfig.register(HF_MODEL_TYPE, HybridLMConfig)
AutoModelForCausalLM.register(HybridLMConfig, HybridLMForCausalLM)


def save_pretrained(model: LanguageModel, path: str | Path, tokenizer=None) -> Path:
    """Write `model` (and `tokenizer`) as a `transformers` model directory, atomically."""
    hf = HybridLMForCausalLM.from_language_model(
        model, auto_map={"AutoConfig": f"{SHIM}.HybridLMConfig", "AutoModelForCausalLM": f"{SHIM}.HybridLMForCausalLM"},
        bos_token_id=getattr(tokenizer, "bos_token_id", None), eos_token_id=getattr(tokenizer, "eos_token_id", None),
        pad_token_id=getattr(tokenizer, "pad_token_id", None))
    with atomic_dir(Path(path)) as tmp:
        hf.save_pretrained(tmp)
        (tmp / f"{SHIM}.py").write_text(SHIM_SOURCE)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return Path(path)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description="Write a save_language_model directory as a transformers one.")
    parser.add_argument("model", help="a directory written by save_language_model")
    parser.add_argument("out", help="the transformers directory to write (replaced if it exists)")
    parser.add_argument("--tokenizer", help="a tokenizer directory to save beside the model")
    args = parser.parse_args(argv)
    from common.data.tokenizer import load_tokenizer
    from common.models.lm import load_language_model

    model = load_language_model(args.model)
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    if tokenizer is not None and len(tokenizer) > model.cfg.vocab_size:
        raise DataError(f"{args.tokenizer}: {len(tokenizer)} tokens, but the model has {model.cfg.vocab_size} rows")
    print(save_pretrained(model, args.out, tokenizer=tokenizer))


if __name__ == "__main__":
    main()
