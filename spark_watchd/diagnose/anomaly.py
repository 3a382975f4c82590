"""Non-thermal GPU anomalies reported under G4 but never called a throttle: power-delivery fault, hung engine."""

from __future__ import annotations

from collections import deque

from spark_watchd.diagnose import features as feat

ADVICE_POWER = (
    "Clocks pinned low at cool temperature with no throttle reason: a power-delivery fault, not heat.",
    "Do a full AC power cycle: shut down, unplug the power brick for 60 s, plug back in.",
)
ADVICE_RECURRING = (
    "A low-power stall that keeps coming back and clears on its own is not the persistent power-delivery "
    "fault an AC power cycle cures: the board or its firmware drops the GPU to its floor for minutes at a time.",
    "Record a few episodes (spark-watchd thermal-log, or keep the daemon's trace) and report them to the "
    "vendor with the BIOS, SOC firmware and driver `spark-watchd status` shows; check for a firmware update "
    "(fwupdmgr get-updates). If one stall stops clearing, it is the persistent fault: power-cycle then.",
)
ADVICE_LIMIT = (
    "The board firmware's power limit (pl1/syspl1 on the spbm chip), not heat, is holding the clocks; "
    "NVML shows no reason for it.",
    "Check the effective limits: the spbm chip's power11_cap..power14_cap (pl1, pl2, syspl1, syspl2); "
    "an OS override written there stays until 0 is written back (the EC default).",
)
ADVICE_HUNG = (
    "The GPU reports full utilisation at idle power while cooling down: the engine looks hung.",
    "Check the job (py-spy dump / NCCL timeouts); kill and restart it, reboot if the GPU stays stuck.",
)


class AnomalyWatch:
    """Tracks how long a power-delivery or hung-engine pattern has persisted (time from sample.ts)."""

    def __init__(self, th):
        self.th = th
        self.temps = deque()  # (ts, temp) over the window, for "temperature falling"
        self.pd_since = None
        self.hung_since = None
        self.stalls: deque[tuple[float, float]] = deque(maxlen=16)  # (start, end) of stalls that healed
        self.pd_last = 0.0  # the last sample in the stall on now

    def reset(self) -> None:
        """Forget the window (reboot, clock step)."""
        self.temps.clear()
        self.stalls.clear()
        self.pd_since = self.hung_since = None

    def recurring(self, ts: float) -> tuple[int, float, float] | None:
        """(stalls in the run, mean spacing start to start s, mean length of the healed ones s) when the
        power-delivery pattern on now is at least the stall_recur_min + 1-th stall within stall_recur_window_s
        whose predecessors each healed under load within stall_recovers_s, and it is not past that length
        itself; None otherwise (the persistent fault, or a first stall)."""
        th, start = self.th, self.pd_since
        if start is None or ts - start > th.stall_recovers_s:
            return None
        healed = [
            (a, b)
            for a, b in self.stalls
            if ts - b <= th.stall_recur_window_s and b - a <= th.stall_recovers_s
        ]
        if len(healed) < th.stall_recur_min:
            return None
        starts = [a for a, _ in healed] + [start]
        spacing = (starts[-1] - starts[0]) / (len(starts) - 1)
        return len(starts), spacing, sum(b - a for a, b in healed) / len(healed)

    def update(self, f: feat.Features, loaded: bool) -> str | None:
        """`power_delivery` or `hung_engine` once the pattern persisted anomaly_min_s, else None."""
        th = self.th
        ts = f.ts
        temp, power, clk, util = f.temp_c, f.power_w, f.sm_clock_mhz, f.util_pct
        temps = self.temps
        if temp is not None:
            temps.append((ts, temp))
            while temps and ts - temps[0][0] > th.window_s:
                temps.popleft()
        pinned = clk is not None and clk <= th.pinned_clock_max_mhz
        if (
            loaded
            and pinned
            and power is not None
            and power <= th.pinned_power_max_w
            and feat.well_under_slowdown(temp, f.slowdown_c, th)
            and not f.thermal_bits
        ):
            if self.pd_since is None:
                self.pd_since = ts - (f.dt or 0)
            self.pd_last = ts
        else:
            if (
                self.pd_since is not None
                and ts - self.pd_since >= th.anomaly_min_s
                and loaded
                and clk is not None
                and not pinned
            ):  # it healed under load: the clocks came back with the work still there
                self.stalls.append((self.pd_since, self.pd_last))
            self.pd_since = None
        if (
            not pinned
            and util is not None
            and util >= th.hung_util_pct
            and power is not None
            and power <= th.hung_power_max_w
            and temp is not None
            and max(t for _, t in temps) - temp >= th.hung_temp_drop_c  # temps holds temp: not empty
        ):
            if self.hung_since is None:
                self.hung_since = ts - (f.dt or 0)
        else:
            self.hung_since = None
        if self.pd_since is not None and ts - self.pd_since >= th.anomaly_min_s:
            return "power_delivery"
        if self.hung_since is not None and ts - self.hung_since >= th.anomaly_min_s:
            return "hung_engine"
        return None
