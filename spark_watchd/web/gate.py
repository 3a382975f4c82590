"""Hold accepted connections until their request has arrived, so idle or trickling clients hold no worker.

Without this an idle connection (a client that connects and says nothing, a
half-open socket after a network drop) takes one of the bounded workers until
its timeout: as many such clients as workers and every scrape gets 503. The
gate waits for the whole header block (plain HTTP, peeked without consuming it)
or for the first bytes of the handshake (TLS) before handing a connection on,
and drops connections still silent after the timeout.
"""

from __future__ import annotations

import selectors
import socket
import time

_PEEK = 65536  # the handler refuses larger header blocks with 431: hand such a request on as it is
_HEADERS_END = (b"\r\n\r\n", b"\n\n", b"\n\r\n")
_TCP_CLOSE_WAIT = 8  # linux/tcp_states.h


def _peer_finished(conn: socket.socket) -> bool:
    """True when the client has half-closed (TCP CLOSE_WAIT): what it sent is all it will send."""
    try:
        info = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
    except (OSError, AttributeError):
        return True  # no TCP_INFO here: hand partial requests on rather than hold them
    return info[0] == _TCP_CLOSE_WAIT


class ConnectionGate:
    """Accepts on `listener` and yields (conn, addr) once each request is in; closes the silent ones."""

    def __init__(self, listener: socket.socket, timeout: float, tls: bool, max_pending: int = 512):
        self.listener = listener
        self.timeout = timeout
        self.tls = tls
        self.max_pending = max_pending
        self._sel = selectors.DefaultSelector()
        listener.setblocking(False)
        self._sel.register(listener, selectors.EVENT_READ, None)
        self._waiting: dict[socket.socket, tuple[object, float]] = {}  # conn -> (addr, accepted at)
        self._partial: set[socket.socket] = (
            set()
        )  # some bytes in, not the whole request: polled, not selected

    def poll(self, wait: float = 0.5) -> list[tuple[socket.socket, object]]:
        """Wait up to `wait` s; the connections whose request has arrived (blocking sockets again)."""
        ready: list[tuple[socket.socket, object]] = []
        try:
            events = self._sel.select(0.05 if self._partial else wait)
        except (OSError, ValueError):  # the listener was closed under us
            return ready
        for key, _ in events:
            if key.fileobj is self.listener:
                self._accept()
            else:
                self._check(key.fileobj, ready)  # type: ignore[arg-type]
        for conn in list(self._partial):
            self._check(conn, ready)
        self._expire()
        return ready

    def _accept(self) -> None:
        while True:
            try:
                conn, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                # Out of descriptors (EMFILE): free the oldest held connection and pause, rather than spin on a
                # listener that stays readable.
                if self._waiting:
                    self._drop(min(self._waiting, key=lambda c: self._waiting[c][1]))
                time.sleep(0.05)
                return
            conn.setblocking(False)
            if len(self._waiting) >= self.max_pending:  # a flood of silent clients: drop the oldest
                oldest = min(self._waiting, key=lambda c: self._waiting[c][1])
                self._drop(oldest)
            self._waiting[conn] = (addr, time.monotonic())
            self._sel.register(conn, selectors.EVENT_READ, None)

    def _check(self, conn: socket.socket, ready: list) -> None:
        if self.tls:
            done = True  # the handshake bytes are in; the worker's deadline covers the rest
        else:
            try:
                head = conn.recv(_PEEK, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._drop(conn)
                return
            if not head:  # closed without a request
                self._drop(conn)
                return
            done = len(head) >= _PEEK or any(end in head for end in _HEADERS_END) or _peer_finished(conn)
        if done:
            addr = self._forget(conn)
            conn.setblocking(True)
            ready.append((conn, addr))
        elif conn not in self._partial:
            self._sel.unregister(conn)  # readable until consumed: poll it instead of spinning in select
            self._partial.add(conn)

    def _expire(self) -> None:
        cutoff = time.monotonic() - self.timeout
        for conn, (_, since) in list(self._waiting.items()):
            if since < cutoff:
                self._drop(conn)

    def _forget(self, conn: socket.socket) -> object:
        addr, _ = self._waiting.pop(conn, (None, 0.0))
        if conn in self._partial:
            self._partial.discard(conn)
        else:
            try:
                self._sel.unregister(conn)
            except (KeyError, ValueError):
                pass
        return addr

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
