"""The inference servers' own telemetry (trace-v1 `serving[]`), scraped off the tick.

Each server found in the workload table (or configured) gets a scraper thread of its own that scrapes it
every interval: a server that hangs costs its own thread a timeout, never the tick and never another
server's scrape. `collect` only reads the latest result of each. Scrapes never follow redirects, are
bounded in time and size, and go only to loopback or this host's addresses. A server that does not answer
is a state (`up` false with the reason, logged once per change), not an error of the source.

Any local user can write a server's command line, so a discovered server is scraped, and its reading tied
to a process, only when that process (or its child) holds the port's listening socket (serving_owner.py);
the operator's auth header goes to configured endpoints, and to a discovered server only when its socket is
of a trusted uid. At most `max_servers` are scraped: configured ones first, then GPU-resident ones, then
the rest taking turns per uid.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.groups import group_workloads, who_and_memory
from spark_watchd.sample.model import ServingProgress
from spark_watchd.sample.serving import SERVING_KINDS, ServingReading
from spark_watchd.sources.serving_endpoints import Endpoint, endpoint_for, parse_environ
from spark_watchd.sources.serving_energy import EnergyAttribution
from spark_watchd.sources.serving_fast import ProgressReads
from spark_watchd.sources.serving_http import Fetch, ScrapeError, http_get, scrape
from spark_watchd.sources.serving_owner import NotOwned, PortOwners, attribute
from spark_watchd.sources.serving_reading import finite, reading

__all__ = ["ScrapeError", "Scraper", "ServingSource", "finite", "http_get", "reading", "scrape"]
from spark_watchd.sources.serving_settings import ServingSettings

# A server whose young process refuses connections is loading its model for up to this long (a large model
# read from a network disk takes minutes); while loading it is read again every LOADING_RETRY_S at most.
LOADING_S = 900.0
LOADING_RETRY_S = 5.0
FIRST_WAIT_S = 2.0


class Scraper:
    """One server's thread: scrape, keep the latest reading, wait an interval; logs each state change once.

    `vet` (discovered servers only) says which of the processes whose command line names this server holds
    its port, and whether credentials may go there; configured endpoints have none: the operator named them.
    """

    def __init__(
        self, ep: Endpoint, settings: ServingSettings, interval_s: float, fetch: Fetch, log, clock, vet=None
    ):
        self.ep, self.settings, self.interval_s, self.fetch, self.log, self.clock = (
            ep,
            settings,
            interval_s,
            fetch,
            log,
            clock,
        )
        self.vet = vet
        self.claimants: tuple[int, ...] = (ep.pid,) if ep.pid is not None else ()
        self.latest: ServingReading | None = None
        self.born: float | None = None  # its process's start (Unix s), for a discovered server
        self.first = threading.Event()  # set once its first scrape is in `latest`
        self._prev: tuple[dict[str, Any], float] | None = None
        self._state: Any = None
        self._been_up = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"spark-watchd-serving-{ep.server}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def scrape_once(self) -> ServingReading:
        ts = self.clock()
        prev, prev_ts = self._prev if self._prev else (None, None)
        r, cur, exc, state = self.read(ts, prev, prev_ts)
        if exc is not None:
            self._prev = None  # rates restart after an outage: a gap is not one long interval
            loading = state is False and self._loading(exc, ts)
            if loading:
                r = dataclasses.replace(r, error=f"loading: {r.error}", loading=True)
            self._transition(False, r.error, "loading" if loading else state)
        else:
            self._prev, self._been_up = (cur, ts), True
            self._transition(True, None, True)
        self.latest = r
        self.first.set()
        return r

    def read(
        self, ts: float, prev: dict | None, prev_ts: float | None
    ) -> tuple[ServingReading, Any, Any, Any]:
        """One scrape at `ts`, its port's owner checked and its auth header sent only where trusted, bounded in
        time and size: (its reading, with the interval figures against `prev`; the figures, None when it gave
        none; the ScrapeError then; the state _transition logs: False, or the port's other owner). No state of
        the scraper moves (the 1 s progress reads call it beside the scraper's thread)."""
        ep, s = self.ep, self.settings
        override = s.servers.get(ep.server)
        auth = (override.auth_header_file if override else None) or s.auth_header_file
        state: Any = False
        try:
            if self.vet is not None:
                try:
                    pid, trusted = self.vet(ep, self.claimants)
                except NotOwned as exc:
                    ep, state = ep._replace(pid=None), str(exc)  # nobody's reading: not tied to a pid
                    raise ScrapeError(str(exc)) from None
                if pid is None:
                    where = ep.base_url.split("://", 1)[-1]
                    raise ScrapeError(f"nothing listens on {where}", refused=True)
                ep, auth = ep._replace(pid=pid), auth if trusted else None
            cur = scrape(ep, self.fetch, s.timeout_s, s.max_response_bytes, auth, s.max_series)
        except ScrapeError as exc:
            down = ServingReading(
                ep.server, ep.kind, up=False, ts=ts, pid=ep.pid, endpoint=ep.base_url, error=str(exc)
            )
            return down, None, exc, state
        return finite(reading(ep, ts, cur, prev, prev_ts)), cur, None, state

    def _loading(self, exc: ScrapeError, ts: float) -> bool:
        """Still loading its model, not down: it says so (llama-server's 503 "Loading model"), or, never up
        yet, its young process does not listen yet (vLLM and SGLang listen once the model is loaded)."""
        if exc.status == 503 and "loading" in str(exc).lower():
            return True
        return exc.refused and not self._been_up and self.born is not None and ts - self.born < LOADING_S

    def _transition(self, up: bool, error: str | None, state: Any) -> None:
        """Log a change of state once: up/down, and down because another process holds the port (naming it)."""
        if state == self._state:
            return
        first, self._state = self._state is None, state
        if up:
            if not first:
                self.log.info(f"{self.ep.server} answering again", server=self.ep.server)
        elif state == "loading":
            self.log.info(f"{self.ep.server} {error}", server=self.ep.server)
        else:
            self.log.warning(f"{self.ep.server} not answering: {error}", server=self.ep.server, error=error)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.scrape_once()
            except (
                Exception
            ) as exc:  # a bug in a parser must cost this server, never the thread or the daemon
                self.latest = ServingReading(
                    self.ep.server,
                    self.ep.kind,
                    up=False,
                    ts=self.clock(),
                    pid=None,
                    endpoint=self.ep.base_url,
                    error=f"{type(exc).__name__}: {exc}"[:200],
                )
                self._transition(False, str(exc), False)
            self.first.set()
            loading = self.latest is not None and self.latest.loading
            self._stop.wait(min(self.interval_s, LOADING_RETRY_S) if loading else self.interval_s)


class ServingSource:
    """`serving`: the latest reading of each server in the workload table or the configuration."""

    name = "serving"

    def __init__(
        self,
        settings: ServingSettings | None = None,
        *,
        interval_s: float = 30.0,
        proc_root: str = "/proc",
        own_addresses: frozenset[str] | None = None,
        fetch: Fetch = http_get,
        clock: Callable[[], float] = time.time,
        max_servers: int = 16,
    ):
        self.settings = settings or ServingSettings()
        self.interval_s = self.settings.interval_s or interval_s
        self.proc_root = proc_root
        self.own = own_addresses if own_addresses is not None else _own_addresses()
        self.fetch, self.clock, self.max_servers = fetch, clock, max_servers
        self.log = get_logger("serving")
        self.scrapers: dict[Endpoint, Scraper] = {}
        self._environ: dict[tuple[int, float], dict[str, str]] = {}
        self._skipped: set[tuple[int, float]] = set()
        # The last sample's targets and who they were found among (pid, create_time, ppid, argv, name, residency
        # per process): everything targets() reads of a workload (kind, launcher argv, residency) follows from
        # those alone, so the processes are grouped and their endpoints read again only when one of them
        # changes, not every tick (3.3 ms and 1 ms a tick with 100 server processes); the memory figures,
        # which move every tick, are never read here.
        self._who: list | None = None
        self._targets: list[Endpoint] = []
        self.energy = EnergyAttribution()
        self.trainer_active = False
        self.owners = PortOwners(proc_root)
        self.allowed_uids = self.settings.allowed_uids()
        self._claims: dict[str, tuple[int, ...]] = {}
        self._born: dict[str, float] = {}
        self._vetted: set[str] = set()
        self._left_out: list[str] = []
        self.live: tuple[Scraper, ...] = ()  # the scrapers now, for the 1 s reads' thread
        self.fast: ProgressReads | None = None  # the 1 s progress reads, while the fast ring asks for them
        self._fast_done = False  # disarmed: the reads are dropped once the next sample has them

    def targets(self, processes) -> list[Endpoint]:
        """The endpoints to scrape now, by priority: configured ones, then discovered ones (overrides applied)."""
        who, _ = who_and_memory(processes)
        if who != self._who:
            self._who, self._targets = who, self._discover(processes)
        return list(self._targets)

    def _discover(self, processes) -> list[Endpoint]:
        """The servers to scrape, at most max_servers, by priority: configured endpoints, servers the operator
        pointed elsewhere, GPU-resident servers, then the rest; uids take turns within each of the last two (one
        user's twenty fake servers cannot crowd out another's real one)."""
        s = self.settings
        workloads = group_workloads(processes)
        self.trainer_active = any(w.kind == "trainer" and w.gpu_resident for w in workloads)
        first: list[Endpoint] = []
        for x in s.endpoints:
            port = x.url.rsplit(":", 1)[-1]
            first.append(Endpoint(x.name or f"{x.kind}:{port}", x.kind, x.url, None))
        pointed: list[Endpoint] = []
        by_uid: tuple[dict, dict] = ({}, {})  # GPU-resident servers, the rest: per uid (unknown last)
        for w in workloads:
            if w.kind not in SERVING_KINDS:
                continue
            env = self._env(w.pid, w.create_time)  # OLLAMA_HOST, LLAMA_ARG_HOST/_PORT (serving_endpoints)
            ep = endpoint_for(w.kind, w.cmdline, w.pid, env, self.own)
            if isinstance(ep, str):
                if w.key not in self._skipped:
                    self._skipped.add(w.key)
                    self.log.info(f"{w.kind} pid {w.pid}: {ep}", kind=w.kind)
                continue
            o = s.servers.get(ep.server)
            if o is not None and not o.enabled:
                continue
            uids = self.owners.uids(w.pid)
            self._born.setdefault(ep.server, w.create_time)
            if o is not None and o.url:
                # Scraped where the operator pointed, so nobody's port is checked: tied to the process only
                # when it is a trusted user's (anyone can name the port in an argv).
                trusted = bool(uids) and set(uids) <= self.allowed_uids
                pointed.append(ep._replace(base_url=o.url, pid=w.pid if trusted else None))
            else:
                by_uid[not w.gpu_resident].setdefault((0, uids) if uids else (1, ()), []).append(ep)
        resident, fair = (_in_turns([per[k] for k in sorted(per)]) for per in by_uid)
        first += sorted(pointed, key=lambda ep: ep.pid is None)
        labels: dict[str, Endpoint] = {}
        claims: dict[str, list[int]] = {}
        vetted = {ep.server for ep in (*resident, *fair)} - {ep.server for ep in first}
        # One scraper per label (a launcher and its engine are one server), with every process claiming it.
        for ep in (*first, *resident, *fair):
            labels.setdefault(ep.server, ep)
            if ep.server in vetted and ep.pid is not None:
                claims.setdefault(ep.server, []).append(ep.pid)
        ranked = list(labels.values())
        left = [f"{ep.server} (pid {ep.pid})" if ep.pid else ep.server for ep in ranked[self.max_servers :]]
        if left != self._left_out and left:
            more = f" and {len(left) - 20} more" if len(left) > 20 else ""
            self.log.warning(
                f"{len(ranked)} servers, {self.max_servers} scraped at most: not scraped {', '.join(left[:20])}{more}"
            )
        self._left_out = left
        self._claims = {k: tuple(v) for k, v in claims.items()}
        self._born = {k: v for k, v in self._born.items() if k in labels}
        self._vetted = vetted
        return ranked[: self.max_servers]

    def _vet(self, ep: Endpoint, claimants: tuple[int, ...]) -> tuple[int | None, bool]:
        host, _, port = ep.base_url.split("://", 1)[-1].rpartition(":")
        return attribute(self.owners, host, int(port), claimants, self.allowed_uids)

    def _env(self, pid: int, create_time: float) -> dict[str, str]:
        key = (pid, create_time)
        if key not in self._environ:
            try:  # another user's environ is unreadable: the default endpoint then
                with open(os.path.join(self.proc_root, str(pid), "environ"), "rb") as fh:
                    self._environ[key] = parse_environ(fh.read(1 << 20))
            except OSError:
                self._environ[key] = {}
            if len(self._environ) > 256:
                self._environ = {key: self._environ[key]}
        return self._environ[key]

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        if not self.settings.enabled:
            return {}
        wanted = self.targets(partial.get("processes") or ())
        for ep in list(self.scrapers):
            if ep not in wanted:
                self.scrapers.pop(ep).stop()
        started = []
        for ep in wanted:
            sc = self.scrapers.get(ep)
            new = sc is None
            if sc is None:
                vet = self._vet if ep.server in self._vetted else None
                sc = self.scrapers[ep] = Scraper(
                    ep, self.settings, self.interval_s, self.fetch, self.log, self.clock, vet
                )
            sc.claimants = self._claims.get(ep.server, sc.claimants)
            sc.born = self._born.get(ep.server)
            if new:
                sc.start()
                started.append(sc)
        # A server found now is read in this sample, not a tick later: its first scrape is waited for, at most
        # the scrape timeout and FIRST_WAIT_S in all per tick (a server answers in milliseconds; a hanging one
        # costs this once).
        deadline = time.monotonic() + min(self.settings.timeout_s, FIRST_WAIT_S)
        for sc in started:
            sc.first.wait(max(0.0, deadline - time.monotonic()))
        self.live = tuple(self.scrapers.values())
        readings = [sc.latest for sc in self.live if sc.latest is not None]
        out = {"serving": tuple(map(finite, self.energy.attribute(readings, partial, self.trainer_active)))}
        fast = self.fast.take() if self.fast is not None else ()
        if fast:  # the 1 s reads since the previous sample: G3 judges the engine stall on them
            out["serving_progress"] = fast
        if self._fast_done:
            self.fast, self._fast_done = None, False
        return out

    def progress(self, wait_s: float) -> tuple[ServingProgress, ...]:
        """Each scraped server's progress read now (the armed fast ring's second; serving_fast.py): at most
        wait_s spent, a server still answering its previous read keeps its last reading."""
        if self.fast is None:
            self.fast = ProgressReads(self.clock)
        self._fast_done = False
        # Ollama gives no token counters (/api/ps): nothing to judge a stall on, not read at 1 s.
        return self.fast.read([sc for sc in self.live if sc.ep.kind != "ollama"], wait_s)

    def progress_stop(self) -> None:
        """The fast ring disarmed: no more 1 s reads (one under way ends on its own, within timeout_s); the
        reads not yet in a sample go into the next one."""
        self._fast_done = True

    def close(self) -> None:
        for sc in self.scrapers.values():
            sc.stop()
        self.scrapers.clear()
        self.live, self.fast = (), None


def _in_turns(queues: list[list[Endpoint]]) -> list[Endpoint]:
    """The first of each queue, then the second of each...: one uid's many servers do not crowd out another's."""
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def _own_addresses() -> frozenset[str]:
    """This host's interface addresses (psutil); loopback is always allowed besides these."""
    try:
        import psutil

        return frozenset(a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs)
    except Exception:
        return frozenset()
