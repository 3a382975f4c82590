"""The HTTP client of the serving source: one GET, bounded in time and size, never following a redirect; one
scrape of one server (its answers parsed)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_watchd.sources.serving_endpoints import Endpoint
from spark_watchd.sources.serving_parse import (
    METRICS_PATH,
    ExpositionError,
    parse_metrics,
    parse_ollama,
    parse_slots,
)

Fetch = Callable[[str, float, int, Mapping[str, str]], bytes]


class ScrapeError(Exception):
    """The server did not give its telemetry (why, in words): `status` its HTTP status where it answered
    one, `refused` when nothing accepted the connection."""

    def __init__(self, message: str, status: int | None = None, refused: bool = False):
        super().__init__(message)
        self.status, self.refused = status, refused


def _said(body: bytes) -> str:
    """What a server's error answer says, for the reason shown (llama-server: "This server does not support
    metrics endpoint. Start it with `--metrics`"): its JSON `error.message`, else its text; printable, short."""
    text = body.decode("utf-8", "replace").strip()
    try:
        err = json.loads(text).get("error")
        text = str(err.get("message") if isinstance(err, dict) else err or "")
    except (ValueError, AttributeError):
        pass
    text = "".join(c for c in text if c.isprintable())
    return text[:160]


def _connect(address: tuple[str, int], timeout: float, source_address=None):
    """socket.create_connection with an ASCII host name as bytes: a str name loads the idna codec with
    unicodedata and stringprep (about 0.4 MiB, kept for good) just to spell `localhost`."""
    host, port = address
    return socket.create_connection(
        (host.encode() if host.isascii() else host, port), timeout, source_address
    )


def http_get(url: str, timeout: float, max_bytes: int, headers: Mapping[str, str]) -> bytes:
    """GET url: the body of a 200 answer, read within `timeout` s in all and at most max_bytes; else ScrapeError."""
    deadline = time.monotonic() + timeout
    scheme, _, rest = url.partition("://")
    hostport, _, path = rest.partition("/")
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = cls(hostport, timeout=timeout)
    conn._create_connection = _connect  # type: ignore[attr-defined]  # the hook connect() calls
    try:
        conn.request("GET", "/" + path, headers={"Accept": "text/plain, application/json", **headers})
        resp = conn.getresponse()
        if 300 <= resp.status < 400:
            raise ScrapeError(
                f"HTTP {resp.status} redirect to {resp.getheader('Location', '?')[:80]}: not followed"
            )
        if resp.status != 200:
            said = _said(resp.read(4096)) if time.monotonic() < deadline else ""
            raise ScrapeError(f"HTTP {resp.status} on /{path}" + (f": {said}" if said else ""), resp.status)
        chunks, size = [], 0
        while True:
            if time.monotonic() > deadline:
                raise ScrapeError(f"answer not complete within {timeout:g} s")
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise ScrapeError(f"answer over {max_bytes} bytes (max_response_bytes): refused")
            chunks.append(chunk)
        return b"".join(chunks)
    except (OSError, http.client.HTTPException) as exc:
        refused = isinstance(exc, ConnectionRefusedError)
        raise ScrapeError(f"{type(exc).__name__}: {exc}"[:200], refused=refused) from None
    finally:
        conn.close()


def _auth(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            value = fh.read(4096).strip()
    except OSError as exc:
        raise ScrapeError(f"auth header file unreadable: {exc.strerror or exc}") from None
    return {"Authorization": value} if value else {}


def scrape(
    ep: Endpoint,
    fetch: Fetch,
    timeout: float,
    max_bytes: int,
    auth_file: str | None,
    max_series: int = 5_000,
) -> dict[str, Any]:
    """One scrape of one server: its figures as the parsers give them (ScrapeError when it gives none)."""
    headers = _auth(auth_file)
    if ep.kind == "ollama":
        ps = fetch(ep.base_url + "/api/ps", timeout, max_bytes, headers)
        try:
            version = fetch(ep.base_url + "/api/version", timeout, 4096, headers).decode("utf-8", "replace")
        except ScrapeError:
            version = None
        parse = lambda: parse_ollama(ps.decode("utf-8", "replace"), version)  # noqa: E731
    else:
        body = fetch(ep.base_url + METRICS_PATH[ep.kind], timeout, max_bytes, headers)
        parse = lambda: parse_metrics(ep.kind, body.decode("utf-8", "replace"), max_series)  # noqa: E731
    try:
        figures = parse()
    except ExpositionError as exc:
        raise ScrapeError(str(exc)) from None
    if ep.kind == "llamacpp":  # its counters move only when requests end; /slots shows them as they go
        try:
            slots = fetch(ep.base_url + "/slots", timeout, max_bytes, headers)
            figures["in_flight"] = parse_slots(slots.decode("utf-8", "replace"))
        except (ScrapeError, ExpositionError):
            pass  # `--no-slots`: the counters alone (docs/serving.md says what that rate is then)
    return figures
