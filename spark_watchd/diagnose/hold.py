"""A serving engine's true hold, against what it declared; and whether its first long prefill will fit.

Per-process NVML memory under-counts an engine on GB10 by about 10 GiB (issue 31: one engine's true hold,
the MemAvailable step when it stopped, was 12.6 -> 118.6 GiB; one held 109 GiB against 71 GiB declared;
Syllo/nvtop#511 shows 89.28 against 98.70 GiB). The true hold is measured from usable memory (MemAvailable
- CmaFree) just before the engine appeared, against the same once its load has settled (and, at its exit,
the step back); the declared hold is `--gpu-memory-utilization` x MemTotal (vLLM's default 0.9),
`--mem-fraction-static` x MemTotal (SGLang), or vLLM's `--kv-cache-memory-bytes` (the KV cache alone: the
weights come on top, so the true hold exceeds it by their size).

At an engine's start the declared hold is compared with the usable memory and the page cache then
(tobias-weiss.org, "DGX Spark vLLM OOM debugging": a vLLM OOM-killed at KV-cache allocation on its first
launch because page cache held the pool): a `hold_check` event when it will not fit. Pure: fed each
sample's workloads and usable memory, no clock.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.workloads import read_caps

GIB = 1024**3
SETTLE_S = 300.0  # a load (weights, then KV cache and CUDA graphs) has settled this long after the start
STEADY_BYTES = GIB  # ... and usable memory moved less than this since the previous sample
_DEFAULT_FRACTION = {"vllm": 0.9, "sglang": 0.88}  # each server's default share of the pool
# The workloads whose hold is measured: the engines, and trainers (which declare nothing to compare with).
WATCHED = frozenset((*_DEFAULT_FRACTION, "trainer"))
# A measured hold replaces the counted footprint only past this: the step is read to STEADY_BYTES at each of
# its two ends, so a smaller excess is the measure's own noise (one vLLM held 113.5 GiB against NVML's 113.4).
UNDERCOUNT_BYTES = 2 * GIB
# A trainer's start is looked for this far back (it reads its data and weights, often for minutes, before it
# holds GPU memory and joins the table), in at most this many samples (4 minutes at --interval 1).
LOOKBACK_S = 1800.0
LOOKBACK_SAMPLES = 240
_NAME = {"vllm": "vLLM", "sglang": "SGLang"}


def declared(kind: str, cmdline, mem_total: int | None) -> tuple[int | None, str]:
    """(the hold a server declared on its command line, in words), (None, '') when it declares none."""
    caps = read_caps(cmdline)
    if kind == "vllm" and caps.get("kv_cache_memory_bytes"):
        b = int(caps["kv_cache_memory_bytes"])
        return b, f"by --kv-cache-memory-bytes {b / GIB:.1f} GiB, plus the weights"
    key = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static"}.get(kind)
    if key is None or not mem_total:
        return None, ""
    frac = caps.get(key) or _DEFAULT_FRACTION[kind]
    return int(frac * mem_total), f"at {frac:g} of {mem_total / GIB:.1f} GiB"


class Hold(NamedTuple):
    """One workload's hold: declared, measured (the usable-memory step), NVML's per-process sum, and the
    footprint G6 counts for it (the larger of NVML memory and RSS per member) when it was measured."""

    kind: str
    pid: int
    declared_bytes: int | None
    declared_words: str
    measured_bytes: int | None
    nvml_bytes: int | None
    counted_bytes: int = 0

    @property
    def undeclared_bytes(self) -> int | None:
        if self.declared_bytes is None or self.measured_bytes is None:
            return None
        return self.measured_bytes - self.declared_bytes

    @property
    def undercount_bytes(self) -> int:
        """What NVML and RSS miss of it: its measured hold over the footprint counted then (0 when none)."""
        if self.measured_bytes is None:
            return 0
        return max(0, self.measured_bytes - self.counted_bytes)


class _Start(NamedTuple):
    ts: float
    usable: int
    cached: int | None
    declared: int | None
    words: str
    others: frozenset  # the other workloads then: one that starts or stops before the measure spoils it
    others_b: int  # ... and their footprint, whose own drift is taken off the step


def _others(foot: dict, key) -> tuple[frozenset, int]:
    """The other workloads of a GiB or more (one starting or stopping spoils a step), and all the others'
    footprint together (its drift is taken off the step)."""
    big = frozenset(k for k, b in foot.items() if k != key and b >= STEADY_BYTES)
    return big, sum(b for k, b in foot.items() if k != key)


class HoldWatch:
    """Per watched workload (by launcher key): its start, its settled step, its step back at the exit.

    A step is a workload's only while nothing else in the table starts or stops between its two samples;
    what the others' counted footprint moved meanwhile is taken off it. `undercounts` maps each running
    workload whose hold exceeds its counted footprint by UNDERCOUNT_BYTES or more to that excess: what
    G6's, G3's and the runway's sizing add to its NVML/RSS figure (diagnose/sizing.py).
    """

    def __init__(self, th):
        self.th = th
        self.starts: dict[tuple, _Start] = {}
        self.holds: dict[tuple, Hold] = {}  # the measured holds of the workloads running now
        # Workloads just gone: (hold, usable before, samples since, the others of a GiB or more, all others' bytes).
        self.leaving: dict[tuple, tuple] = {}
        self.undercounts: dict[tuple, int] = {}  # replaced (never changed in place) when a hold comes or goes
        self._usable: int | None = None
        self._cached: int | None = None
        self._ts: float | None = None
        self._foot: dict[tuple, int] = {}  # every workload's counted footprint at the previous sample
        self._wls = None  # the table it was read from (G6 hands back the same tuple while nothing moved)
        self._restored = False  # holds came from the state file: the first table says which still run
        # (ts, usable, cached, footprints) of the recent samples, oldest first: where a trainer's start is found.
        self._hist: deque = deque(maxlen=LOOKBACK_SAMPLES)

    def _before(self, created: float) -> tuple | None:
        """The newest sample taken before `created`, when the history reaches back that far."""
        hist = self._hist
        if not hist or hist[0][0] >= created:
            return None
        for entry in reversed(hist):
            if entry[0] < created:
                return entry
        return None

    def state(self) -> dict:
        """The running workloads' measured holds, for state.json (no key without one): a daemon restarted on the
        same boot judges an engine that runs on by the hold it measured at its start (no start to measure again)."""
        rows = [
            [
                pid,
                created,
                h.kind,
                h.declared_bytes,
                h.declared_words,
                h.measured_bytes,
                h.nvml_bytes,
                h.counted_bytes,
            ]
            for (pid, created), h in self.holds.items()  # (h.pid is the launcher's pid, the key's)
        ]
        return {"holds": rows} if rows else {}

    def restore(self, state) -> None:
        """Take the holds a previous run persisted with state(); rows that are not such a row are left out (a
        new boot forgets them all: the engine's reboot)."""
        rows = state.get("holds") if isinstance(state, dict) else None
        for row in rows if isinstance(rows, list) else ():
            if not isinstance(row, list) or len(row) != 1 + len(Hold._fields):
                continue
            pid, created, kind, d, words, measured, nvml, counted = row
            ints = (pid, measured, counted, *(x for x in (d, nvml) if x is not None))
            if (
                kind in WATCHED
                and isinstance(created, (int, float))
                and isinstance(words, str)
                and all(isinstance(x, int) and not isinstance(x, bool) for x in ints)
            ):
                self.holds[(pid, float(created))] = Hold(kind, pid, d, words, measured, nvml, counted)
        self._restored = bool(self.holds)
        self._undercounts()

    def _undercounts(self) -> None:
        under = {
            k: h.undercount_bytes for k, h in self.holds.items() if h.undercount_bytes >= UNDERCOUNT_BYTES
        }
        if under != self.undercounts:
            self.undercounts = under

    def forget(self) -> None:
        self.starts.clear()
        self.holds.clear()
        self.leaving.clear()
        if self.undercounts:
            self.undercounts = {}
        self._usable = self._cached = self._ts = self._wls = None
        self._foot = {}
        self._restored = False
        self._hist.clear()

    def observe(self, ts: float, usable: int | None, cached: int | None, mem_total, workloads) -> list[Event]:
        """Take one sample; the hold_check and hold events it makes."""
        events: list[Event] = []
        prev, prev_cached, prev_foot = self._usable, self._cached, self._foot
        if workloads is self._wls:
            foot = prev_foot
        else:
            foot = {w.key: w.footprint_bytes for w in workloads}
            self._wls = workloads
        watched = (
            {w.key: w for w in workloads if w.kind in WATCHED} if self.starts or foot is not prev_foot else {}
        )
        if foot is not prev_foot and foot.keys() != prev_foot.keys():
            for k in watched.keys() - prev_foot.keys():  # it appeared: its start, from the sample before it
                w = watched[k]
                # A trainer is a workload only once it holds GPU memory, often long after it began reading its
                # data and weights: its start is the last sample before its process was created, when one is
                # still in the history (none for a trainer that ran before the daemon or the window).
                if w.kind == "trainer":
                    if (b := self._before(w.create_time)) is not None:
                        self.starts[k] = _Start(ts, b[1], b[2], None, "", *_others(b[3], k))
                    continue
                d, words = declared(w.kind, w.cmdline, mem_total)
                if prev is not None:
                    self.starts[k] = _Start(ts, prev, prev_cached, d, words, *_others(prev_foot, k))
                    if (e := self._check(ts, w, d, words, prev, prev_cached)) is not None:
                        events.append(e)
            for k in prev_foot.keys() - foot.keys():  # it left: the step back, over this sample and the next
                self.starts.pop(k, None)
                h = self.holds.pop(k, None)
                if h is not None and prev is not None:
                    self.leaving[k] = (h, prev, 0, *_others(prev_foot, k))
        if self._restored:  # a restored hold whose workload is gone says nothing any more
            self._restored = False
            for k in [k for k in self.holds if k not in foot]:
                del self.holds[k]
        if self.holds and foot is not prev_foot:
            for k, h in list(self.holds.items()):
                # Most of its counted footprint went back (vLLM's sleep mode, an unload): what NVML/RSS missed of
                # it then says nothing of what they miss now.
                if 2 * foot.get(k, h.counted_bytes) < h.counted_bytes:
                    del self.holds[k]
        for k, (h, before, n, others, others_b) in list(self.leaving.items()):
            step = None if usable is None else usable - before
            if step is not None and (step >= STEADY_BYTES or n >= 1):
                del self.leaving[k]
                big, now_b = _others(foot, k)
                if big != others:  # something else started or stopped in the same samples
                    continue
                step += now_b - others_b  # what the others grew by is not its hold
                if step >= STEADY_BYTES:  # (a smaller step, or none, is not its hold coming back)
                    events.append(self._event(ts, h._replace(measured_bytes=step), "when it stopped"))
            else:
                self.leaving[k] = (h, before, n + 1, others, others_b)
        for k, st in list(self.starts.items()):
            if k in self.holds or usable is None or prev is None:
                continue
            big, now_b = _others(foot, k)
            if big != st.others:  # another workload started or stopped since: no clean step to measure
                del self.starts[k]
                continue
            if ts - st.ts >= SETTLE_S and abs(usable - prev) < STEADY_BYTES:
                w = watched[k]
                measured = st.usable - usable - (now_b - st.others_b)
                if measured < STEADY_BYTES:  # the pool gave back what it took: not a hold this step can tell
                    del self.starts[k]
                    continue
                h = Hold(w.kind, w.pid, st.declared, st.words, measured, w.gpu_mem_bytes, w.footprint_bytes)
                self.holds[k] = h
                events.append(self._event(ts, h, "after its load settled"))
        self._usable, self._cached, self._foot, self._ts = usable, cached, foot, ts
        hist = self._hist
        if usable is None or hist and ts <= hist[-1][0]:
            hist.clear()  # a blind sample or a clock step back: no start is found across it
        else:
            hist.append((ts, usable, cached, foot))
            while ts - hist[0][0] > LOOKBACK_S:
                hist.popleft()
        if self.holds or self.undercounts:  # (most samples have neither: nothing to compare)
            self._undercounts()
        return events

    def _check(self, ts, w, d, words, usable, cached) -> Event | None:
        """Before the first long prefill: the declared hold against usable memory and the page cache."""
        if d is None or d <= usable or w.kind != "vllm" and w.kind != "sglang":
            return None
        name = _NAME[w.kind]
        cache = f", {cached / GIB:.1f} GiB of it page cache" if cached else ""
        flag = "--gpu-memory-utilization" if w.kind == "vllm" else "--mem-fraction-static"
        summary = (
            f"{name} (pid {w.pid}) {words} will hold {d / GIB:.1f} GiB; usable {usable / GIB:.1f} GiB{cache}: "
            f"the first long prefill will not fit; drop caches (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches) "
            f"or lower {flag}"
        )
        details = {
            "pid": w.pid,
            "kind": w.kind,
            "declared_bytes": d,
            "usable_bytes": usable,
            "cached_bytes": cached,
        }
        return Event("hold_check", "G3", ts, summary, details=details)

    def _event(self, ts: float, h: Hold, when: str) -> Event:
        name = _NAME.get(h.kind, h.kind)
        summary = (
            f"{name} (pid {h.pid}) holds {h.measured_bytes / GIB:.1f} GiB by the usable-memory step {when}"
        )
        parts = []
        if h.declared_bytes is not None:
            parts.append(f"declared {h.declared_bytes / GIB:.1f} GiB {h.declared_words}")
        if h.nvml_bytes:
            parts.append(f"NVML per-process {h.nvml_bytes / GIB:.1f} GiB")
        if parts:
            summary += f" ({'; '.join(parts)})"
        gap = h.undeclared_bytes
        if gap is not None and gap >= 2 * GIB:
            summary += f": {gap / GIB:.1f} GiB more than it declared"
        details = {
            "pid": h.pid,
            "kind": h.kind,
            "measured_bytes": h.measured_bytes,
            "declared_bytes": h.declared_bytes,
            "nvml_bytes": h.nvml_bytes,
            "undeclared_bytes": gap,
            "when": when,
        }
        return Event("hold", "", ts, summary, details=details)


def with_holds(finding: Finding, holds: dict) -> Finding:
    """G3 with each running engine's measured hold in its evidence (`serving_holds`; the metric reads it) and
    each trainer's (`trainer_holds`)."""
    rows: dict[str, list] = {}
    for h in holds.values():
        key = "serving_holds" if h.kind in _DEFAULT_FRACTION else "trainer_holds"
        rows.setdefault(key, []).append(
            {
                "kind": h.kind,
                "pid": h.pid,
                "measured_bytes": h.measured_bytes,
                "declared_bytes": h.declared_bytes,
                "nvml_bytes": h.nvml_bytes,
                "undeclared_bytes": h.undeclared_bytes,
            }
        )
    return finding.reworded(lambda summary, evidence: (summary, dict(evidence, **rows)))
