"""Typed, validated configs read from YAML.

A config is a dataclass. `from_dict` builds it from a parsed YAML mapping and rejects unknown
keys, wrong types and out-of-range values with one `ConfigError` line that names the full key path
and what is allowed. Numeric bounds live in field metadata: `field(default=8, metadata={"ge": 1})`.

Stage parameters in `params.yaml` are grouped by profile. A section looks like

    lm_baseline:
      base:  {...}          # shared by every profile (optional)
      smoke: {...}          # overrides for the smoke profile
      tiny:  {...}
      paper: {...}

and `stage_config(params, "lm_baseline", Cls)` merges `base` with the active profile's block.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import yaml

from common.errors import ConfigError

PROFILES = ("smoke", "tiny", "paper")
T = TypeVar("T")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Parse a YAML mapping; a missing file, a syntax error or a non-mapping is a `ConfigError`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; a params file is YAML") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{where}: malformed YAML ({problem})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def active_profile(params: dict[str, Any], where: str = "params") -> str:
    """The `profile` key; required, so a params file without it never silently runs some default."""
    if "profile" not in params:
        raise ConfigError(f"{where}: no `profile` key; set it to one of {', '.join(PROFILES)}")
    profile = params["profile"]
    if profile not in PROFILES:
        raise ConfigError(f"profile: {profile!r} is not a profile; allowed: {', '.join(PROFILES)}")
    return profile


def stage_config(params: dict[str, Any], section: str, cls: type[T], profile: str | None = None,
                 shared: tuple[str, type] | None = None) -> T:
    """Build `cls` from `params[section]`, merging its `base` block with the active profile's.

    `shared`: a section another stage reads too, and its class (a base class of `cls`), whose keys
    this stage reads as its own. Kept apart so that each stage's DVC params name only what it reads;
    the shared block is checked on its own first, so that an error names the section it is in, and
    a key of the shared class may be set only there."""
    profile = profile or active_profile(params)
    merged = profile_block(params, section, profile)
    if shared is not None:
        shared_section, shared_cls = shared
        common = profile_block(params, shared_section, profile)
        from_dict(shared_cls, common, where=f"{shared_section}.{profile}")
        owned = {f.name for f in dataclasses.fields(shared_cls)}
        if misplaced := sorted(set(merged) & owned):
            raise ConfigError(f"{section}.{misplaced[0]}: set in {shared_section}, which {section} reads with the "
                              f"other stages that share it; move it there")
        merged = {**common, **merged}
    return from_dict(cls, merged, where=f"{section}.{profile}")


def profile_block(params: dict[str, Any], section: str, profile: str) -> dict[str, Any]:
    """`params[section]`'s `base` block merged with `profile`'s, checked for shape."""
    if section not in params:
        raise ConfigError(f"{section}: section missing from params")
    block = params[section]
    if not isinstance(block, dict):
        raise ConfigError(f"{section}: expected a mapping of profiles, got {type(block).__name__}")
    unknown = sorted(set(block) - {"base", *PROFILES})
    if unknown:
        raise ConfigError(f"{section}.{unknown[0]}: unknown key; allowed: base, {', '.join(PROFILES)}")
    for key in ("base", profile):
        if not isinstance(block.get(key) or {}, dict):
            raise ConfigError(f"{section}.{key}: expected a mapping of settings, got {_describe(block[key])}")
    return deep_merge(block.get("base") or {}, block.get(profile) or {})


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def from_dict(cls: type[T], data: Any, where: str) -> T:
    """Build dataclass `cls` from a mapping, validating keys, types and bounds recursively."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {_describe(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(sorted(fields))}")
    hints = get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        key = f"{where}.{name}"
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{key}: required key missing")
            continue
        value = _convert(hints[name], data[name], key)
        check_bounds(value, f.metadata, key)
        values[name] = value
    obj = cls(**values)
    check = getattr(obj, "check", None)
    if check is not None:
        try:
            check()
        except ConfigError as err:
            raise ConfigError(f"{where}.{err}") from None
    return obj


def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def _convert(tp: Any, value: Any, key: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got {_describe(value)}")
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{key}: {value!r} is not allowed; allowed: {', '.join(map(str, allowed))}")
        return value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, key)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {_describe(value)}")
        args = get_args(tp) or (Any,)
        fixed = origin is tuple and Ellipsis not in args  # tuple[int, float]: one type per position
        if fixed and len(value) != len(args):
            raise ConfigError(f"{key}: expected {len(args)} items, got {len(value)}")
        items = [_convert(args[i] if fixed else args[0], v, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {_describe(value)}")
        _, value_tp = get_args(tp) or (str, Any)
        return {k: _convert(value_tp, v, f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {_describe(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {_describe(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {_describe(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {_describe(value)}")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {key}")


def check_value(tp: Any, value: Any, key: str) -> Any:
    """`value` checked against type annotation `tp` (as `from_dict` checks a field), converted."""
    return _convert(tp, value, key)


def check_bounds(value: Any, meta: Any, key: str) -> None:
    """A number outside `meta`'s bounds (`ge`, `gt`, `le`) is a `ConfigError` naming `key`; a list's
    or tuple's numbers are each checked; other values pass."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_bounds(item, meta, f"{key}[{i}]")
        return
    if value is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if "ge" in meta and value < meta["ge"]:
        raise ConfigError(f"{key}: must be >= {meta['ge']}, got {value}")
    if "gt" in meta and value <= meta["gt"]:
        raise ConfigError(f"{key}: must be > {meta['gt']}, got {value}")
    if "le" in meta and value > meta["le"]:
        raise ConfigError(f"{key}: must be <= {meta['le']}, got {value}")


def _type_name(tp: Any) -> str:
    if get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "null"
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(map(str, get_args(tp)))
    return getattr(tp, "__name__", str(tp))


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if not isinstance(value, dict) else "a mapping"


def bounded(default: Any, **bounds: float) -> Any:
    """A dataclass field with numeric bounds: `batch_size: int = bounded(32, ge=1)`."""
    return dataclasses.field(default=default, metadata=bounds)


def check_distinct(values, key: str, at_least: int = 1) -> None:
    """A list of seeds or names: at least `at_least` of them, each once (a repeat would train the
    same run twice, or two results would share one key)."""
    if len(values) < at_least or len(set(values)) != len(values):
        least = f"at least {at_least}, " if at_least else ""
        raise ConfigError(f"{key}: give {least}each once; got {list(values)}")


def check_names(names, key: str) -> None:
    """Names that become directory names (models, tasks): letters, digits and _, so that none can
    write outside its stage's directory (`../x`) or need quoting."""
    for name in names:
        if not name or not name.replace("_", "").isalnum():
            raise ConfigError(f"{key}.{name}: a name must be letters, digits and _ (it names a directory)")


SEED_RANGE = {"ge": 0, "le": 2**32 - 1}  # what numpy's generators accept (torch's take more)


def seed_field(default: int = 0) -> Any:
    """A random seed: a whole number every generator here accepts."""
    return bounded(default, **SEED_RANGE)


def seeds_field(*default: int) -> Any:
    """A list of random seeds, each as `seed_field`'s: `seeds: list[int] = seeds_field(0, 1, 2)`."""
    return dataclasses.field(default_factory=lambda: list(default), metadata=SEED_RANGE)
