"""`POST /api/v1/progress`: a trainer's cumulative totals in, the derived values out."""

from __future__ import annotations

import hmac
import json
from typing import Any

from pydantic import ValidationError

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.throughput.models import ProgressReport, describe_errors
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.throughput.tracker import JobTracker, ReportRejected, TooManyJobs
from spark_watchd.web.http import Request, Response, Route

PATH = "/api/v1/progress"
JSON = "application/json"


def _reply(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    body = dumps_strict(payload, separators=(",", ":")).encode()
    return Response(status, body + b"\n", JSON, headers or {})


def _error(status: int, message: str, **extra: Any) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="spark-watchd"'} if status == 401 else None
    return _reply(status, {"error": message, **extra}, headers)


def _authorise(req: Request, token: str | None, trust_loopback: bool = True) -> Response | None:
    """None when the client may report; else the 401/403 to send."""
    scheme, _, cred = req.headers.get("authorization", "").partition(" ")
    # With exporter-toolkit basic auth on every endpoint, Authorization carries Basic credentials
    # (checked by the server): the progress token then comes in X-Progress-Token.
    presented = (
        cred.strip() if scheme.lower() == "bearer" else req.headers.get("x-progress-token", "").strip()
    )
    if token is not None and presented:
        # A wrong token is refused even from loopback: it means a misconfigured client.
        if not hmac.compare_digest(presented.encode(), token.encode()):
            return _error(401, "invalid bearer token")
        return None
    if req.from_loopback and trust_loopback:
        return None
    if token is None:
        return _error(
            403, "progress reports are accepted from loopback only (set progress.token to allow others)"
        )
    return _error(401, "a bearer token is required (Authorization: Bearer ...)")


def make_handler(tracker: JobTracker, settings: ProgressSettings):
    """The request handler, bound to one tracker and its settings."""
    token = settings.token_value()
    limit = settings.max_body_bytes

    def handle(req: Request) -> Response:
        denied = _authorise(req, token, settings.trust_loopback)
        if denied is not None:
            return denied
        # A browser may POST text/plain, a form or no type at all cross-site without asking first (a "simple"
        # request); application/json needs a CORS preflight this server never grants. So only JSON is taken.
        ctype = req.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != JSON:
            return _error(415, f"send the report as {JSON} (got {ctype or 'no Content-Type'})")
        if len(req.body) > limit:  # the server checks Content-Length first; chunked bodies end here
            return _error(413, f"report body is {len(req.body)} bytes; the limit is {limit}")
        try:
            data = json.loads(req.body)
        except (UnicodeDecodeError, ValueError) as e:
            return _error(400, f"body is not JSON: {e}")
        except RecursionError:
            return _error(400, "body is not a progress report: JSON nested too deeply")
        if not isinstance(data, dict):
            return _error(400, f"body must be a JSON object, got {type(data).__name__}")
        try:
            report = ProgressReport.model_validate(data)
        except ValidationError as e:
            errors = describe_errors(e)
            reason = "; ".join(f"{x['field']}: {x['reason']}" for x in errors)
            return _error(400, f"invalid progress report: {reason}", errors=errors)
        try:
            stats = tracker.report(report)
        except ReportRejected as e:
            return _error(409, str(e))
        except TooManyJobs as e:
            return _error(429, str(e))
        return _reply(200, {"accepted": True, **stats.to_dict()})

    return handle


def routes(tracker: JobTracker) -> list[Route]:
    """The progress route over the tracker (built only while progress.enabled)."""
    settings = tracker.settings
    # Route.max_body lets the server answer 413 from Content-Length without reading the body.
    return [Route("POST", PATH, make_handler(tracker, settings), max_body=settings.max_body_bytes)]
