"""The tests' shared fakes: a source with a fixed reading, a recording HTTP server, a raw-socket exchange.

Only the GPU is faked in the package itself (spark_watchd.testing); these stand in for the
daemon's collaborators in tests: a source, the far end of an HTTP call, a misbehaving client.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from spark_watchd.sources.base import SourceUnavailable

# The smallest reading the daemon publishes a snapshot from.
MEMINFO = {"meminfo": {"MemTotal": 1000, "MemAvailable": 400}}


class FakeSource:
    """A source returning the same reading every tick, or raising SourceUnavailable while `fail` is set."""

    def __init__(self, name: str = "meminfo", reading: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.reading = dict(MEMINFO if reading is None else reading)
        self.fail: str | None = None
        self.calls = 0
        self.closed = False

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        """The reading, counting the call; raises while `fail` names a reason."""
        self.calls += 1
        if self.fail:
            raise SourceUnavailable(self.fail)
        return self.reading

    def close(self) -> None:
        """Remember that the daemon closed it."""
        self.closed = True


@dataclass
class Recorded:
    """One request the CaptureServer received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 200


@dataclass
class Reply:
    """What a CaptureServer answers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class CaptureServer:
    """A loopback HTTP server recording every request; `respond(request) -> Reply` decides each answer."""

    def __init__(self, respond: Callable[[Recorded], Reply | None] | None = None) -> None:
        self.requests: list[Recorded] = []
        self.arrived = threading.Condition()
        outer = self
        answer = respond or (lambda _req: Reply())

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                req = Recorded(self.command, self.path, dict(self.headers.items()), body)
                reply = answer(req) or Reply()
                req.status = reply.status
                with outer.arrived:
                    outer.requests.append(req)
                    outer.arrived.notify_all()
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_HEAD = _serve  # noqa: N815 - http.server's names

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def wait_for(self, count: int = 1, timeout: float = 10.0) -> list[Recorded]:
        """The requests so far, once at least `count` have arrived (or timeout passed)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.requests) >= count, timeout)
            return list(self.requests)

    def wait_until(self, predicate: Callable[[list[Recorded]], Any], timeout: float = 10.0) -> list[Recorded]:
        """The requests so far, once predicate(requests) holds (or timeout passed)."""
        with self.arrived:
            self.arrived.wait_for(lambda: predicate(self.requests), timeout)
            return list(self.requests)

    def close(self) -> None:
        """Stop serving and release the port."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> CaptureServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def raw_exchange(
    address: tuple[str, int],
    data: bytes,
    *,
    tls: bool = False,
    half_close: bool = False,
    read: bool = True,
    timeout: float = 5.0,
) -> bytes:
    """Send raw bytes on a fresh connection and read the answer until the server closes (or resets)."""
    sock = socket.create_connection(address, timeout=timeout)
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        sock = ctx.wrap_socket(sock)
    with sock:
        sock.sendall(data)
        if half_close:
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        if not read:
            return b""
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError, ssl.SSLError):
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(reply: bytes) -> int:
    """The status code of a raw HTTP/1.1 answer, 0 when there is none."""
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0


def http_request(
    method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
) -> bytes:
    """A raw HTTP/1.1 request with Host and Content-Length."""
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return head.encode() + b"\r\n" + body
