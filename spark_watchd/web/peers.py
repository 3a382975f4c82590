"""`[fleet]`: the other Sparks of a desk, read daemon to daemon (their /api/v1/status), no Prometheus.

The client speaks to a peer the way a browser speaks to our own server (web/server.py): plain HTTP on
loopback or a LAN, or HTTPS with the peer's CA or certificate fingerprint pinned, basic auth when the
peer asks for it. Every read has one deadline (`timeout_s` from connect to the last byte, not per
recv: a peer dripping a byte a second is cut at it) and a size bound, and its answer is decoded and
checked by web/peerdoc.py: a peer that hangs, drips, answers a gigabyte or a hostile document costs
its own read, never the tick or another peer (the worker in web/fleet.py owns every call).
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import io
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.quantities import Seconds
from spark_watchd.web.peerdoc import PeerError, decode, peer_status

STATUS_PATH = "/api/v1/status"
_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")


class FleetSettings(BaseModel):
    """The peers this daemon reads and shows beside itself; off while `peers` is empty."""

    model_config = ConfigDict(extra="forbid")

    peers: list[str] = Field(
        default_factory=list,
        max_length=16,
        description='The other Sparks\' spark-watchd, "HOST:PORT" or "https://HOST:PORT", optionally named '
        '"spark-b=https://10.0.0.2:9761". E.g. ["spark-b.local:9761"].',
    )
    name: str | None = Field(
        None, max_length=64, description="This Spark's name in the pair view (default: host)."
    )
    interval_s: Seconds = Field(
        30.0, ge=1, le=3600, description="Seconds between two reads of each peer (on the fleet worker)."
    )
    timeout_s: Seconds = Field(
        5.0, le=60, description="Deadline of one peer read, seconds: connect to the last byte of the answer."
    )
    max_response_bytes: int = Field(
        4 << 20, ge=4096, le=64 << 20, description="Largest status document accepted from a peer, bytes."
    )
    ca_file: str | None = Field(None, description="PEM CA bundle that signs the peers' certificates (https).")
    fingerprint_sha256: str | None = Field(
        None,
        description="Pin the peers' certificate instead of a CA: its SHA-256 in hex "
        "(`openssl x509 -noout -fingerprint -sha256 -in cert.pem`, colons allowed).",
    )
    username: str | None = Field(
        None, description="Basic auth user, when the peers' web config asks for one."
    )
    password_file: str | None = Field(None, description="File holding the basic auth password (one line).")
    history_points: int = Field(
        720, ge=10, le=20_000, description="Readings kept per Spark for the pair view's charts."
    )
    # The on-demand fabric measurement (web/fabric_test.py): off unless the owner turns it on, and then only
    # for the configured peers' addresses, one test at a time, bounded in bytes and seconds.
    fabric_test: bool = Field(
        False,
        description="Let the configured peers measure the fabric to this daemon (spark-watchd fabric-test).",
    )
    fabric_test_bytes: int = Field(
        1 << 30, ge=1 << 20, le=16 << 30, description="Most bytes one fabric test may move to this daemon."
    )
    fabric_test_seconds: Seconds = Field(
        5.0, ge=1, le=30, description="Longest a fabric test may run, seconds."
    )

    @field_validator("peers")
    @classmethod
    def _peer_addresses(cls, v: list[str]) -> list[str]:
        for p in v:
            parse_peer(p)  # raises ValueError naming the entry
        return v

    @field_validator("fingerprint_sha256")
    @classmethod
    def _hex_digest(cls, v: str | None) -> str | None:
        if v is None:
            return v
        d = v.replace(":", "").lower()
        if not _FINGERPRINT.match(d):
            raise ValueError("must be a SHA-256 digest: 64 hex digits (colons allowed)")
        return d


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    scheme: str  # http or https
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def parse_peer(text: str) -> Peer:
    """`spark-b.local:9761`, `https://10.0.0.2:9761`, `spark-b=https://10.0.0.2:9761` -> Peer."""
    name, sep, addr = text.partition("=")
    if not sep:
        name, addr = "", text
    addr = addr.strip()
    if "://" not in addr:
        addr = "http://" + addr
    u = urlsplit(addr)
    if u.scheme not in ("http", "https") or not u.hostname or (u.path not in ("", "/")) or u.query:
        raise ValueError(f"peer {text!r}: expected HOST:PORT or http(s)://HOST:PORT")
    try:
        port = u.port or (443 if u.scheme == "https" else 9761)
    except ValueError:
        raise ValueError(f"peer {text!r}: bad port") from None
    host = u.hostname
    label = name.strip() or (host.split(".")[0] if not host.replace(".", "").isdigit() else f"{host}:{port}")
    return Peer(label, u.scheme, host, port)


class PeerClient:
    """Reads one peer's status document; one short connection per read (no pooled socket to go stale)."""

    def __init__(self, peer: Peer, settings: FleetSettings):
        self.peer = peer
        self.s = settings
        self._auth = None
        if settings.username:
            password = ""
            if settings.password_file:
                with open(settings.password_file, encoding="utf-8") as fh:
                    password = fh.readline().rstrip("\r\n")
            token = base64.b64encode(f"{settings.username}:{password}".encode()).decode()
            self._auth = f"Basic {token}"
        self._ctx = self._tls_context() if peer.scheme == "https" else None

    def _tls_context(self) -> ssl.SSLContext:
        if self.s.fingerprint_sha256:  # pinned certificate: the digest is the trust, not a CA or a name
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=self.s.ca_file)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        return ctx

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._ctx is None:
            conn = http.client.HTTPConnection(self.peer.host, self.peer.port, timeout=timeout)
        else:
            conn = http.client.HTTPSConnection(
                self.peer.host, self.peer.port, timeout=timeout, context=self._ctx
            )
        return conn

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, str, bytes]:
        """One request on a fresh connection (the pinned certificate checked) within one deadline of
        `timeout_s` from connect to the last byte: (status, reason, body read up to max_response_bytes + 1);
        PeerError with a short reason when it cannot be made."""
        t = self.s.timeout_s
        deadline = time.monotonic() + t
        conn = self._connection(t)
        try:
            conn.connect()  # the TLS handshake too: ssl bounds it as a whole by the socket's timeout
            if self._ctx is not None and self.s.fingerprint_sha256:
                der = conn.sock.getpeercert(binary_form=True) or b""
                if hashlib.sha256(der).hexdigest() != self.s.fingerprint_sha256:
                    raise PeerError("certificate fingerprint does not match fingerprint_sha256")
            headers = {"Accept": "application/json", "Host": f"{self.peer.host}:{self.peer.port}"}
            if body is not None:
                headers["Content-Type"] = "application/json"
            if self._auth:
                headers["Authorization"] = self._auth
            conn.sock.settimeout(_left(deadline, t))  # sendall: one bound for the whole request
            conn.request(method, path, body=body, headers=headers)
            conn.response_class = lambda sock, **kw: http.client.HTTPResponse(
                _Deadline(sock, deadline, t), **kw
            )
            resp = conn.getresponse()
            return resp.status, resp.reason[:80], resp.read(self.s.max_response_bytes + 1)
        except PeerError:
            raise
        except ssl.SSLError as exc:
            raise PeerError(f"TLS: {exc.reason or exc}") from None
        except TimeoutError:  # connect, or a TLS handshake that drips (ssl bounds it as a whole)
            raise PeerError(timed_out(t)) from None
        except (OSError, http.client.HTTPException) as exc:
            raise PeerError(getattr(exc, "strerror", None) or str(exc)[:200] or type(exc).__name__) from None
        finally:
            conn.close()

    def post_json(self, path: str, doc: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST a small JSON document; (HTTP status, the JSON answer or {}); PeerError when unreachable."""
        status, _, body = self._request("POST", path, dumps_strict(doc).encode())
        try:
            answer = decode(body)  # strict and depth-bounded, as a status document is
        except PeerError:
            answer = {}
        return status, answer if isinstance(answer, dict) else {}

    def status(self) -> dict[str, Any]:
        """The pair view's part of the peer's /api/v1/status (web/peerdoc.py); PeerError with a short reason."""
        status, reason, body = self._request("GET", STATUS_PATH)
        if status != 200:
            raise PeerError(f"HTTP {status} {reason}".strip())
        if len(body) > self.s.max_response_bytes:
            raise PeerError(f"status document larger than {self.s.max_response_bytes} bytes")
        return peer_status(body)


def timed_out(t: float) -> str:
    """Why a read that did not end within its deadline failed."""
    return f"timed out: no whole answer within the {t:g} s deadline"


def _left(deadline: float, t: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise PeerError(timed_out(t))
    return left


class _Deadline:
    """The socket http.client reads the answer from, each recv bounded by what is left of the deadline."""

    def __init__(self, sock, deadline: float, t: float):
        self.sock, self.deadline, self.t = sock, deadline, t

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineRaw(self))


class _DeadlineRaw(io.RawIOBase):
    def __init__(self, d: _Deadline):
        self.d = d
        # The socket's own reader: it holds the socket open after http.client closes the connection
        # on a `Connection: close` answer, before the body is read (as HTTPResponse's own file does).
        self.io = d.sock.makefile("rb", buffering=0)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        d = self.d
        d.sock.settimeout(_left(d.deadline, d.t))
        try:
            return self.io.readinto(b)
        except TimeoutError:
            raise PeerError(timed_out(d.t)) from None

    def close(self) -> None:
        self.io.close()
        super().close()
