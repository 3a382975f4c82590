"""Web configuration compatible with the Prometheus exporter-toolkit file: TLS and bcrypt basic auth.

The same YAML file works for node_exporter (`--web.config.file`) and
spark-watchd. Paths inside it are relative to the file, as in the toolkit.
Every value is checked for its type and form here, so a bad file exits 78
naming the key instead of ending in a traceback or a daemon that drops every
response (a header value that cannot be sent) or lets a header be injected.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_watchd.errors import ConfigError
from spark_watchd.web import yamlguard
from spark_watchd.web.credentials import BCRYPT_HASH, BasicAuth

_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_KEYS = {
    "cert_file",
    "key_file",
    "client_ca_file",
    "client_auth_type",
    "min_version",
    "max_version",
    "cipher_suites",
    "curve_preferences",
    "prefer_server_cipher_suites",
    "client_allowed_sans",
}
_TOP_KEYS = {"tls_server_config", "basic_auth_users", "http_server_config"}


_HTTP_KEYS = {"headers", "http2"}
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")  # an HTTP header name (RFC 9110 token)
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # CR, LF, NUL and other controls (tab is fine)
# Set by the server on every response: a second copy would make the answer ambiguous.
_RESERVED_HEADERS = {"content-length", "content-type", "connection", "transfer-encoding", "www-authenticate"}


@dataclass
class WebConfig:
    """A loaded web config: an SSLContext when TLS is on, bcrypt users when basic auth is on."""

    path: str
    tls: ssl.SSLContext | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    auth: BasicAuth | None = None


def _err(path: str, key: str, reason: str) -> ConfigError:
    return ConfigError(f"{path}: key '{key}': {reason}")


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", bool: "a boolean"}.get(type(value), type(value).__name__)


def _mapping(path: str, key: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _err(path, key, f"must be a mapping, not {_kind(value)}")
    return value


def _string(path: str, key: str, value: Any) -> str | None:
    """A non-empty string without NUL, or None when absent; ConfigError otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _err(path, key, f"must be a non-empty string, not {_kind(value)}")
    if "\0" in value:
        raise _err(path, key, "contains a NUL byte")
    return value


def _choice(path: str, key: str, value: Any, choices: Mapping[str, Any]) -> str | None:
    text = _string(path, key, value)
    if text is not None and text not in choices:
        raise _err(path, key, f"{text!r} is not one of {', '.join(choices)}")
    return text


def _string_list(path: str, key: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        raise _err(path, key, f"must be a list of strings, not {_kind(value)}")
    for i, item in enumerate(value):
        _string(path, f"{key}[{i}]", item)


def load_web_config(path: str) -> WebConfig:
    """Read and check an exporter-toolkit web config; ConfigError names file, key and reason."""
    try:
        import yaml  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"{path}: reading a web config needs PyYAML: pip install 'spark-watchd[auth]'"
        ) from None
    data = yamlguard.load(path, yamlguard.read_text(path))
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a web config is a YAML mapping, not {_kind(data)}")
    for key in data:
        if key not in _TOP_KEYS:
            raise _err(path, str(key), "unknown key")
    base = os.path.dirname(os.path.abspath(path))
    cfg = WebConfig(path=path)
    tls = _mapping(path, "tls_server_config", data.get("tls_server_config"))
    if tls:
        cfg.tls = _tls_context(path, base, tls)
    cfg.users = _users(path, _mapping(path, "basic_auth_users", data.get("basic_auth_users")))
    if cfg.users:
        cfg.auth = BasicAuth(cfg.users)
    cfg.headers = _headers(path, _mapping(path, "http_server_config", data.get("http_server_config")))
    return cfg


def _users(path: str, users: dict) -> dict[str, bytes]:
    if users:
        try:
            import bcrypt  # noqa: F401
        except ImportError:
            raise ConfigError(
                f"{path}: key 'basic_auth_users': needs the bcrypt package: pip install 'spark-watchd[auth]'"
            ) from None
    parsed = {}
    for user, hashed in users.items():
        if not isinstance(user, (str, int)) or isinstance(user, bool):
            raise _err(path, "basic_auth_users", f"user names are strings, not {_kind(user)}")
        name = str(user)
        key = f"basic_auth_users.{name[:60]}"
        if not name or ":" in name or _BAD_VALUE.search(name):
            raise _err(path, key, "a user name is non-empty, without ':' or control characters")
        if not isinstance(hashed, str) or not BCRYPT_HASH.match(hashed.encode("utf-8", "replace")):
            raise _err(path, key, "not a bcrypt hash (htpasswd -nBC 10 USER)")
        parsed[name] = hashed.encode()
    return parsed


def _headers(path: str, http_cfg: dict) -> dict[str, str]:
    for key in http_cfg:
        if key not in _HTTP_KEYS:
            raise _err(path, f"http_server_config.{key}", "unknown key")
    if "http2" in http_cfg and not isinstance(http_cfg["http2"], bool):
        raise _err(path, "http_server_config.http2", f"must be true or false, not {_kind(http_cfg['http2'])}")
    out = {}
    headers = _mapping(path, "http_server_config.headers", http_cfg.get("headers"))
    for name, value in headers.items():
        key = f"http_server_config.headers.{str(name)[:60]}"
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise _err(path, key, "not a valid header name (letters, digits and !#$%&'*+-.^_`|~)")
        if name.lower() in _RESERVED_HEADERS:
            raise _err(path, key, "set by the server itself")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise _err(path, key, f"must be a string, not {_kind(value)}")
        text = str(value)
        if _BAD_VALUE.search(text):
            raise _err(path, key, "contains CR, LF or another control character (header injection)")
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            raise _err(path, key, "HTTP header values must be Latin-1 (ASCII is safest)") from None
        out[name] = text
    return out


def _tls_context(path: str, base: str, tls: dict) -> ssl.SSLContext:
    for key in tls:
        if key not in _TLS_KEYS:
            raise _err(path, f"tls_server_config.{key}", "unknown key")
    files = {}
    for key in ("cert_file", "key_file", "client_ca_file"):
        value = _string(path, f"tls_server_config.{key}", tls.get(key))
        if value is None and key != "client_ca_file":
            raise _err(path, f"tls_server_config.{key}", "required when tls_server_config is set")
        files[key] = value if value is None or os.path.isabs(value) else os.path.join(base, value)
    for key in ("cipher_suites", "curve_preferences", "client_allowed_sans"):
        _string_list(path, f"tls_server_config.{key}", tls.get(key))
    prefer = tls.get("prefer_server_cipher_suites")
    if prefer is not None and not isinstance(prefer, bool):
        raise _err(
            path,
            "tls_server_config.prefer_server_cipher_suites",
            f"must be true or false, not {_kind(prefer)}",
        )
    lo = _choice(path, "tls_server_config.min_version", tls.get("min_version"), _TLS_VERSIONS)
    hi = _choice(path, "tls_server_config.max_version", tls.get("max_version"), _TLS_VERSIONS)
    order = list(_TLS_VERSIONS)
    if lo and hi and order.index(lo) > order.index(hi):
        raise _err(path, "tls_server_config.min_version", f"{lo} is above max_version {hi}")
    auth_type = _choice(path, "tls_server_config.client_auth_type", tls.get("client_auth_type"), _CLIENT_AUTH)
    auth_type = auth_type or ("RequireAndVerifyClientCert" if files["client_ca_file"] else "NoClientCert")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(files["cert_file"], files["key_file"])
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise _err(path, "tls_server_config.cert_file", f"cannot load certificate/key: {exc}") from None
    ctx.minimum_version = _TLS_VERSIONS[lo] if lo else ssl.TLSVersion.TLSv1_2  # the exporter-toolkit default
    if hi:
        ctx.maximum_version = _TLS_VERSIONS[hi]
    ctx.verify_mode = _CLIENT_AUTH[auth_type]
    if ctx.verify_mode != ssl.CERT_NONE:
        if not files["client_ca_file"]:
            raise _err(
                path, "tls_server_config.client_ca_file", f"required with client_auth_type {auth_type}"
            )
        try:
            ctx.load_verify_locations(files["client_ca_file"])
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise _err(path, "tls_server_config.client_ca_file", f"cannot load: {exc}") from None
    return ctx
