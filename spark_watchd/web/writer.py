"""Finish writing responses off the request workers, so a client that stops reading holds no worker.

A worker renders the whole response, then `ResponseWriter.send` tries it on the
socket without blocking: a scrape's answer fits the kernel's buffer and is done
there and then. What does not fit is written from one thread as the client reads
it, under a write deadline (`deadline_s` in all, and `idle_s` without progress),
from a bounded buffer: past `max_buffered` bytes held for slow clients the
client that has waited longest without reading is dropped. Issue 20: 8 clients
that never read a 5.5 MB /api/v1/status held the workers for the whole timeout
and left 3 of 11 scrapes OK.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import threading
import time

WRITE_IDLE_S = 5.0  # a client that reads nothing for this long is dropped
MAX_BUFFERED = 32 * 1024 * 1024  # response bytes held for slow readers, all of them together
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError)


class _Out:
    __slots__ = ("data", "sent", "deadline", "last")

    def __init__(self, data: memoryview, deadline: float, now: float):
        self.data = data
        self.sent = 0
        self.deadline = deadline
        self.last = now

    @property
    def left(self) -> int:
        return len(self.data) - self.sent


def _close(conn: socket.socket) -> None:
    try:
        conn.close()
    except OSError:
        pass


def _push(conn: socket.socket, out: _Out) -> bool | None:
    """Write what the socket takes; True when all is written, None when the client is gone."""
    while out.left:
        try:
            n = conn.send(out.data[out.sent : out.sent + 1024 * 1024])
        except _WOULD_BLOCK:
            return False
        except (OSError, ValueError):
            return None
        if n <= 0:
            return False
        out.sent += n
    return True


class ResponseWriter:
    """Writes whole responses to their connections and closes them; slow readers are served by one thread."""

    def __init__(self, deadline_s: float, idle_s: float = WRITE_IDLE_S, max_buffered: int = MAX_BUFFERED):
        self.deadline_s = deadline_s
        self.idle_s = min(idle_s, deadline_s)
        self.max_buffered = max_buffered
        self.dropped = 0  # slow readers cut off (deadline, idle or buffer pressure)
        self._lock = threading.Lock()
        self._incoming: list[tuple[socket.socket, _Out]] = []
        self._pending: dict[socket.socket, _Out] = {}  # owned by the writer thread
        self._buffered = 0  # bytes left to write over _incoming and _pending (under _lock)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="http-writer", daemon=True)
        self._thread.start()

    @property
    def buffered(self) -> int:
        return self._buffered

    def send(self, conn: socket.socket, data: bytes) -> None:
        """Write `data` to `conn` and close it: at once when the socket takes it all, else from the writer."""
        now = time.monotonic()
        out = _Out(memoryview(data), now + self.deadline_s, now)
        try:
            conn.setblocking(False)
        except (OSError, ValueError):
            _close(conn)
            return
        done = _push(conn, out)
        if done or done is None or self._stop.is_set():
            _close(conn)
            return
        with self._lock:
            self._buffered += out.left
            self._incoming.append((conn, out))
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # already woken (buffer full) or closing

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(0.25):
                if key.fileobj is self._wake_r:
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except OSError:
                        pass
                else:
                    self._advance(key.fileobj)  # type: ignore[arg-type]
            self._adopt()
            self._expire()

    def _adopt(self) -> None:
        with self._lock:
            new, self._incoming = self._incoming, []
        for conn, out in new:
            self._pending[conn] = out
            try:
                self._sel.register(conn, selectors.EVENT_WRITE, None)
            except (OSError, ValueError, KeyError):
                self._finish(conn, dropped=True)
        with self._lock:
            over = self._buffered > self.max_buffered
        while over and len(self._pending) > 1:
            # Memory is bounded: the client that has gone longest without reading makes room.
            stalest = min(self._pending, key=lambda c: self._pending[c].last)
            self._finish(stalest, dropped=True)
            with self._lock:
                over = self._buffered > self.max_buffered

    def _advance(self, conn: socket.socket) -> None:
        out = self._pending.get(conn)
        if out is None:
            return
        before = out.left
        done = _push(conn, out)
        with self._lock:
            self._buffered -= before - out.left
        if out.left < before:
            out.last = time.monotonic()
        if done or done is None:
            self._finish(conn, dropped=done is None)

    def _expire(self) -> None:
        now = time.monotonic()
        for conn, out in list(self._pending.items()):
            if now > out.deadline or now - out.last > self.idle_s:
                self._finish(conn, dropped=True)

    def _finish(self, conn: socket.socket, dropped: bool) -> None:
        out = self._pending.pop(conn, None)
        if out is not None:
            with self._lock:
                self._buffered -= out.left
        if dropped:
            self.dropped += 1
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        _close(conn)

    def close(self) -> None:
        """Stop the thread and close every connection still being written."""
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(timeout=2)
        self._adopt()
        for conn in list(self._pending):
            self._finish(conn, dropped=False)
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
