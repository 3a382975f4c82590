"""G6's rules, in priority order: each rules on one sample's signals and the tracker's state, or passes.

A rule is `rule(s: G6Signals, now: G6Now, th) -> Ruling | None`: pure, no state, no events (those are
`G6Tracker.advance`'s). The first rule in `RULES` that does not pass gives the finding; the last never
passes. A ruling's summary is its words function (`words(s, now, th) -> str`, or a plain string): the
finding writes it only when read (most never are). A new rule: read what it needs from `G6Signals` (add a
field there, computed in `g6.signals`) or, for what depends on the workloads or a latch, from `G6Now` (built
in `G6Tracker._now`), put its thresholds in `diagnose/thresholds.py` with why they have their value, and
insert it in `RULES` where its priority lies, and declare with `@fires_when("...")` what must hold for it to
rule (expressions over `s` and `now`, one true whenever it rules): the quiet shortcut (`tracker.shortcut`)
skips a rule only when all of its conditions fail, and a rule that declares none always runs
(tests/diagnose/test_rule_declarations.py checks every declaration against every value of every field).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from spark_watchd.diagnose.advice import g6_advice
from spark_watchd.diagnose.sizing import SOURCE, size_words
from spark_watchd.diagnose.tracker import Ruling, Shortcut, fires_when
from spark_watchd.sample.groups import Workload
from spark_watchd.sample.workloads import SERVER_KINDS

if TYPE_CHECKING:
    from spark_watchd.diagnose.g6 import G6Signals

GIB = 1024**3


class G6Now(NamedTuple):
    """G6's state after advance() took this sample: what the rules read besides the signals."""

    heavy: tuple[Workload, ...]  # GPU-resident workloads over heavy_workload_bytes (to heavy_leave_bytes)
    stalls: bool  # PSI some latched over psi_some_warn_pct
    storm: bool  # major faults latched over majfault_storm_per_s
    uncapped: int  # heavy workloads holding more than a capped share
    large: int  # heavy trainers over large_trainer_bytes
    footprint_bytes: int  # of the heavy workloads together
    near_capacity: bool  # they hold near_capacity_ratio of the pool
    evicted: str | None  # the last eviction's words while eviction_hold_s lasts
    inside: tuple = ()  # what sharing servers' own counters show (diagnose/serving.py contention evidence)
    # Each workload's under-count where its true hold was measured (diagnose/sizing.py); `heavy` is sized by it.
    held: Mapping[tuple, int] = MappingProxyType({})


# Named words functions, not lambdas, so a held finding pickles.
def _evicted_words(s: G6Signals, now: G6Now, th) -> str:
    return f"Eviction: {now.evicted}"


@fires_when("now.evicted is not None")
def evicted(s: G6Signals, now: G6Now, th) -> Ruling | None:
    """An eviction within eviction_hold_s: critical."""
    if now.evicted is not None:
        return Ruling("critical", _evicted_words, g6_advice(now.heavy, evicting=True, held=now.held))
    return None


def _storm_words(s: G6Signals, now: G6Now, th) -> str:
    return (
        f"Major-fault storm ({s.majfault_per_s:.0f}/s) with memory stalls (PSI {s.some:.0f}%) while "
        f"{_names(now.heavy, th, s.share_max, now.held)} share the pool"
    )


@fires_when("len(now.heavy) >= 2")
def fault_storm(s: G6Signals, now: G6Now, th) -> Ruling | None:
    """Two heavy workloads sharing during a major-fault storm with memory stalls: critical."""
    if len(now.heavy) >= 2 and now.storm and now.stalls:
        return Ruling("critical", _storm_words, g6_advice(now.heavy, evicting=True, held=now.held))
    return None


def _uncapped_words(s: G6Signals, now: G6Now, th) -> str:
    why = ""
    if not (now.uncapped or now.large):
        by = f", by the {SOURCE} where measured" if now.held else ""
        why = (
            f", together near capacity ({now.footprint_bytes / GIB:.0f} of {s.mem_total_b / GIB:.0f} GiB{by})"
        )
    return (
        f"{len(now.heavy)} heavy GPU workloads share the pool: {_names(now.heavy, th, s.share_max, now.held)}{why}"
        f"{_inside(now.inside)}"
    )


@fires_when("len(now.heavy) >= 2")
def uncapped_sharing(s: G6Signals, now: G6Now, th) -> Ruling | None:
    """Two heavy workloads sharing with one uncapped or large, or together near capacity: warning."""
    if len(now.heavy) < 2 or not (now.uncapped or now.large or now.near_capacity):
        return None
    return Ruling("warning", _uncapped_words, g6_advice(now.heavy, evicting=False, held=now.held))


def _capped_words(s: G6Signals, now: G6Now, th) -> str:
    return f"{len(now.heavy)} GPU workloads share the pool, all capped: {_names(now.heavy, th, s.share_max, now.held)}"


_CAPPED = Ruling("ok", _capped_words)


@fires_when("len(now.heavy) >= 2")
def capped_sharing(s: G6Signals, now: G6Now, th) -> Ruling | None:
    """Heavy workloads sharing, all capped: ok."""
    return _CAPPED if len(now.heavy) >= 2 else None


_ALONE = Ruling("ok", "No contention: at most one heavy GPU workload")


def alone(s: G6Signals, now: G6Now, th) -> Ruling:
    """At most one heavy workload: ok."""
    return _ALONE


RULES = (evicted, fault_storm, uncapped_sharing, capped_sharing, alone)


# The first of RULES that rules: a quiet sample (most are) walks only what the declarations cannot skip.
ruling = Shortcut(__name__).judge


def _inside(inside: tuple) -> str:
    """What the servers' own counters say about the sharing, for the summary."""
    parts = []
    for e in inside[:2]:
        if e["signal"] == "preemption_storm":
            parts.append(
                f"{e['server']} preempted {e['preemptions']:.0f} requests in {e['over_s'] / 60:.0f} min"
            )
        else:
            parts.append(
                f"{e['server']} KV use fell to {e['kv_usage_share']:.0%} from {e['kv_usage_before_share']:.0%} while busy"
            )
    return "; " + ", ".join(parts) if parts else ""


def _over_share(w: Workload, share_max) -> bool:
    """Uncapped for G6: no bounding flag, a fraction above the line, or a byte budget holding over the share."""
    if w.capped is False:
        return True
    # A KV budget in bytes bounds the cache, not the weights beside it: judge what it really holds.
    return bool(
        w.capped and w.caps.get("kv_cache_memory_bytes") and share_max and w.footprint_bytes > share_max
    )


def _names(heavy, th, share_max, held=None) -> str:
    """Who shares the pool, the uncapped or large ones first: 'trainer (30 GiB, large) beside vllm (capped 0.5)'."""
    bad, good = [], []
    large = th.large_trainer_bytes
    for w in heavy:
        foot = w.footprint_bytes
        if w.kind in SERVER_KINDS:
            kv = w.caps.get("kv_cache_memory_bytes") if w.capped else None
            if kv and _over_share(w, share_max):
                bad.append(f"{w.kind} ({w.cap}, holding {size_words(w, held)})")
            elif w.capped:
                good.append(f"{w.kind} (capped {w.cap_value:g})" if not kv else f"{w.kind} (capped {w.cap})")
            elif w.cap_value is not None:
                bad.append(f"{w.kind} (cap {w.cap_value:g}, above {th.capped_utilization_max:g})")
            else:
                bad.append(f"{w.kind} (uncapped)")
        elif foot >= large:
            bad.append(f"{w.kind} ({size_words(w, held)}, large)")
        else:
            good.append(f"{w.kind} ({size_words(w, held)})")
    if bad and good:
        return f"{' and '.join(bad)} beside {' and '.join(good)}"
    return " and ".join(bad or good)
