"""Configuration: TOML file, then SPARK_WATCHD_* environment (nested with __), then flags.

Each section's model lives with the code that uses it; this module only composes
and loads them. A bad value exits 78 (EX_CONFIG) naming the file, key and reason.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.errors import ConfigError
from spark_watchd.notify.settings import NotifySettings
from spark_watchd.sources.settings import SourcesSettings
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.web.http import parse_listen
from spark_watchd.web.settings import WebSettings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DEFAULT_CONFIG_PATH = "/etc/spark-watchd/config.toml"
ENV_PREFIX = "SPARK_WATCHD_"
CONFIG_ENV = "SPARK_WATCHD_CONFIG"


class DaemonSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    listen: str = Field("127.0.0.1:9761", description="HOST:PORT for HTTP; loopback by default.")
    interval: float = Field(30.0, ge=1, le=3600, description="Seconds between samples.")
    state_dir: str = Field(
        "/var/lib/spark-watchd", description="State file, event journal, ledger, captures."
    )
    web_config_file: str | None = Field(
        None,
        description="Prometheus exporter-toolkit web config (TLS, basic auth) applied to every endpoint.",
    )
    log_level: str = Field("info", pattern="^(debug|info|warning|error)$", description="Log threshold.")
    log_format: str = Field(
        "auto", pattern="^(auto|json|console)$", description="auto: JSON unless stderr is a terminal."
    )
    http_workers: int = Field(8, ge=1, le=256, description="HTTP worker threads (bounded pool).")
    http_timeout: float = Field(
        10.0, gt=0, le=300, description="Seconds a client may take to send a request."
    )
    record_dir: str | None = Field(
        None, description="Also keep rolling daily trace-v1 files here (like --record)."
    )
    record_keep_days: int = Field(
        7, ge=1, le=3650, description="Rolling traces older than this many days are deleted."
    )

    @field_validator("listen")
    @classmethod
    def _listen_is_host_port(cls, v: str) -> str:
        parse_listen(v)
        return v


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid")

    daemon: DaemonSettings = DaemonSettings()
    sources: SourcesSettings = SourcesSettings()
    thresholds: Thresholds = Thresholds()
    progress: ProgressSettings = ProgressSettings()
    notify: NotifySettings = NotifySettings()
    web: WebSettings = WebSettings()


class _Composed(Settings):
    """Settings validated from an already merged dict: load_settings reads file and env itself to name origins."""

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, **_others
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def config_path(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The config file to read: --config, else $SPARK_WATCHD_CONFIG, else the default if it exists."""
    env = os.environ if environ is None else environ
    if explicit:
        return explicit
    if env.get(CONFIG_ENV):
        return env[CONFIG_ENV]
    return DEFAULT_CONFIG_PATH if os.path.exists(DEFAULT_CONFIG_PATH) else None


def read_toml(path: str) -> dict[str, Any]:
    """Parse a TOML config file; ConfigError names the file and line on bad syntax."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 ({exc.reason})") from None


def _merge(base: dict, over: Mapping, origins: dict, label_for) -> dict:
    """Deep-merge `over` into a copy of `base`, recording each leaf key's origin."""
    out = dict(base)
    for key, val in over.items():
        if isinstance(val, Mapping) and isinstance(out.get(key), Mapping):
            sub_origins: dict = {}
            out[key] = _merge(out[key], val, sub_origins, lambda p, k=key: label_for((k, *p)))
            for p, lab in sub_origins.items():
                origins[(key, *p)] = lab
        else:
            out[key] = val
            _record_leaves(origins, (key,), val, label_for)
    return out


def _record_leaves(origins: dict, prefix: tuple, val: Any, label_for) -> None:
    if isinstance(val, Mapping):
        for k, v in val.items():
            _record_leaves(origins, (*prefix, k), v, label_for)
    else:
        origins[prefix] = label_for(prefix)


def _origin(origins: Mapping[tuple, str], loc: tuple) -> str:
    for n in range(len(loc), 0, -1):
        if loc[:n] in origins:
            return origins[loc[:n]]
    return "configuration"


def _describe(err: Mapping[str, Any]) -> str:
    msg = err["msg"]
    if err.get("type") == "extra_forbidden":
        return "unknown key"
    if "input" in err and not isinstance(err["input"], (dict, list)):
        return f"{msg} (got {err['input']!r})"
    return msg


def load_settings(
    path: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Compose file < environment < flags (nested dicts like {"daemon": {"interval": 5}}); raise ConfigError."""
    env = dict(os.environ if environ is None else environ)
    origins: dict[tuple, str] = {}
    data: dict[str, Any] = {}
    resolved = config_path(path, env)
    if resolved:
        data = _merge(data, read_toml(resolved), origins, lambda p: resolved)
    env_data = EnvSettingsSource(Settings, env_prefix=ENV_PREFIX, env_nested_delimiter="__")
    env_data.env_vars = {k.lower(): v for k, v in env.items()}  # injectable environment, not os.environ
    try:
        env_dict = env_data()
    except Exception as exc:  # a JSON-looking value that does not parse
        raise ConfigError(f"environment: {exc}") from None
    data = _merge(data, env_dict, origins, lambda p: "environment " + ENV_PREFIX + "__".join(p).upper())
    if overrides:
        data = _merge(data, overrides, origins, lambda p: "command line")
    try:
        return _Composed(**data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(str(x) for x in err["loc"])
            lines.append(f"{_origin(origins, loc)}: key '{'.'.join(loc)}': {_describe(err)}")
        raise ConfigError("\n".join(lines)) from None


def config_reference() -> str:
    """Every configuration key as a Markdown table (section.key, default, env variable, meaning), for docs."""
    rows = ["| key | default | environment | meaning |", "|---|---|---|---|"]
    for section, field in Settings.model_fields.items():
        model = field.annotation
        for key, f in getattr(model, "model_fields", {}).items():
            default = f.default if f.default is not None else ""
            env = f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
            rows.append(f"| `{section}.{key}` | `{default!s}` | `{env}` | {f.description or ''} |")
    return "\n".join(rows)
