"""Post-mortem routes: the latest bundle's report (self-contained HTML) and the list of bundles."""

from __future__ import annotations

import os
from pathlib import Path

from spark_watchd.postmortem import list_bundles
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.files import StateFileError, open_regular
from spark_watchd.web.http import Request, Response, Route

LATEST = "/postmortem/latest"
# The report carries its own CSP meta as well; no script, nothing fetched.
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def latest_info(root: str | Path) -> dict | None:
    """The newest bundle as the status document shows it (with the page's link), or None."""
    bundles = list_bundles(root)
    if not bundles:
        return None
    return {**bundles[-1].to_dict(), "url": LATEST}


def routes(root: str | Path) -> list[Route]:
    """GET /postmortem/latest (the report) and GET /api/v1/postmortem (every bundle, oldest first)."""

    def latest(_req: Request) -> Response:
        bundles = list_bundles(root)
        if not bundles:
            return Response(404, b"no post-mortem bundle yet\n")
        try:  # never through a link, never blocked on a FIFO planted as report.html
            fd = open_regular(bundles[-1].path / "report.html")
            if fd is None:
                return Response(404, b"the latest post-mortem bundle has no report\n")
            with os.fdopen(fd, "rb") as fh:
                body = fh.read()
        except (OSError, StateFileError) as exc:
            return Response(500, f"report not readable: {getattr(exc, 'strerror', None) or exc}\n".encode())
        return Response(200, body, "text/html; charset=utf-8", _HEADERS)

    def listing(_req: Request) -> Response:
        doc = {"bundles": [b.to_dict() for b in list_bundles(root)], "latest_url": LATEST}
        return Response(200, dumps_strict(doc).encode(), "application/json")

    return [Route("GET", LATEST, latest), Route("GET", "/api/v1/postmortem", listing)]
