"""Request/response types every route handler uses (the server lives in web/server.py)."""

from __future__ import annotations

import ipaddress
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
    # True when the server checked basic-auth credentials for this request (a web config with users).
    authenticated: bool = False

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
    """Split HOST:PORT (IPv6 as [::1]:PORT; empty host means all addresses); ValueError says why.

    An IPv6 address without brackets (`::1`, `::1:9761`) is refused: its last group cannot be told from a
    port (`::1` read as host `:` port 1 and failed later with "Name or service not known").
    """
    if listen.startswith("["):
        close = listen.find("]")
        host, rest = listen[1:close], listen[close + 1 :] if close > 0 else ""
        if close < 0 or not rest.startswith(":"):
            raise ValueError(f"{listen!r} is not HOST:PORT (IPv6: [ADDRESS]:PORT, e.g. [::1]:9761)")
        port = rest[1:]
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise ValueError(f"{listen!r}: {host!r} in brackets is not an IPv6 address") from None
    else:
        host, sep, port = listen.rpartition(":")
        if ":" in host:
            raise ValueError(
                f"{listen!r} is not HOST:PORT: write an IPv6 address in brackets with a port, e.g. [::1]:9761"
            )
        if not sep:
            port = ""
        host = host or "0.0.0.0"
    if not port.isascii() or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{listen!r} is not HOST:PORT (port 0-65535)")
    return host, int(port)
