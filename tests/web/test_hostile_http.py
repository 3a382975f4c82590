"""Hostile HTTP, round 2 (issue 20 §1) against a real daemon on loopback, each case bounded in count and time.

Framing parsed once (web/framing.py) by the gate and the handler alike, slow readers that never read
their answer, idle connections under a low descriptor limit, Host conformance and IPv6 listen addresses.
"""

from __future__ import annotations

import os
import socket
import time

import pytest

from tests.daemon_helpers import running_daemon
from tests.web.test_abuse import _addr, _get, _request

BAD_LENGTHS = ("+64", "6_4", "0x40", "64 64", " -0", "1" * 13)


def _plain(state, **env):
    return running_daemon(
        "--interval", "1", "--state-dir", str(state),
        env={"SPARK_WATCHD_FAKE_NVML": "gb10", "SPARK_WATCHD_DAEMON__HTTP_WORKERS": "2", **env},
    )  # fmt: skip


def _post_head(length_lines: str) -> bytes:
    return (
        "POST /api/v1/progress HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        + length_lines
        + "\r\n"
    ).encode()


@pytest.mark.parametrize(
    "length_lines",
    [f"Content-Length: {v}\r\n" for v in BAD_LENGTHS]
    + [
        "Content-Length: 64\r\nContent-Length: 64\r\n",
        "Content-Length: 64, 64\r\n",
        "Content-Length: 64\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length : 64\r\n",
        "X-A: b\r\n Content-Length: 64\r\n",
    ],
)
def test_lengths_the_gate_cannot_read_get_400_at_once_and_hold_no_worker(tmp_path, length_lines):
    """`Content-Length: +64` with no body: the gate saw no length, the worker's int() saw 64 and waited the
    whole timeout; 8 such connections (four times the workers) left 0-2 of 6-10 scrapes OK."""
    with _plain(tmp_path / "state") as (_, base):
        addr = _addr(base)
        clients = []
        t0 = time.monotonic()
        for _ in range(8):
            s = socket.create_connection(addr, timeout=10)
            s.sendall(_post_head(length_lines))  # and no body
            clients.append(s)
        try:
            assert [_get(addr, auth=None) for _ in range(6)] == [200] * 6
            for s in clients:
                assert s.recv(200).startswith(b"HTTP/1.1 400"), length_lines
            assert time.monotonic() - t0 < 5  # answered at once, not at the 10 s request timeout
        finally:
            for s in clients:
                s.close()


def test_host_conformance_one_host_and_http11_needs_it(tmp_path):
    with _plain(tmp_path / "state") as (_, base):
        addr = _addr(base)
        status, reply = _request(
            addr, "GET /api/v1/status HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n"
        )
        assert status == 400 and b"more than one Host" in reply, reply[:200]
        status, reply = _request(
            addr, "GET /api/v1/status HTTP/1.1\r\nHost: evil.example\r\nHost: localhost\r\n"
        )
        assert status == 400, reply[:200]
        status, reply = _request(addr, "GET /metrics HTTP/1.1\r\n")
        assert status == 400 and b"without a Host" in reply, reply[:200]
        # HTTP/1.0 needs no Host (old tools); the answer is still HTTP/1.1 framed.
        status, reply = _request(addr, "GET /metrics HTTP/1.0\r\n")
        assert status == 200, reply[:200]


def _serves_on_ipv6(listen: str, port: int, tmp_path) -> int:
    """Start `run --listen LISTEN`; the status of GET http://[::1]:PORT/metrics once it answers."""
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env
    from tests.daemon_helpers import http_get

    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--listen", listen, "--state-dir", str(tmp_path / "s")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=cli_env({"SPARK_WATCHD_FAKE_NVML": "gb10"}), cwd=str(REPO),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                return http_get(f"http://[::1]:{port}/metrics", timeout=1)[0]
            except OSError:
                time.sleep(0.1)
        raise AssertionError(
            f"no answer on [::1]:{port}: {proc.stderr.read() if proc.poll() is not None else ''}"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stderr.close()


def test_ipv6_listen_addresses_in_brackets_serve_and_bare_ones_exit_78(tmp_path):
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env, free_port

    for listen in ("[::1]:{port}", "[::]:{port}"):
        port = free_port()
        assert _serves_on_ipv6(listen.format(port=port), port, tmp_path) == 200, listen
    for listen in (
        "::1",
        "::1:9761",
    ):  # `::1` was read as host ':' port 1: exit 1, "Name or service not known"
        proc = subprocess.run(
            [sys.executable, "-m", "spark_watchd", "run", "--listen", listen, "--state-dir", str(tmp_path / "s")],
            capture_output=True, text=True, timeout=30, env=cli_env({"SPARK_WATCHD_FAKE_NVML": "gb10"}),
            cwd=str(REPO),
        )  # fmt: skip
        assert proc.returncode == 78, proc.stderr
        assert "daemon.listen" in proc.stderr and "e.g. [::1]:9761" in proc.stderr, proc.stderr


def _slow_reader(addr, path: str) -> socket.socket:
    """A client that asks for `path` and never reads a byte of the answer (a tiny receive window)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(addr)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    return s


def test_clients_that_never_read_a_big_answer_hold_no_worker_and_are_dropped():
    """8 clients that never read a 5.5 MB /api/v1/status held the workers for the whole timeout: 3 of 11
    scrapes OK. Now the answer is written off the workers, memory held for slow readers is bounded, and a
    client that reads nothing is dropped after the writer's idle time."""
    from spark_watchd.web.http import Response, Route
    from spark_watchd.web.server import HttpServer

    big = b"x" * (8 << 20)
    routes = [
        Route("GET", "/big", lambda req: Response(200, big)),
        Route("GET", "/metrics", lambda req: Response(200, b"up 1\n")),
    ]
    srv = HttpServer("127.0.0.1:0", routes, workers=2, timeout=10.0)
    srv.writer.idle_s = 1.0
    srv.writer.max_buffered = 3 * len(big)
    srv.start()
    slow = [_slow_reader(srv.address, "/big") for _ in range(8)]
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        assert [_get(srv.address, auth=None, timeout=3) for _ in range(10)] == [200] * 10
        assert time.monotonic() - t0 < 3
        assert srv.writer.buffered <= srv.writer.max_buffered  # the stalest were dropped to make room
        deadline = time.monotonic() + 5
        while srv.writer.buffered and time.monotonic() < deadline:
            time.sleep(0.1)
        assert srv.writer.buffered == 0 and srv.writer.dropped == 8  # each cut, none held to the timeout
        fast = socket.create_connection(srv.address, timeout=5)  # a client that reads gets it all
        fast.sendall(b"GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
        got = b""
        while chunk := fast.recv(1 << 20):
            got += chunk
        fast.close()
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(big[-100:]) and len(got) > len(big)
    finally:
        for s in slow:
            s.close()
        srv.stop()


def _nofile(n: int):
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return limit


def test_400_idle_connections_at_ulimit_256_leave_every_scrape_answered(tmp_path):
    """At `ulimit -n 256`, 400 idle keep-alive connections cost 2 of 19 scrapes: held connections now stay
    clear of the limit (the oldest idle one is reaped for each newcomer), so scrapes always find a descriptor."""
    with running_daemon(
        "--interval", "1", "--state-dir", str(tmp_path / "s"), env={"SPARK_WATCHD_FAKE_NVML": "gb10"},
        preexec_fn=_nofile(256),
    ) as (proc, base):  # fmt: skip
        addr = _addr(base)
        idle = []
        try:
            for _ in range(400):
                idle.append(socket.create_connection(addr, timeout=5))  # connect, say nothing
            time.sleep(0.5)
            t0 = time.monotonic()
            statuses = []
            for _ in range(20):
                statuses.append(_get(addr, auth=None, timeout=5))
                idle.append(socket.create_connection(addr, timeout=5))  # the flood goes on between scrapes
            assert statuses == [200] * 20, statuses
            assert time.monotonic() - t0 < 10
            assert len(os.listdir(f"/proc/{proc.pid}/fd")) < 256
            assert _get(addr, "/healthz", auth=None) == 200  # the daemon's sources found descriptors too
        finally:
            for s in idle:
                s.close()


def test_slow_readers_over_tls_hold_no_worker_and_a_reader_gets_the_whole_answer(tmp_path, cert):
    """The writer's non-blocking path over TLS (SSLWantWrite, partial records) as over plain TCP."""
    import ssl

    from spark_watchd.web.auth import load_web_config
    from spark_watchd.web.http import Response, Route
    from spark_watchd.web.server import HttpServer

    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {cert / 'cert.pem'}\n  key_file: {cert / 'key.pem'}\n")
    big = bytes(range(256)) * (24 << 12)  # 6 MiB
    routes = [
        Route("GET", "/big", lambda req: Response(200, big)),
        Route("GET", "/metrics", lambda req: Response(200, b"up 1\n")),
    ]
    # A reader that reads is never cut: idle_s and the deadline leave room for a loaded 2-core machine,
    # where the test's own TLS reader can be off the CPU for a second (a 1 s idle cut it there).
    srv = HttpServer("127.0.0.1:0", routes, workers=2, timeout=30, web=load_web_config(str(web)))
    srv.writer.idle_s = 3.0
    srv.start()
    ctx = ssl.create_default_context(cafile=str(cert / "cert.pem"))
    slow = []
    try:
        for _ in range(4):
            raw = socket.socket()
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            raw.settimeout(10)
            raw.connect(srv.address)
            s = ctx.wrap_socket(raw, server_hostname="localhost")
            s.sendall(b"GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")  # and never read
            slow.append(s)
        time.sleep(0.5)
        assert [_get(srv.address, auth=None, tls=ctx, timeout=3) for _ in range(6)] == [200] * 6
        status, reply = _request(srv.address, "GET /big HTTP/1.1\r\nHost: localhost\r\n", tls=ctx, timeout=30)
        assert status == 200 and reply.endswith(big) and b"Content-Length: %d\r\n" % len(big) in reply
        deadline = time.monotonic() + 10
        while srv.writer.buffered and time.monotonic() < deadline:
            time.sleep(0.1)
        assert srv.writer.buffered == 0 and srv.writer.dropped == 4
    finally:
        for s in slow:
            s.close()
        srv.stop()
