"""The pair view: this Spark and its `[fleet]` peers side by side, with the straggler judged in the daemon.

A worker thread of its own reads each peer's /api/v1/status every `interval_s` (never the tick), each
peer on its own reader thread under its own deadline, so that a peer that hangs, drips or answers a
hostile document is that peer down with its reason and delays or hides no other peer and not this
Spark. Every document, this daemon's own included, is reduced by web/peerdoc.py to bounded numbers
and enumerated or clipped strings before it is judged, shown or kept in the history. Each member is
judged against the others with diagnose/straggler.py, the one definition the SparkWatchdStraggler
alert is generated from. The result is published as the `fleet` extra, on GET /api/v1/fleet, on the
page and in `status --fleet`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from spark_watchd.diagnose import straggler as st
from spark_watchd.logs import get_logger
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.web.http import Request, Response, Route
from spark_watchd.web.peerdoc import PeerError, reduce_status
from spark_watchd.web.peers import FleetSettings, PeerClient, parse_peer, timed_out

FLEET_PATH = "/api/v1/fleet"
_DIGITS = re.compile(r"\d+")  # a reason that differs only by a number is the same reason
SELF = "\x00self"  # the history key of this Spark (never a peer's name: names are printable)
FIRST_RETRY_S = 2.0


def _point(doc: Mapping[str, Any] | None, t: float) -> dict[str, Any]:
    """One chart point of a member: worst finding, temperature, clock, memory budget, tokens/s (None: down)."""
    if doc is None:
        return {"t": t, "up": False}
    g = max(doc.get("gpus") or [{}], key=lambda g: g.get("util_pct") or 0)
    tps = [x["tokens_per_second"] for x in doc.get("throughput") or () if x.get("tokens_per_second")]
    return {
        "t": t,
        "up": True,
        "worst": doc.get("worst"),
        "temp_c": g.get("temp_c"),
        "sm_clock_mhz": g.get("sm_clock_mhz"),
        "util_pct": g.get("util_pct"),
        "budget_bytes": (doc.get("memory") or {}).get("budget_bytes"),
        "tokens_per_second": sum(tps) if tps else None,
    }


def _row(m: st.Member, doc: Mapping[str, Any] | None, own: bool) -> dict[str, Any]:
    findings = (doc or {}).get("findings") or {}
    link = ((doc or {}).get("extras") or {}).get("link") or {}
    return {
        "name": m.name,
        "self": own,
        "up": m.up,
        "error": m.error,
        "host": (doc or {}).get("host"),
        "fresh": (doc or {}).get("fresh"),
        "findings": {
            g: {"severity": f.get("severity"), "summary": f.get("summary")} for g, f in findings.items()
        },
        "link": {"problem": link.get("problem"), "summary": link.get("summary")} if link else None,
        **{k: v for k, v in _point(doc, 0.0).items() if k not in ("t", "up")},
    }


class FleetWatch:
    """Polls the peers on its own thread and keeps the latest pair view; view() is what readers get."""

    def __init__(
        self,
        settings: FleetSettings,
        own_status: Callable[[], Mapping[str, Any]] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.s = settings
        self.own_status = own_status
        self.clock = clock
        self.log = get_logger("fleet")
        self.clients = [PeerClient(parse_peer(p), settings) for p in settings.peers]
        self.hold = st.StragglerHold()
        self.history: dict[str, deque] = {}
        self._down: dict[str, str | None] = {}
        self._reads: dict[str, Future] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._failed: str | None = None
        self._view: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # a poll now: the first sample, or this Spark back from stale
        self._thread: threading.Thread | None = None
        self._seen: set[str] = set()  # peers that answered at least once
        self._me = "this Spark"  # this Spark's name as last shown (its history is kept under SELF)

    # ---- the worker ----
    def start(self, own_status: Callable[[], Mapping[str, Any]] | None = None) -> None:
        """Start polling; own_status (this daemon's status document) when the daemon was built after the watch."""
        if own_status is not None:
            self.own_status = own_status
        if self._thread is None and self.clients:
            self._thread = threading.Thread(target=self._run, name="fleet", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        retry = FIRST_RETRY_S
        while not self._stop.is_set():
            try:
                self.poll_once()
                self._failed = None
            except Exception as exc:  # nothing may end the worker; logged once per distinct failure
                why = f"{type(exc).__name__}: {exc}"[:300]
                if why != self._failed:
                    self.log.exception("fleet poll failed", error=why)
                self._failed = why
            # A peer not seen yet (both Sparks starting together) is read again soon, 2, 4, 8 s..., not a
            # whole interval later; once every peer has answered, at the interval.
            unseen = any(c.peer.name not in self._seen for c in self.clients)
            pause = min(retry, self.s.interval_s) if unseen else self.s.interval_s
            retry = retry * 2 if unseen else FIRST_RETRY_S
            self._wake.wait(pause)
            self._wake.clear()

    def observe(self, snapshot) -> None:
        """Subscriber: a poll at once when this Spark has a sample the view does not show yet (the first
        one after start, or back from stale), so it never reads "stale" beside a fresh sample for long."""
        if getattr(snapshot, "sample", None) is None:
            return
        rows = (self._view or {}).get("members") or ()
        own = next((r for r in rows if r.get("self")), None)
        if own is None or own.get("fresh") is not True:
            self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.s.timeout_s * 2 + 1)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _note(self, name: str, error: str | None) -> None:
        """Log a peer going down, down for another reason, or back, once per change, never every poll."""
        before = self._down.get(name, "unseen")
        self._down[name] = error
        if error is None:
            self._seen.add(name)
        if error is not None and (
            before in (None, "unseen") or _DIGITS.sub("#", before) != _DIGITS.sub("#", error)
        ):
            self.log.warning(f"peer {name} down: {error}", peer=name, error=error)
        elif error is None and before not in (None, "unseen"):
            self.log.info(f"peer {name} back", peer=name)

    def _own(self) -> tuple[Mapping[str, Any] | None, str | None, float | None]:
        try:
            own = self.own_status()
            ts = own.get("ts")
            return reduce_status(own), None, ts if type(ts) in (int, float) else None
        except PeerError as exc:
            return None, str(exc)[:200], None
        except Exception as exc:  # this daemon's own document: never a reason to hide the peers
            return None, f"status document: {type(exc).__name__}: {exc}"[:200], None

    def _read_peers(self) -> list[tuple[Mapping[str, Any] | None, str | None]]:
        """Every peer read at once, each on its own thread under its own deadline; a read still running
        from the last poll (stuck past its deadline, e.g. in name resolution) is not started twice."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=len(self.clients), thread_name_prefix="fleet-peer")
        for c in self.clients:
            f = self._reads.get(c.peer.name)
            if f is None or f.done():
                self._reads[c.peer.name] = self._pool.submit(c.status)
        futures = [self._reads[c.peer.name] for c in self.clients]
        wait(futures, timeout=self.s.timeout_s + 1.0)
        out = []
        for f in futures:
            if not f.done():
                out.append((None, timed_out(self.s.timeout_s)))
            elif isinstance(f.exception(), PeerError):
                out.append((None, str(f.exception())[:200]))
            elif f.exception() is not None:  # a bug, not the peer's fault: still only this peer is down
                exc = f.exception()
                out.append((None, f"{type(exc).__name__}: {exc}"[:200]))
            else:
                out.append((f.result(), None))
        return out

    def poll_once(self) -> dict[str, Any]:
        """Read every peer and ourselves once, judge, keep the history point, publish the view."""
        own, own_err, own_ts = self._own()
        me = self.s.name or (own or {}).get("host") or self._me
        self._me = me
        docs: list[tuple[str, Mapping[str, Any] | None, str | None, bool]] = [(me, own, own_err, True)]
        for c, (doc, err) in zip(self.clients, self._read_peers(), strict=True):
            self._note(c.peer.name, err)
            docs.append((c.peer.name, doc, err, False))
        now = self.clock()
        ts = own_ts if own_ts is not None else now
        members = [st.member(n, d, e) for n, d, e, _ in docs]
        verdicts = []
        for m in members:
            j = st.judge(m, [o for o in members if o is not m])
            state, held = self.hold.update(j, float(ts))
            if state is not None:
                verdicts.append((state, held, j))
        rows = []
        for m, (n, d, _, own_flag) in zip(members, docs, strict=True):
            rows.append(_row(m, d, own_flag))
            # This Spark's points under one key whatever its name (its host name is known only after its
            # first sample): one series, not "this Spark" and then its host name.
            h = self.history.setdefault(SELF if own_flag else n, deque(maxlen=self.s.history_points))
            h.append(_point(d, float(ts)))  # one axis: this daemon's sample clock (the page's own charts)
        self._view = self._compose(me, rows, verdicts, now)
        return self._view

    def _compose(self, me: str, rows: list[dict], verdicts: list, now: float) -> dict[str, Any]:
        names = [r["name"] for r in rows]
        straggler = next(((s, h, j) for s, h, j in verdicts if s == "straggler"), None)
        pending = next(((s, h, j) for s, h, j in verdicts if s == "pending"), None)
        links = [
            f"{r['name']}: {r['link']['summary']}" for r in rows if r.get("link") and r["link"]["problem"]
        ]
        down = [r["name"] for r in rows if not r["up"]]
        if straggler is not None:
            summary = st.sentence(straggler[2], me, names)
        elif pending is not None:
            mins = st.STRAGGLER_FOR_S // 60
            summary = f"{st.sentence(pending[2], me, names)}; for {pending[1] / 60:.0f} min (straggler after {mins})"
        elif down:
            summary = f"peer {', '.join(down)} down: no comparison"
        else:
            summary = "no straggler: the Sparks under load run alike"
        if links:  # a slow peer because of the link, not heat
            summary += "; ConnectX-7 link problem on " + "; ".join(links)
        return {
            "self": me,
            "ts": now,
            "summary": summary,
            "straggler": straggler[2].name if straggler else None,
            "pending": pending[2].name if pending else None,
            "reasons": list((straggler or pending or (None, 0, st.Judgement("", ())))[2].reasons),
            "link_problem": bool(links),
            "members": rows,
            "interval_s": self.s.interval_s,  # the page joins chart points this far apart
            "thresholds": {
                "load_ratio": st.LOAD_RATIO,
                "clock_shortfall": st.CLOCK_SHORTFALL,
                "temp_excess_c": st.TEMP_EXCESS_C,
                "util_gap": st.UTIL_GAP,
                "for_s": st.STRAGGLER_FOR_S,
            },
        }

    # ---- readers ----
    def view(self) -> dict[str, Any] | None:
        """The latest pair view (None before the first poll)."""
        return self._view

    def history_json(self) -> dict[str, list]:
        """Each member's chart points, oldest first, on one wall-clock axis."""
        return {(self._me if name == SELF else name): list(points) for name, points in self.history.items()}


def routes(watch: FleetWatch | None) -> list[Route]:
    """GET /api/v1/fleet: the pair view and each member's chart points; `configured` false without peers."""

    def fleet(_req: Request) -> Response:
        if watch is None:
            doc: dict[str, Any] = {"configured": False, "view": None, "history": {}}
        else:
            doc = {"configured": True, "view": watch.view(), "history": watch.history_json()}
        body = dumps_strict(doc, separators=(",", ":"), default=str).encode()
        return Response(200, body, "application/json", {"Cache-Control": "no-store"})

    return [Route("GET", FLEET_PATH, fleet)]
