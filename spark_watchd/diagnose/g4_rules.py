"""G4's rules, in priority order: each rules on one sample's signals and the tracker's state, or passes.

A rule is `rule(s: G4Signals, now: G4Now, th) -> Ruling | None`: pure, no state, no events (those are
`G4Tracker.advance`'s). The first rule in `RULES` that does not pass gives the finding; the last never
passes. A ruling's summary is its words function (`words(s, now, th) -> str`, or a plain string): the
finding writes it only when read. A new rule: read what it needs from `G4Signals` (add a field there,
computed in `g4.signals`), put its thresholds in `diagnose/thresholds.py` with why they have their value,
and insert it in `RULES` where its priority lies, and declare with `@fires_when("...")` what must hold for
it to rule (expressions over `s` and `now`, one true whenever it rules): the quiet shortcut
(`tracker.shortcut`) skips a rule only when all of its conditions fail, and a rule that declares none always
runs (tests/diagnose/test_rule_declarations.py checks every declaration against every value of every field).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from spark_watchd.diagnose.anomaly import ADVICE_HUNG, ADVICE_LIMIT, ADVICE_POWER, ADVICE_RECURRING
from spark_watchd.diagnose.board import ADVICE_PROCHOT_COOL
from spark_watchd.diagnose.clockcap import ADVICE_LOST, CapStatus
from spark_watchd.diagnose.tracker import Ruling, Shortcut, fires_when
from spark_watchd.diagnose.verdicts import StepRatio

if TYPE_CHECKING:
    from spark_watchd.diagnose.g4 import G4Signals

# Each remedy appears once per finding: a critical adds why it matters to the throttle advice, never a
# second wording of the clock cap.
CAP_CLOCKS = "sudo nvidia-smi -lgc 0,2100"
ADVICE_THROTTLE = (
    "Expect the ~100 W sustained cap on GB10: flat power under the 240 W rating is normal, heat is not.",
    "Improve cooling: clear the vents, give the unit space, lower the room temperature.",
    f"Or lower the clock ceiling so it stops hitting the slowdown threshold: {CAP_CLOCKS}",
)
ADVICE_DAMAGE = ("Training is measurably slower: fix the heat (below) before long runs.",)
ADVICE_SERVING = ("Its users get measurably slower answers while it throttles: fix the heat (below) first.",)
ADVICE_REBOOT = (
    "The unit rebooted after a thermal throttle: check airflow before restarting the job, "
    f"and lower the clock ceiling for long runs: {CAP_CLOCKS}",
)


class G4Now(NamedTuple):
    """G4's state after advance() took this sample: what the rules read besides the signals."""

    throttling: bool  # a throttle episode is on
    hold: bool  # within reboot_critical_hold_s of a reboot that followed a throttle
    damaged: bool  # the episode slows training (or sits at the shutdown threshold)
    step: StepRatio | None
    anomaly: str | None  # "power_delivery" or "hung_engine" once persisted anomaly_min_s
    duration_s: float | None  # of the episode
    serving_cut: tuple = ()  # per server whose decode rate the episode cut (diagnose/serving.py evidence)
    cap: CapStatus | None = None  # the SM clock cap watch (diagnose/clockcap.py): seen, expected, lost, cost
    stall: tuple | None = None  # a recurring power_delivery stall: (stalls, spacing s, healed length s)


def _n(v, fmt: str = "") -> str:
    """Format a reading that may be missing."""
    return "?" if v is None else format(v, fmt)


# A G4 ruling's summary is a words function `words(s, now, th) -> str` (or a plain string): the tracker's
# finding calls it when its text is first read, from this sample's records (most findings never are). So
# a rule only decides: it returns one of the rulings below (built once) or, where its advice depends on the
# sample, a new one. Named functions, not lambdas, so a held finding pickles.
_REBOOTED = Ruling("critical", "Rebooted after a thermal throttle", ADVICE_REBOOT)
_BLIND = Ruling("unknown", "No GPU readings: thermal state cannot be judged")


@fires_when("not s.has_gpu")
def blind_after_reboot(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """No GPU readings within the hold after a reboot that followed a throttle: still critical."""
    return _REBOOTED if not s.has_gpu and now.hold else None


@fires_when("not s.has_gpu")
def blind(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """No GPU readings: unknown."""
    return _BLIND if not s.has_gpu else None


def _at_shutdown_words(s: G4Signals, now: G4Now, th) -> str:
    return f"GPU at its shutdown threshold: {s.temp_c:.1f} C (shutdown {s.shutdown_c:.0f} C)"


_AT_SHUTDOWN = Ruling("critical", _at_shutdown_words, ADVICE_THROTTLE)


@fires_when("now.throttling")
def at_shutdown(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Throttling at the shutdown threshold: critical."""
    return _AT_SHUTDOWN if now.throttling and s.at_shutdown else None


def _slowing_training_words(s: G4Signals, now: G4Now, th) -> str:
    w = now.step
    return (
        f"Thermal throttle is slowing training: step time x{w.ratio:.2f} of its baseline "
        f"({w.job}), {_n(s.temp_c, '.1f')} C, clocks {_n(s.sm_clock_mhz)} MHz"
    )


_SLOWING_TRAINING = Ruling("critical", _slowing_training_words, ADVICE_DAMAGE + ADVICE_THROTTLE)


@fires_when("now.throttling")
def slowing_training(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Throttling while a job's step time is step_slowdown_ratio over its baseline (until step_recover_ratio): critical."""
    return _SLOWING_TRAINING if now.throttling and now.damaged else None


def _slowing_serving_words(s: G4Signals, now: G4Now, th) -> str:
    c = max(now.serving_cut, key=lambda d: d["decode_ratio"])
    return (
        f"Thermal throttle is slowing inference: {c['server']} generates {c['tokens_per_s']:.0f} tokens/s against "
        f"{c['baseline_tokens_per_s']:.0f} at the same load ({c['running_requests']:g} requests, "
        f"x{c['decode_ratio']:.2f}), {_n(s.temp_c, '.1f')} C, clocks {_n(s.sm_clock_mhz)} MHz"
    )


_SLOWING_SERVING = Ruling("critical", _slowing_serving_words, ADVICE_SERVING + ADVICE_THROTTLE)


@fires_when("now.throttling")
def slowing_serving(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Throttling while a server's decode rate per request is well under its own baseline at the same load: critical."""
    return _SLOWING_SERVING if now.throttling and now.serving_cut else None


@fires_when("now.throttling")
def throttle_after_reboot(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Throttling again within the hold after a reboot that followed a throttle: critical."""
    return _REBOOTED if now.throttling and now.hold else None


def _throttle_words(s: G4Signals, now: G4Now, th) -> str:
    b = s.board
    why = "active" if s.thermal_bits else "counters moving"
    if not s.thermal_bits and not s.moving and b is not None and b.thermal:
        why = f"mask clear but {b.why_thermal()}"
    return (
        f"Thermal throttle: {_n(s.temp_c, '.1f')} C at the {s.slowdown_c:.0f} C slowdown, thermal reason "
        f"{why}, clocks {_n(s.sm_clock_mhz)} of {s.app_clock_mhz} MHz, {_n(s.power_w, '.0f')} W"
    )


_THROTTLE = Ruling("warning", _throttle_words, ADVICE_THROTTLE)


@fires_when("now.throttling")
def throttle(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Throttling, training not (measurably) slower: warning."""
    return _THROTTLE if now.throttling else None


@fires_when("now.hold")
def after_reboot(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Within the hold after a reboot that followed a throttle: critical."""
    return _REBOOTED if now.hold else None


def _cap_words(s: G4Signals, now: G4Now, th) -> str:
    return now.cap.sentence()


@fires_when("now.cap is not None and now.cap.lost")
def clock_cap_lost(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """The owner's SM clock cap is gone this boot (the loaded clock runs above it): warning, never a throttle."""
    c = now.cap
    if c is None or not c.lost:
        return None
    cap = c.cap_mhz or c.expected_mhz
    return Ruling("warning", _cap_words, tuple(a.format(cap=cap) for a in ADVICE_LOST), "clock_cap_lost")


def _power_delivery_words(s: G4Signals, now: G4Now, th) -> str:
    b = s.board
    return (
        f"Not thermal: clocks pinned at {s.sm_clock_mhz} MHz at {s.temp_c:.0f} C and {s.power_w:.0f} W with no "
        "clock-event reason bit (power-delivery fault"
        + (
            f", confirmed by board DC input {b.dc_input_w:.0f} W)"
            if b is not None and b.dc_input_low
            else ")"
        )
    )


_POWER_DELIVERY = Ruling("ok", _power_delivery_words, ADVICE_POWER, "power_delivery")


def _recurring_stall_words(s: G4Signals, now: G4Now, th) -> str:
    n, spacing, length = now.stall
    return (
        f"Not thermal: clocks pinned at {s.sm_clock_mhz} MHz at {s.temp_c:.0f} C and {s.power_w:.0f} W with no "
        f"clock-event reason bit, stall {n} in a row about every {spacing / 60:.0f} min, the earlier ones "
        f"clearing on their own after about {length / 60:.0f} min (a recurring low-power stall)"
    )


_RECURRING_STALL = Ruling("ok", _recurring_stall_words, ADVICE_RECURRING, "recurring_stall")


@fires_when('now.anomaly == "power_delivery"')
def recurring_stall(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """The power-delivery pattern again after stall_recur_min stalls that healed on their own: ok, recurring."""
    return _RECURRING_STALL if now.anomaly == "power_delivery" and now.stall is not None else None


@fires_when('now.anomaly == "power_delivery"')
def power_delivery(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Clocks pinned low, cool, no reason bit, for anomaly_min_s: ok, a power-delivery anomaly."""
    return _POWER_DELIVERY if now.anomaly == "power_delivery" else None


def _hung_engine_words(s: G4Signals, now: G4Now, th) -> str:
    return f"Not thermal: {s.util_pct:.0f}% utilisation at {s.power_w:.0f} W with temperature falling (hung engine?)"


_HUNG_ENGINE = Ruling("ok", _hung_engine_words, ADVICE_HUNG, "hung_engine")


@fires_when('now.anomaly == "hung_engine"')
def hung_engine(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Full utilisation at idle power while cooling, for anomaly_min_s: ok, a hung-engine anomaly."""
    return _HUNG_ENGINE if now.anomaly == "hung_engine" else None


def _prochot_cool_words(s: G4Signals, now: G4Now, th) -> str:
    return (
        f"Not thermal: board PROCHOT asserted at {_n(s.temp_c, '.0f')} C, well under the {s.slowdown_c:.0f} C "
        "slowdown: a board power or current limit, not a thermal throttle"
    )


_PROCHOT_COOL = Ruling("ok", _prochot_cool_words, ADVICE_PROCHOT_COOL, "power_limit")


@fires_when("s.board is not None and s.board.prochot_cool")
def prochot_cool(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Board PROCHOT asserted well under the slowdown line while loaded: ok, a power_limit anomaly."""
    b = s.board
    return _PROCHOT_COOL if b is not None and b.prochot_cool and s.loaded else None


def _power_limit_slowdown_words(s: G4Signals, now: G4Now, th) -> str:
    b, w = s.board, now.step
    return (
        f"Not thermal: step time x{w.ratio:.2f} of its baseline ({w.job}) while the firmware "
        f"{b.limit} power limit holds the board ({b.limit_phrase()}), with no NVML reason: "
        "the slowdown is that limit, not heat"
    )


_POWER_LIMIT_SLOWDOWN = Ruling("ok", _power_limit_slowdown_words, ADVICE_LIMIT, "power_limit")


@fires_when("s.board is not None and s.board.limit is not None")
def power_limit_slowdown(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """Step time over step_slowdown_ratio while a firmware power limit holds the board: ok, a power_limit anomaly."""
    b, w = s.board, now.step
    if b is None or b.limit is None or w is None or w.ratio < th.step_slowdown_ratio:
        return None
    return _POWER_LIMIT_SLOWDOWN


def _power_limit_words(s: G4Signals, now: G4Now, th) -> str:
    return (
        f"No thermal throttle: {_n(s.temp_c, '.0f')} C at the platform power limit ({s.board.limit_phrase()}): "
        "the platform cap, not heat"
    )


_POWER_LIMIT = Ruling("ok", _power_limit_words)


@fires_when("s.board is not None and s.board.limit is not None")
def power_limit(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """A firmware power limit holds the board: ok, the platform cap."""
    b = s.board
    return _POWER_LIMIT if b is not None and b.limit is not None else None


def _cool_words(s: G4Signals, now: G4Now, th) -> str:
    summary = f"No thermal throttle: {s.temp_c:.0f} C"
    if s.power_w is not None:
        summary += f", {s.power_w:.0f} W"
    if s.near:
        summary += f" (near the {s.slowdown_c:.0f} C slowdown, no thermal reason yet)"
    return summary


def _clock_capped_words(s: G4Signals, now: G4Now, th) -> str:
    return f"{_cool_words(s, now, th)}; {now.cap.sentence()}"


_CLOCK_CAPPED = Ruling("ok", _clock_capped_words)


@fires_when("now.cap is not None and now.cap.cap_mhz is not None")
def clock_capped(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """The SM clock held at a ceiling under load while cool, no reason bit: ok, a cap with its value (and cost)."""
    c = now.cap
    return _CLOCK_CAPPED if c is not None and c.cap_mhz is not None and s.temp_c is not None else None


_NO_TEMPERATURE = Ruling("ok", "No throttle signature (temperature not reported)")


@fires_when("s.temp_c is None")
def no_temperature(s: G4Signals, now: G4Now, th) -> Ruling | None:
    """No temperature reported: ok, said so."""
    return _NO_TEMPERATURE if s.temp_c is None else None


_COOL = Ruling("ok", _cool_words)


def cool(s: G4Signals, now: G4Now, th) -> Ruling:
    """Nothing above: ok (noting a temperature near the slowdown)."""
    return _COOL


RULES = (
    blind_after_reboot,
    blind,
    at_shutdown,
    slowing_training,
    slowing_serving,
    throttle_after_reboot,
    throttle,
    after_reboot,
    clock_cap_lost,
    recurring_stall,
    power_delivery,
    hung_engine,
    prochot_cool,
    power_limit_slowdown,
    power_limit,
    clock_capped,
    no_temperature,
    cool,
)


# The first of RULES that rules: a quiet sample (most are) walks only what the declarations cannot skip.
ruling = Shortcut(__name__).judge
