"""The commented default config.toml generated from the Settings model: accepted as is, and uncommented it is exactly the defaults."""

from __future__ import annotations

import re

import pytest

from spark_watchd.config import Settings, load_settings
from spark_watchd.service import configdoc

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def test_generated_config_is_accepted_by_the_daemon_and_uncommented_is_exactly_the_defaults(tmp_path):
    text = configdoc.render()
    assert tomllib.loads(text) == {k: {} for k in Settings.model_fields}  # all values commented out
    path = tmp_path / "config.toml"
    path.write_text(text)
    defaults = load_settings(None, environ={}).model_dump()
    assert load_settings(str(path), environ={}).model_dump() == defaults
    value_line = re.compile(r"^# [a-z_][a-z0-9_]* = ")  # descriptions are prose, value lines `# key = ...`
    uncommented = "\n".join(
        ln[2:] if value_line.match(ln) and "(unset" not in ln else ln for ln in text.splitlines()
    )
    path.write_text(uncommented)
    assert load_settings(str(path), environ={}).model_dump() == defaults
    for name, info in Settings.model_fields["daemon"].annotation.model_fields.items():
        assert f"# {info.description}\n# {name} = " in text


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (True, "true"),
        (30.0, "30.0"),
        (7, "7"),
        ('a "quoted" \\ path', '"a \\"quoted\\" \\\\ path"'),
        (["x", 1], '["x", 1]'),
        ({"k": False}, '{ "k" = false }'),
    ],
)
def test_toml_values_parse_back_to_the_default(value, literal):
    assert configdoc.toml_value(value) == literal
    assert tomllib.loads(f"v = {literal}")["v"] == value


def test_render_of_given_settings_shows_their_values_not_the_defaults():
    s = load_settings(None, {"daemon": {"interval": 45}}, environ={})
    assert "# interval = 45" in configdoc.render(s) and "# interval = 45" not in configdoc.render()
