"""G6 contention: heavy GPU-resident workloads sharing the one UMA pool, and evictions between them.

Three stages per sample: `signals(f, th)` reads the sample's features into a `G6Signals` record (pure);
`G6Tracker.advance` is the only place the grouping, per-process levels, latches and holds change and
events are emitted; the rules in `g6_rules.RULES` then rule on the record and the state in priority order.
`classify(window, th)` is the pure function of a window; `G6Tracker.observe` is its incremental form
(a `diagnose.tracker.Tracker`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.g6_levels import LEVELS, Level, Reference, folded, window_reference
from spark_watchd.diagnose.g6_rules import GIB, G6Now, _over_share, ruling
from spark_watchd.diagnose.serving import ServingWatch
from spark_watchd.diagnose.sizing import sized, source_of
from spark_watchd.diagnose.steady import Dwell, Latch
from spark_watchd.diagnose.tracker import Ruling, Unpersisted, Verdict, words
from spark_watchd.diagnose.verdicts import G6State
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.groups import Grouper, Workload
from spark_watchd.sample.model import Sample
from spark_watchd.sample.workloads import SERVER_KINDS


class G6Signals(NamedTuple):
    """What one sample says about pressure on the shared pool, read once (no state)."""

    ts: float
    some: float  # PSI some %, 0 when not read
    psi_some_now: float | None
    majfault_per_s: float | None
    mem_total_b: int | None
    share_max: float | None  # capped_utilization_max of the pool: more than this is not a capped share
    pressure: bool  # stalls, swapping or a major-fault storm: evictions are looked for


# tuple.__new__ builds the record without NamedTuple's Python-level __new__ (once per sample per record).
_new = tuple.__new__


def signals(f: feat.Features, th) -> G6Signals:
    """Read one sample's features into what G6 judges; pure (the processes are read by advance())."""
    some = f.psi_some_pct or 0.0
    pressure = (
        some >= th.psi_some_warn_pct
        or (f.swapout_per_s or 0.0) >= th.swapout_warn_pages_s
        or (f.majfault_per_s or 0.0) >= th.majfault_storm_per_s
    )
    total = f.mem_total_b
    share_max = th.capped_utilization_max * total if total else None
    return _new(G6Signals, (f.ts, some, f.psi_some_now, f.majfault_per_s, total, share_max, pressure))


class G6Tracker(Unpersisted):
    """Incremental G6 classifier: feed samples oldest first."""

    gotcha = "G6"

    def __init__(self, th):
        self.th = th
        # A sample this close to a process's latest level folds into it (diagnose/g6_levels.py).
        self.fold_s = th.eviction_window_s / LEVELS
        self.grouper = Grouper(th.capped_utilization_max)
        self.workloads: tuple[Workload, ...] = ()  # the latest sample's workload table
        self._grouped: Sample | None = None  # the sample group() made that table from, until it is judged
        self._members_of: tuple[Workload, ...] | None = None  # the table _member was built from
        self._member: dict[int, Workload] = {}  # pid -> its workload in that table (built when asked)
        self.heavy_keys: set[tuple] = set()  # workloads counted heavy (hysteresis on the footprint)
        # The table the heavy ones were last picked from, and what was found: the same table (the grouper
        # hands back the same tuple while nothing moved) gives the same heavy ones under the hysteresis.
        self._heavy_of: tuple | None = None
        self._heavy_share: float | None = None  # the capped share's bytes it was judged against
        # Each workload's under-count by per-process NVML/RSS where its true hold was measured (diagnose/hold.py:
        # the engine sets HoldWatch.undercounts, measured on this sample's table, before G6 judges it).
        self.held: dict[tuple, int] = {}
        self._held_of: dict[tuple, int] | None = None  # the mapping the heavy ones were last sized by
        self._heavy: tuple = ((), 0, 0, 0)  # (heavy, uncapped, large, footprint) of that table
        self.rss: dict[tuple, deque[Level]] = {}  # (pid, create_time) -> its levels over the window
        self.fired: dict[tuple, float] = {}
        # Per process, the reference level of the current pressure episode.
        self.ref: dict[tuple, Reference] = {}
        # Time of the last sample under pressure: a gap longer than eviction_episode_gap_s ends the episode.
        self.pressure_last = None
        self.hold_until = None
        self.last_eviction = None
        self.stalls = Latch()
        self.storm = Latch()
        self.dwell = Dwell()
        self.serving = ServingWatch(th)

    def reboot(self, ts: float, boot_id: str | None, cause: str | None) -> list[Event]:
        """Processes do not survive a reboot; no events."""
        self._forget()
        return []

    def time_jump(self, ts: float) -> None:
        """The clock stepped back: per-process histories keyed on time start afresh, as after a reboot."""
        self._forget()

    def _forget(self) -> None:
        self.rss.clear()
        self.fired.clear()
        self.ref.clear()
        self.heavy_keys.clear()
        self._heavy_of = None
        self.pressure_last = None
        self.dwell.reset()
        self.serving.forget()

    def set_thresholds(self, th) -> None:
        """Thresholds were reloaded: judge the next sample afresh against them (no level or dwell held)."""
        self.th = th
        self.fold_s = th.eviction_window_s / LEVELS
        if self.grouper.capped_max != th.capped_utilization_max:
            self.grouper = Grouper(th.capped_utilization_max)
        self.serving.th = th
        self.stalls, self.storm = Latch(), Latch()
        self.heavy_keys.clear()
        self._heavy_of = None
        self.dwell.reset()

    def observe(self, sample: Sample, f: feat.Features) -> Verdict:
        """Judge the newest sample (held at a severity for min_dwell_s before it may fall)."""
        return self.advance(sample, f, signals(f, self.th))

    def group(self, sample: Sample) -> tuple[Workload, ...]:
        """The newest sample's workload table, ahead of observe() (which then judges that same table): the
        engine measures each workload's true hold on it and hands G6 the under-counts (`held`) before G6 rules."""
        self.workloads = self.grouper.group(sample.processes)
        self._grouped = sample
        return self.workloads

    def advance(self, sample: Sample, f: feat.Features, s: G6Signals) -> Verdict:
        """The one place G6's state moves (grouping, per-process levels, latches, holds) and events are made."""
        th = self.th
        events = self._evictions(sample, f, s)
        now = self._now(s)
        r = ruling(s, now, th)
        state = _new(
            G6State, (len(now.heavy), now.uncapped, now.large, now.footprint_bytes, s.majfault_per_s)
        )
        # The words (summary, a row per heavy workload) are written when someone reads them, from this
        # sample's records only (s, now and the rows in it are immutable).
        found = Finding.deferred("G6", r.severity, partial(_words, r, s, now, th), r.advice, None, state)
        out = self.dwell.apply(found, s.ts, self.th.min_dwell_s)
        if out.severity != "critical":  # the storm latches hold a critical, never start one
            self.stalls.on = self.storm.on = False
        return _new(Verdict, (out, events, self.workloads))

    def _evictions(self, sample: Sample, f: feat.Features, s: G6Signals) -> list[Event]:
        """Group the processes and follow each one's level under pressure: the eviction events."""
        th = self.th
        ts = s.ts
        events: list[Event] = []
        pressure = s.pressure
        hists = self.rss
        refs = self.ref
        win, hold, fold = th.eviction_window_s, th.eviction_level_hold_s, self.fold_s
        procs = sample.processes
        avail = f.avail_b
        if self._grouped is not sample:  # (the engine may have grouped it already: group())
            self.workloads = self.grouper.group(procs)
        self._grouped = None
        serving = self.serving
        # No readings now and nothing left from the last ones: observe() would only empty its lists.
        if sample.serving or serving.unloads or serving.lost_models:
            serving.observe(sample.serving, ts, False)
            if serving.unloads:  # Ollama's expires_at passed: its keep-alive gave the memory up
                self._unloaded(procs)
        if pressure:
            last = self.pressure_last
            if last is None or ts - last > th.eviction_episode_gap_s:
                refs.clear()  # a new pressure episode: references start from the window
            self.pressure_last = ts
        for p in procs:
            key = (p.pid, p.create_time)
            gpu = p.gpu_mem_bytes or 0
            rss = p.rss_bytes
            hist = hists.get(key)
            if hist is None:
                hist = hists[key] = deque()
            # The level this process has held for at least `hold` seconds up to now: the lowest RSS over
            # that span, so a short spike (a checkpoint save staging its state dict) never becomes a level.
            held = None
            lo = rss
            for e in reversed(hist):
                if e.rss < lo:
                    lo = e.rss
                if ts - e.ts >= hold:
                    held = lo
                    break
            if hist and ts - hist[-1].ts < fold:
                hist[-1] = folded(hist[-1], rss, gpu, held, avail)
            else:
                hist.append(_new(Level, (ts, rss, gpu, held, avail)))
            while ts - hist[0].ts > win:
                hist.popleft()
            r = refs.get(key)
            if r is not None:
                if held is not None and held >= r.level:
                    r.level, r.ts, r.gpu, r.avail = held, ts, gpu, avail
            elif pressure:
                r = window_reference(hist)
                if r is not None:
                    refs[key] = r
            if pressure and r is not None and not r.fired:
                w = self._members().get(p.pid)
                ev = self._eviction(p, key, hist, r, gpu, ts, f, w.kind if w is not None else "other")
                if ev is not None:
                    events.append(ev)
        if len(hists) > len(procs):  # some process is gone: forget it (bounded memory)
            seen = {(p.pid, p.create_time) for p in procs}
            for key in [k for k in hists if k not in seen]:
                hists.pop(key, None)
                self.fired.pop(key, None)
                refs.pop(key, None)
        return events

    def _members(self) -> dict[int, Workload]:
        """pid -> its workload in the latest table (rebuilt only when the table changed and someone asks)."""
        wls = self.workloads
        if wls is not self._members_of:
            self._members_of = wls
            self._member = {pid: w for w in wls for pid in w.members}
        return self._member

    def _unloaded(self, procs) -> None:
        """A keep-alive unload gave the memory up, nothing took it: its processes' levels start over."""
        unloaded = {self.serving.last[server].pid for server, _m in self.serving.unloads}
        launcher_of = {pid: w.pid for pid, w in self._members().items()}
        for p in procs:
            if launcher_of.get(p.pid) in unloaded:
                key = (p.pid, p.create_time)
                self.rss.pop(key, None)  # its level starts over from what it holds now
                self.ref.pop(key, None)

    def _now(self, s: G6Signals) -> G6Now:
        """Who is heavy (with hysteresis), the latches and the eviction hold: what the rules read."""
        th = self.th
        wls = self.workloads
        held = self.held
        if wls is not self._heavy_of or self._heavy_share != s.share_max or held is not self._held_of:
            self._heavy_of, self._heavy_share, self._held_of = wls, s.share_max, held
            self._heavy = self._pick_heavy(wls, s.share_max, held)
        heavy, n_uncapped, n_large, total_foot = self._heavy
        stalls = self.stalls.above(s.some, th.psi_some_warn_pct, th.psi_some_leave_pct, s.psi_some_now)
        storm = self.storm.above(s.majfault_per_s, th.majfault_storm_per_s, th.majfault_storm_leave_per_s)
        total = s.mem_total_b
        near_cap = total is not None and total_foot >= th.near_capacity_ratio * total
        hold = self.hold_until
        evicted = self.last_eviction if hold is not None and s.ts < hold else None
        # The servers' own view of the sharing (none without their readings).
        inside = tuple(self.serving.contention()) if len(heavy) >= 2 and self.serving.points else ()
        return _new(
            G6Now, (heavy, stalls, storm, n_uncapped, n_large, total_foot, near_cap, evicted, inside, held)
        )

    def _pick_heavy(self, wls: tuple[Workload, ...], share_max, held) -> tuple:
        """(heavy workloads, how many uncapped, how many large, their footprint together), each workload sized
        by its measured hold where per-process NVML under-counts it (diagnose/sizing.py)."""
        th = self.th
        # Heavy means heavy, whatever the kind: an Ollama with no model loaded (0.5 GiB) is no co-tenant.
        # A footprint wandering at the line stays heavy until it is clearly under it.
        was, enter, leave = self.heavy_keys, th.heavy_workload_bytes, th.heavy_leave_bytes
        large = th.large_trainer_bytes
        heavy, keys = [], set()
        n_uncapped = n_large = total_foot = 0
        for w in wls:
            if not w.gpu_resident:
                continue
            if held:
                w = sized(w, held)
            key, foot = (w.pid, w.create_time), w.footprint_bytes
            if foot < (leave if key in was else enter):
                continue
            heavy.append(w)
            keys.add(key)
            total_foot += foot
            if _over_share(w, share_max):
                n_uncapped += 1
            elif foot >= large and w.kind not in SERVER_KINDS:
                n_large += 1
        self.heavy_keys = keys
        return tuple(heavy), n_uncapped, n_large, total_foot

    def _eviction(self, p, key, hist, ref, gpu, ts, f, kind):
        """An eviction event when this live process lost a large share of its reference level under pressure.

        The reference is the highest level the process held (for eviction_level_hold_s) in the window
        when the pressure episode began, or since: a fast eviction shows against the window, a slow
        squeeze accumulates against the level it held when the pressure started.
        """
        th = self.th
        ref_rss, ref_ts, ref_gpu = ref.level, ref.ts, ref.gpu
        loss = ref_rss - p.rss_bytes
        if loss < th.eviction_min_loss_bytes or loss < th.eviction_loss_ratio * ref_rss:
            return None
        # GPU memory gained since the reference or within the window (a load hands its weights to the GPU
        # while RSS still sits at its level, so the gain can predate the reference).
        gpu_lo = ref_gpu
        for e in hist:
            if e.gpu < gpu_lo:
                gpu_lo = e.gpu
        if gpu - gpu_lo >= th.gpu_move_ratio * loss:
            return None  # it moved its own weights into GPU memory
        # Memory that came back to the pool was given up (a model unloaded: Ollama keep-alive, vLLM sleep
        # mode, a restart), not taken: an eviction's pages go to the aggressor and MemAvailable stays low.
        if (
            f.avail_b is not None
            and ref.avail is not None
            and f.avail_b - ref.avail >= th.gpu_move_ratio * loss
        ):
            return None
        if p.gpu_mem_bytes is None and p.gpu_resident:
            # No per-process GPU memory to check: a GPU process that climbed to its level within the window
            # and fell back is loading weights and handing them to the GPU, not a settled victim.
            before = [e.rss for e in hist if e.ts < ref_ts]
            if before and min(before) <= ref_rss - th.gpu_move_ratio * loss:
                return None
        last = self.fired.get(key)
        if last is not None and ts - last < th.eviction_rearm_s:
            return None
        self.fired[key] = ts
        ref.fired = True  # one eviction per process per pressure episode
        self.hold_until = ts + th.eviction_hold_s
        span = ts - ref_ts
        msg = (
            f"{p.name} (pid {p.pid}, {kind}) lost {loss / GIB:.1f} GiB of the {ref_rss / GIB:.1f} GiB resident "
            f"it held {span:.0f} s ago ({100 * loss / ref_rss:.0f}%) under memory pressure, still running"
        )
        self.last_eviction = msg
        return Event(
            "eviction",
            "G6",
            ts,
            msg,
            details={
                "pid": p.pid,
                "name": p.name,
                "kind": kind,
                "rss_before_bytes": ref_rss,
                "rss_after_bytes": p.rss_bytes,
                "loss_ratio": round(loss / ref_rss, 3),
                "psi_some_avg60_pct": f.psi_some_pct,
                "swap_out_pages_per_s": f.swapout_per_s,
            },
        )


def _words(r: Ruling, s: G6Signals, now: G6Now, th) -> tuple[str, dict]:
    """The finding's summary and evidence, from one sample's records (built when first read)."""
    ev = {
        "heavy_workloads": len(now.heavy),
        # Caps are a server notion: a lone trainer is never "uncapped"; a large one is counted apart.
        "uncapped_workloads": now.uncapped,
        "large_workloads": now.large,
        "workloads_footprint_bytes": now.footprint_bytes,
        "psi_some_avg60_pct": s.some,
        "major_faults_per_s": s.majfault_per_s,
        "workloads": [source_of(_row(w), w, now.held) for w in now.heavy],
    }
    if now.inside:
        ev["serving_contention"] = list(now.inside)
    return words(r, s, now, th), ev


def _row(w: Workload) -> dict:
    return {
        "pid": w.pid,
        "name": w.name,
        "kind": w.kind,
        "capped": w.capped,
        "cap": w.cap,
        "members": list(w.members),
        "footprint_bytes": w.footprint_bytes,
    }


def classify(window: Sequence[Sample], th) -> Finding:
    """G6 finding for the newest sample of a window (oldest first); pure."""
    return feat.fold(G6Tracker(th), window, th)
