"""Mamba language models: the layout of `transformers`' `MambaForCausalLM` and mamba-ssm's
`MambaLMHeadModel` as a `LanguageModel`, and loaders for their checkpoints.

    embedding -> [x = x + Mamba(RMSNorm(x))] * n_layers -> RMSNorm -> head (tied by default)
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from common.blocks.mamba import mamba_kwargs_from_mixer, mamba_mixer_state_dict
from common.models.lm import LanguageModel, LMConfig, check_model_type


def mamba_language_model(vocab_size: int, d_model: int, n_layers: int, norm_eps: float = 1e-5,
                         tie_embeddings: bool = True, n_ctx: int = 2048, **mamba_kwargs) -> LanguageModel:
    """Keyword arguments beyond the model's go to every `Mamba` block (d_state, scan, ...)."""
    return LanguageModel(LMConfig(
        vocab_size=vocab_size, d_model=d_model, pattern="mamba", repeat=n_layers, n_ctx=n_ctx, norm="rmsnorm",
        norm_eps=norm_eps, final_norm="rmsnorm", tie_embeddings=tie_embeddings, blocks={"mamba": mamba_kwargs},
    ))


def _lm_state_dict(sd, embedding_key, layer_prefix, norm_f_key) -> tuple[dict, dict]:
    """Rename a whole Mamba LM state dict to `mamba_language_model`'s keys; returns (state dict, its kwargs).
    Every key must be used: a leftover one means a layout this function does not understand."""
    for key in (embedding_key, norm_f_key):
        if key not in sd:
            raise ValueError(f"missing {key!r}; the state dict has {', '.join(sorted(sd)[:6])}, ...")
    layer_ids = sorted({int(m.group(1)) for k in sd if (m := re.match(re.escape(layer_prefix) + r"(\d+)\.", k))})
    if not layer_ids or layer_ids != list(range(len(layer_ids))):
        raise ValueError(f"layers under {layer_prefix!r} must be numbered 0..n-1, got {layer_ids}")
    out = {"embed.weight": sd[embedding_key], "final_norm.weight": sd[norm_f_key]}
    used = {embedding_key, norm_f_key, "lm_head.weight"}
    kwargs = None
    for i in layer_ids:
        mixer = mamba_mixer_state_dict(sd, f"{layer_prefix}{i}.mixer.")
        layer_kwargs = mamba_kwargs_from_mixer(mixer)
        kwargs = kwargs or layer_kwargs
        if layer_kwargs != kwargs:
            raise ValueError(f"layer {i} is shaped {layer_kwargs}, unlike layer 0: {kwargs}")
        norm_key = f"{layer_prefix}{i}.norm.weight"
        if norm_key not in sd:
            raise ValueError(f"missing {norm_key!r}")
        out.update({f"blocks.{i}.{k}": v for k, v in mixer.items()})
        out[f"norms.{i}.weight"] = sd[norm_key]
        used.update(f"{layer_prefix}{i}.mixer.{k}" for k in mixer)
        used.add(norm_key)
    if leftover := sorted(set(sd) - used):
        raise ValueError(f"unexpected keys for a Mamba LM: {', '.join(leftover[:8])}")
    emb, head = sd[embedding_key], sd.get("lm_head.weight")
    out["head.weight"] = emb if head is None else head
    kwargs.update(vocab_size=emb.shape[0], n_layers=len(layer_ids),
                  tie_embeddings=head is None or head.data_ptr() == emb.data_ptr() or torch.equal(head, emb))
    return out, kwargs


def convert_mamba_ssm_state_dict(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """mamba-ssm `MambaLMHeadModel` keys (backbone.embedding.weight, backbone.layers.{i}.mixer.*,
    backbone.layers.{i}.norm.weight, backbone.norm_f.weight, lm_head.weight) -> `mamba_language_model` keys."""
    return _lm_state_dict(sd, "backbone.embedding.weight", "backbone.layers.", "backbone.norm_f.weight")[0]


def convert_hf_mamba_state_dict(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers `MambaForCausalLM` keys (backbone.embeddings.weight, ...) -> `mamba_language_model` keys."""
    return _lm_state_dict(sd, "backbone.embeddings.weight", "backbone.layers.", "backbone.norm_f.weight")[0]


def mamba_lm_from_hf(path_or_model, **mamba_kwargs) -> LanguageModel:
    """A Mamba `LanguageModel` with the weights of a `transformers` `MambaForCausalLM` (an instance, or a
    directory written by `save_pretrained`). Extra keyword arguments go to every `Mamba` (scan=...)."""
    if isinstance(path_or_model, (str, Path)):
        from transformers import MambaForCausalLM

        check_model_type(path_or_model, "mamba", other_loader="common.models.hf.language_model_from_hf")
        path_or_model = MambaForCausalLM.from_pretrained(path_or_model)
    hf = path_or_model
    cfg = hf.config
    if cfg.hidden_act != "silu":
        raise ValueError(f"only hidden_act='silu' is supported, got {cfg.hidden_act!r}")
    sd, kwargs = _lm_state_dict(hf.state_dict(), "backbone.embeddings.weight", "backbone.layers.",
                                "backbone.norm_f.weight")
    kwargs["tie_embeddings"] = bool(getattr(cfg, "tie_word_embeddings", True)) and kwargs["tie_embeddings"]
    model = mamba_language_model(norm_eps=cfg.layer_norm_epsilon, **kwargs, **mamba_kwargs)
    model.load_state_dict(sd)
    return model.to(hf.dtype)


def mamba_lm_from_mamba_ssm(sd_or_dir, **mamba_kwargs) -> LanguageModel:
    """A Mamba `LanguageModel` from a mamba-ssm state dict, or a directory with its pytorch_model.bin."""
    if isinstance(sd_or_dir, (str, Path)):
        sd_or_dir = torch.load(Path(sd_or_dir) / "pytorch_model.bin", map_location="cpu", weights_only=True)
    sd, kwargs = _lm_state_dict(sd_or_dir, "backbone.embedding.weight", "backbone.layers.", "backbone.norm_f.weight")
    model = mamba_language_model(**kwargs, **mamba_kwargs)
    model.load_state_dict(sd)
    return model
