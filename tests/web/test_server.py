"""The HTTP server under bad input and bad clients: 413/411/400, slow-loris, busy pool, routing."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_watchd import cli
from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.web.http import Response, Route
from spark_watchd.web.server import HttpServer
from tests.daemon_helpers import http_get, samples, value
from tests.support.fakes import MEMINFO, FakeSource, raw_exchange


@pytest.fixture
def server(tmp_path):
    settings = load_settings(None, environ={})
    daemon = build(
        settings,
        sources=(FakeSource(reading={**MEMINFO, "vmstat": {"oom_kill": 2}}),),
        state_dir=str(tmp_path),
    )
    daemon.tick()
    got = []

    def echo(req):
        got.append(req.body)
        return Response(200, b"got %d\n" % len(req.body))

    release = threading.Event()

    def slow(req):
        release.wait(10)
        return Response(200, b"slow\n")

    routes = [
        *daemon.routes,
        Route("POST", "/echo", echo, max_body=1024),
        Route("POST", "/big", echo, max_body=1 << 20),
        Route("GET", "/slow", slow),
    ]
    srv = HttpServer("127.0.0.1:0", routes, workers=4, timeout=1.0)
    srv.start()
    srv.received = got
    srv.release = release
    yield srv
    srv.stop()
    daemon.close()


def _raw(srv, data: bytes, timeout: float = 5.0) -> bytes:
    return raw_exchange(srv.address, data, timeout=timeout)


def _metrics_ok(srv) -> bool:
    status, text = http_get(srv.url + "metrics", timeout=3)
    return status == 200 and value(samples(text), "sparkwatchd_oom_kills_total") == 2


def test_metrics_render_the_published_snapshot(server):
    assert _metrics_ok(server)


def test_oversized_body_gets_413_before_it_is_read_while_metrics_answers(server):
    # Announce 20 MB and start streaming it from another thread.
    sock = socket.create_connection(server.address, timeout=5)
    sock.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 20971520\r\n\r\n")
    reply = []

    def stream():
        try:
            chunk = b"x" * 65536
            for _ in range(320):
                sock.sendall(chunk)
        except OSError:
            pass  # the server stopped reading after its 413: expected

    t = threading.Thread(target=stream)
    t.start()
    try:
        reply.append(sock.recv(4096))
    except OSError:
        pass
    assert _metrics_ok(server)  # a scrape during the upload still answers
    t.join(timeout=10)
    sock.close()
    assert reply and reply[0].startswith(b"HTTP/1.1 413"), reply
    assert server.received == []  # the handler never saw the body


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n", b"400"),
        (b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: -5\r\n\r\n", b"400"),
        (b"POST /echo HTTP/1.1\r\nHost: localhost\r\n\r\n", b"411"),
        (b"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", b"411"),
        (b"\x00\x01\x02 garbage \xff\r\n\r\n", b"400"),
        (
            b"GET\t\x00\r\n\r\n",
            b"400",
        ),  # HTTP/0.9 form, found by the fuzzer: it got a reply without status line
        (b"GET /metrics HTTP/1.1\r\n" + b"X-Long: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
    ],
)
def test_garbage_requests_get_4xx(server, request_bytes, status):
    reply = _raw(server, request_bytes)
    assert reply.split(b" ", 2)[1] == status, reply[:200]
    assert _metrics_ok(server)


def test_small_body_reaches_the_handler(server):
    reply = _raw(server, b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello")
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"got 5\n")
    assert server.received == [b"hello"]


def test_slow_loris_does_not_block_a_scrape(server):
    idle = [socket.create_connection(server.address) for _ in range(2)]  # connect, send nothing
    partial = socket.create_connection(server.address)
    partial.sendall(b"GET /metrics HTTP/1.1\r\nHost:")  # half a request, then silence
    try:
        t0 = time.monotonic()
        assert _metrics_ok(server)
        assert time.monotonic() - t0 < 0.9  # well under the 1 s client timeout: not queued behind them
    finally:
        for s in [*idle, partial]:
            s.close()


def test_trickling_client_is_cut_off_at_the_request_deadline(server):
    s = socket.create_connection(server.address, timeout=5)
    t0 = time.monotonic()
    try:
        for ch in b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n":  # one byte every 0.2 s: each recv is quick
            s.sendall(bytes([ch]))
            time.sleep(0.2)
    except OSError:
        pass  # closed on us: what we want
    finally:
        s.close()
    assert time.monotonic() - t0 < 4  # dropped after the 1 s deadline, not after 30 bytes x 0.2 s = 6 s


def test_full_pool_answers_503_at_once_and_recovers(server):
    hogs = [socket.create_connection(server.address) for _ in range(server.workers)]
    for h in hogs:  # a handler that takes its time: each holds a worker
        h.sendall(b"GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
    try:
        time.sleep(0.3)
        reply = _raw(server, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", timeout=2)
        assert reply.startswith(b"HTTP/1.1 503"), reply[:100]
        server.release.set()
        deadline = time.monotonic() + 5
        while not _metrics_ok(server):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        server.release.set()
        for s in hogs:
            s.close()


@pytest.mark.parametrize("path", ["/echo", "/big"])
def test_body_shorter_than_content_length_gets_408_without_holding_a_worker(server, path):
    """Small bodies wait in the gate (408 after BODY_IDLE_S); large ones in the handler (408 at the deadline)."""
    hogs = [socket.create_connection(server.address, timeout=5) for _ in range(server.workers * 2)]
    length = 100 if path == "/echo" else 200_000
    for h in hogs:
        h.sendall(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {length}\r\n\r\nabc".encode())
    try:
        if path == "/echo":
            assert _metrics_ok(server)  # the short bodies hold no worker
        t0 = time.monotonic()
        reply = hogs[0].recv(200)
        assert reply.startswith(b"HTTP/1.1 408"), reply
        assert time.monotonic() - t0 < 3.5
    finally:
        for s in hogs:
            s.close()


def test_head_and_405_and_404(server):
    reply = _raw(server, b"HEAD /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"\r\n\r\n")
    reply = _raw(server, b"DELETE /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 405") and b"Allow: GET, HEAD" in reply
    assert http_get(server.url + "missing")[0] == 404


def test_stop_cuts_idle_clients_instead_of_waiting_for_their_timeout(tmp_path):
    srv = HttpServer("127.0.0.1:0", [], workers=2, timeout=30.0)
    srv.start()
    idle = socket.create_connection(srv.address)
    time.sleep(0.2)
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 5
    idle.close()


_METHODS = st.sampled_from(["GET", "POST", "PUT", "HEAD", "DELETE", "BREW", "get", ""])
_PATHS = st.sampled_from(["/metrics", "/echo", "/healthz", "/api/v1/status", "/", "*", "/%00", "//x?y"])
_HEADER = st.tuples(
    st.sampled_from(
        ["Content-Length", "Transfer-Encoding", "Host", "Authorization", "X-\x00", "Content-Length "]
    ),
    st.text(alphabet=st.characters(codec="latin-1"), max_size=20),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raw=st.one_of(
        st.binary(max_size=300),
        st.builds(
            lambda m, p, v, hs, body: (
                (f"{m} {p} {v}\r\n" + "".join(f"{k}: {val}\r\n" for k, val in hs) + "\r\n").encode("latin-1")
                + body
            ),
            _METHODS,
            _PATHS,
            st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/9.9", "HTTP/1.1 x", ""]),
            st.lists(_HEADER, max_size=4),
            st.binary(max_size=64),
        ),
    )
)
def test_fuzzed_requests_get_an_http_answer_or_a_close_never_a_crash(server, raw):
    with socket.create_connection(server.address, timeout=5) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)  # EOF now: no waiting for the request deadline
        reply = b""
        try:
            while chunk := s.recv(65536):
                reply += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    if reply:
        assert re.match(rb"HTTP/1\.[01] [1-5]\d\d ", reply), reply[:80]
    assert server.received == [] or all(len(b) <= 1024 for b in server.received)


def test_server_still_scrapes_after_fuzzing(server):
    for raw in (
        b"\xff" * 100,
        b"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"\r\n\r\n",
    ):
        with socket.create_connection(server.address, timeout=5) as s:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
            s.recv(4096)
    assert _metrics_ok(server)


def test_port_in_use_exits_1_with_the_address(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        addr = f"127.0.0.1:{s.getsockname()[1]}"
        env_state = ["--state-dir", str(tmp_path)]
        assert cli.main(["run", "--listen", addr, "--interval", "5", *env_state]) == 1
    assert f"cannot listen on {addr}" in capsys.readouterr().err
