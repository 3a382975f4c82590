"""G3's rules, in priority order: each rules on one sample's signals and the tracker's state, or passes.

A rule is `rule(s: G3Signals, now: G3Now, th) -> Ruling | None`: pure, no state, no events (those are
`G3Tracker.advance`'s). A ruling's summary is a template (`words` fills it when the finding is first read,
most never are): {avail} the pool, {stall} the stall rates, {tte} the seconds to exhaustion, {runway} the
runway sentence. The first rule in `RULES` that does not pass gives the finding; the last never passes. A
new rule: read what it needs from `G3Signals` (add a field there, computed in `g3.signals`) or, for a latch
or window, from `G3Now` (moved in `G3Tracker._now`), put its thresholds in `diagnose/thresholds.py` with why
they have their value, and insert it in `RULES` where its priority lies, and declare with
`@fires_when("...")` what must hold for it to rule (expressions over `s` and `now`, one true whenever it
rules): the quiet shortcut (`tracker.shortcut`) skips a rule only when all of its conditions fail, and a
rule that declares none always runs (tests/diagnose/test_rule_declarations.py checks every declaration
against every value of every field).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from spark_watchd.diagnose.collateral import ADVICE_COLLATERAL, ADVICE_LIMIT
from spark_watchd.diagnose.runway import ADVICE_RUNWAY, Runway
from spark_watchd.diagnose.tracker import Ruling, Shortcut, fires_when

if TYPE_CHECKING:
    from spark_watchd.diagnose.g3 import G3Signals

GIB = 1024**3

ADVICE_LADDER = (
    "Drop the page cache between runs: sync; echo 3 | sudo tee /proc/sys/vm/drop_caches",
    "Then shrink the job: smaller batch, sequence packing, gradient checkpointing.",
    "Then bf16 LoRA before QLoRA.",
)
# The flag that caps a server depends on how it runs (a vLLM under --kv-cache-memory-bytes is capped and still
# too big, an Ollama has no cap): G6's card names each tenant and its remedy (diagnose/advice.py), so G3's
# line points there instead of naming a flag that can contradict it.
ADVICE_TENANT = (
    "Stop or cap the other GPU tenants while training: the G6 card names each one and how to cap it.",
)
ADVICE_THIN = (
    "Little headroom left: fine for a capped server that is already loaded, risky before starting another job.",
)
ADVICE_GONE = (
    "The pool is about to run out with no reclaim left to warn: stop or cap the largest GPU job now "
    "(vLLM --gpu-memory-utilization, --kv-cache-memory-bytes) before the OOM killer picks sshd or the host freezes.",
)
ADVICE_STALL = (
    "The engine has stopped making progress with memory nearly gone: on GB10 the host froze seconds after "
    "this in every instrumented wedge. Cancel the long request or stop the engine now; then lower "
    "--gpu-memory-utilization or --max-num-batched-tokens before serving long prompts again.",
)
ADVICE_LOAD = (
    "A model load is filling the pool (page cache and anonymous memory climbing together, the weights "
    "counted twice): let it finish before starting anything else, and drop caches before the next load.",
)


class G3Now(NamedTuple):
    """G3's latches, windows and holds after advance() took this sample: what the rules read besides the signals."""

    stalls: bool  # PSI some over psi_some_warn_pct (latched to psi_some_leave_pct)
    swapping: bool  # swap-out over swapout_warn_pages_s (latched)
    thin: bool  # budget under budget_warn_bytes (latched)
    exhausted: bool  # lowest budget under budget_critical_bytes (latched)
    full_sustained: bool  # PSI full over psi_full_critical_pct for psi_full_sustain_s
    oom_hold: bool  # within oom_critical_hold_s of an OOM kill
    tte: float | None  # seconds until the budget is gone: a load transient, or (falling) the fall rate
    falling: bool  # tte comes from MemAvailable's fall rate, not a load transient
    # The warning conditions: the latches, or entered afresh when falling from a held critical.
    w_stalls: bool
    w_swapping: bool
    w_thin: bool
    runway: Runway | None  # the budget's runway at its 20-minute trend (diagnose/runway.py), None when blind
    runway_warn: bool  # a runway under runway_warn_s on a sustained fall (latched, see BudgetRunway.warn)
    gone: bool  # usable memory nearly gone in a sustained thin spell (diagnose/usable.py), whatever PSI says
    engine_stalled: (
        tuple  # the serving engines stalled now (diagnose/stall.Stall): requests running, no progress
    )
    collateral: tuple  # system services the held OOM kills took (diagnose/collateral.py)
    oom_roomy: bool  # the held kills came with usable memory to spare: not the pool running out


_BLIND = G3Now(
    False,
    False,
    False,
    False,
    False,
    False,
    None,
    False,
    False,
    False,
    False,
    None,
    False,
    False,
    (),
    (),
    False,
)


def words(template: str, s: G3Signals, now: G3Now) -> str:
    """A ruling's summary template filled from this sample's signals and state."""
    if "{" not in template:  # (unreadable: no MemAvailable to say)
        return template
    return template.format(
        avail=_avail(s),
        stall=_stall(s),
        tte=now.tte,
        runway=_runway(now),
        usable=_usable(s),
        stalled=_stalled(now),
        collateral=", ".join(now.collateral),
    )


def _avail(s: G3Signals) -> str:
    txt = f"{s.avail_b / GIB:.1f} GiB available (min {s.avail_min_b / GIB:.1f}), budget {s.budget / GIB:.1f} GiB"
    if s.cma >= GIB // 4:
        txt += f" ({s.cma / GIB:.1f} GiB CmaFree not counted)"
    return txt


def _usable(s: G3Signals) -> str:
    txt = f"usable {s.usable / GIB:.1f} GiB (min {s.usable_low / GIB:.1f})"
    if s.cma >= GIB // 4:
        txt += f" = MemAvailable {s.avail_b / GIB:.1f} GiB - CmaFree {s.cma / GIB:.1f} GiB"
    return txt


def _stalled(now: G3Now) -> str:
    return ", ".join(st.words() for st in now.engine_stalled)


def _stall(s: G3Signals) -> str:
    return f"PSI some {s.some:.1f}% / full {s.full:.1f}%, swap-out {s.swo:.0f} pages/s"


def _runway(now: G3Now) -> str:
    sentence = now.runway.sentence() if now.runway is not None else None
    if sentence is None:  # held while the fall eases (hysteresis, dwell)
        sentence = "the budget is still falling at its 20-minute trend"
    return f"{sentence[0].upper()}{sentence[1:]}"


# The common case's ruling (the last rule's), built once.
_OK = Ruling("ok", "Memory OK: {avail}, no reclaim stalls")


@fires_when("s.avail_b is None")
def unreadable(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """No MemAvailable: unknown."""
    if s.avail_b is None:
        return Ruling("unknown", "MemAvailable not readable: memory pressure cannot be judged")
    return None


@fires_when("now.oom_hold")
def oom_killed(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """The OOM killer ran within oom_critical_hold_s: critical (warning when the pool was roomy through it)."""
    if now.oom_hold and now.oom_roomy:
        return Ruling(
            "warning",
            "The OOM killer ran with the pool roomy ({usable}): most likely a cgroup's (container's) own "
            "memory limit, not the pool running out",
            ADVICE_LIMIT,
        )
    if now.oom_hold and now.collateral:
        return Ruling(
            "critical",
            "The OOM killer ran and took system services as collateral ({collateral}): {avail}",
            ADVICE_COLLATERAL + ADVICE_LADDER + ADVICE_TENANT,
        )
    if now.oom_hold:
        return Ruling("critical", "The OOM killer ran: {avail}", ADVICE_LADDER + ADVICE_TENANT)
    return None


@fires_when("now.exhausted")
def exhausted_stalling(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """The lowest budget under budget_critical_bytes while reclaim stalls or swaps: critical."""
    if now.exhausted and (now.stalls or now.swapping):
        return Ruling(
            "critical",
            "Pool close to exhaustion while reclaim stalls: {avail}; {stall}",
            ADVICE_LADDER + ADVICE_TENANT,
        )
    return None


@fires_when("now.full_sustained")
def full_stalls(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """PSI full over psi_full_critical_pct for psi_full_sustain_s: critical."""
    if now.full_sustained:
        return Ruling(
            "critical",
            "Sustained full memory stalls: {stall}; {avail}",
            ADVICE_LADDER + ADVICE_TENANT,
        )
    return None


@fires_when("now.engine_stalled")
def engine_stall_thin(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """A serving engine stalled (requests running, no progress) while the budget is thin: critical."""
    if now.engine_stalled and (now.w_thin or now.gone):
        return Ruling(
            "critical",
            "Serving engine stalled with requests running while memory is thin, the last sign before a wedge: "
            "{stalled}; {usable}",
            ADVICE_STALL + ADVICE_TENANT,
        )
    return None


@fires_when("now.gone")
def usable_gone(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """Usable memory (MemAvailable - CmaFree) nearly gone over consecutive samples, whatever PSI says: critical."""
    if now.gone:
        return Ruling(
            "critical",
            "Usable memory nearly gone, whatever PSI says: {usable}; {stall}",
            ADVICE_GONE + ADVICE_TENANT,
        )
    return None


@fires_when("now.w_stalls", "now.w_swapping")
def reclaim(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """Reclaim stalls or swap-out past their warning levels: warning."""
    if now.w_stalls or now.w_swapping:
        return Ruling("warning", "Reclaim has begun: {stall}; {avail}", ADVICE_LADDER)
    return None


@fires_when("now.tte is not None")
def load_transient(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """A model load (cache and anon climbing together) heading for the limit within transient_horizon_s: warning."""
    if now.tte is None or now.falling:
        return None
    return Ruling(
        "warning",
        "Model-load transient heading for the limit in {tte:.0f} s: {avail}",
        ADVICE_LOAD + ADVICE_LADDER[:1],
    )


@fires_when("now.tte is not None")
def falling_fast(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """MemAvailable falling fast enough to empty the budget before the next sample or two: warning."""
    if now.tte is None or not now.falling:
        return None
    return Ruling(
        "warning",
        "MemAvailable falling fast, budget gone in ~{tte:.0f} s at this rate: {avail}",
        ADVICE_LOAD + ADVICE_LADDER[:1],
    )


@fires_when("now.runway_warn")
def runway_short(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """The budget on a sustained fall (never a settling load) runs out within runway_warn_s: warning."""
    if not now.runway_warn:
        return None
    return Ruling("warning", "Memory runway short: {runway}: {avail}", ADVICE_RUNWAY)


@fires_when("now.w_thin")
def thin_budget(s: G3Signals, now: G3Now, th) -> Ruling | None:
    """The budget under budget_warn_bytes without stalls: warning."""
    if now.w_thin:
        return Ruling(
            "warning",
            "Memory budget is thin, no reclaim stalls: {avail}",
            ADVICE_THIN + ADVICE_LADDER[:1],
        )
    return None


def ok(s: G3Signals, now: G3Now, th) -> Ruling:
    """Nothing above: ok."""
    return _OK


RULES = (
    unreadable,
    oom_killed,
    exhausted_stalling,
    full_stalls,
    engine_stall_thin,
    usable_gone,
    reclaim,
    load_transient,
    falling_fast,
    runway_short,
    thin_budget,
    ok,
)

# The first of RULES that rules: a quiet sample (most are) walks only what the declarations cannot skip.
ruling = Shortcut(__name__).judge
