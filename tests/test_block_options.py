"""A block's constructor is its config schema: every option it declares, and nothing else, is
accepted, and a misspelt option stops with one line naming its full key path (looped over the
registry, as mad-lab's tests loop over layers)."""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path

import pytest
import torch
import yaml

from common.blocks.registry import BLOCKS, SHARED, Block, block_options, build_block
from common.config import from_dict
from common.errors import ConfigError
from common.models.lm import LanguageModel, LMConfig
from tests.conftest import ROOT

WHERE = "train_compare.tiny.baselines.transformer"
# A pattern each block can sit in (two-stream blocks need the two-stream norm).
PATTERN_EXTRAS = {"mixer_bidirectional": {"norm": "layernorm_two_stream", "final_norm": "layernorm"},
                  "mlp_two_stream": {"norm": "layernorm_two_stream", "final_norm": "layernorm"}}

OPTIONS = [(name, option) for name in sorted(BLOCKS) for option in block_options(BLOCKS[name]) if option not in SHARED]


def misspell(option: str, declared) -> str:
    typo = option[:-1] if len(option) > 2 and option[:-1] not in declared else option + "x"
    assert typo not in declared
    return typo


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_every_block_declares_its_options_without_a_catch_all(name):
    params = inspect.signature(BLOCKS[name].__init__).parameters.values()
    assert not [p for p in params if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    assert list(block_options(BLOCKS[name])) == [p.name for p in list(params)[3:]]


@pytest.mark.parametrize(("name", "option"), OPTIONS, ids=[f"{n}.{o}" for n, o in OPTIONS])
def test_a_misspelt_option_names_its_full_key_path_and_the_allowed_ones(name, option):
    declared = block_options(BLOCKS[name])
    typo = misspell(option, declared)
    raw = {"pattern": name, "blocks": {name: {typo: 1}}, **PATTERN_EXTRAS.get(name, {})}
    with pytest.raises(ConfigError) as err:
        from_dict(LMConfig, raw, where=WHERE)
    message = str(err.value)
    assert message.startswith(f"{WHERE}.blocks.{name}.{typo}: unknown option; allowed: "), message
    allowed = message.split("allowed: ")[1].split(", ")
    assert allowed == [o for o in declared if o not in SHARED]
    assert "\n" not in message


def test_shared_settings_reach_only_the_blocks_that_declare_them():
    model = LanguageModel(LMConfig(pattern="mixer,mamba", n_ctx=24, d_model=8))
    assert model.blocks[0].n_ctx == 24  # the mixer declares n_ctx; Mamba does not and still builds
    with pytest.raises(ConfigError, match=r"^blocks\.mixer\.n_ctx: set by the model"):
        LanguageModel(LMConfig(pattern="mixer", blocks={"mixer": {"n_ctx": 8}}))


def test_wrong_types_and_choices_are_one_line():
    with pytest.raises(ConfigError, match=r"^x\.blocks\.attn\.n_heads: expected an integer, got str 'two'$"):
        from_dict(LMConfig, {"pattern": "attn", "blocks": {"attn": {"n_heads": "two"}}}, where="x")
    with pytest.raises(ConfigError, match=r"^x\.blocks\.moe\.router: 'softmax' is not allowed; allowed: sinkhorn, "):
        from_dict(LMConfig, {"pattern": "moe", "blocks": {"moe": {"router": "softmax"}}}, where="x")
    with pytest.raises(ConfigError,
                       match=r"^x\.blocks\.mixer\.softmax: 'weight' is not allowed; allowed: none, weights, outputs$"):
        from_dict(LMConfig, {"pattern": "mixer", "blocks": {"mixer": {"softmax": "weight"}}}, where="x")


def numeric(hint) -> bool:
    """Whether an option's type admits a number (int, float, or a union holding one; not a tuple of them)."""
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    return any(a in (int, float) for a in args)


NUMERIC = [(name, option) for name, option in OPTIONS
           if numeric(typing.get_type_hints(BLOCKS[name].__init__).get(option))]


@pytest.mark.parametrize(("name", "option"), NUMERIC, ids=[f"{n}.{o}" for n, o in NUMERIC])
def test_every_numeric_option_has_a_range_and_a_value_outside_it_is_one_line(name, option):
    bounds = BLOCKS[name].option_bounds.get(option)
    assert bounds, f"{name}.{option}: declare its range in {BLOCKS[name].__qualname__}.option_bounds"
    default = block_options(BLOCKS[name])[option].default
    for kind, edge in bounds.items():
        if default is not None and not isinstance(default, str):  # the default itself is in range
            assert {"ge": default >= edge, "gt": default > edge, "le": default <= edge}[kind], (kind, edge, default)
        outside = {"ge": edge - 1, "gt": edge, "le": edge + 1}[kind]
        raw = {"pattern": name, "blocks": {name: {option: outside}}, **PATTERN_EXTRAS.get(name, {})}
        with pytest.raises(ConfigError, match=rf"^x\.blocks\.{name}\.{option}: must be "):
            from_dict(LMConfig, raw, where="x")


def test_a_misspelt_hugging_face_config_field_is_one_line():
    # Hugging Face configs keep any keyword as an attribute, so without this check the typo is ignored.
    spec = {"pattern": "hf_decoder", "blocks": {"hf_decoder": {"family": "gpt_neox",
                                                               "config": {"num_attention_head": 4}}}}
    with pytest.raises(ConfigError, match=r"^x\.blocks\.hf_decoder\.config\.num_attention_head: "
                                          r"not a field of transformers' GPTNeoXConfig$"):
        from_dict(LMConfig, spec, where="x")
    spec["blocks"]["hf_decoder"]["config"] = {"num_attention_heads": 4}
    from_dict(LMConfig, spec, where="x")
    # A field Hugging Face's own validation refuses for this d_model: one line, not its report.
    spec["blocks"]["hf_decoder"]["config"] = {"num_attention_heads": 3}
    with pytest.raises(ConfigError, match=r"^x\.blocks\.hf_decoder: gpt_neox config: .*divisible") as err:
        from_dict(LMConfig, {**spec, "d_model": 32}, where="x")
    assert "\n" not in str(err.value)


class Doubler(Block):
    """A block kept outside `common/`, named by import path."""

    def __init__(self, d_model: int, layer_idx: int = 0, factor: float = 2.0):
        super().__init__()
        self.factor = factor
        self.proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x, cache=None):
        return self.factor * self.proj(x)


def test_a_block_named_by_import_path_builds_and_checks_its_options():
    path = f"{__name__}:Doubler"
    model = LanguageModel(LMConfig(pattern=f"attn,{path}", d_model=8, blocks={path: {"factor": 3.0}}))
    assert isinstance(model.blocks[1], Doubler) and model.blocks[1].factor == 3.0
    assert model(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, 4096)
    with pytest.raises(ConfigError, match=rf"^blocks\.{path}\.fctor: unknown option; allowed: factor$"):
        LMConfig(pattern=path, blocks={path: {"fctor": 3.0}}).check()
    with pytest.raises(ConfigError, match=r"cannot import"):
        LMConfig(pattern="tests.nowhere:Doubler").check()
    with pytest.raises(ConfigError, match=r"not a subclass"):
        build_block("torch.nn:Linear", 8)


# The typos of the issue, each through a real stage's `main`: one line, exit 2, nothing written.
STAGE_TYPOS = [
    ("papers/blackmamba/params.yaml", "train_compare", ["baselines", "transformer", "blocks", "attn"],
     {"n_head": 2}, "train_compare.smoke.baselines.transformer.blocks.attn.n_head: unknown option; allowed: n_heads,"),
    ("papers/blackmamba/params.yaml", "train_compare", ["baselines", "moe_transformer", "blocks", "moe"],
     {"n_expert": 2, "routr": "softmax_topk"},
     "train_compare.smoke.baselines.moe_transformer.blocks.moe.n_expert: unknown option; allowed: n_experts,"),
    ("papers/blackmamba/params.yaml", "train_compare", ["baselines", "mamba"],
     {"blocks": {"mamba": {"d_stat": 4}}},
     "train_compare.smoke.baselines.mamba.blocks.mamba.d_stat: unknown option; allowed: d_state,"),
    ("papers/masked_mixers/params.yaml", "models", ["archs", "mixer_k4", "blocks", "mixer"],
     {"kernel": 4}, "models.smoke.archs.mixer_k4.blocks.mixer.kernel: unknown option; allowed: kernel_size,"),
    # Well-typed values a block refuses for the model's sizes, found when the config is loaded too.
    ("papers/masked_mixers/params.yaml", "models", ["archs", "mixer_flat", "blocks", "mixer"],
     {"n_heads": 3}, "models.smoke.archs.mixer_flat.blocks.mixer: n_heads=3 must divide d_model=16"),
    ("papers/masked_mixers/params.yaml", "models", ["archs", "mixer_flat", "blocks", "mixer"],
     {"parallel": 2, "n_heads": 2},
     "models.smoke.archs.mixer_flat.blocks.mixer: parallel=2 combines with neither n_heads > 1 nor expansion"),
    ("papers/blackmamba/params.yaml", "train_compare", ["baselines", "transformer", "blocks", "attn"],
     {"n_heads": 5}, "train_compare.smoke.baselines.transformer.blocks.attn: n_heads=5 must divide d_model="),
]


@pytest.mark.parametrize("params_file,section,path,typo,expected", STAGE_TYPOS,
                         ids=[t[-1].split(":")[0] for t in STAGE_TYPOS])
def test_stage_stops_on_a_block_option_typo(params_file, section, path, typo, expected, tmp_path, monkeypatch,
                                            capsys):
    from papers.blackmamba import train_compare
    from papers.masked_mixers import compare

    raw = yaml.safe_load((ROOT / params_file).read_text())
    node = raw[section].setdefault("smoke", {})
    for key in path:
        node = node.setdefault(key, {})
    node.update(typo)
    params = tmp_path / "paper_params.yaml"
    params.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("profile: smoke\n")
    out = tmp_path / "out"
    if section == "train_compare":
        argv = ["--params", str(params), "--data", str(out / "d"), "--tokenizer", str(out / "t"),
                "--run-dir", str(out / "r"), "--models-out", str(out / "m"), "--out", str(out / "x.json"),
                "--plot", str(out / "a.png")]
        main = train_compare.main
    else:
        argv = ["--params", str(params), "--data", str(out / "d"), "--tokenizer", str(out / "t"),
                "--run-dir", str(out / "r"), "--results", str(out / "x"), "--section", "clm"]
        main = compare.main
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {expected}"), err
    assert not out.exists()
