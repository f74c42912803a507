"""`LanguageModel`: any block pattern as a causal LM, with cached or recomputing generation.

    embedding (+ learned positions) -> [x = x + block(norm(x)) for each block] -> final norm -> head

The pattern names registered blocks, e.g. `"mamba,moe"` repeated 2 times, or `"attn,swiglu"`, or
blocks kept elsewhere by import path (`package.module:Class`). Each block gets `d_model`, its
`layer_idx`, the model's `n_ctx` if it declares that option, and the options listed under its name
in `blocks`, which are checked against the options the block declares.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

import common.blocks  # noqa: F401  (registers every block family)
from common.blocks.norms import build_norm
from common.blocks.registry import block_class, build_block, check_block_options
from common.config import bounded, from_dict
from common.data.manifest import MANIFEST, file_sha256, verify_manifest
from common.errors import ConfigError, DataError
from common.io import atomic_dir, write_json


@dataclass
class LMConfig:
    vocab_size: int = bounded(4096, ge=2)
    d_model: int = bounded(128, ge=1)
    pattern: str = "attn,swiglu"
    repeat: int = bounded(1, ge=1)
    n_ctx: int = bounded(512, ge=1)
    norm: Literal["rmsnorm", "layernorm", "layernorm_two_stream", "none"] = "rmsnorm"
    norm_eps: float = bounded(1e-6, gt=0)
    final_norm: Literal["rmsnorm", "layernorm", "none"] = "rmsnorm"
    pos_embedding: Literal["none", "learned"] = "none"
    tie_embeddings: bool = True
    init_std: float = bounded(0.02, gt=0)
    # "standard": each block's `init_weights(init_std)` (N(0, init_std) linear layers, as GPT-2 and
    # Llama; Mamba keeps its own); "pytorch": PyTorch's default layer init (the masked-mixer code's).
    init: Literal["standard", "pytorch"] = "standard"
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def layers(self) -> list[str]:
        return [name.strip() for name in self.pattern.split(",")] * self.repeat

    def check(self) -> None:
        for name in self.layers:
            try:
                block_class(name)
            except ConfigError as err:
                raise ConfigError(f"pattern: {err}") from None
        for name, options in self.blocks.items():
            if name not in self.layers:
                raise ConfigError(f"blocks.{name}: not in the pattern ({self.pattern})")
            if not isinstance(options, dict):
                raise ConfigError(f"blocks.{name}: expected a mapping of options, got {type(options).__name__}")
            check_block_options(name, options, where=f"blocks.{name}")
        # Values a block refuses for this model's sizes (heads that do not divide d_model, ...) stop
        # the config here, before any work: each block built once, on the meta device (no memory).
        for name in dict.fromkeys(self.layers):
            with torch.device("meta"):
                build_block(name, self.d_model, shared={"n_ctx": self.n_ctx}, **self.blocks.get(name, {}))


def check_lm_spec(raw: dict[str, Any], where: str) -> None:
    """Validate a `LMConfig` mapping whose `vocab_size` and `n_ctx` are filled in later from the data,
    so a stage's config is checked, block options included, before any work starts."""
    from_dict(LMConfig, {"vocab_size": 2, "n_ctx": 1, **raw}, where=where)


@dataclass
class LMCache:
    layers: list[Any]
    position: int = 0


class LanguageModel(nn.Module):
    def __init__(self, cfg: LMConfig):
        super().__init__()
        cfg.check()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_embed = nn.Embedding(cfg.n_ctx, cfg.d_model) if cfg.pos_embedding == "learned" else None
        self.blocks = nn.ModuleList(
            build_block(name, cfg.d_model, i, shared={"n_ctx": cfg.n_ctx}, **cfg.blocks.get(name, {}))
            for i, name in enumerate(cfg.layers)
        )
        self.norms = nn.ModuleList(
            nn.Identity() if block.wraps_residual else build_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
            for block in self.blocks
        )
        self.final_norm = build_norm(cfg.final_norm, cfg.d_model, cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.init == "standard":
            for block in self.blocks:
                block.init_weights(cfg.init_std)
        nn.init.normal_(self.embed.weight, std=cfg.init_std)
        if self.pos_embed is not None:
            nn.init.normal_(self.pos_embed.weight, std=cfg.init_std)
        if cfg.tie_embeddings:
            self.head.weight = self.embed.weight
        else:
            nn.init.normal_(self.head.weight, std=cfg.init_std)

    @property
    def position_weights(self) -> bool:
        """Whether some weights belong to one position (learned positions, a masked mixer's
        convolution): then rows shorter than `n_ctx` leave the later positions' weights untrained."""
        return self.pos_embed is not None or any(block.position_weights for block in self.blocks)

    def forward(self, input_ids: torch.Tensor, cache: LMCache | None = None) -> torch.Tensor:
        start = cache.position if cache is not None else 0
        x = self.run_blocks(self.embed(input_ids), 0, len(self.blocks), cache=cache, position=start)
        if cache is not None:
            cache.position = start + input_ids.shape[1]
        return self.head(x)

    def run_blocks(self, x: torch.Tensor, first: int, stop: int, cache: LMCache | None = None,
                   position: int = 0, final_norm: bool = True) -> torch.Tensor:
        """Blocks `first .. stop-1` on hidden states `x [B, T, d_model]` whose first token sits at
        `position`. Learned positions are added when starting at block 0 and the final norm is
        applied when ending at the last block (unless `final_norm=False`), so running the model in
        contiguous slices (as a Manticore hybrid does) equals running it whole."""
        if first == 0 and self.pos_embed is not None:
            positions = torch.arange(position, position + x.shape[1], device=x.device)
            if positions[-1] >= self.cfg.n_ctx:
                raise ValueError(f"position {int(positions[-1])} beyond n_ctx={self.cfg.n_ctx}")
            x = x + self.pos_embed(positions)
        for i in range(first, stop):
            norm, block = self.norms[i], self.blocks[i]
            if block.wraps_residual:
                x = block(x)
                continue
            h = norm(x)
            if cache is None:
                x = x + block(h)
            elif x.shape[1] == 1 and position > 0:
                x = x + block.step(h, cache.layers[i])
            else:
                x = x + block(h, cache.layers[i])
        return self.final_norm(x) if stop == len(self.blocks) and final_norm else x

    def aux_loss(self) -> torch.Tensor | None:
        """Sum of the blocks' auxiliary losses from the last forward (MoE load balancing)."""
        losses = [loss for block in self.blocks if (loss := block.aux_loss()) is not None]
        return torch.stack(losses).sum() if losses else None

    @property
    def supports_cache(self) -> bool:
        return all(block.supports_step for block in self.blocks)

    def allocate_cache(self, batch_size: int, max_len: int) -> LMCache:
        param = self.embed.weight
        return LMCache([block.allocate_cache(batch_size, max_len, param.device, param.dtype) for block in self.blocks])

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, *, do_sample: bool = False,
                 temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                 seed: int | None = None, use_cache: bool = True) -> torch.Tensor:
        """Greedy or sampled continuation of `input_ids [B, T]`; returns `[B, T + max_new_tokens]`.

        With `use_cache` and blocks that all support `step`, the prompt is processed once and
        every new token costs one recurrent or cached step. Otherwise each token recomputes the
        whole window of the last `n_ctx` tokens, which is how the masked mixer generates.
        """
        generator = torch.Generator(device=input_ids.device).manual_seed(seed) if seed is not None else None
        ids = input_ids
        cached = use_cache and self.supports_cache
        if cached:
            cache = self.allocate_cache(ids.shape[0], ids.shape[1] + max_new_tokens)
            logits = self(ids, cache)[:, -1]
        for i in range(max_new_tokens):
            if not cached:
                logits = self(ids[:, -self.cfg.n_ctx:])[:, -1]
            token = sample_next(logits, do_sample, temperature, top_k, top_p, generator)
            ids = torch.cat([ids, token], dim=1)
            if cached and i + 1 < max_new_tokens:
                logits = self(token, cache)[:, -1]
        return ids


def sample_next(logits: torch.Tensor, do_sample: bool, temperature: float, top_k: int | None,
                top_p: float | None, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row: argmax, or a draw after temperature, top-k and nucleus (top-p) filtering."""
    if not do_sample:
        return logits.argmax(-1, keepdim=True)
    logits = logits.float() / max(temperature, 1e-8)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        sorted_logits, order = logits.sort(-1, descending=True)
        probs = sorted_logits.softmax(-1)
        # Drop a token once the mass before it already reaches top_p; the first token always stays.
        drop = probs.cumsum(-1) - probs >= top_p
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)


# --- saving and loading ---------------------------------------------------------------------------

FORMAT = "language-model"
MODEL_FILES = ("config.json", "model.safetensors")
HF_MODEL_TYPE = "hybrid_lm"  # a `transformers` directory written by `hf_causal_lm.save_pretrained`


def check_model_type(path: str | Path, *expected: str, other_loader: str) -> None:
    """Refuse, in one line, a Hugging Face directory whose `model_type` a loader cannot read (the
    Auto classes would build some other architecture, or a random model around stray weights), and
    name the loader that reads it. A Hub id (no such local directory) is left to `transformers`."""
    if not Path(path).is_dir():
        return
    config = Path(path) / "config.json"
    if not config.is_file():
        raise DataError(f"{path}: no config.json (expected a Hugging Face model directory)")
    try:
        model_type = json.loads(config.read_text()).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{config}: not valid JSON ({err})") from None
    if model_type in expected:
        return
    loader = "common.models.lm.load_language_model" if model_type in (None, HF_MODEL_TYPE) else other_loader
    raise DataError(f"{config}: model_type {model_type!r}, expected {' or '.join(map(repr, expected))}; "
                    f"load it with {loader}")


def save_language_model(model: LanguageModel, path: str | Path) -> Path:
    """`config.json` (the `LMConfig`), `model.safetensors` and `manifest.json` (a SHA-256 of each),
    written atomically. A tied head is stored once, as the embedding."""
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if not (k == "head.weight" and model.cfg.tie_embeddings)}
    with atomic_dir(Path(path)) as tmp:
        (tmp / "config.json").write_text(json.dumps(
            {"format": FORMAT, "lm_config": asdict(model.cfg)}, indent=2))
        save_file(state, str(tmp / "model.safetensors"))
        write_model_manifest(tmp)
    return Path(path)


def write_model_manifest(directory: Path) -> None:
    """Hash only the model's own files: stages keep other things (a tokenizer) in the same directory."""
    write_json(directory / MANIFEST, {"format": FORMAT, "files": {n: file_sha256(directory / n) for n in MODEL_FILES}})


def load_language_model(path: str | Path) -> LanguageModel:
    """Read back `save_language_model`'s directory, checking its files against their manifest and
    every tensor name and shape, in the dtype it was saved in. A `transformers` directory of ours
    (`hf_causal_lm.save_pretrained`) loads too."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
        raise DataError(f"{path}: expected config.json and model.safetensors (written by save_language_model)")
    if (path / MANIFEST).is_file():  # directories saved before manifests, or by transformers, have none
        verify_manifest(path, hint="save the model again, or rerun the stage that wrote it")
    try:
        raw = json.loads((path / "config.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path}/config.json: not valid JSON ({err}); save the model again") from None
    hf_format = raw.get("model_type") == HF_MODEL_TYPE
    if raw.get("format") != FORMAT and not hf_format:
        loader = {"mamba": "common.models.mamba.mamba_lm_from_hf"}.get(
            raw.get("model_type"), "common.models.hf.language_model_from_hf")
        kind = f"a Hugging Face {raw['model_type']!r} model; load it with {loader}" if "model_type" in raw \
            else f"format={raw.get('format')!r}"
        raise DataError(f"{path}/config.json: not a {FORMAT} directory ({kind})")
    if not isinstance(raw.get("lm_config"), dict):
        raise DataError(f"{path}/config.json: no lm_config mapping; save the model again")
    model = LanguageModel(from_dict(LMConfig, raw["lm_config"], where=f"{path}/config.json:lm_config"))
    try:
        state = load_file(str(path / "model.safetensors"))
    except SafetensorError as err:  # truncated, or not a safetensors file
        raise DataError(f"{path}/model.safetensors: unreadable ({err}); save the model again") from None
    if hf_format:  # the wrapper keeps this model's tensors under `model.`
        state = {key.removeprefix("model."): value for key, value in state.items()}
    if model.cfg.tie_embeddings and "embed.weight" in state:
        state["head.weight"] = state["embed.weight"]
    expected = model.state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise DataError(f"{path}: missing {missing[:4] or 'nothing'}, unexpected {unexpected[:4] or 'nothing'}")
    for key, value in state.items():
        if value.shape != expected[key].shape:
            raise DataError(f"{path}: {key} has shape {tuple(value.shape)}, expected {tuple(expected[key].shape)}")
    # Built in float32; a checkpoint saved in bfloat16 stays bfloat16.
    model.to(state["embed.weight"].dtype).load_state_dict(state)
    return model.eval()
