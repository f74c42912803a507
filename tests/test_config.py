"""Config loading and validation: every user mistake is one line naming the key."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from common.config import bounded, from_dict, load_yaml, stage_config
from common.errors import ConfigError


@dataclass
class Inner:
    batch_size: int = bounded(8, ge=1)
    lr: float = bounded(1e-3, gt=0)
    mode: Literal["padded", "packed"] = "padded"
    devices: int | str = 1
    limit: int | None = None


@dataclass
class Outer:
    name: str = "x"
    inner: Inner = field(default_factory=Inner)
    sizes: list[int] = field(default_factory=list)


@pytest.mark.parametrize("data, message", [
    ({"inner": {"batch_size": -4}}, "cfg.inner.batch_size: must be >= 1, got -4"),
    ({"inner": {"bogus": 1}}, "cfg.inner.bogus: unknown key; allowed: batch_size, devices, limit, lr, mode"),
    ({"inner": {"mode": "ragged"}}, "cfg.inner.mode: 'ragged' is not allowed; allowed: padded, packed"),
    ({"inner": {"lr": "fast"}}, "cfg.inner.lr: expected a number, got str 'fast'"),
    ({"inner": {"batch_size": 2.5}}, "cfg.inner.batch_size: expected an integer, got float 2.5"),
    ({"inner": {"batch_size": True}}, "cfg.inner.batch_size: expected an integer, got bool True"),
    ({"inner": 3}, "cfg.inner: expected a mapping, got int 3"),
    ({"sizes": [1, "two"]}, "cfg.sizes[1]: expected an integer, got str 'two'"),
    ({"inner": {"devices": [1]}}, "cfg.inner.devices: expected int or str, got list [1]"),
])
def test_validation_names_the_key(data, message):
    with pytest.raises(ConfigError) as err:
        from_dict(Outer, data, "cfg")
    assert str(err.value) == message


def test_valid_config_converts_types():
    cfg = from_dict(Outer, {"inner": {"lr": 1, "devices": "auto", "limit": None}, "sizes": [1, 2]}, "cfg")
    assert cfg.inner.lr == 1.0 and isinstance(cfg.inner.lr, float)
    assert cfg.inner.devices == "auto" and cfg.sizes == [1, 2] and cfg.inner.batch_size == 8


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("profile: tiny\nstories:\n  base: {seed: 0\n  tiny: {}\n")
    with pytest.raises(ConfigError) as err:
        load_yaml(path)
    message = str(err.value)
    assert message.startswith(f"{path}:") and "malformed YAML" in message and "\n" not in message


def test_missing_and_non_mapping_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_yaml(tmp_path / "absent.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        load_yaml(tmp_path / "list.yaml")


def test_profiles_merge_base_and_reject_unknowns():
    params = {"profile": "smoke", "sec": {"base": {"batch_size": 4, "lr": 0.5}, "smoke": {"batch_size": 2}}}
    cfg = stage_config(params, "sec", Inner)
    assert (cfg.batch_size, cfg.lr) == (2, 0.5)
    with pytest.raises(ConfigError, match=r"^profile: 'huge' is not a profile; allowed: smoke, tiny, paper$"):
        stage_config({**params, "profile": "huge"}, "sec", Inner)
    with pytest.raises(ConfigError, match=r"^sec.smok: unknown key; allowed: base, smoke, tiny, paper$"):
        stage_config({"profile": "smoke", "sec": {"smok": {}}}, "sec", Inner)
    with pytest.raises(ConfigError, match=r"^sec: section missing from params$"):
        stage_config({"profile": "smoke"}, "sec", Inner)


def stage_sections(folder: Path) -> dict[str, type]:
    """Section -> config class (or class and shared section), for every stage module in `folder` that
    calls `load_stage(args.params, "<section>", <Class>[, shared=...])` or `load_paper_stage(...)` (which also reads the
    paper's shared `models` section) or Masked Mixers' `clm_recipe(params_path, "<section>", <Class>)`,
    and for Masked Mixers' `compare`, which reads the section its `--section` names."""
    import importlib
    import re

    from tests.conftest import ROOT

    found = {}
    for path in sorted(folder.glob("*.py")):
        module = None
        # `clm_recipe` (Masked Mixers): a section trained with the clm section's recipe. `shared`: a
        # section the stage reads besides its own (Manticore's mad_tasks, lra_tasks), with its class.
        for loader, section, cls, shared in re.findall(
                r'(load_stage|load_paper_stage|clm_recipe)\((?:args\.)?params(?:_path)?, "(\w+)", (\w+)'
                r'(?:, shared=(\w+))?\)', path.read_text()):
            module = module or importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
            found[section] = (getattr(module, cls), getattr(module, shared)) if shared else getattr(module, cls)
            if shared:
                found.setdefault(*getattr(module, shared))
            if loader == "load_paper_stage":
                from papers.masked_mixers.models import ModelsConfig

                found["models"] = ModelsConfig
    if folder.name == "masked_mixers":
        from papers.masked_mixers.compare import SECTIONS, CompareConfig

        for section in SECTIONS:
            found.setdefault(section, CompareConfig)
    return found


PIPELINE_FOLDERS = {"params.yaml": "common/stages", "papers/blackmamba/params.yaml": "papers/blackmamba",
                    "papers/manticore/params.yaml": "papers/manticore",
                    "papers/masked_mixers/params.yaml": "papers/masked_mixers"}


def validate_params_files(root: Path) -> None:
    """Every section of every pipeline's params file under `root` builds its stage's config at every
    profile; the first error raises (a `ConfigError` naming the key)."""
    from common.config import PROFILES
    from tests.conftest import ROOT

    for params_file, folder in PIPELINE_FOLDERS.items():
        params = load_yaml(root / params_file)
        sections = stage_sections(ROOT / folder)
        assert set(params) - {"profile"} == set(sections), f"{params_file}: every section must be read by a stage"
        for profile in PROFILES:
            for section, cls in sections.items():
                cls, shared = cls if isinstance(cls, tuple) else (cls, None)
                stage_config(params, section, cls, profile, shared=shared)


def test_repository_params_validate_for_every_profile():
    """Every section of every pipeline's params file is read by one of its stages and builds for every
    profile (catches typos in the paper blocks, which no test run reaches)."""
    from tests.conftest import ROOT

    validate_params_files(ROOT)


def test_seeds_out_of_the_generators_range_name_the_key():
    from common.config import seed_field, seeds_field

    @dataclass
    class Seeded:
        seed: int = seed_field()
        seeds: list[int] = seeds_field(0, 1)

    assert from_dict(Seeded, {"seed": 2**32 - 1, "seeds": [0, 7]}, where="s").seeds == [0, 7]
    for raw, message in [({"seed": -1}, r"^s\.seed: must be >= 0, got -1$"),
                         ({"seed": 2**32}, r"^s\.seed: must be <= 4294967295, got 4294967296$"),
                         ({"seeds": [0, -1]}, r"^s\.seeds\[1\]: must be >= 0, got -1$")]:
        with pytest.raises(ConfigError, match=message):
            from_dict(Seeded, raw, where="s")


def test_every_config_seed_has_the_generators_range():
    """A seed numpy refuses (-1, 2**32) stopped stages with a traceback; every config field named
    `seed` or `seeds`, in every module of the project, declares the range."""
    import dataclasses
    import importlib
    import inspect

    from common.config import SEED_RANGE
    from tests.conftest import ROOT

    seen = []
    for path in sorted([*ROOT.glob("common/**/*.py"), *ROOT.glob("papers/**/*.py")]):
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for _, cls in inspect.getmembers(module, dataclasses.is_dataclass):
            for f in dataclasses.fields(cls):
                if f.name in ("seed", "seeds") and cls.__module__ == module.__name__:
                    seen.append(f"{cls.__qualname__}.{f.name}")
                    assert dict(f.metadata) == SEED_RANGE, f"{module.__name__}.{cls.__qualname__}.{f.name}"
    assert len(seen) >= 20, seen


@pytest.mark.parametrize("name", ["../escape", "a/b", "", "has space"])
def test_names_that_become_directories_stay_inside_their_stage(name):
    from common.config import check_names
    from common.stages.lra_generate import LRAGenerateConfig
    from papers.manticore.components import ComponentsConfig
    from papers.masked_mixers.models import ModelsConfig

    with pytest.raises(ConfigError, match=r"a name must be letters, digits and _ \(it names a directory\)$"):
        check_names(["ok_1", name], "models")
    spec = {"d_model": 8, "pattern": "mlp"}
    for cls, raw in [(ComponentsConfig, {"models": {name: spec}}), (LRAGenerateConfig, {"tasks": {name: {}}})]:
        with pytest.raises(ConfigError, match=rf"^c\.(models|tasks)\.{re.escape(name)}: a name must be"):
            from_dict(cls, raw, where="c")
    with pytest.raises(ConfigError, match=rf"^c\.archs\.{re.escape(name)}: a name must be"):
        from_dict(ModelsConfig, {"archs": {name: {}}}, where="c")


@pytest.mark.parametrize("config, raw, message", [
    ("papers.manticore.landscape:LandscapeConfig", {"methods": ["darts", "darts"]},
     r"^c\.methods: give at least 1, each once; got \['darts', 'darts'\]$"),
    ("papers.manticore.landscape:LandscapeConfig", {"components": ["gpt_neo", "gpt_neo"]},
     r"^c\.components: give at least 1, each once"),
    ("papers.masked_mixers.train:CompareConfig", {"models": ["mixer_flat", "mixer_flat", "llama_h4"]},
     r"^c\.models: give at least 2, each once"),
    ("papers.blackmamba.compared_models:TrainCompareConfig", {"seeds": [1, 1]},
     r"^c\.seeds: give at least 1, each once"),
    ("papers.manticore.specialists:SpecialistsConfig",
     {"pairs": {"p": {"components": ["gpt_neo", "mamba"], "updates": ["alternating", "alternating"]}}},
     r"^c\.pairs\.p\.updates: give each once"),
])
def test_a_repeated_name_or_seed_is_refused(config, raw, message):
    """A repeat trained the same run twice, or two results shared one key and one was lost."""
    import importlib

    module, name = config.split(":")
    with pytest.raises(ConfigError, match=message):
        from_dict(getattr(importlib.import_module(module), name), raw, where="c")
