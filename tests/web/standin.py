"""A stand-in for the daemon in page tests: a settings/snapshot/subscribe object and a tiny route server.

Only for exercising the page's own routes with hand-made snapshots; the main browser
test runs the real daemon (`spark-watchd run --replay`).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import spark_watchd
from spark_watchd.config import Settings
from spark_watchd.sample.findings import Diagnosis, Event, Finding
from spark_watchd.sample.groups import group_workloads
from spark_watchd.sample.model import Sample
from spark_watchd.snapshot import Snapshot, SourceStatus
from spark_watchd.web import fleet, page
from spark_watchd.web.charts import History
from spark_watchd.web.http import Request, Response, Route
from spark_watchd.web.page import _json
from tests.support.fakes import CaptureServer, Recorded, Reply

SCENARIOS = Path(spark_watchd.__file__).parent / "scenarios"


class FakeDaemon:
    """Publishes snapshots to subscribers the way the daemon does."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._snap = Snapshot(sample=None, diagnosis=None)
        self._subs = []
        self.fresh = True  # what the real daemon's is_fresh() would say

    def snapshot(self) -> Snapshot:
        return self._snap

    def subscribe(self, fn) -> None:
        self._subs.append(fn)

    def page_routes(self) -> list[Route]:
        """The page's routes over this stand-in and a chart store subscribed to it, as the app wires them."""
        self.history = History(self.settings.web)
        self.subscribe(self.history)
        return page.routes(self, self.history, self.settings.web) + fleet.routes(None)  # no [fleet] peers

    def publish(self, snap: Snapshot) -> None:
        self._snap = snap
        for fn in self._subs:
            fn(snap)


def status_json(snap: Snapshot, fresh: bool = True) -> dict:
    """A /api/v1/status body in the shape the page reads (findings, recent_events, sources, serving, mode)."""
    d = snap.diagnosis
    return {
        "mode": snap.mode,
        "fresh": fresh,
        "age_seconds": None if fresh else 300.0,
        "host": snap.sample.host if snap.sample else None,
        "ts": snap.sample.ts if snap.sample else None,
        "published_at": snap.published_at,
        "findings": {g: f.to_dict() for g, f in d.findings.items()} if d else {},
        "recent_events": [e.to_dict() for e in snap.recent_events],
        "sources": {n: {"up": s.up, "error": s.error} for n, s in snap.sources.items()},
        "serving": [r.to_dict() for r in snap.sample.serving] if snap.sample else [],
        "extras": dict(snap.extras),
    }


def diagnose_by_hand(sample: Sample, evicted_at: float) -> Diagnosis:
    """Canned findings for the eviction trace (the real classifiers are another area's)."""
    after = sample.ts >= evicted_at
    findings = {
        "G3": Finding(
            "G3",
            "critical" if after else "ok",
            "MemAvailable 3.1 GiB, PSI full 12 %" if after else "Plenty of memory",
            {"mem_available_bytes": 3.1 * 2**30, "psi_full_avg60": 12.0},
            ("Drop caches between runs",),
        ),
        "G4": Finding("G4", "ok", "Power 92 W at the cap, 79 C stable", {"power_w": 92.0}),
        "G6": Finding(
            "G6",
            "critical" if after else "warning",
            "vLLM evicted the trainer" if after else "Two heavy workloads share the pool",
            {"uncapped": "vllm"},
            ("Cap vLLM with --gpu-memory-utilization 0.5",),
        ),
    }
    events = (
        (Event("eviction", "G6", sample.ts, "python3 (5120) lost 48% of its resident memory"),)
        if sample.ts == evicted_at
        else ()
    )
    return Diagnosis(sample.ts, findings, events)


def snapshot_of(
    sample: Sample,
    diagnosis: Diagnosis,
    recent: tuple = (),
    nvml_error: str | None = None,
    mode: str = "replay",
    extras: dict | None = None,
) -> Snapshot:
    sources = {
        "proc": SourceStatus("proc", True),
        "nvml": SourceStatus("nvml", nvml_error is None, error=nvml_error),
    }
    return Snapshot(
        sample,
        diagnosis,
        sources,
        recent_events=recent,
        extras=extras or {},
        published_at=sample.ts,
        mode=mode,
        # The table the diagnosis would publish for this sample (the grouping is real, the findings canned).
        workloads=group_workloads(sample.processes),
    )


class RouteServer(CaptureServer):
    """Serves a list of Routes (plus a stand-in /api/v1/status) on loopback in a thread."""

    def __init__(self, routes: list[Route], daemon: FakeDaemon) -> None:
        self.table = {(r.method, r.path): r for r in routes}

        def status(_req: Request) -> Response:
            return _json(200, status_json(daemon.snapshot(), daemon.fresh))

        self.table[("GET", "/api/v1/status")] = Route("GET", "/api/v1/status", status)
        super().__init__(self._answer)
        self.origin = self.url

    def _answer(self, rec: Recorded) -> Reply:
        parts = urlsplit(rec.path)
        route = self.table.get((rec.method, parts.path))
        if route is None:
            return Reply(404, b"not found\n", {"Content-Type": "text/plain"})
        headers = {k.lower(): v for k, v in rec.headers.items()}
        resp = route.handler(
            Request(rec.method, parts.path, parse_qs(parts.query), headers, rec.body, "127.0.0.1")
        )
        return Reply(resp.status, resp.body, {"Content-Type": resp.content_type, **resp.headers})
