"""`/api/v1/acks`: list, acknowledge and withdraw acknowledgements of findings (snapshot/acks.py).

GET lists them; POST `{"gotcha": "G6", "for_s": 28800, "note": "vLLM kept on purpose"}` acknowledges the
gotcha's current finding; DELETE `?gotcha=G6` withdraws. Changing them is taken from loopback, or from a
client the server authenticated with the web config's basic auth; the server refuses a browser's
cross-site POST or DELETE before this handler runs. After a change the daemon publishes again at once, so
the page, `status` and `/metrics` show it without waiting for the next sample.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.snapshot.acks import AckError, Acks
from spark_watchd.web.http import Request, Response, Route

PATH = "/api/v1/acks"
JSON = "application/json"


def _reply(status: int, payload: dict[str, Any]) -> Response:
    return Response(status, dumps_strict(payload, separators=(",", ":")).encode() + b"\n", JSON)


def _may_change(req: Request) -> Response | None:
    if req.from_loopback or req.authenticated:
        return None
    return _reply(
        403, {"error": "acknowledging is taken from loopback, or with basic auth (--web.config.file)"}
    )


def routes(acks: Acks, republish: Callable[[], Any]) -> list[Route]:
    """GET, POST and DELETE /api/v1/acks over one daemon's acknowledgements."""

    def listing(_req: Request) -> Response:
        return _reply(200, {"acks": [a.to_dict() for a in acks.active()]})

    def add(req: Request) -> Response:
        if (denied := _may_change(req)) is not None:
            return denied
        ctype = req.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != JSON:
            return _reply(
                415, {"error": f"send the acknowledgement as {JSON} (got {ctype or 'no Content-Type'})"}
            )
        try:
            data = json.loads(req.body)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            return _reply(400, {"error": f"body is not JSON: {exc}"})
        if not isinstance(data, dict):
            return _reply(400, {"error": "body must be a JSON object"})
        gotcha, for_s, note = data.get("gotcha"), data.get("for_s"), data.get("note", "")
        if not isinstance(gotcha, str) or not isinstance(note, str):
            return _reply(400, {"error": "gotcha and note must be strings"})
        if isinstance(for_s, bool) or not isinstance(for_s, (int, float)):
            return _reply(400, {"error": "for_s must be a number of seconds"})
        try:
            ack = acks.add(gotcha, float(for_s), note)
        except AckError as exc:
            return _reply(409 if "can be acknowledged" in str(exc) else 400, {"error": str(exc)})
        republish()
        return _reply(200, {"ack": ack.to_dict()})

    def withdraw(req: Request) -> Response:
        if (denied := _may_change(req)) is not None:
            return denied
        gotcha = (req.query.get("gotcha") or [""])[0]
        if not acks.clear(gotcha):
            return _reply(404, {"error": f"no acknowledgement of {gotcha or '(no gotcha given)'}"})
        republish()
        return _reply(200, {"cleared": gotcha})

    return [
        Route("GET", PATH, listing),
        Route("POST", PATH, add, max_body=4096),
        Route("DELETE", PATH, withdraw),
    ]
