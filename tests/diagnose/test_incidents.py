"""Capture on trouble: the samples around a finding leaving ok saved as a trace, the count of files bounded."""

from __future__ import annotations

import json

from spark_watchd.diagnose.incidents import CaptureRing
from spark_watchd.diagnose.runtime import DiagnosisRuntime
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.findings import Diagnosis, Finding
from spark_watchd.sample.trace import read_trace
from tests.diagnose.diag_builders import Host


def test_capture_on_trouble_writes_a_bounded_trace(tmp_path):
    host = Host()
    th = Thresholds()
    rt = DiagnosisRuntime(th, tmp_path, capture_pre=5, capture_post=3, capture_keep=2)
    for s in host.run(10):
        rt.observe(s)
    for s in host.run(4, psi_some=8.0):  # G3 leaves ok
        rt.observe(s)
    rt.close()
    files = sorted((tmp_path / "captures").glob("*.jsonl"))
    assert len(files) == 1 and "G3" in files[0].name
    lines = files[0].read_text().splitlines()
    assert len(lines) == 5 + 3  # 5 before (including the trouble sample), 3 after
    assert all(json.loads(x)["v"] == 1 for x in lines)


def test_capture_count_is_bounded(tmp_path):
    host = Host()
    th = Thresholds()
    rt = DiagnosisRuntime(th, tmp_path, capture_pre=2, capture_post=1, capture_keep=2)
    for _ in range(4):
        for s in host.run(3):
            rt.observe(s)
        for s in host.run(2, psi_some=8.0):
            rt.observe(s)
    rt.close()
    assert len(list((tmp_path / "captures").glob("*.jsonl"))) == 2


def _diag(**sev) -> Diagnosis:
    return Diagnosis(0.0, {g: Finding(g, s, f"{g} {s}") for g, s in sev.items()})


def test_ring_starts_one_capture_per_transition_and_extends_it_on_more_trouble(tmp_path):
    host = Host()
    ring = CaptureRing(tmp_path / "captures", pre=2, post=2, keep=5)
    samples = host.run(8)
    verdicts = ["ok", "ok", "warning", "ok", "critical", "ok", "ok", "ok"]
    started = [ring.push(s, _diag(G3="ok", G6=v)) for s, v in zip(samples, verdicts, strict=True)]
    ring.close()
    (path,) = [p for p in started if p is not None]  # trouble while recording extends, starts no new file
    assert path.name == f"capture-{int(samples[2].ts)}-G6.jsonl"
    # Two before (with the trouble sample), post=2 after, renewed by the critical at index 4: up to index 6.
    assert [s.ts for s in read_trace(path)] == [s.ts for s in samples[1:7]]


def _trouble(rt) -> None:
    host = Host()
    for s in host.run(10):
        rt.observe(s)
    for s in host.run(4, psi_some=8.0):  # G3 leaves ok
        rt.observe(s)
    rt.close()


def test_a_link_planted_under_the_capture_name_is_refused_not_written_through(tmp_path):
    """Issue 20 §3: state-dir files are never written through a link; a capture is one of them."""
    first = tmp_path / "first"
    _trouble(DiagnosisRuntime(Thresholds(), first, capture_pre=5, capture_post=3))
    (name,) = [p.name for p in (first / "captures").glob("*.jsonl")]
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    second = tmp_path / "second"
    (second / "captures").mkdir(parents=True)
    (second / "captures" / name).symlink_to(victim)
    rt = DiagnosisRuntime(Thresholds(), second, capture_pre=5, capture_post=3)
    _trouble(rt)
    assert victim.read_text() == "keep\n"
    assert rt.storage_errors_total >= 1 and "symbolic link" in (rt.storage_error or "symbolic link")
