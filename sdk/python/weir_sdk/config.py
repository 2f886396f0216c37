"""An operator's `config` (the job file's `[operator.config]` table, passed
as JSON) parsed into a dict or a dataclass.

With a dataclass, every field is checked against its annotation (`bool`,
`int`, `float`, `str`, `Optional[...]`/`X | None`, `list[...]`,
`dict[str, ...]`, a nested dataclass, `typing.Any`); a field with a default
may be left out; an unknown field, a missing one or a wrong type is an
`InvalidConfig` naming the field, like the Rust SDK's
`#[serde(deny_unknown_fields)]`. A `__post_init__` that raises
`InvalidConfig` or `ValueError` is reported the same way.
"""

import dataclasses
import json
import types
import typing

from .errors import InvalidConfig
from .jsontext import json_text

_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def parse(text, spec=None):
    """The config `text` (JSON; blank means `{}`) as a dict, or as an
    instance of the dataclass `spec`."""
    text = text if text.strip() else "{}"
    try:
        value = json.loads(text)
    except ValueError as e:
        raise InvalidConfig(f"config is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise InvalidConfig(f"config must be a JSON object, got {json_text(value)}")
    if spec is None:
        return value
    return _dataclass(spec, value, "")


def _where(path):
    return f"`{path}`: " if path else ""


def _dataclass(cls, value, path):
    if not isinstance(value, dict):
        raise InvalidConfig(f"{_where(path)}expected a table, got {json_text(value)}")
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = [f.name for f in fields]
    for key in value:
        if key not in names:
            expected = (
                f"expected `{names[0]}`"
                if len(names) == 1
                else "expected one of " + ", ".join(f"`{n}`" for n in names)
                if names
                else "expected no fields"
            )
            raise InvalidConfig(f"unknown field `{_join(path, key)}`, {expected}")
    args = {}
    for f in fields:
        where = _join(path, f.name)
        if f.name in value:
            args[f.name] = _check(hints.get(f.name, typing.Any), value[f.name], where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InvalidConfig(f"missing field `{where}`")
    try:
        return cls(**args)
    except InvalidConfig:
        raise
    except ValueError as e:
        raise InvalidConfig(f"{_where(path)}{e}") from None


def _join(path, name):
    return f"{path}.{name}" if path else name


def _check(hint, value, path):
    """`value` checked against the annotation `hint`."""
    if hint is typing.Any:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _check(rest[0], value, path)
        for a in rest:
            try:
                return _check(a, value, path)
            except InvalidConfig:
                pass
        raise InvalidConfig(f"`{path}`: {json_text(value)} matches none of the allowed types")
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(value, list):
            raise InvalidConfig(f"`{path}`: expected a list, got {json_text(value)}")
        item = args[0] if args else typing.Any
        return [_check(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise InvalidConfig(f"`{path}`: expected a table, got {json_text(value)}")
        item = args[1] if len(args) == 2 else typing.Any
        return {k: _check(item, v, _join(path, k)) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint, value, path)
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint in (bool, str):
        if isinstance(value, hint):
            return value
    else:
        return value
    raise InvalidConfig(f"`{path}`: expected {_NAMES[hint]}, got {json_text(value)}")
