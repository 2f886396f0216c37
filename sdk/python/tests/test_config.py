"""Config parsed into a dict or a dataclass, errors naming the field."""

from dataclasses import dataclass, field
from typing import Optional

import pytest

from weir_sdk import InvalidConfig, parse_config


@dataclass
class Window:
    size: int
    label: str = "w"


@dataclass
class Config:
    lowercase: bool = False
    ratio: float = 1.0
    name: Optional[str] = None
    tags: list[str] = field(default_factory=list)
    window: Optional[Window] = None

    def __post_init__(self):
        if self.ratio < 0:
            raise InvalidConfig(f"`ratio` must be >= 0, got {self.ratio}")


def test_blank_config_is_an_empty_dict():
    assert parse_config("") == {}
    assert parse_config('{"x": [1]}') == {"x": [1]}


def test_dataclass_fields_are_parsed_and_checked():
    c = parse_config('{"ratio": 2, "tags": ["a"], "window": {"size": 3}}', Config)
    assert c == Config(ratio=2.0, tags=["a"], window=Window(3))
    assert isinstance(c.ratio, float)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[1]", "config must be a JSON object"),
        ("{", "config is not JSON"),
        ('{"lowercase": 1}', "`lowercase`: expected a boolean, got 1"),
        ('{"lowercas": true}', "unknown field `lowercas`, expected one of `lowercase`, `ratio`"),
        ('{"tags": ["a", 2]}', "`tags[1]`: expected a string, got 2"),
        ('{"window": {}}', "missing field `window.size`"),
        ('{"window": {"size": 1, "x": 0}}', "unknown field `window.x`, expected one of `size`, `label`"),
        ('{"ratio": -1}', "`ratio` must be >= 0"),
        ('{"name": 5}', "`name`: expected a string, got 5"),
    ],
)
def test_errors_name_the_field(text, message):
    with pytest.raises(InvalidConfig) as e:
        parse_config(text, Config)
    assert message in str(e.value)
