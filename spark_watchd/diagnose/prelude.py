"""What came before a wedge: the last minutes of a boot, for the reboot that follows to name.

Owners' logs (domenkogler/homelab docs/spark-incidents.md): nine OOM kills in 39 s, `sshd` among them, and
the host froze; the next boot said only "no throttle before it". `Prelude` keeps, over the last
`driver_fault_reboot_window_s` of a boot, its OOM kills (their count and the collateral victims' names),
engine stalls, live NV_ERR_NO_MEMORY lines and usable memory at the last sample, and says them at the
reboot: "the host froze 40 s after the OOM killer took 9 processes including sshd; usable memory 0.4 GiB".
A boot that ended with none of them and a roomy pool says nothing: a clean, deliberate reboot has no cause.
Pure: fed each sample's features and events, no clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from spark_watchd.sample.findings import Event

GIB = 1024**3


def _span(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class Prelude:
    """One boot's last minutes; `observe` each sample (after its events), `words` at the next boot."""

    def __init__(self, th):
        self.th = th
        self.kills: deque = deque()  # (ts, count, names, collateral names) per oom_kill event
        self.stalls: deque = deque()  # (ts, server) per engine_stall event
        self.nomem: deque = deque()  # ts of live NV_ERR_NO_MEMORY lines
        self.last_ts: float | None = None
        self.usable: int | None = None  # usable memory (MemAvailable - CmaFree) at the last sample

    def forget(self) -> None:
        self.kills.clear()
        self.stalls.clear()
        self.nomem.clear()
        self.last_ts = self.usable = None

    def observe(self, ts: float, usable: int | None, events) -> None:
        """Take one sample: its usable memory and its events."""
        self.last_ts, self.usable = ts, usable
        for e in events:
            k = e.kind
            if k == "oom_kill":
                victims = e.details.get("victims") or ()
                names = tuple(v.get("name") or "?" for v in victims)
                at = min((v["ts"] for v in victims if isinstance(v.get("ts"), (int, float))), default=e.ts)
                self.kills.append(
                    (
                        at,
                        int(e.details.get("oom_kills") or len(names) or 1),
                        names,
                        tuple(e.details.get("collateral") or ()),
                    )
                )
            elif k == "engine_stall":
                since = e.details.get("stalled_since")
                self.stalls.append(
                    (e.ts if since is None else since, e.details.get("server") or "a serving engine")
                )
            elif k == "driver_oom" and not e.details.get("previous_boot"):
                self.nomem.append(e.ts)
        start = ts - self.th.driver_fault_reboot_window_s
        for q in (self.kills, self.stalls):
            while q and q[0][0] < start:
                q.popleft()
        while self.nomem and self.nomem[0] < start:
            self.nomem.popleft()

    def thin(self) -> bool:
        """Usable memory at the boot's last sample was under the thin-budget line (budget_warn + OS reserve)."""
        th = self.th
        return self.usable is not None and self.usable <= th.budget_warn_bytes + th.os_reserve_bytes

    def roomy(self) -> bool:
        """The boot ended with usable memory to spare and nothing memory-related in its last minutes."""
        return self.usable is not None and not self.thin() and not self.kills and not self.stalls

    def words(self, said_nomem: bool = False) -> tuple[str, dict] | None:
        """What preceded the gap, or None when nothing did (a clean reboot as far as the samples tell);
        said_nomem: the reboot already names an NV_ERR_NO_MEMORY line as its cause."""
        if self.last_ts is None or not (self.kills or self.stalls or self.thin()):
            return None
        end = self.last_ts
        details: dict = {}
        parts = []
        first = None
        if self.kills:
            n = sum(c for _, c, _, _ in self.kills)
            coll = list(dict.fromkeys(x for *_, cs in self.kills for x in cs))
            names = list(dict.fromkeys(x for _, _, ns, _ in self.kills for x in ns))
            what = f"{n} processes" if n > 1 else "a process"
            if coll:
                what += " including " + ", ".join(coll[:3])
            elif names:
                what += " including " + ", ".join(names[:3]) if n > 1 else f" ({names[0]})"
            first = self.kills[0][0]
            parts.append(f"the OOM killer took {what}")
            details.update(oom_kills=n, oom_victims=names, collateral=coll, first_kill_ts=first)
        if self.stalls:
            ts, server = self.stalls[-1]
            parts.append(f"{server} stalled with requests running")
            first = ts if first is None else min(first, ts)
            details["engine_stall_ts"] = ts
        if self.nomem:
            details["driver_oom_lines"] = len(self.nomem)
        text = f"the host froze {_span(max(0.0, end - first))} after " + " and ".join(parts) if parts else ""
        if self.usable is not None and (self.thin() or parts):
            gib = f"{self.usable / GIB:.1f} GiB"
            text = f"{text}; usable memory {gib}" if text else f"it ended with usable memory {gib} (thin)"
            details["usable_bytes"] = self.usable
        if self.nomem and not said_nomem:
            text += f"; {len(self.nomem)} NV_ERR_NO_MEMORY line{'s' if len(self.nomem) > 1 else ''} before it"
        details["last_sample_ts"] = end
        return text, details


def named_reboot(e: Event, text: str, details: dict) -> Event:
    """The reboot event with what preceded the gap in its summary and `details.before_gap`."""
    summary = e.summary.replace(" (no throttle before it)", "")
    return replace(e, summary=f"{summary}; {text}", details={**e.details, "before_gap": details})
