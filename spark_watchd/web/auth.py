"""Web configuration compatible with the Prometheus exporter-toolkit file: TLS and bcrypt basic auth.

The same YAML file works for node_exporter (`--web.config.file`) and
spark-watchd. Paths inside it are relative to the file, as in the toolkit.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_watchd.errors import ConfigError

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


@dataclass
class WebConfig:
    """A loaded web config: an SSLContext when TLS is on, bcrypt users when basic auth is on."""

    path: str
    tls: ssl.SSLContext | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    _ok_cache: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check_basic(self, header: str | None) -> bool:
        """True if the Authorization header carries a configured user with the right password."""
        if not self.users:
            return True
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            user, sep, password = (
                base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        # bcrypt costs ~50 ms per check: remember successes (keyed by a digest, never the password).
        key = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with self._lock:
            cached = self._ok_cache.get(user)
        if cached is not None and hmac.compare_digest(cached, key):
            return True
        import bcrypt

        hashed = self.users.get(user)
        try:
            ok = bcrypt.checkpw(password.encode("utf-8"), hashed if hashed is not None else _dummy_hash())
        except ValueError:
            ok = False
        if ok and hashed is not None:
            with self._lock:
                self._ok_cache[user] = key
            return True
        return False


_DUMMY: list[bytes] = []


def _dummy_hash() -> bytes:
    """Compared against when the user is unknown, so a miss costs as much as a wrong password."""
    if not _DUMMY:
        import bcrypt

        _DUMMY.append(bcrypt.hashpw(b"spark-watchd-dummy", bcrypt.gensalt(rounds=10)))
    return _DUMMY[0]


def _err(path: str, key: str, reason: str) -> ConfigError:
    return ConfigError(f"{path}: key '{key}': {reason}")


def load_web_config(path: str) -> WebConfig:
    """Read and check an exporter-toolkit web config; ConfigError names file, key and reason."""
    try:
        import yaml
    except ImportError:
        raise ConfigError(
            f"{path}: reading a web config needs PyYAML: pip install 'spark-watchd[auth]'"
        ) from None
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read web config: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}".replace("\n", " ")) from None
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a web config is a YAML mapping")
    for key in data:
        if key not in _TOP_KEYS:
            raise _err(path, str(key), "unknown key")
    base = os.path.dirname(os.path.abspath(path))
    cfg = WebConfig(path=path)
    if data.get("tls_server_config"):
        cfg.tls = _tls_context(path, base, data["tls_server_config"])
    users = data.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise _err(path, "basic_auth_users", "must map user names to bcrypt hashes")
    if users:
        try:
            import bcrypt  # noqa: F401
        except ImportError:
            raise ConfigError(
                f"{path}: key 'basic_auth_users': needs the bcrypt package: pip install 'spark-watchd[auth]'"
            ) from None
        parsed = {}
        for user, hashed in users.items():
            if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
                raise _err(path, f"basic_auth_users.{user}", "not a bcrypt hash (htpasswd -nBC 10 USER)")
            parsed[str(user)] = hashed.encode()
        cfg.users = parsed
    http_cfg = data.get("http_server_config") or {}
    if not isinstance(http_cfg, dict):
        raise _err(path, "http_server_config", "must be a mapping")
    headers = http_cfg.get("headers") or {}
    if not isinstance(headers, dict):
        raise _err(path, "http_server_config.headers", "must map header names to values")
    cfg.headers = {str(k): str(v) for k, v in headers.items()}
    return cfg


def _tls_context(path: str, base: str, tls: Any) -> ssl.SSLContext:
    if not isinstance(tls, dict):
        raise _err(path, "tls_server_config", "must be a mapping")
    for key in tls:
        if key not in _TLS_KEYS:
            raise _err(path, f"tls_server_config.{key}", "unknown key")
    for key in ("cert_file", "key_file"):
        if not tls.get(key):
            raise _err(path, f"tls_server_config.{key}", "required when tls_server_config is set")

    def rel(p: str) -> str:
        return p if os.path.isabs(p) else os.path.join(base, p)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(rel(tls["cert_file"]), rel(tls["key_file"]))
    except (OSError, ssl.SSLError) as exc:
        raise _err(path, "tls_server_config.cert_file", f"cannot load certificate/key: {exc}") from None
    for key, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
        if tls.get(key):
            if tls[key] not in _TLS_VERSIONS:
                raise _err(path, f"tls_server_config.{key}", f"one of {', '.join(_TLS_VERSIONS)}")
            setattr(ctx, attr, _TLS_VERSIONS[tls[key]])
    if not tls.get("min_version"):
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # the exporter-toolkit default
    auth_type = tls.get("client_auth_type") or (
        "RequireAndVerifyClientCert" if tls.get("client_ca_file") else "NoClientCert"
    )
    if auth_type not in _CLIENT_AUTH:
        raise _err(
            path,
            "tls_server_config.client_auth_type",
            f"{auth_type!r} not supported here; use one of {', '.join(_CLIENT_AUTH)}",
        )
    ctx.verify_mode = _CLIENT_AUTH[auth_type]
    if ctx.verify_mode != ssl.CERT_NONE:
        if not tls.get("client_ca_file"):
            raise _err(
                path, "tls_server_config.client_ca_file", f"required with client_auth_type {auth_type}"
            )
        try:
            ctx.load_verify_locations(rel(tls["client_ca_file"]))
        except (OSError, ssl.SSLError) as exc:
            raise _err(path, "tls_server_config.client_ca_file", f"cannot load: {exc}") from None
    return ctx
