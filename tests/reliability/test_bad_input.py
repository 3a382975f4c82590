"""Bad input: configuration from every origin exits 78 naming it; bad clients and bodies never stop a scrape."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_watchd import cli
from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.web.server import HttpServer
from tests.conftest import FIXTURES
from tests.daemon_helpers import http_get, running_daemon, samples, value
from tests.support.fakes import FakeSource, raw_exchange, status_of

VM_ROOT = FIXTURES / "hosts" / "daemon-vm" / "proc"
PROGRESS = "/api/v1/progress"


@pytest.mark.parametrize(
    ("env", "argv", "needle"),
    [
        ({"SPARK_WATCHD_DAEMON__INTERVAL": "soon"}, [], "environment SPARK_WATCHD_DAEMON__INTERVAL: key 'daemon.interval'"),
        ({"SPARK_WATCHD_SOURCES__NVML_TIMEOUT_S": "-1"}, [], "key 'sources.nvml_timeout_s': Input should be greater than 0"),
        ({"SPARK_WATCHD_DAEMON__HTTP_WORKERS": "0"}, [], "key 'daemon.http_workers'"),
        ({}, ["--interval", "99999"], "command line: key 'daemon.interval': Input should be less than or equal to 3600"),
        ({}, ["--log-level", "loud"], None),  # argparse choices: usage error 2, not 78
    ],
)  # fmt: skip
def test_bad_configuration_from_env_or_flags_exits_78_naming_origin_and_key(
    monkeypatch, capsys, env, argv, needle
):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("SPARK_WATCHD_CONFIG", raising=False)
    try:
        rc = cli.main(["run", "--listen", "127.0.0.1:0", *argv])
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    if needle is None:
        assert rc == 2 and "invalid choice" in err
    else:
        assert rc == 78, err
        assert needle in err


def test_config_file_named_by_environment_with_unknown_key_exits_78_naming_file(
    tmp_path, monkeypatch, capsys
):
    cfg = tmp_path / "conf.toml"
    cfg.write_text("[daemon]\ninterval = 30\n\n[sources]\nproc_rot = '/proc'\n")
    monkeypatch.setenv("SPARK_WATCHD_CONFIG", str(cfg))
    assert cli.main(["run"]) == 78
    assert f"{cfg}: key 'sources.proc_rot': unknown key" in capsys.readouterr().err


def _metrics_ok(base: str) -> bool:
    status, text = http_get(base + "/metrics", timeout=5)
    return status == 200 and value(samples(text), "sparkwatchd_source_up", source="meminfo") == 1


def test_idle_and_half_open_clients_beyond_the_worker_count_do_not_block_scrapes(tmp_path):
    env = {
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT),
        "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path),
        "SPARK_WATCHD_DAEMON__HTTP_WORKERS": "2",
        "SPARK_WATCHD_DAEMON__HTTP_TIMEOUT": "30",
    }
    with running_daemon("--interval", "5", env=env) as (proc, base):
        host, port = base.removeprefix("http://").split(":")
        hold = []
        try:
            for i in range(8):  # four times the workers: connect and say nothing, or half a request
                s = socket.create_connection((host, int(port)), timeout=5)
                if i % 2:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost:")
                hold.append(s)
            for _ in range(3):
                assert _metrics_ok(base)
        finally:
            for s in hold:
                s.close()
        assert proc.poll() is None


def _progress_server(tmp_path):
    daemon = build(
        load_settings(None, environ={}), sources=(FakeSource(),), state_dir=str(tmp_path / "state")
    )
    srv = HttpServer("127.0.0.1:0", daemon.routes, workers=4, timeout=2)
    assert PROGRESS in srv.table
    srv.start()
    daemon.tick()
    return srv, daemon


def _exchange(addr, data: bytes) -> int:
    return status_of(raw_exchange(addr, data, half_close=True))


def _post(body: bytes, headers: dict[str, str]) -> bytes:
    head = f"POST {PROGRESS} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n"
    if not any(k.lower() == "content-type" for k in headers):  # JSON unless the fuzzer picked a type
        head += "Content-Type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)
_reports = st.fixed_dictionaries(
    {},
    optional={
        "job": st.text(max_size=140) | st.integers(),
        "step": st.integers(min_value=-5, max_value=2**70) | st.floats() | st.text(max_size=5),
        "tokens": st.integers(min_value=-5, max_value=2**70) | st.none(),
        "samples": st.integers(min_value=-5, max_value=2**64) | st.none(),
        "ts": st.floats() | st.integers() | st.text(max_size=5),
        "event": st.sampled_from(["start", "end", "pause", ""]),
        "extra": _json_values,
    },
)
_bodies = (
    _reports.map(lambda d: json.dumps(d).encode())
    | _json_values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=300)
    | st.just(b"[" * 5000 + b"]" * 5000)
)
_header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
_headers = st.dictionaries(
    st.sampled_from(["Content-Type", "Authorization", "X-Forwarded-For", "Accept", "Content-Encoding"]),
    _header_values,
    max_size=3,
)
ALLOWED = {200, 202, 400, 401, 403, 409, 413, 415, 429}


def test_progress_api_fuzzed_answers_only_client_errors_and_keeps_serving(tmp_path):
    srv, daemon = _progress_server(tmp_path)
    seen: set[int] = set()
    try:

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(body=_bodies, headers=_headers)
        def check(body, headers):
            code = _exchange(srv.address, _post(body, headers))
            seen.add(code)
            assert code in ALLOWED, (code, body[:100], headers)

        check()
        assert 400 in seen  # the fuzzer did reach the validation, not only the transport
        status, text = http_get(srv.url + "metrics")
        assert status == 200 and "sparkwatchd_source_up" in text
    finally:
        srv.stop()
        daemon.close()


def test_20mb_body_and_garbage_concurrently_while_metrics_answers(tmp_path):
    srv, daemon = _progress_server(tmp_path)
    results: dict[str, list[int]] = {"big": [], "garbage": [], "metrics": []}
    try:

        def big():
            with socket.create_connection(srv.address, timeout=10) as s:
                s.sendall(_post(b"", {}).replace(b"Content-Length: 0", b"Content-Length: 20971520"))
                try:
                    for _ in range(320):
                        s.sendall(b"x" * 65536)
                except OSError:
                    pass  # refused after the 413: expected
                try:
                    results["big"].append(int(s.recv(4096).split(b" ", 2)[1]))
                except (OSError, IndexError, ValueError):
                    results["big"].append(0)

        def garbage():
            for body in (b"\x00\xff not json", b"{", b'{"job": "x"}', b"[1,2,3]", b'{"job":"a b","step":-1}'):
                results["garbage"].append(
                    _exchange(srv.address, _post(body, {"Content-Type": "application/json"}))
                )

        def scrape():
            for _ in range(5):
                results["metrics"].append(http_get(srv.url + "metrics", timeout=10)[0])

        threads = [threading.Thread(target=f) for f in (big, garbage, scrape)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert results["big"] == [413]
        assert results["garbage"] == [400] * 5
        assert results["metrics"] == [200] * 5
    finally:
        srv.stop()
        daemon.close()
