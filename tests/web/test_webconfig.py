"""The web-config loader refuses every malformed file with exit 78 naming the key: no traceback, no bad server."""

from __future__ import annotations

import json
import string

import bcrypt
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_watchd import cli
from spark_watchd.errors import ConfigError
from spark_watchd.web.auth import WebConfig, load_web_config

GOOD_HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()


@pytest.fixture
def pem(cert):
    """The directory of the shared self-signed certificate (tests/support/tls.py)."""
    return cert


def _tls(pem, **extra: str) -> str:
    lines = [f"  cert_file: {pem / 'cert.pem'}", f"  key_file: {pem / 'key.pem'}"]
    lines += [f"  {k}: {v}" for k, v in extra.items()]
    return "tls_server_config:\n" + "\n".join(lines) + "\n"


def _bomb() -> str:
    """Nine levels of nine aliases: 9**9 strings once expanded, a few hundred bytes on disk."""
    lines = ["http_server_config:", '  x0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        lines.append(f"  x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join([*lines, "  http2: *a8", ""])


# (file content: str or bytes or a callable of the pem dir, the key the error must name)
CASES = {
    "cert_file number": (lambda pem: _tls(pem).replace(f"cert_file: {pem / 'cert.pem'}", "cert_file: 12"),
                         "tls_server_config.cert_file"),
    "cert_file list": (lambda pem: _tls(pem).replace(f"cert_file: {pem / 'cert.pem'}", "cert_file: [a, b]"),
                       "tls_server_config.cert_file"),
    "cert_file map": (lambda pem: _tls(pem).replace(f"cert_file: {pem / 'cert.pem'}", "cert_file: {a: 1}"),
                      "tls_server_config.cert_file"),
    "NUL in a path": (lambda pem: _tls(pem).replace(f"key_file: {pem / 'key.pem'}", 'key_file: "k\\0.pem"'),
                      "tls_server_config.key_file"),
    "min_version list": (lambda pem: _tls(pem, min_version="[TLS12]"), "tls_server_config.min_version"),
    "client_auth_type list": (lambda pem: _tls(pem, client_auth_type="[NoClientCert]"),
                              "tls_server_config.client_auth_type"),
    "min_version above max_version": (lambda pem: _tls(pem, min_version="TLS13", max_version="TLS12"),
                                      "tls_server_config.min_version"),
    "nested 5,000 deep": (lambda pem: "http_server_config:\n  headers:\n    X-Deep: " + "[" * 5000 + "]" * 5000,
                          "http_server_config.headers.X-Deep"),
    "not UTF-8": (lambda pem: b"basic_auth_users:\n  prom: '\xff\xfe'\n", "line 2, after \"prom: '\""),
    "CR/LF in a header": (lambda pem: 'http_server_config:\n  headers:\n    X-A: "ok\\r\\nSet-Cookie: evil=1"\n',
                          "http_server_config.headers.X-A"),
    "non-Latin-1 header value": (lambda pem: "http_server_config:\n  headers:\n    X-Name: '\u96ea'\n",
                                 "http_server_config.headers.X-Name"),
    "header name with a space": (lambda pem: "http_server_config:\n  headers:\n    'X A': b\n",
                                 "http_server_config.headers.X A"),
    "malformed bcrypt hash": (lambda pem: f"basic_auth_users:\n  prom: '{GOOD_HASH[:-5]}'\n",
                              "basic_auth_users.prom"),
    "bcrypt hash with a bad cost": (lambda pem: f"basic_auth_users:\n  prom: '{GOOD_HASH.replace('$04$', '$99$')}'\n",
                                    "basic_auth_users.prom"),
    "YAML alias bomb": (lambda pem: _bomb(), "http_server_config.x"),
}  # fmt: skip


def _write(tmp_path, pem, make) -> str:
    content = make(pem)
    p = tmp_path / "web.yml"
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return str(p)


@pytest.mark.parametrize("case", list(CASES))
def test_each_bad_web_config_is_refused_naming_the_key(tmp_path, pem, case):
    make, key = CASES[case]
    path = _write(tmp_path, pem, make)
    with pytest.raises(ConfigError) as exc:
        load_web_config(path)
    msg = str(exc.value)
    assert msg.startswith(path) and key in msg, msg


@pytest.mark.parametrize("case", ["cert_file map", "nested 5,000 deep", "not UTF-8", "CR/LF in a header"])
def test_run_exits_78_naming_the_key(tmp_path, pem, case, capsys):
    make, key = CASES[case]
    path = _write(tmp_path, pem, make)
    assert (
        cli.main(["run", "--web.config.file", path, "--state-dir", str(tmp_path), "--listen", "127.0.0.1:0"])
        == 78
    )
    err = capsys.readouterr().err
    events = [json.loads(line)["event"] for line in err.splitlines()]  # JSON mode: every line one object
    assert any(key in e for e in events) and "Traceback" not in err, events


def test_a_good_file_still_loads(tmp_path, pem):
    p = tmp_path / "web.yml"
    p.write_text(
        _tls(pem, min_version="TLS12", max_version="TLS13")
        + f"basic_auth_users:\n  prom: '{GOOD_HASH}'\n"
        + "http_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n"
        + "    Content-Security-Policy: \"default-src 'self'\"\n"
    )
    cfg = load_web_config(str(p))
    assert cfg.tls is not None and cfg.auth is not None and set(cfg.users) == {"prom"}
    assert cfg.headers == {"X-Frame-Options": "deny", "Content-Security-Policy": "default-src 'self'"}


# Property: whatever YAML (or bytes) the file holds, the loader returns a config or raises ConfigError.
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
_values = st.recursive(
    _scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=8,
)
_KEYS = ["tls_server_config", "basic_auth_users", "http_server_config", "headers", "cert_file", "key_file",
         "min_version", "max_version", "client_auth_type", "client_ca_file", "http2", "prom"]  # fmt: skip
_docs = st.recursive(
    _scalars | st.sampled_from(["TLS12", "TLS13", "NoClientCert", GOOD_HASH, "a\r\nb", "\u96ea", "x\0y"]),
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(
            st.sampled_from(_KEYS) | st.text(alphabet=string.printable, max_size=6), kids, max_size=4
        )
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_docs | _values)
def test_any_yaml_document_loads_or_gives_a_config_error(tmp_path, doc):
    p = tmp_path / "fuzz.yml"
    p.write_text(yaml.safe_dump(doc, allow_unicode=True))
    try:
        cfg = load_web_config(str(p))
    except ConfigError as exc:
        assert str(exc).startswith(str(p))
        return
    assert isinstance(cfg, WebConfig)
    for name, val in cfg.headers.items():  # whatever was accepted can be sent
        (name + ": " + val).encode("latin-1")
        assert "\r" not in val and "\n" not in val


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_any_bytes_load_or_give_a_config_error(tmp_path, raw):
    p = tmp_path / "fuzz.yml"
    p.write_bytes(raw)
    try:
        load_web_config(str(p))
    except ConfigError:
        pass
