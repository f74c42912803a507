"""BlackMamba checkpoints: the released Megatron-style files, and our own directory format.

Released layout (Zyphra/BlackMamba-1.5B / -2.8B): `config.json` and `pytorch_model.bin`, a pickle
of `{"model": state_dict}` with keys

    embedding.word_embeddings.weight                  [V, H]   (the head is tied to it)
    decoder.layers.{i}.norm.weight                    [H]      RMSNorm
    decoder.layers.{i}.mixer.{in_proj.weight, ...}             Mamba-1 mixer, even i
    decoder.layers.{i}.mixer.router.{weight, bias}    [E, H], [E]                       odd i
    decoder.layers.{i}.mixer.local_experts.{e}.linear_fc1.weight  [2F, H]  (rows: gate | up)
    decoder.layers.{i}.mixer.local_experts.{e}.linear_fc2.weight  [H, F]
    decoder.final_layernorm.{weight, bias}            [H]      LayerNorm

Our own format is the library's (`common.models.lm.save_language_model` / `load_language_model`):
`config.json` with the `LMConfig` and `model.safetensors` with `LanguageModel` keys.

Every file is read with `torch.load(weights_only=True)` or safetensors, so a pickle that carries
code is refused; missing, unexpected or mis-shaped tensors are reported in one line.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import torch

from common.blocks.mamba import mamba_kwargs_from_mixer, mamba_mixer_state_dict
from common.errors import DataError
from common.io import atomic_dir
from common.models.lm import LanguageModel
from papers.blackmamba.model import BlackMambaConfig, build_blackmamba

RELEASED_WEIGHTS = ("pytorch_model.bin", "1.5b.pt", "2.8b.pt")


# --- the released format ------------------------------------------------------------------------


def config_from_released(raw: dict, activation: str = "silu") -> BlackMambaConfig:
    """Our config from a released `config.json`. Only the alternating `["r", "8", ...]` layout of the
    released models is accepted."""
    try:
        layers = list(raw["mamba_moe_layers"])
        n_layers, hidden = int(raw["num_layers"]), int(raw["hidden_size"])
    except (KeyError, TypeError, ValueError) as err:
        raise DataError(f"config.json: not a BlackMamba config ({err!r}); needs num_layers, hidden_size, "
                        f"mamba_moe_layers") from None
    if len(layers) != n_layers or layers[0::2] != ["r"] * (n_layers // 2) or len(set(layers[1::2])) != 1 \
            or not layers[1].isdigit() or n_layers % 2:
        raise DataError(f"config.json: mamba_moe_layers must alternate 'r' and one expert count, "
                        f"e.g. ['r', '8', 'r', '8'], got {layers[:6]}...")
    if raw.get("add_bias_linear", False) or raw.get("bias", False):
        raise DataError("config.json: linear biases (bias/add_bias_linear true) are not part of the released models")
    return BlackMambaConfig(
        vocab_size=int(raw["vocab_size"]), d_model=hidden, n_layers=n_layers, d_state=int(raw["state_size"]),
        d_conv=int(raw["conv_dimension"]), expand=int(raw.get("expansion_factor", 2)), n_experts=int(layers[1]),
        d_ff=int(raw.get("ffn_hidden_size") or 4 * hidden), activation=activation,
        n_ctx=int(raw.get("max_sequence_length", 2048)))


def _safe_load(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0]
        raise DataError(f"{path}: refused, the pickle holds more than tensors ({first})") from None
    except (OSError, RuntimeError, EOFError) as err:
        raise DataError(f"{path}: not a readable torch checkpoint ({err})") from None


def state_dict_from_released(sd: dict[str, torch.Tensor], cfg: BlackMambaConfig) -> dict[str, torch.Tensor]:
    """Released keys -> `LanguageModel` keys. Every released key must be consumed."""
    out, used = {}, set()

    def take(key: str, shape: tuple[int, ...]) -> torch.Tensor:
        if key not in sd:
            raise DataError(f"checkpoint: missing {key!r}")
        if tuple(sd[key].shape) != shape:
            raise DataError(f"checkpoint: {key} has shape {tuple(sd[key].shape)}, expected {shape}")
        used.add(key)
        return sd[key]

    H, V, E, Fw = cfg.d_model, cfg.vocab_size, cfg.n_experts, cfg.d_ff
    out["embed.weight"] = take("embedding.word_embeddings.weight", (V, H))
    out["head.weight"] = out["embed.weight"]
    out["final_norm.weight"] = take("decoder.final_layernorm.weight", (H,))
    out["final_norm.bias"] = take("decoder.final_layernorm.bias", (H,))
    for i in range(cfg.n_layers):
        prefix = f"decoder.layers.{i}."
        out[f"norms.{i}.weight"] = take(prefix + "norm.weight", (H,))
        if i % 2 == 0:
            try:
                mixer = mamba_mixer_state_dict(sd, prefix + "mixer.")
                shape = mamba_kwargs_from_mixer(mixer)
            except ValueError as err:
                raise DataError(f"checkpoint: {err}") from None
            want = dict(d_model=H, d_state=cfg.d_state, d_conv=cfg.d_conv, expand=cfg.expand)
            if {k: shape[k] for k in want} != want:
                raise DataError(f"checkpoint: layer {i} Mamba is {shape}, config says {want}")
            out.update({f"blocks.{i}.{k}": v for k, v in mixer.items()})
            used.update(prefix + "mixer." + k for k in mixer)
            continue
        out[f"blocks.{i}.router.weight"] = take(prefix + "mixer.router.weight", (E, H))
        if cfg.router_bias:
            out[f"blocks.{i}.router.bias"] = take(prefix + "mixer.router.bias", (E,))
        experts = prefix + "mixer.local_experts."
        out[f"blocks.{i}.w_in"] = torch.stack([take(f"{experts}{e}.linear_fc1.weight", (2 * Fw, H)) for e in range(E)])
        out[f"blocks.{i}.w_out"] = torch.stack([take(f"{experts}{e}.linear_fc2.weight", (H, Fw)) for e in range(E)])
    if leftover := sorted(set(sd) - used):
        raise DataError(f"checkpoint: unexpected keys for this config: {', '.join(leftover[:5])}"
                        + (f" and {len(leftover) - 5} more" if len(leftover) > 5 else ""))
    return out


def state_dict_to_released(model: LanguageModel) -> dict[str, torch.Tensor]:
    """The inverse of `state_dict_from_released`, for a model built by `build_blackmamba`."""
    sd = model.state_dict()
    out = {"embedding.word_embeddings.weight": sd["embed.weight"],
           "decoder.final_layernorm.weight": sd["final_norm.weight"],
           "decoder.final_layernorm.bias": sd["final_norm.bias"]}
    for key, value in sd.items():
        m = re.match(r"(norms|blocks)\.(\d+)\.(.+)", key)
        if not m:
            continue
        kind, i, name = m.groups()
        prefix = f"decoder.layers.{i}."
        if kind == "norms":
            out[prefix + "norm.weight"] = value
        elif name == "w_in" or name == "w_out":
            fc = "linear_fc1" if name == "w_in" else "linear_fc2"
            for e, w in enumerate(value.unbind(0)):
                out[f"{prefix}mixer.local_experts.{e}.{fc}.weight"] = w.clone()
        else:
            out[prefix + "mixer." + name] = value
    return out


def load_released(path: Path | str, activation: str = "silu", dtype: torch.dtype = torch.float32) -> LanguageModel:
    """A released BlackMamba directory (config.json + pytorch_model.bin) as our `LanguageModel`."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise DataError(f"{path}: no config.json; expected a directory with config.json and pytorch_model.bin")
    weights = next((path / name for name in RELEASED_WEIGHTS if (path / name).is_file()), None)
    if weights is None:
        raise DataError(f"{path}: no weights file; expected one of {', '.join(RELEASED_WEIGHTS)}")
    cfg = config_from_released(json.loads((path / "config.json").read_text()), activation)
    raw = _safe_load(weights)
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise DataError(f"{weights}: expected a Megatron-style {{'model': state_dict}}, got keys "
                        f"{sorted(raw)[:4] if isinstance(raw, dict) else type(raw).__name__}")
    model = build_blackmamba(cfg)
    model.load_state_dict(state_dict_from_released(raw["model"], cfg))
    return model.to(dtype).eval()


def save_released(model: LanguageModel, cfg: BlackMambaConfig, path: Path | str) -> Path:
    """Write `model` in the released layout (in its own dtype; the release is bf16)."""
    raw_config = {"num_layers": cfg.n_layers, "hidden_size": cfg.d_model, "state_size": cfg.d_state,
                  "conv_dimension": cfg.d_conv, "vocab_size": cfg.vocab_size, "expansion_factor": cfg.expand,
                  "mamba_moe_layers": ["r", str(cfg.n_experts)] * (cfg.n_layers // 2), "ffn_hidden_size": cfg.d_ff,
                  "bias": False, "add_bias_linear": False, "swiglu": True, "max_sequence_length": cfg.n_ctx}
    with atomic_dir(Path(path)) as tmp:
        (tmp / "config.json").write_text(json.dumps(raw_config))
        torch.save({"model": state_dict_to_released(model)}, tmp / "pytorch_model.bin")
    return Path(path)
