"""Request/response types every route handler uses (the server lives in web/server.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # without the query string
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-cased names
    body: bytes
    client: str  # peer IP address

    @property
    def from_loopback(self) -> bool:
        return self.client in ("127.0.0.1", "::1", "::ffff:127.0.0.1") or self.client.startswith("127.")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Response]


@dataclass(frozen=True, slots=True)
class Route:
    method: str  # "GET" / "POST"
    path: str  # exact path
    handler: Handler
    # Largest body accepted (POST); larger gets 413 before the body is read.
    max_body: int = 0


def parse_listen(listen: str) -> tuple[str, int]:
    """Split HOST:PORT (IPv6 as [::1]:PORT; empty host means all addresses); ValueError says why."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{listen!r} is not HOST:PORT")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)
