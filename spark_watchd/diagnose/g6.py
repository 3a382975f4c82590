"""G6 contention: heavy GPU-resident workloads sharing the one UMA pool, and evictions between them.

`classify(window, th)` is the pure function of a window; `G6Tracker.update` is its incremental form.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from spark_watchd.diagnose import features as feat
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import Sample
from spark_watchd.sample.workloads import classify as classify_workload
from spark_watchd.sample.workloads import read_caps

GIB = 1024**3
SERVER_KINDS = frozenset(("vllm", "sglang", "ollama", "llamacpp"))

ADVICE_SHARE = (
    "Stop the unrelated server while training, or cap it: vLLM --gpu-memory-utilization 0.5 "
    "(not --kv-cache-memory-bytes), SGLang --mem-fraction-static 0.5.",
    "Ollama grabs what it can: stop it (sudo systemctl stop ollama) or set OLLAMA_KEEP_ALIVE=0 while training.",
)
ADVICE_EVICT = (
    "One workload is pushing another's memory out of the shared pool: stop or cap the server now.",
    "Then follow the OOM ladder: drop caches between runs (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches), "
    "smaller batch / packing, bf16 LoRA before QLoRA.",
)


class _Workload:
    __slots__ = ("kind", "capped", "cap")

    def __init__(self, kind, capped, cap):
        self.kind = kind
        self.capped = capped
        self.cap = cap


def describe(cmdline, name, gpu_resident, th) -> _Workload:
    """Kind of a process and whether its memory is capped (None for non-servers)."""
    kind = classify_workload(cmdline, name, gpu_resident)
    capped = None
    cap = None
    if kind in SERVER_KINDS:
        caps = read_caps(cmdline) or {}
        if kind == "ollama" or kind == "llamacpp":
            capped = False  # they take what they find; nothing on the command line bounds them
        elif caps.get("kv_cache_memory_bytes"):
            capped = False  # a KV budget in bytes bypasses the utilisation cap
        else:
            cap = caps.get("gpu_memory_utilization")  # SGLang's --mem-fraction-static lands here too
            # vLLM defaults to 0.9 of the whole pool, SGLang to ~0.88
            capped = cap is not None and cap <= th.capped_utilization_max
    return _Workload(kind, capped, cap)


class G6Tracker:
    """Incremental G6 classifier: feed samples oldest first."""

    def __init__(self, th):
        self.th = th
        self.kinds: dict[tuple, _Workload] = {}
        self.rss: dict[tuple, deque] = {}  # key -> deque of (ts, rss, gpu_mem, held level)
        self.fired: dict[tuple, float] = {}
        # Per process, the reference level of the current pressure episode: [rss, ts, gpu_mem, fired].
        self.ref: dict[tuple, list] = {}
        # Time of the last sample under pressure: a gap longer than eviction_episode_gap_s ends the episode.
        self.pressure_last = None
        self.hold_until = None
        self.last_eviction = None
        self._heavy_ident = None
        self._heavy_list: list = []
        self._heavy_names = ""

    def reboot(self) -> None:
        """Processes do not survive a reboot."""
        self.kinds.clear()
        self.rss.clear()
        self.fired.clear()
        self.ref.clear()
        self.pressure_last = None

    def update(self, sample: Sample, f: feat.Features) -> tuple[Finding, list[Event]]:
        """Judge the newest sample."""
        th = self.th
        ts = f.ts
        events: list[Event] = []
        some = f.psi_some_pct or 0.0
        stalls = some >= th.psi_some_warn_pct
        swapping = (f.swapout_per_s or 0.0) >= th.swapout_warn_pages_s
        storm = (f.majfault_per_s or 0.0) >= th.majfault_storm_per_s
        pressure = stalls or swapping or storm
        heavy = []
        kinds = self.kinds
        hists = self.rss
        refs = self.ref
        win = th.eviction_window_s
        hold = th.eviction_level_hold_s
        heavy_b = th.heavy_workload_bytes
        procs = sample.processes
        if pressure:
            last = self.pressure_last
            if last is None or ts - last > th.eviction_episode_gap_s:
                refs.clear()  # a new pressure episode: references start from the window
            self.pressure_last = ts
        for p in procs:
            key = (p.pid, p.create_time)
            w = kinds.get(key)
            if w is None:
                w = kinds[key] = describe(p.cmdline, p.name, p.gpu_resident, th)
            gpu = p.gpu_mem_bytes or 0
            rss = p.rss_bytes
            foot = gpu if gpu > rss else rss
            if (p.gpu_resident or gpu > 0) and (w.kind in SERVER_KINDS or foot >= heavy_b):
                heavy.append((p, w, foot))
            hist = hists.get(key)
            if hist is None:
                hist = hists[key] = deque()
            # The level this process has held for at least `hold` seconds up to now: the lowest RSS over
            # that span, so a short spike (a checkpoint save staging its state dict) never becomes a level.
            held = None
            lo = rss
            for e in reversed(hist):
                if e[1] < lo:
                    lo = e[1]
                if ts - e[0] >= hold:
                    held = lo
                    break
            hist.append((ts, rss, gpu, held))
            while ts - hist[0][0] > win:
                hist.popleft()
            r = refs.get(key)
            if r is not None:
                if held is not None and held >= r[0]:
                    r[0], r[1], r[2] = held, ts, gpu
            elif pressure:
                r = _window_reference(hist)
                if r is not None:
                    refs[key] = r
            if pressure and r is not None and not r[3]:
                ev = self._eviction(p, key, hist, r, gpu, ts, f, w)
                if ev is not None:
                    events.append(ev)
        if len(kinds) > len(procs):  # some process is gone: forget it (bounded memory)
            seen = {(p.pid, p.create_time) for p in procs}
            for key in [k for k in kinds if k not in seen]:
                kinds.pop(key, None)
                hists.pop(key, None)
                self.fired.pop(key, None)
                refs.pop(key, None)

        if len(heavy) > 1:
            heavy = _one_per_server(heavy)
        sharing = len(heavy) >= 2
        n_uncapped = 0
        total_foot = 0
        large = th.large_trainer_bytes
        for _, w, foot in heavy:
            total_foot += foot
            if w.capped is False or (w.kind not in SERVER_KINDS and foot >= large):
                n_uncapped += 1
        near_cap = f.mem_total_b is not None and total_foot >= th.near_capacity_ratio * f.mem_total_b
        hold = self.hold_until is not None and ts < self.hold_until
        ev = {
            "heavy_workloads": len(heavy),
            "uncapped_workloads": n_uncapped,
            "workloads_footprint_bytes": total_foot,
            "psi_some_avg60_pct": some,
            "major_faults_per_s": f.majfault_per_s,
        }
        if heavy:
            # The list and names only change when the set of heavy processes (or a trainer's whole-GiB
            # footprint, which the summary shows) does: reuse them.
            ident = tuple(
                (p.pid, p.create_time, 0 if w.kind in SERVER_KINDS else foot >> 30) for p, w, foot in heavy
            )
            if ident != self._heavy_ident:
                self._heavy_ident = ident
                self._heavy_list = [
                    {"pid": p.pid, "name": p.name, "kind": w.kind, "capped": w.capped} for p, w, _ in heavy
                ]
                self._heavy_names = _names(heavy, th)
            ev["workloads"] = self._heavy_list
            names = self._heavy_names
        else:
            ev["workloads"] = []
            names = ""
        if hold:
            le = self.last_eviction
            return Finding("G6", "critical", f"Eviction: {le}", ev, ADVICE_EVICT), events
        if sharing and storm and stalls:
            return Finding(
                "G6",
                "critical",
                f"Major-fault storm ({f.majfault_per_s:.0f}/s) with memory stalls (PSI {some:.0f}%) while "
                f"{names} share the pool",
                ev,
                ADVICE_EVICT,
            ), events
        if sharing and (n_uncapped or near_cap):
            why = ""
            if not n_uncapped:
                why = f", together near capacity ({total_foot / GIB:.0f} of {f.mem_total_b / GIB:.0f} GiB)"
            return Finding(
                "G6",
                "warning",
                f"{len(heavy)} heavy GPU workloads share the pool: {names}{why}",
                ev,
                ADVICE_SHARE,
            ), events
        if sharing:
            return Finding(
                "G6", "ok", f"{len(heavy)} GPU workloads share the pool, all capped: {names}", ev
            ), events
        return Finding("G6", "ok", "No contention: at most one heavy GPU workload", ev), events

    def _eviction(self, p, key, hist, ref, gpu, ts, f, w):
        """An eviction event when this live process lost a large share of its reference level under pressure.

        The reference is the highest level the process held (for eviction_level_hold_s) in the window
        when the pressure episode began, or since: a fast eviction shows against the window, a slow
        squeeze accumulates against the level it held when the pressure started.
        """
        th = self.th
        ref_rss, ref_ts, ref_gpu = ref[0], ref[1], ref[2]
        loss = ref_rss - p.rss_bytes
        if loss < th.eviction_min_loss_bytes or loss < th.eviction_loss_ratio * ref_rss:
            return None
        # GPU memory gained since the reference or within the window (a load hands its weights to the GPU
        # while RSS still sits at its level, so the gain can predate the reference).
        gpu_lo = ref_gpu
        for e in hist:
            if e[2] < gpu_lo:
                gpu_lo = e[2]
        if gpu - gpu_lo >= th.gpu_move_ratio * loss:
            return None  # it moved its own weights into GPU memory
        if p.gpu_mem_bytes is None and p.gpu_resident:
            # No per-process GPU memory to check: a GPU process that climbed to its level within the window
            # and fell back is loading weights and handing them to the GPU, not a settled victim.
            before = [e[1] for e in hist if e[0] < ref_ts]
            if before and min(before) <= ref_rss - th.gpu_move_ratio * loss:
                return None
        last = self.fired.get(key)
        if last is not None and ts - last < th.eviction_rearm_s:
            return None
        self.fired[key] = ts
        ref[3] = True  # one eviction per process per pressure episode
        self.hold_until = ts + th.eviction_hold_s
        span = ts - ref_ts
        msg = (
            f"{p.name} (pid {p.pid}, {w.kind}) lost {loss / GIB:.1f} GiB of the {ref_rss / GIB:.1f} GiB resident "
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
                "kind": w.kind,
                "rss_before_bytes": ref_rss,
                "rss_after_bytes": p.rss_bytes,
                "loss_ratio": round(loss / ref_rss, 3),
                "psi_some_avg60_pct": f.psi_some_pct,
                "swap_out_pages_per_s": f.swapout_per_s,
            },
        )


def _one_per_server(heavy):
    """Drop a server's helper process (an API front end holding a CUDA context but no weights) when another
    process of the same kind holds the memory, so one vLLM is not counted as two tenants."""
    big = {w.kind for p, w, _ in heavy if w.kind in SERVER_KINDS and (p.gpu_mem_bytes or 0) >= GIB}
    if not big:
        return heavy
    return [
        h
        for h in heavy
        if not (h[1].kind in big and h[0].gpu_mem_bytes is not None and h[0].gpu_mem_bytes < GIB)
    ]


def _names(heavy, th) -> str:
    """Who shares the pool, the uncapped or large ones first: 'trainer (30 GiB, large) beside vllm (capped 0.5)'."""
    bad, good = [], []
    large = th.large_trainer_bytes
    for _, w, foot in heavy:
        if w.kind in SERVER_KINDS:
            if w.capped:
                good.append(f"{w.kind} (capped {w.cap:g})")
            elif w.cap is not None:
                bad.append(f"{w.kind} (cap {w.cap:g}, above {th.capped_utilization_max:g})")
            else:
                bad.append(f"{w.kind} (uncapped)")
        elif foot >= large:
            bad.append(f"{w.kind} ({foot / GIB:.0f} GiB, large)")
        else:
            good.append(f"{w.kind} ({foot / GIB:.0f} GiB)")
    if bad and good:
        return f"{' and '.join(bad)} beside {' and '.join(good)}"
    return " and ".join(bad or good)


def _window_reference(hist):
    """[level, ts, gpu_mem, fired] of the highest held level in the window (the latest such), or None."""
    best = None
    for e in hist:
        h = e[3]
        if h is not None and (best is None or h >= best[3]):
            best = e
    return None if best is None else [best[3], best[0], best[2], False]


def classify(window: Sequence[Sample], th) -> Finding:
    """G6 finding for the newest sample of a window (oldest first); pure."""
    tr = G6Tracker(th)
    return feat.fold("G6", tr, window, th, lambda s: tr.reboot())
