"""The commented default config.toml, generated from the Settings model so it never drifts from the code.

Every key is written commented out with its default, under its description: the daemon's defaults
stay in one place (the models), and uncommenting a line is the whole edit an operator makes.
`python -m spark_watchd.service.configdoc` prints it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel

from spark_watchd.config import Settings

HEADER = """\
# spark-watchd configuration (TOML). Every key is optional: the commented value is the default.
# Override any key with the environment, SPARK_WATCHD_<SECTION>__<KEY> (e.g.
# SPARK_WATCHD_DAEMON__INTERVAL=60), and the environment with command-line flags.
# After editing: systemctl restart spark-watchd.
"""


def toml_value(value: Any) -> str:
    """A TOML literal for a default value (strings, numbers, booleans, lists, tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, BaseModel):
        return toml_value(value.model_dump(mode="json"))
    return json.dumps(str(value))


def _section(model: BaseModel, path: str, out: list[str]) -> None:
    cls = type(model)
    scalars, nested = [], []
    for name, info in cls.model_fields.items():
        value = getattr(model, name)
        (nested if isinstance(value, BaseModel) else scalars).append((name, info, value))
    out.append("")
    doc = (cls.__doc__ or "").strip().splitlines()
    if doc and not doc[0].startswith(("Usage docs", "!!!")):
        out.append(f"# {doc[0]}")
    out.append(f"[{path}]")
    for name, info, value in scalars:
        if info.description:
            for line in info.description.strip().splitlines():
                out.append(f"# {line.strip()}")
        if value is None:
            out.append(f"# {name} =   (unset by default)")
        else:
            out.append(f"# {name} = {toml_value(value)}")
    for name, _info, value in nested:
        _section(value, f"{path}.{name}", out)


def render(settings: BaseModel | None = None) -> str:
    """The commented config file for these settings (the models' defaults when None, never the environment)."""
    out = [HEADER.rstrip("\n")]
    for name, info in Settings.model_fields.items():
        value = (
            getattr(settings, name) if settings is not None else info.get_default(call_default_factory=True)
        )
        if isinstance(value, BaseModel):
            _section(value, name, out)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
