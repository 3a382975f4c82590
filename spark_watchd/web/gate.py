"""Hold accepted connections until their whole request has arrived, so slow or hostile clients hold no worker.

Without this an idle connection (a client that connects and says nothing, a
half-open socket, a stalled TLS handshake) takes one of the bounded workers
until its timeout: as many such clients as workers and every scrape fails. The
gate runs TLS handshakes without blocking, under their own short deadline,
then reads the header block (and a small body) into a buffer as it arrives:
each byte is read and searched once (linear, however slowly it trickles), a
header block over MAX_HEAD gets 431 at once, ambiguous framing (web/framing.py)
400 at once, a body that stops short of its
Content-Length gets 408 once it goes idle. Only complete requests reach a
worker, with the bytes read so far.
"""

from __future__ import annotations

import os
import re
import resource
import selectors
import socket
import ssl
import time

from spark_watchd.web.framing import FramingError, parse_head

MAX_HEAD = 16 * 1024  # request line + headers; nginx's default large_client_header_buffers is 8 KiB
MAX_HELD_BODY = (
    64 * 1024
)  # bodies up to this wait here; larger ones go on (the route answers 413 or reads it)
BODY_IDLE_S = 2.0  # a body that pauses this long mid-way will not come: 408
# Bytes held across all waiting connections: 512 clients x 80 KiB would be 40 MiB (the RSS target is 60 MiB).
MAX_BUFFERED = 8 * 1024 * 1024
_HEADERS_END = re.compile(rb"\r?\n\r?\n")

HANDSHAKE, HEAD, BODY = "handshake", "head", "body"
FD_RESERVE = 64  # descriptors never taken by held connections (workers, writer, state, /proc, NVML)
REAP_BATCH = 16  # idle connections closed at once when accept() meets the descriptor limit anyway


def _descriptor_room() -> int:
    """How many connections may be held: the soft RLIMIT_NOFILE less those open now and FD_RESERVE."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        in_use = len(os.listdir("/proc/self/fd"))
    except (OSError, ValueError):
        return 1 << 30
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(8, soft - in_use - FD_RESERVE)


class _Pending:
    __slots__ = ("addr", "since", "last", "stage", "buf", "need", "scanned")

    def __init__(self, addr: object, now: float, stage: str):
        self.addr = addr
        self.since = now
        self.last = now
        self.stage = stage
        self.buf = bytearray()
        self.need = 0  # bytes that make the request whole, once the header block is in
        self.scanned = 0  # where the next search for the header end starts (each byte searched once)


def reply(conn: socket.socket, status: str, text: str) -> None:
    """Best-effort short answer and close; valid on TLS too, since `conn` is then the TLS socket."""
    body = text.encode() + b"\n"
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
    try:
        conn.setblocking(False)
        conn.send(head.encode() + b"Connection: close\r\n\r\n" + body)
    except (OSError, ValueError):
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


class ConnectionGate:
    """Accepts on `listener` and yields (conn, addr, head bytes) once each request is in; drops the rest."""

    def __init__(
        self,
        listener: socket.socket,
        timeout: float,
        tls: ssl.SSLContext | None = None,
        max_pending: int = 512,
        handshake_timeout: float = 3.0,
    ):
        self.listener = listener
        self.timeout = timeout
        self.tls = tls
        self.handshake_timeout = min(handshake_timeout, timeout)
        # Held connections stay clear of the descriptor limit, so workers, the writer, state files and /proc
        # reads always find one (issue 20: at `ulimit -n 256`, 400 idle connections cost 2 of 19 scrapes).
        self.max_pending = min(max_pending, _descriptor_room())
        self._sel = selectors.DefaultSelector()
        listener.setblocking(False)
        self._sel.register(listener, selectors.EVENT_READ, None)
        self._waiting: dict[socket.socket, _Pending] = {}
        self._buffered = 0  # sum of len(p.buf) over self._waiting

    def poll(self, wait: float = 0.5) -> list[tuple[socket.socket, object, bytes]]:
        """Wait up to `wait` s; the connections whose request is in (blocking again), with what was read."""
        ready: list[tuple[socket.socket, object, bytes]] = []
        try:
            events = self._sel.select(min(wait, BODY_IDLE_S / 4))
        except (OSError, ValueError):  # the listener was closed under us
            return ready
        for key, _ in events:
            if key.fileobj is self.listener:
                self._accept()
            elif key.fileobj in self._waiting:
                self._advance(key.fileobj, ready)  # type: ignore[arg-type]
        self._expire()
        return ready

    def _accept(self) -> None:
        while True:
            try:
                conn, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                # Out of descriptors (EMFILE) all the same: reap idle ones and hold fewer from now on; with none
                # held, pause rather than spin on a listener that stays readable.
                if not self._waiting:
                    time.sleep(0.05)
                    return
                self.max_pending = max(1, len(self._waiting) - REAP_BATCH)
                for _ in range(min(REAP_BATCH, len(self._waiting))):
                    self._drop(self._idlest())
                continue
            conn.setblocking(False)
            if len(self._waiting) >= self.max_pending:  # a flood of silent clients: reap the oldest idle one
                self._drop(self._idlest())
            now = time.monotonic()
            if self.tls is not None:
                try:
                    conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                except (OSError, ValueError):
                    conn.close()
                    continue
                self._waiting[conn] = _Pending(addr, now, HANDSHAKE)
            else:
                self._waiting[conn] = _Pending(addr, now, HEAD)
            self._sel.register(conn, selectors.EVENT_READ, None)

    def _idlest(self) -> socket.socket:
        """The connection to reap first: the oldest that has sent nothing, else the oldest (dicts keep order)."""
        for conn, p in self._waiting.items():
            if not p.buf:
                return conn
        return next(iter(self._waiting))

    def _advance(self, conn: socket.socket, ready: list) -> None:
        p = self._waiting[conn]
        if p.stage == HANDSHAKE:
            try:
                conn.do_handshake()  # type: ignore[attr-defined]
            except ssl.SSLWantReadError:
                self._sel.modify(conn, selectors.EVENT_READ, None)
                return
            except ssl.SSLWantWriteError:
                self._sel.modify(conn, selectors.EVENT_WRITE, None)
                return
            except (OSError, ValueError):  # a failed handshake (plain HTTP on TLS, bad client cert...)
                self._drop(conn)
                return
            p.stage = HEAD
            self._sel.modify(conn, selectors.EVENT_READ, None)
        finished = self._read(conn, p)
        if finished is None:
            return  # dropped
        if self._buffered > MAX_BUFFERED:
            self._forget(conn)
            reply(conn, "503 Service Unavailable", "busy: too many requests arriving at once")
            return
        p.last = time.monotonic()
        if p.stage == HEAD:
            end = _HEADERS_END.search(p.buf, max(0, p.scanned - 3))
            if end is None or end.end() > MAX_HEAD:
                p.scanned = len(p.buf)
                if len(p.buf) > MAX_HEAD:
                    self._forget(conn)
                    reply(
                        conn, "431 Request Header Fields Too Large", f"request headers over {MAX_HEAD} bytes"
                    )
                    return
            else:
                try:  # the one framing parse (web/framing.py): the handler reads the same length
                    parsed = parse_head(bytes(p.buf[: end.end()]))
                except FramingError as exc:
                    self._forget(conn)
                    reply(conn, "400 Bad Request", str(exc))
                    return
                length = (parsed[1].length or 0) if parsed is not None else 0
                p.need = end.end() + (length if length <= MAX_HELD_BODY else 0)
                p.stage = BODY
        if (p.stage == BODY and len(p.buf) >= p.need) or finished:
            # Whole, or the client half-closed: what it sent is all it will send; the handler answers it.
            self._forget(conn)
            conn.setblocking(True)
            ready.append((conn, p.addr, bytes(p.buf)))

    def _read(self, conn: socket.socket, p: _Pending) -> bool | None:
        """Read what is there into p.buf; True at end of stream, None when the connection was dropped."""
        cap = MAX_HEAD + MAX_HELD_BODY + 1
        while len(p.buf) < cap:
            try:
                chunk = conn.recv(min(65536, cap - len(p.buf)))
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return False
            except (OSError, ValueError):
                self._drop(conn)
                return None
            if not chunk:
                if not p.buf:  # closed without a request
                    self._drop(conn)
                    return None
                return True
            p.buf += chunk
            self._buffered += len(chunk)
        return False

    def _expire(self) -> None:
        now = time.monotonic()
        for conn, p in list(self._waiting.items()):
            if p.stage == HANDSHAKE and now - p.since > self.handshake_timeout:
                self._drop(conn)  # no HTTP is possible before the handshake: just close
            elif p.stage == BODY and now - p.last > min(BODY_IDLE_S, self.timeout):
                self._forget(conn)
                reply(conn, "408 Request Timeout", "body shorter than Content-Length")
            elif now - p.since > self.timeout:
                if p.buf:
                    self._forget(conn)
                    reply(conn, "408 Request Timeout", "request not received in time")
                else:
                    self._drop(conn)

    def _forget(self, conn: socket.socket) -> None:
        p = self._waiting.pop(conn, None)
        if p is not None:
            self._buffered -= len(p.buf)
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass

    def _drop(self, conn: socket.socket) -> None:
        self._forget(conn)
        try:
            conn.close()
        except OSError:
            pass

    def close(self) -> None:
        """Close every held connection and the selector (not the listener)."""
        for conn in list(self._waiting):
            self._drop(conn)
        self._sel.close()
