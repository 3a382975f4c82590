"""The typed state each classifier publishes on its Finding (`Finding.state`), for code to read.

The exporter, the page's charts, the API and the CLI format these; they never re-derive a throttle, a
rate or a ratio from a sample or look for key names in the free-form evidence (which is for people).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class StepRatio(NamedTuple):
    """The training job whose recent step time is furthest above its own baseline."""

    ratio: float  # recent mean / baseline
    job: str
    recent_s: float  # mean step seconds over step_recent_s
    baseline_s: float


class G4State(NamedTuple):
    """G4 at one sample: is the GPU in a thermal throttle, why, and what it costs."""

    throttling: bool  # a throttle episode is on (started on the signature, ends after throttle_end_quiet_s)
    # Why heat is signalled at this sample: "reasons" (NVML thermal reason bits), "counters" (thermal
    # counters moving), "board" (PROCHOT or Tj max), "temperature" (no mask nor counters: temperature at
    # the slowdown with clocks sagging), "shutdown" (at the shutdown threshold); None when nothing is.
    reason: str | None
    counter_share: float | None  # share of the last interval the thermal counters ran (0..1)
    step: StepRatio | None  # the worst job's step-time damage; None without a baseline
    throttled_seconds_total: float  # cumulative, restored across restarts
    duration_s: float | None  # of the current episode


class G3State(NamedTuple):
    """G3 at one sample: the budget and the rates it judged (None where not measurable)."""

    budget_bytes: int | None  # MemAvailable minus the OS reserve; negative once into the reserve
    swapout_per_s: float | None  # pages/s over the last interval (no rate across a gap or reboot)
    majfault_per_s: float | None
    psi_some_pct: float | None
    psi_full_pct: float | None
    budget_exhausted_in_s: float | None  # a load transient or fast fall heading for the limit
    runway_known: bool = False  # the runway window holds runway_min_span_s of history (diagnose/runway.py)
    runway_s: float | None = None  # seconds until the budget runs out at its sustained trend; None: no fall


class G6State(NamedTuple):
    """G6 at one sample: how many heavy workloads share the pool and how many are uncapped."""

    heavy: int
    uncapped: int
    large: int
    footprint_bytes: int
    majfault_per_s: float | None


def state_dict(state: Any) -> dict[str, Any] | None:
    """A published state as JSON (`/api/v1/status` findings' `state`): nested records become objects."""
    if state is None:
        return None
    return {k: v._asdict() if hasattr(v, "_asdict") else v for k, v in state._asdict().items()}
