"""Drive the runway scenario traces through a runtime and a PostMortem the way the daemon's tick does."""

from __future__ import annotations

from pathlib import Path

from spark_watchd.diagnose.runtime import DiagnosisRuntime
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.postmortem import PostMortem
from spark_watchd.sample.trace import read_trace
from spark_watchd.snapshot import Snapshot

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "runway"


def scenario(name: str) -> list:
    return list(read_trace(TRACES / f"{name}.jsonl"))


def feed(state_dir, samples, *, postmortem: PostMortem | None = None, close: bool = True):
    """Judge samples with a runtime on state_dir and hand each snapshot to a PostMortem (as subscribers are)."""
    th = Thresholds()
    rt = DiagnosisRuntime(th, state_dir)
    pm = postmortem or PostMortem(state_dir, th)
    for s in samples:
        d = rt.observe(s)
        pm(Snapshot(sample=s, diagnosis=d, workloads=d.workloads, recent_events=rt.recent_events(50)))
    if close:
        rt.close()
        pm.close()
    return pm
