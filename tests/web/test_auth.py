"""Exporter-toolkit web config: bcrypt basic auth and TLS on every endpoint."""

from __future__ import annotations

import base64
import ssl
import subprocess
import time
import urllib.error

import bcrypt
import pytest

from spark_watchd import cli
from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.errors import ConfigError
from spark_watchd.web.auth import load_web_config
from spark_watchd.web.server import HttpServer
from tests.conftest import free_port, require_binary
from tests.daemon_helpers import http_get, running_daemon
from tests.support.fakes import FakeSource

PATHS = ("/metrics", "/healthz", "/api/v1/status")


def _hash(pw: str) -> str:
    # $2y$ is what htpasswd -B writes; the toolkit accepts it, so must we.
    return bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$", 1)


def _basic(user: str, pw: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()}


def _serve(tmp_path, web_yaml: str):
    cfg = tmp_path / "web.yml"
    cfg.write_text(web_yaml)
    daemon = build(load_settings(None, environ={}), sources=(FakeSource(),), state_dir=str(tmp_path))
    daemon.tick()
    srv = HttpServer("127.0.0.1:0", daemon.routes, workers=4, timeout=2, web=load_web_config(str(cfg)))
    srv.start()
    return srv, daemon


def test_basic_auth_refuses_without_or_with_wrong_password_on_every_endpoint(tmp_path):
    srv, daemon = _serve(tmp_path, f"basic_auth_users:\n  prom: '{_hash('s3cret')}'\n")
    try:
        for path in PATHS:
            url = srv.url.rstrip("/") + path
            assert http_get(url)[0] == 401
            assert http_get(url, headers=_basic("prom", "wrong"))[0] == 401
            assert http_get(url, headers=_basic("nobody", "s3cret"))[0] == 401
            assert http_get(url, headers=_basic("prom", "s3cret"))[0] == 200
        try:
            urllib.request.urlopen(srv.url + "metrics", timeout=5)
        except urllib.error.HTTPError as err:
            assert err.headers["WWW-Authenticate"].startswith("Basic ")
    finally:
        srv.stop()
        daemon.close()


def test_tls_serves_https_and_refuses_plain_http(tmp_path, cert):
    srv, daemon = _serve(
        tmp_path,
        f"tls_server_config:\n  cert_file: {cert / 'cert.pem'}\n  key_file: {cert / 'key.pem'}\n"
        f"basic_auth_users:\n  prom: '{_hash('pw')}'\n",
    )
    try:
        ctx = ssl.create_default_context(cafile=str(cert / "cert.pem"))
        assert srv.url.startswith("https://")
        assert http_get(srv.url + "healthz", context=ctx)[0] == 401
        assert http_get(srv.url + "healthz", context=ctx, headers=_basic("prom", "pw")) == (200, "ok\n")
        plain = srv.url.replace("https://", "http://") + "healthz"
        with pytest.raises((OSError, urllib.error.URLError)):
            http_get(plain, timeout=3)
    finally:
        srv.stop()
        daemon.close()


def test_relative_cert_paths_resolve_next_to_the_web_config(tmp_path, cert):
    (tmp_path / "c.pem").write_bytes((cert / "cert.pem").read_bytes())
    (tmp_path / "k.pem").write_bytes((cert / "key.pem").read_bytes())
    (tmp_path / "web.yml").write_text(
        "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  min_version: TLS13\n"
    )
    cfg = load_web_config(str(tmp_path / "web.yml"))
    assert cfg.tls is not None and cfg.tls.minimum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize(
    ("yaml_text", "needle"),
    [
        ("basic_auth_user:\n  a: b\n", "key 'basic_auth_user': unknown key"),
        ("basic_auth_users:\n  prom: plaintext\n", "key 'basic_auth_users.prom': not a bcrypt hash"),
        (
            "tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent.key\n",
            "key 'tls_server_config.cert_file'",
        ),
        ("tls_server_config:\n  key_file: k\n", "key 'tls_server_config.cert_file': required"),
        (
            "tls_server_config: {cert_file: a, key_file: b, bogus: 1}\n",
            "key 'tls_server_config.bogus': unknown key",
        ),
        ("basic_auth_users: [\n", "invalid YAML"),
    ],
)
def test_bad_web_config_names_file_and_key(tmp_path, yaml_text, needle):
    p = tmp_path / "web.yml"
    p.write_text(yaml_text)
    with pytest.raises(ConfigError) as exc:
        load_web_config(str(p))
    assert str(exc.value).startswith(str(p)) and needle in str(exc.value)


def test_cli_bad_web_config_exits_78(tmp_path, capsys):
    p = tmp_path / "web.yml"
    p.write_text("nope: 1\n")
    assert cli.main(["run", "--web.config.file", str(p), "--state-dir", str(tmp_path)]) == 78
    assert f"{p}: key 'nope': unknown key" in capsys.readouterr().err


def test_daemon_flag_applies_basic_auth(tmp_path):
    p = tmp_path / "web.yml"
    p.write_text(f"basic_auth_users:\n  prom: '{_hash('pw')}'\n")
    env = {"SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path)}
    with running_daemon(
        "--interval", "1", "--web.config.file", str(p), env=env, headers=_basic("prom", "pw")
    ) as (
        _,
        base,
    ):
        for path in PATHS:
            assert http_get(base + path)[0] == 401
            assert http_get(base + path, headers=_basic("prom", "pw"))[0] == 200


def test_client_certificates_required_and_verified(tmp_path, cert):
    openssl = require_binary("openssl")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def run(*args):
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=tmp_path)

    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=test-ca")
    run("req", *ec, "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=prometheus")
    run("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "client.pem", "-days", "1")  # fmt: skip
    srv, daemon = _serve(
        tmp_path,
        f"tls_server_config:\n  cert_file: {cert / 'cert.pem'}\n  key_file: {cert / 'key.pem'}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n",
    )
    try:
        with_cert = ssl.create_default_context(cafile=str(cert / "cert.pem"))
        with_cert.load_cert_chain(str(tmp_path / "client.pem"), str(tmp_path / "client.key"))
        assert http_get(srv.url + "metrics", context=with_cert)[0] == 200
        without = ssl.create_default_context(cafile=str(cert / "cert.pem"))
        with pytest.raises((OSError, urllib.error.URLError)):
            http_get(srv.url + "metrics", context=without, timeout=3)
    finally:
        srv.stop()
        daemon.close()


@pytest.mark.e2e
def test_one_web_config_file_serves_node_exporter_and_spark_watchd_alike(tmp_path, cert):
    node_exporter = require_binary("prometheus-node-exporter")
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {cert / 'cert.pem'}\n  key_file: {cert / 'key.pem'}\n"
        f"basic_auth_users:\n  prometheus: '{_hash('scrape-me')}'\n"
    )
    port = free_port()
    ne = subprocess.Popen(
        [node_exporter, f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={web}",
         "--collector.disable-defaults", "--collector.loadavg"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    ctx = ssl.create_default_context(cafile=str(cert / "cert.pem"))
    auth = _basic("prometheus", "scrape-me")
    try:
        env = {
            "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path / "state"),
            "SPARK_WATCHD_DAEMON__WEB_CONFIG_FILE": str(web),
        }
        with running_daemon("--interval", "1", env=env, headers=auth, scheme="https", context=ctx) as (
            _,
            base,
        ):
            for url in (f"https://127.0.0.1:{port}/metrics", base + "/metrics"):
                _wait_up(url, ctx, auth)
                assert http_get(url, context=ctx)[0] == 401
                assert http_get(url, context=ctx, headers=_basic("prometheus", "nope"))[0] == 401
                status, body = http_get(url, context=ctx, headers=auth)
                assert status == 200 and "# TYPE" in body
    finally:
        ne.terminate()
        ne.wait(timeout=10)


def _wait_up(url, ctx, auth, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if http_get(url, context=ctx, headers=auth, timeout=2)[0] == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not come up")
        time.sleep(0.1)
