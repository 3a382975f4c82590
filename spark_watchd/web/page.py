"""The status page at `/`, its static assets, `GET /api/v1/history` and `GET /api/v1/workloads`.

The page is one HTML shell plus vendored-free CSS/JS from package data: it works
with no internet (the box is often reached through an SSH tunnel), and its
Content-Security-Policy forbids any other origin. Handlers only read the
published snapshot and the history; they never touch hardware.
"""

from __future__ import annotations

import math
import re
from importlib import resources
from typing import Any

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.snapshot import Snapshot
from spark_watchd.web.charts import History
from spark_watchd.web.http import Request, Response, Route
from spark_watchd.web.settings import WebSettings

STATIC_PREFIX = "/static/"
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
}
# Everything from this origin only: the page must work offline and leak nothing.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _json(status: int, obj: Any) -> Response:
    body = dumps_strict(obj, separators=(",", ":")).encode()
    return Response(status, body, "application/json", {"Cache-Control": "no-store", **_SECURITY_HEADERS})


def _static_files() -> dict[str, bytes]:
    root = resources.files("spark_watchd.web") / "static"
    out: dict[str, bytes] = {}
    for entry in root.iterdir():
        if entry.is_file() and not entry.name.startswith("."):
            out[entry.name] = entry.read_bytes()
    return out


def _content_type(name: str) -> str:
    ext = name[name.rfind(".") :] if "." in name else ""
    return _CONTENT_TYPES.get(ext, "application/octet-stream")


def render_index(template: bytes, settings: WebSettings) -> bytes:
    """The page shell with its settings filled in (the JS reads them from data attributes)."""
    text = template.decode()
    text = text.replace("__REFRESH_S__", _fmt_num(settings.page_refresh_seconds))
    text = text.replace("__PAGE_HOURS__", _fmt_num(settings.page_hours))
    return text.encode()


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def parse_since(query: dict[str, list[str]] | Any) -> tuple[float | None, int | None]:
    """`since` (Unix seconds) and `limit` from a history query; ValueError names the bad parameter."""
    since = limit = None
    raw = (query.get("since") or [None])[-1]
    if raw not in (None, ""):
        try:
            since = float(raw)
        except ValueError:
            raise ValueError(f"since: not a number: {raw[:40]!r}") from None
        if not math.isfinite(since):
            raise ValueError("since: must be a finite Unix time in seconds")
    raw = (query.get("limit") or [None])[-1]
    if raw not in (None, ""):
        if not re.fullmatch(r"[0-9]{1,9}", raw):
            raise ValueError(f"limit: not a non-negative integer: {raw[:40]!r}")
        limit = int(raw)
    return since, limit


# --- workloads --------------------------------------------------------------------------------------


def workloads_json(snapshot: Snapshot | None) -> dict[str, Any]:
    """The GET /api/v1/workloads body: one row per workload (launcher argv, cap, members), biggest first."""
    sample = snapshot.sample if snapshot is not None else None
    rows = [w.to_dict() for w in snapshot.workloads] if snapshot is not None else []
    rows.sort(key=lambda r: -r["footprint_bytes"])
    return {"ts": sample.ts if sample is not None else None, "workloads": rows}


# --- routes ------------------------------------------------------------------------------------------


def routes(daemon: Any, history: History, settings: WebSettings) -> list[Route]:
    """The page, its assets and the history/workloads APIs over a daemon's snapshot() and the chart store."""
    files = _static_files()
    index = render_index(files.pop("index.html"), settings)

    def page(_req: Request) -> Response:
        return Response(
            200, index, _CONTENT_TYPES[".html"], {"Cache-Control": "no-cache", **_SECURITY_HEADERS}
        )

    def history_api(req: Request) -> Response:
        try:
            since, limit = parse_since(req.query)
        except ValueError as e:
            return _json(400, {"error": str(e)})
        if limit is not None:
            limit = min(limit, settings.history_api_max_records)
        body = history.json_body(since, limit)  # _json's encoding, a record at a time
        return Response(200, body, "application/json", {"Cache-Control": "no-store", **_SECURITY_HEADERS})

    def workloads_api(_req: Request) -> Response:
        return _json(200, workloads_json(daemon.snapshot()))

    def static(name: str, body: bytes) -> Route:
        def handler(_req: Request) -> Response:
            return Response(
                200, body, _content_type(name), {"Cache-Control": "max-age=300", **_SECURITY_HEADERS}
            )

        return Route("GET", STATIC_PREFIX + name, handler)

    out = [
        Route("GET", "/", page),
        Route("GET", "/api/v1/history", history_api),
        Route("GET", "/api/v1/workloads", workloads_api),
    ]
    out.extend(static(name, body) for name, body in sorted(files.items()))
    return out
