"""Core routes: /metrics, /healthz, /api/v1/status. They only read the published snapshot."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from spark_watchd import __version__
from spark_watchd.diagnose.verdicts import state_dict
from spark_watchd.export.prometheus import workload_table
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.snapshot import Snapshot
from spark_watchd.snapshot.acks import acknowledged, worst_unacknowledged
from spark_watchd.web.http import Request, Response, Route

# The /api/v1/status `memory` object (documented in docs/daemon.md).
MEMORY_KEYS = (
    "total_bytes",
    "available_bytes",
    "available_min_bytes",
    "budget_bytes",
    "os_reserve_bytes",
    "swap_used_bytes",
    "gpu_attributed_bytes",
    "cma_total_bytes",
    "cma_free_bytes",
)


def _memory(snap: Snapshot, os_reserve_bytes: int) -> dict[str, Any]:
    view = snap.memory_or_default()
    if view is None:  # before the first sample: the same keys, all unknown
        return dict.fromkeys(MEMORY_KEYS) | {"os_reserve_bytes": os_reserve_bytes}
    return {k: getattr(view, k) for k in MEMORY_KEYS}


def _finding(f, ack=None) -> dict[str, Any]:
    """A finding as the API shows it: its words and evidence, the typed state code should read, and the
    acknowledgement covering it (shown, never hidden)."""
    d = f.to_dict()
    if f.state is not None:
        d["state"] = state_dict(f.state)
    if ack is not None:
        d["acknowledged"] = ack.to_dict()
    return d


def status_dict(daemon) -> dict[str, Any]:
    """The /api/v1/status document: latest sample summary, findings, recent events, sources."""
    snap: Snapshot = daemon.snapshot()
    s = snap.sample
    diag = snap.diagnosis
    acked = acknowledged(snap)
    return {
        "version": __version__,
        "mode": snap.mode,
        "fresh": daemon.is_fresh(),
        "published_at": snap.published_at or None,
        "age_seconds": round(time.time() - snap.published_at, 3) if snap.published_at else None,
        "interval_seconds": daemon.expected_period(),
        "ts": s.ts if s is not None else None,
        "host": s.host if s is not None else None,
        "boot_id": s.boot_id if s is not None else None,
        "uptime_s": s.uptime_s if s is not None else None,
        "memory": _memory(snap, daemon.settings.thresholds.os_reserve_bytes),
        "gpus": [g.to_dict() for g in s.gpus] if s is not None else [],
        "psi_memory": s.psi_memory if s is not None else None,
        "board": s.board.to_dict() if s is not None and s.board is not None else None,
        "link": s.link.to_dict() if s is not None and s.link is not None else None,
        "processes": [p.to_dict() for p in s.processes] if s is not None else [],
        "workloads": _safe(workload_table, snap),
        "throughput": [t.to_dict() for t in s.throughput] if s is not None else [],
        "serving": [r.to_dict() for r in s.serving] if s is not None else [],
        "worst": diag.worst() if diag is not None else "unknown",
        # What is still to look at once acknowledged findings are set aside (`status`'s exit code).
        "worst_unacknowledged": worst_unacknowledged(snap),
        "findings": {g: _finding(f, acked.get(g)) for g, f in diag.findings.items()}
        if diag is not None
        else {},
        "events": [e.to_dict() for e in diag.events] if diag is not None else [],
        "recent_events": [e.to_dict() for e in snap.recent_events],
        "event_counts": dict(snap.event_counts),
        "sources": {
            name: {
                "up": st.up,
                "duration_seconds": st.duration_s,
                "errors_total": st.errors_total,
                "error": st.error,
            }
            for name, st in snap.sources.items()
        },
        # Each driver-events feed: state (watching, read, not supported, unreadable, restarting, off), lines rejected.
        "driver_feeds": _jsonable((snap.extras or {}).get("driver_feeds") or {}),
        "extras": _jsonable(snap.extras),
        "replay": replay_clock(snap),
    }


def replay_clock(snap: Snapshot) -> dict[str, Any] | None:
    """For a replay: when the newest sample was recorded, and the shift that shows it as now.

    A replay at 60x serves trace time 60 times faster than the wall clock, so its sample times run hours
    ahead; pages add `shift_s` to every time they print, so the newest sample reads as when it was
    published (issue 14.7); /metrics, `status` and webhooks use the same shift (Snapshot.wall_shift).
    """
    info = (snap.extras or {}).get("replay")
    s = snap.sample
    if not isinstance(info, Mapping) or s is None:
        return None
    return {
        "trace": info.get("trace"),
        "speed": info.get("speed"),
        "recorded_ts": s.ts - float(info.get("offset_s") or 0.0),
        "shift_s": round(snap.wall_shift(), 3),
    }


def _safe(fn, *args) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # one odd process must not cost the whole status document
        return {"error": str(exc)}


def _jsonable(obj: Any) -> Any:
    """Extras as JSON: objects with to_dict() or dataclasses become dicts, anything else its str()."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if hasattr(obj, "to_dict"):  # first: a tuple subclass may define its own JSON view
        return _jsonable(obj.to_dict())
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in obj]
    if dataclasses.is_dataclass(obj):
        return _jsonable(dataclasses.asdict(obj))
    return str(obj)


def routes(daemon, registry: CollectorRegistry) -> list[Route]:
    """/metrics over the registry, /healthz and /api/v1/status over the daemon's published snapshot."""

    # The exposition is a function of the published snapshot (and the overrun count): rendered once per
    # tick and format, then every scrape until the next tick is served the same bytes.
    rendered: list[tuple[Any, int, str, bytes]] = []

    def metrics(req: Request) -> Response:
        encoder, content_type = choose_encoder(req.headers.get("accept", ""))
        snap, overruns = daemon.snapshot(), getattr(daemon, "overruns", 0)
        for s, o, ct, body in rendered:
            if s is snap and o == overruns and ct == content_type:
                return Response(200, body, content_type)
        body = encoder(registry)
        rendered[:] = [e for e in rendered if e[0] is snap and e[1] == overruns][-1:] + [
            (snap, overruns, content_type, body)
        ]
        return Response(200, body, content_type)

    def healthz(req: Request) -> Response:
        snap = daemon.snapshot()
        if snap.sample is None:
            return Response(503, b"no sample yet\n")
        if daemon.is_fresh():
            return Response(200, b"ok\n")
        age = time.time() - snap.published_at
        return Response(503, f"stale: last sample {age:.0f} s ago\n".encode())

    def status(req: Request) -> Response:
        body = dumps_strict(status_dict(daemon), default=str).encode()
        return Response(200, body, "application/json")

    return [
        Route("GET", "/metrics", metrics),
        Route("GET", "/healthz", healthz),
        Route("GET", "/api/v1/status", status),
    ]
