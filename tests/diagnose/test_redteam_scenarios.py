"""Red-team scenarios (tests/fixtures/traces/redteam) replayed through the Diagnoser.

The scenarios were written from trace-v1 "What the severities mean" without reading the engine;
each one is scored with the rules of bench/score_replay.py: agreement >= 97 % per scenario,
every episode detected, no false critical, every expected event found within its tolerance and
none invented (eviction, reboot and, stricter than the scorer, oom_kill). A scenario the engine
fails today is marked xfail(strict=True) with the reason, so the failure stays on record and the
mark must go once the engine is fixed.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.sample.trace import read_trace

RANK = {"ok": 0, "unknown": 0, "warning": 1, "critical": 2}
GOTCHAS = ("G3", "G4", "G6")
DIR = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "redteam"
TRACES = sorted(p for p in DIR.glob("*.jsonl") if not p.name.endswith(".truth.jsonl"))

# scenario stem -> why the engine fails it today (see the red-team report)
XFAIL: dict[str, str] = {}


def _allowed(spec: str) -> set[str]:
    return {"ok", "warning", "critical", "unknown"} if spec == "any" else set(spec.split("|"))


def _score(trace: Path) -> dict:
    stem = trace.name[: -len(".jsonl")]
    truth = [json.loads(x) for x in (DIR / f"{stem}.truth.jsonl").read_text().splitlines() if x.strip()]
    expected = json.loads((DIR / f"{stem}.events.json").read_text())
    out = [d.to_replay_dict() for d in Diagnoser().run(read_trace(trace))]
    assert len(out) == len(truth), "one judgement per sample"
    r = {
        "agree": 0,
        "total": 0,
        "episodes": 0,
        "detected": 0,
        "false_critical": [],
        "missed": [],
        "events_missed": [],
        "extra": [],
    }
    for g in GOTCHAS:
        start = hit = None
        for i, (t, o) in enumerate(zip(truth, out, strict=True)):
            a, v = _allowed(t[g]), o["findings"][g]["severity"]
            r["total"] += 1
            r["agree"] += v in a
            if v == "critical" and "critical" not in a:
                r["false_critical"].append((g, i))
            must = "ok" not in a and t[g] != "any"
            if must and start is None:
                start, hit = i, None
            if start is not None and must and hit is None and RANK.get(v, 0) >= 1:
                hit = i
            if start is not None and (not must or i == len(truth) - 1):
                r["episodes"] += 1
                if hit is None:
                    r["missed"].append((g, start, i))
                else:
                    r["detected"] += 1
                start = None
    got = [(float(o["ts"]), e) for o in out for e in o["events"]]
    used: set[int] = set()
    for e in expected:
        for k, (ts, ge) in enumerate(got):
            if k in used or ge.get("kind") != e["kind"] or abs(ts - e["ts"]) > e["tol_s"] + 1e-6:
                continue
            if e["kind"] == "reboot" and bool(ge.get("after_throttle")) != e["after_throttle"]:
                continue
            used.add(k)
            break
        else:
            r["events_missed"].append(e)
    kinds = {e["kind"] for e in expected}
    for k, (ts, ge) in enumerate(got):
        if k in used or ge.get("kind") not in ("eviction", "reboot", "oom_kill"):
            continue
        if not (ge["kind"] in kinds and any(abs(ts - e["ts"]) <= 600 for e in expected)):
            r["extra"].append((ts, ge.get("kind")))
    return r


def _params():
    for p in TRACES:
        stem = p.name[: -len(".jsonl")]
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[stem])] if stem in XFAIL else []
        yield pytest.param(p, id=stem, marks=marks)


@pytest.mark.parametrize("trace", list(_params()))
def test_redteam_scenario_meets_the_bar(trace):
    r = _score(trace)
    assert r["false_critical"] == [], f"false critical (gotcha, sample): {r['false_critical'][:10]}"
    assert r["missed"] == [], f"missed episodes (gotcha, first, last sample): {r['missed']}"
    assert r["events_missed"] == [], f"expected events not reported: {r['events_missed']}"
    assert r["extra"] == [], f"invented events: {r['extra']}"
    assert r["agree"] / r["total"] >= 0.97, f"agreement {r['agree']}/{r['total']}"


def test_redteam_set_covers_the_unseen_cases():
    names = " ".join(p.name for p in TRACES)
    for needle in (
        "counters_only",
        "slowdown84",
        "slow_onset",
        "nojob",
        "shutdown",
        "power_fault",
        "hung_engine",
        "reboot_no_throttle",
        "benign_cap",
        "ollama",
        "vllm_default",
        "trainer_to_gpu",
        "sglang",
        "stale_swap",
        "vllm094",
        "oom_kill",
        "load_transient",
        "30s",
        "37s",
        "45s",
        "52s",
        "60s",
    ):
        assert needle in names, needle


def test_generator_reproduces_the_committed_files(tmp_path):
    gen = runpy.run_path(str(DIR / "make_redteam.py"))
    assert gen["main"](["make_redteam.py", str(tmp_path)]) == 0
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == sorted(p.name for p in DIR.iterdir() if p.suffix in (".jsonl", ".json"))
    for name in made:
        assert (tmp_path / name).read_bytes() == (DIR / name).read_bytes(), name
