"""Security: loopback by default, basic auth and TLS on every route, no shell anywhere in the package."""

from __future__ import annotations

import ast
import base64
from pathlib import Path

import bcrypt

import spark_watchd
from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.web.auth import load_web_config
from spark_watchd.web.server import HttpServer
from tests.support.fakes import FakeSource, http_request, raw_exchange, status_of

PACKAGE = Path(spark_watchd.__file__).resolve().parent


_SHELL_FUNCS = {
    ("os", "system"),
    ("os", "popen"),
    ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"),
}


def _shell_uses(tree: ast.AST) -> list[str]:
    """Calls that go through a shell: shell=True anywhere, os.system, os.popen, commands.getoutput."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                found.append(f"line {node.lineno}: shell={ast.unparse(kw.value)}")
        fn = node.func
        if (
            isinstance(fn, ast.Attribute)
            and isinstance(fn.value, ast.Name)
            and (fn.value.id, fn.attr) in _SHELL_FUNCS
        ):
            found.append(f"line {node.lineno}: {fn.value.id}.{fn.attr}")
        if isinstance(fn, ast.Name) and fn.id in {"system", "popen", "getoutput", "getstatusoutput"}:
            found.append(f"line {node.lineno}: {fn.id}")
    return found


def test_shell_detector_catches_what_it_should():
    bad = "import os, subprocess\nsubprocess.run('ls', shell=True)\nos.system('x')\nos.popen('y')\n"
    assert len(_shell_uses(ast.parse(bad))) == 3
    assert _shell_uses(ast.parse("subprocess.run(['ls'], shell=False)\n")) == []


def test_no_shell_anywhere_in_the_package():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20
    offenders = {
        str(f.relative_to(PACKAGE)): uses for f in files if (uses := _shell_uses(ast.parse(f.read_text())))
    }
    assert offenders == {}


def test_listens_on_loopback_by_default():
    settings = load_settings(None, environ={})
    assert settings.daemon.listen.startswith("127.0.0.1:")


def _server(tmp_path, web_yaml: str | None):
    web = None
    if web_yaml is not None:
        cfg = tmp_path / "web.yml"
        cfg.write_text(web_yaml)
        web = load_web_config(str(cfg))
    daemon = build(
        load_settings(None, environ={}), sources=(FakeSource(),), state_dir=str(tmp_path / "state")
    )
    daemon.tick()
    srv = HttpServer("127.0.0.1:0", daemon.routes, workers=4, timeout=2, web=web)
    srv.start()
    return srv, daemon


def _raw(srv, method: str, path: str, headers: dict, body: bytes = b"", tls: bool = False) -> int:
    return status_of(raw_exchange(srv.address, http_request(method, path, headers, body), tls=tls))


def _past_auth(srv, method: str, path: str, headers: dict, body: bytes = b"", tls: bool = False) -> bool:
    """Good credentials got the request to its handler: no 401, and no 403 but a handler's own refusal that
    names its reason in JSON (the fabric offer while fabric tests are off), never the server's."""
    raw = raw_exchange(srv.address, http_request(method, path, headers, body), tls=tls)
    status = status_of(raw)
    return status != 401 and (status != 403 or b'{"error": "fabric tests are off' in raw)


def _every_route(srv) -> list[tuple[str, str]]:
    routes = [(m, p) for p, by in srv.table.items() for m in by]
    assert ("GET", "/metrics") in routes and ("GET", "/api/v1/status") in routes
    return sorted(routes)


def test_basic_auth_guards_every_route_the_server_has(tmp_path):
    h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    srv, daemon = _server(tmp_path, f"basic_auth_users:\n  prom: '{h}'\n")
    good = {"Authorization": "Basic " + base64.b64encode(b"prom:s3cret").decode()}
    wrong = {"Authorization": "Basic " + base64.b64encode(b"prom:nope").decode()}
    srv.web.auth.failures = 1000  # one wrong password per route: more than the per-client limit allows
    try:
        for method, path in _every_route(srv):
            body = b'{"job":"x","step":1}' if method == "POST" else b""
            assert _raw(srv, method, path, {}, body) == 401, (method, path)
            assert _raw(srv, method, path, wrong, body) == 401, (method, path)
            assert _past_auth(srv, method, path, good, body), (method, path)
        assert _raw(srv, "GET", "/no-such-page", {}) == 401  # even a 404 is not told to strangers
    finally:
        srv.stop()
        daemon.close()


def test_tls_and_auth_together_on_every_route(tmp_path, cert):
    h = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    srv, daemon = _server(
        tmp_path,
        f"tls_server_config:\n  cert_file: {cert / 'cert.pem'}\n  key_file: {cert / 'key.pem'}\n"
        f"basic_auth_users:\n  prom: '{h}'\n",
    )
    good = {"Authorization": "Basic " + base64.b64encode(b"prom:pw").decode()}
    try:
        assert srv.url.startswith("https://")
        for method, path in _every_route(srv):
            body = b'{"job":"x","step":1}' if method == "POST" else b""
            assert _raw(srv, method, path, {}, body, tls=True) == 401
            assert _past_auth(srv, method, path, good, body, tls=True), (method, path)
    finally:
        srv.stop()
        daemon.close()
