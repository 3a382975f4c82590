"""The accept gate: a connection reaches a worker only once its request is in; silent ones are dropped."""

from __future__ import annotations

import socket
import time

from spark_watchd.web.gate import ConnectionGate


def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s


def _poll_until(gate: ConnectionGate, n: int, timeout: float = 5.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += gate.poll(0.05)
    return got


def test_only_complete_requests_are_handed_on_and_silent_clients_are_dropped_at_the_timeout():
    lst = _listener()
    gate = ConnectionGate(
        lst,
        timeout=0.5,
    )
    silent = socket.create_connection(lst.getsockname())
    partial = socket.create_connection(lst.getsockname())
    partial.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost")
    whole = socket.create_connection(lst.getsockname())
    whole.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    try:
        ready = _poll_until(gate, 1)
        assert len(ready) == 1
        conn, _, head = ready[0]
        assert head == b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"  # handed on with what was read
        conn.close()
        partial.sendall(b"\r\n\r\n")  # the rest of the headers: now it goes on
        ready = _poll_until(gate, 1)
        assert len(ready) == 1
        ready[0][0].close()
        time.sleep(0.6)
        assert _poll_until(gate, 1, timeout=0.3) == []
        silent.settimeout(2)
        assert silent.recv(10) == b""  # dropped after the timeout, never handed on
    finally:
        for s in (silent, partial, whole):
            s.close()
        gate.close()
        lst.close()


def test_a_half_closed_partial_request_is_handed_on_for_the_handler_to_refuse():
    lst = _listener()
    gate = ConnectionGate(
        lst,
        timeout=5,
    )
    c = socket.create_connection(lst.getsockname())
    c.sendall(b"\x00\x01 garbage")
    c.shutdown(socket.SHUT_WR)
    try:
        ready = _poll_until(gate, 1)
        assert len(ready) == 1  # not held until the timeout: the client has said all it will
        ready[0][0].close()
    finally:
        c.close()
        gate.close()
        lst.close()


def test_a_flood_of_silent_clients_is_capped_oldest_dropped_first():
    lst = _listener()
    gate = ConnectionGate(lst, timeout=30, max_pending=4)
    clients = [socket.create_connection(lst.getsockname()) for _ in range(6)]
    try:
        deadline = time.monotonic() + 3
        while len(gate._waiting) < 4 and time.monotonic() < deadline:
            gate.poll(0.05)
        for _ in range(5):
            gate.poll(0.05)
        assert len(gate._waiting) == 4
        clients[0].settimeout(2)
        assert clients[0].recv(10) == b""  # the oldest went first
    finally:
        for s in clients:
            s.close()
        gate.close()
        lst.close()


def test_header_search_is_linear_and_oversized_headers_get_431_early():
    """A header block trickled 1 KiB at a time is searched once per byte; past MAX_HEAD it is refused."""
    from spark_watchd.web.gate import MAX_HEAD

    lst = _listener()
    gate = ConnectionGate(lst, timeout=10)
    c = socket.create_connection(lst.getsockname())
    c.settimeout(5)
    try:
        c.sendall(b"GET /metrics HTTP/1.1\r\n")
        sent = 0
        reply = b""
        while sent <= MAX_HEAD + 4096:
            c.sendall(b"X-Pad: " + b"a" * 1000 + b"\r\n")
            sent += 1009
            gate.poll(0.05)
            pending = next(iter(gate._waiting.values()), None)
            if pending is None:
                break
            assert pending.scanned == len(pending.buf)  # never searched from the start again
        assert _poll_until(gate, 1, timeout=0.5) == []
        reply = c.recv(200)
        assert reply.startswith(b"HTTP/1.1 431"), reply
        assert sent <= MAX_HEAD + 2048  # refused as soon as the cap was passed
    finally:
        c.close()
        gate.close()
        lst.close()


def test_a_short_body_gets_408_from_the_gate_once_it_goes_idle():
    from spark_watchd.web import gate as gate_mod

    lst = _listener()
    gate = ConnectionGate(lst, timeout=10)
    c = socket.create_connection(lst.getsockname())
    c.settimeout(5)
    try:
        c.sendall(b"POST /api/v1/progress HTTP/1.1\r\nHost: localhost\r\nContent-Length: 50\r\n\r\n{}")
        t0 = time.monotonic()
        assert _poll_until(gate, 1, timeout=gate_mod.BODY_IDLE_S + 1) == []
        assert c.recv(200).startswith(b"HTTP/1.1 408")
        assert time.monotonic() - t0 < gate_mod.BODY_IDLE_S + 1.5
        c2 = socket.create_connection(lst.getsockname())
        c2.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}")
        ready = _poll_until(gate, 1)
        assert [r[2].endswith(b"\r\n\r\n{}") for r in ready] == [True]  # whole body: handed on with it
        ready[0][0].close()
        c2.close()
    finally:
        c.close()
        gate.close()
        lst.close()


def test_bytes_held_across_connections_are_capped(monkeypatch):
    from spark_watchd.web import gate as gate_mod

    monkeypatch.setattr(gate_mod, "MAX_BUFFERED", 2500)
    lst = _listener()
    gate = ConnectionGate(lst, timeout=10)
    clients = [socket.create_connection(lst.getsockname(), timeout=5) for _ in range(4)]
    try:
        for c in clients:  # ~1 KiB each, headers never finished
            c.sendall(b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * 1000 + b"\r\n")
        end = time.monotonic() + 1
        while time.monotonic() < end:
            assert gate.poll(0.05) == []
        assert len(gate._waiting) == 2 and gate._buffered <= 2500  # two held, the rest refused
        replies = [_reply_of(c) for c in clients if _readable(c)]
        assert len(replies) == 2 and all(r.startswith(b"HTTP/1.1 503") for r in replies), replies
    finally:
        for c in clients:
            c.close()
        gate.close()
        lst.close()
    assert gate._buffered == 0


def _readable(c: socket.socket) -> bool:
    import select

    return bool(select.select([c], [], [], 0.2)[0])


def _reply_of(c: socket.socket) -> bytes:
    try:
        return c.recv(100)
    except OSError:
        return b""
