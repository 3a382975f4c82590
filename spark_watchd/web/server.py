"""The HTTP server: a bounded worker pool, per-connection timeouts, routes built by spark_watchd.app.

Connections wait in the gate (web/gate.py: TLS handshake, headers, small
body) without a worker; a worker gets only complete requests. When every
worker is busy a new connection gets an immediate 503 (over TLS when TLS is
on) instead of queueing, so Prometheus scrapes are never stuck behind slow
clients. Requests must name this host (web/hosts.py: DNS rebinding gets 421),
state-changing requests from a browser must come from this daemon's own
origin, and basic auth is checked by web/credentials.py (flood-safe).
"""

from __future__ import annotations

import io
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from spark_watchd import __version__
from spark_watchd.logs import get_logger
from spark_watchd.web.framing import Framing, FramingError, framing
from spark_watchd.web.gate import ConnectionGate, reply
from spark_watchd.web.hosts import HostPolicy
from spark_watchd.web.http import Request, Response, Route, parse_listen
from spark_watchd.web.writer import ResponseWriter

if TYPE_CHECKING:  # the web config (TLS, basic auth, bcrypt) is loaded only when one is configured
    from spark_watchd.web.auth import WebConfig

_BODY_METHODS = ("POST", "PUT", "PATCH")
_DRAIN_LIMIT = 256 * 1024  # read this much of a refused body so the client sees our answer, not a reset
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
QUEUE_WAIT_S = 1.0  # a complete request waits this long for a free worker before 503
QUEUE_MAX = 256  # complete requests waiting for a worker; beyond this the oldest get 503 at once
_DIRECT_WRITE = 16 * 1024  # responses up to this are written by the worker; larger ones by the writer


class _DeadlineReader(io.RawIOBase):
    """Socket reads that share one deadline, after the bytes the gate already read: trickling gets cut off."""

    def __init__(self, sock: socket.socket, deadline: float, head: bytes = b""):
        self.sock = sock
        self.deadline = deadline
        self.head = memoryview(head)

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self.head:
            n = min(len(buf), len(self.head))
            buf[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not received in time")
        self.sock.settimeout(left)
        return self.sock.recv_into(buf)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"spark-watchd/{__version__}"
    sys_version = ""

    def version_string(self) -> str:
        return self.server_version

    # Set per server by HttpServer (a subclass each).
    app: HttpServer

    handed_off = False  # the response went to the writer, which closes the connection
    error_message_format = "%(code)d %(message)s\n"
    error_content_type = "text/plain; charset=utf-8"

    def __init__(self, request, client_address, server, head: bytes = b""):
        self._head = head
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        deadline = time.monotonic() + self.app.timeout
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadline, self._head))

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":  # a bare "GET path" line: no headers, no status line back
            self.send_error(400, "HTTP/0.9 is not supported")
            return False
        return True

    def send_error(self, code, message=None, explain=None):
        # Garbage request lines parse as HTTP/0.9, which would get a reply without a status line.
        self.request_version = "HTTP/1.1"
        self.close_connection = True
        super().send_error(code, message, explain)

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass  # access logs would flood journald at one scrape per 15 s; errors are logged by the app

    def _dispatch(self) -> None:
        self.close_connection = True
        app = self.app
        extra = dict(app.web.headers) if app.web else {}
        try:  # the gate parsed the same head with the same rules; this is the handler's copy of its verdict
            frame = framing(self.request_version, self.headers.items())
        except FramingError as exc:
            return self._send(Response(400, f"{exc}\n".encode()), extra)
        host = frame.host
        if not app.hosts.allows_host(host):
            # DNS rebinding: a foreign name pointed at this address. Add it to [daemon] allowed_hosts if it is ours.
            return self._send(Response(421, b"unknown Host: add it to [daemon] allowed_hosts\n"), extra)
        client = self.client_address[0] if self.client_address else ""
        authenticated = False
        if app.web is not None and app.web.auth is not None:
            from spark_watchd.web.credentials import Verdict  # loaded with the web config already

            verdict = app.web.auth.check(self.headers.get("Authorization"), client)
            if verdict is Verdict.LIMITED:
                extra["Retry-After"] = "10"
                return self._send(Response(429, b"too many failed logins: retry later\n"), extra)
            if verdict is not Verdict.OK:
                extra["WWW-Authenticate"] = 'Basic realm="spark-watchd", charset="UTF-8"'
                return self._send(Response(401, b"authentication required\n"), extra)
            authenticated = True
        if self.command not in _SAFE_METHODS and not app.hosts.allows_origin(
            self.headers.get("Origin"), host
        ):
            return self._send(
                Response(403, b"cross-site request refused (Origin is not this daemon)\n"), extra
            )
        path, _, qs = self.path.partition("?")
        by_method = app.table.get(path)
        if by_method is None:
            return self._send(Response(404, b"not found\n"), extra)
        method = "GET" if self.command == "HEAD" else self.command
        route = by_method.get(method)
        if route is None:
            extra["Allow"] = ", ".join(sorted(set(by_method) | ({"HEAD"} if "GET" in by_method else set())))
            return self._send(Response(405, b"method not allowed\n"), extra)
        body = b""
        if method in _BODY_METHODS:
            body = self._read_body(route, frame, extra)
            if body is None:
                return
        req = Request(
            method=method,
            path=path,
            query=parse_qs(qs, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            client=client,
            authenticated=authenticated,
        )
        try:
            resp = route.handler(req)
        except Exception as exc:
            app.log.exception("handler failed", path=path, error=str(exc))
            resp = Response(500, b"internal error\n")
        self._send(resp, extra)

    def _read_body(self, route: Route, frame: Framing, extra: dict) -> bytes | None:
        """The request body, or None after answering 411/400/413 (413 is sent before reading it)."""
        if frame.chunked:
            self._send(Response(411, b"send the body with a Content-Length, not chunked\n"), extra)
            return None
        length = frame.length
        if length is None:
            self._send(Response(411, b"Content-Length required\n"), extra)
            return None
        if length > route.max_body:
            self._send(Response(413, f"body over {route.max_body} bytes\n".encode()), extra)
            self._drain(min(length, _DRAIN_LIMIT))
            return None
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            self._send(Response(408, b"body shorter than Content-Length\n"), extra)
            return None
        if len(body) < length:
            self._send(Response(400, b"body shorter than Content-Length\n"), extra)
            return None
        return body

    def _drain(self, n: int) -> None:
        try:
            self.wfile.flush()
            self.connection.settimeout(1.0)
            while n > 0:
                chunk = self.rfile.read1(min(n, 65536)) if hasattr(self.rfile, "read1") else b""
                if not chunk:
                    break
                n -= len(chunk)
        except OSError:
            pass

    def _send(self, resp: Response, extra: dict) -> None:
        try:
            self.send_response(
                resp.status,
                HTTPStatus(resp.status).phrase if resp.status in HTTPStatus._value2member_map_ else "",
            )
            self.send_header("Content-Type", resp.content_type)
            self.send_header("Content-Length", str(len(resp.body)))
            self.send_header("Connection", "close")
            for k, v in {**extra, **resp.headers}.items():
                self.send_header(k, v)
            self._headers_buffer.append(b"\r\n")
            data = b"".join(self._headers_buffer) + (resp.body if self.command != "HEAD" else b"")
            self._headers_buffer = []
            if len(data) <= _DIRECT_WRITE:  # fits an empty socket buffer: never blocks
                self.wfile.write(data)
            else:  # written as the client reads it, off this worker (web/writer.py)
                self.app.writer.send(self.connection, data)
                self.handed_off = True
        except OSError:
            pass  # the client went away

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _dispatch


class HttpServer:
    """Serves routes on HOST:PORT with a bounded pool of workers; optional TLS and basic auth (WebConfig)."""

    def __init__(
        self,
        listen: str,
        routes: Iterable[Route],
        *,
        workers: int = 8,
        timeout: float = 10.0,
        web: WebConfig | None = None,
        allowed_hosts: Iterable[str] = (),
    ):
        self.host, self.port = parse_listen(listen)
        self.hosts = HostPolicy(self.host, allowed_hosts)
        self.log = get_logger("http")
        self.table: dict[str, dict[str, Route]] = {}
        for r in routes:
            self.table.setdefault(r.path, {})[r.method.upper()] = r
        self.timeout = timeout
        self.web = web
        self.workers = workers
        self._slots = threading.BoundedSemaphore(workers)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http")
        self._handler = type("Handler", (_Handler,), {"app": self})
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((self.host, self.port))
        except OSError:
            self._sock.close()
            raise
        self._sock.listen(128)
        self.writer = ResponseWriter(deadline_s=timeout)  # after the bind: a refused port leaves no thread
        self._sock.settimeout(0.5)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._open: set[socket.socket] = set()  # connections in service, cut on stop
        self._open_lock = threading.Lock()

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.getsockname()[:2]

    @property
    def url(self) -> str:
        host, port = self.address
        scheme = "https" if self.web is not None and self.web.tls is not None else "http"
        return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}/"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._accept_loop, name="http-accept", daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        # Idle and half-open clients wait in the gate, not in a worker (see web/gate.py). Complete requests wait
        # up to QUEUE_WAIT_S for a worker (a burst of quick requests is served, not refused), then get 503.
        gate = ConnectionGate(self._sock, self.timeout, tls=self.web.tls if self.web is not None else None)
        queue: deque[tuple[socket.socket, object, bytes, float]] = deque()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                queue.extend(
                    (conn, addr, head, now) for conn, addr, head in gate.poll(0.005 if queue else 0.5)
                )
                while queue and self._slots.acquire(blocking=False):
                    conn, addr, head, _ = queue.popleft()
                    try:
                        self._pool.submit(self._serve, conn, addr, head)
                    except RuntimeError:  # pool shut down
                        self._slots.release()
                        conn.close()
                        return
                while queue and (len(queue) > QUEUE_MAX or time.monotonic() - queue[0][3] > QUEUE_WAIT_S):
                    # After the gate's handshake `conn` is the TLS socket: the 503 goes out encrypted.
                    reply(
                        queue.popleft()[0],
                        "503 Service Unavailable",
                        "busy: every worker is serving a request",
                    )
        finally:
            for conn, *_ in queue:
                conn.close()
            gate.close()

    def _serve(self, conn: socket.socket, addr, head: bytes = b"") -> None:
        with self._open_lock:
            self._open.add(conn)
        handler = None
        try:
            conn.settimeout(self.timeout)
            handler = self._handler(conn, addr, self, head)
        except (TimeoutError, ConnectionError, ssl.SSLError):
            pass  # slow, half-open or vanished client: drop it
        except Exception as exc:
            self.log.exception("connection failed", error=str(exc))
        finally:
            with self._open_lock:
                self._open.discard(conn)
            if not getattr(handler, "handed_off", False):  # else the writer closes it once written
                try:
                    conn.close()
                except OSError:
                    pass
            self._slots.release()

    def stop(self) -> None:
        self._stop.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept() at once on Linux
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._open_lock:
            for conn in self._open:  # a slow client must not hold the exit for its timeout
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.writer.close()
