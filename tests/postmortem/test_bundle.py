"""Bundles on critical events: what they hold, the wedge seen at the next boot, bounds, the report verb."""

from __future__ import annotations

import json

from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.postmortem import PostMortem, list_bundles
from spark_watchd.postmortem.bundle import prune
from tests.conftest import run_cli as _run_cli
from tests.postmortem.helpers import feed, scenario


def test_an_oom_kill_writes_a_bundle_with_the_ring_timeline_workloads_and_report(tmp_path):
    samples = scenario("vllm_creep_oom_30s")
    pm = feed(tmp_path, samples)
    (b,) = [x for x in list_bundles(tmp_path / "bundles") if x.kind == "oom_kill"]
    files = {p.name for p in b.path.iterdir()}
    assert files == {"trace.jsonl", "timeline.json", "workloads.json", "report.html", "manifest.json"}
    trace = (b.path / "trace.jsonl").read_text().splitlines()
    kill = json.loads(trace[-1])
    assert kill["vmstat"]["oom_kill"] == 1 and kill["oom_kills"][0]["pid"] == 4121
    assert kill["ts"] - json.loads(trace[0])["ts"] >= 1800 - 60  # the last 30 minutes
    tl = json.loads((b.path / "timeline.json").read_text())
    assert any(r["G3"]["severity"] == "warning" and "runway" in r["G3"]["summary"] for r in tl["findings"])
    kinds = {e["kind"] for e in tl["events"]}
    assert {"oom_kill", "workload_exit"} <= kinds
    html = (b.path / "report.html").read_text()
    assert "VLLM::EngineCor (pid 4121" in html and html.count("<svg") >= 6
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert pm.written and len(list_bundles(tmp_path / "bundles")) == 1  # the exit a tick later: no second


def test_a_wedge_seen_at_the_next_boot_bundles_the_minutes_before_the_freeze(tmp_path):
    samples = scenario("wedge_power_cycle_30s")
    boot = next(i for i, s in enumerate(samples) if s.boot_id != samples[0].boot_id)
    # First daemon: the minutes up to the freeze, then nothing (the host wedged: no close, no flush)
    feed(tmp_path, samples[:boot], close=False)
    # After the power cycle a new daemon reads the same state directory
    feed(tmp_path, samples[boot:])
    bundles = list_bundles(tmp_path / "bundles")
    reboot = [b for b in bundles if b.kind == "reboot"]
    assert len(reboot) == 1 and "NV_ERR_NO_MEMORY" in reboot[0].summary
    trace = [json.loads(x) for x in (reboot[0].path / "trace.jsonl").read_text().splitlines()]
    before = [s for s in trace if s["boot_id"] == samples[0].boot_id]
    assert len(before) >= 25 and before[-1]["ts"] == samples[boot - 1].ts  # up to the last sample before it
    assert trace[-1]["boot_id"] == samples[boot].boot_id


def test_a_plain_exit_and_a_memcg_kill_differ_and_bundles_are_bounded(tmp_path):
    feed(tmp_path, scenario("model_load_transient_30s"))
    assert list_bundles(tmp_path / "bundles") == []  # nothing critical
    feed(tmp_path / "c", scenario("container_memcg_kill_30s"))
    (b,) = list_bundles(tmp_path / "c" / "bundles")
    assert "own limit" in b.summary or "cgroup" in b.summary
    for i in range(5):
        feed(
            tmp_path / "c",
            scenario("container_memcg_kill_30s")[40 + i :],
            postmortem=PostMortem(tmp_path / "c", Thresholds(), min_gap_s=0),
        )
    assert prune(tmp_path / "c" / "bundles", keep=3, max_bytes=1 << 30)
    assert len(list_bundles(tmp_path / "c" / "bundles")) == 3


def run_cli(*args):
    p = _run_cli(*args)
    return p.returncode, p.stdout, p.stderr


def test_report_lists_writes_and_replay_reads_a_bundle(tmp_path):
    feed(tmp_path, scenario("vllm_creep_oom_30s"))
    code, out, err = run_cli("report", "--state-dir", str(tmp_path))
    assert code == 0 and "oom_kill" in out and "VLLM::EngineCor" in out, err
    code, out, _ = run_cli("report", "--last", "--state-dir", str(tmp_path))
    assert code == 0 and out.strip().endswith("report.html")
    dest = tmp_path / "out" / "pm.html"
    code, out, _ = run_cli("report", "--last", "--out", str(dest), "--state-dir", str(tmp_path))
    assert code == 0 and dest.read_text().startswith("<!doctype html>")
    code, _, err = run_cli("report", "nope", "--state-dir", str(tmp_path))
    assert code == 1 and "no bundle named" in err
    (b,) = list_bundles(tmp_path / "bundles")
    code, out, _ = run_cli("replay", str(b.path), "--format", "jsonl")
    assert code == 0 and len(out.splitlines()) == b.samples
    code, out, _ = run_cli("replay", b.name, "--state-dir", str(tmp_path), "--format", "jsonl")
    assert code == 0 and len(out.splitlines()) == b.samples  # by name, from the state directory


def test_the_report_of_thirty_minutes_at_two_second_sampling_stays_under_one_megabyte(tmp_path):
    from spark_watchd.postmortem.bundle import timeline_of
    from spark_watchd.postmortem.html import render_report
    from tests.diagnose.diag_builders import Host, proc

    h = Host(interval=2.0)
    procs = [proc(4000 + i, ["python3", f"worker{i}.py"], 2.0 + i, 4.0, create_time=100.0) for i in range(8)]
    samples = [h.sample(processes=procs, avail_gib=60 - i * 0.02, step=1.0) for i in range(900)]
    tl = timeline_of(samples, Thresholds())
    events = [{"kind": "oom_kill", "ts": samples[-1].ts, "summary": "The kernel OOM killer killed x"}]
    html = render_report(samples, tl, events, [], events[0])
    assert len(html.encode()) < 1_000_000


def test_a_replay_served_as_if_it_ended_now_keeps_each_kill_report_with_its_sample():
    import dataclasses

    from spark_watchd.sources.replay import ReplayFeed

    (kill,) = [s for s in scenario("vllm_creep_oom_30s") if s.oom_kills]
    moved = ReplayFeed._shift(kill, 3600.0, 0.0)
    assert moved.oom_kills[0].ts - kill.oom_kills[0].ts == 3600.0
    assert dataclasses.replace(moved.oom_kills[0], ts=kill.oom_kills[0].ts) == kill.oom_kills[0]


def test_a_demo_pass_dates_its_bundle_on_the_demo_clock_not_hours_ahead(tmp_path):
    """Issue 34: a replay at 60x publishes a sample a second (trace time 30 s apart); the page, /metrics and
    `status` show the newest as now, and so must the bundle's name, trigger, samples and events."""
    import datetime as dt

    from spark_watchd.diagnose.runtime import DiagnosisRuntime
    from spark_watchd.snapshot import Snapshot

    samples = scenario("vllm_creep_oom_30s")
    wall0 = samples[0].ts - 7 * 3600.0  # the demo started 7 h of trace time "before" the recording's clock
    th = Thresholds()
    rt, pm = DiagnosisRuntime(th, tmp_path), PostMortem(tmp_path, th)
    published = {}
    for i, s in enumerate(samples):
        d = rt.observe(s)
        published[s.ts] = wall0 + i  # one sample a second
        snap = Snapshot(
            sample=s, diagnosis=d, workloads=d.workloads, mode="replay", published_at=published[s.ts]
        )
        pm(snap)
    rt.close()
    pm.close()
    (b,) = [x for x in list_bundles(tmp_path / "bundles") if x.kind == "oom_kill"]
    kill = next(s for s in samples if s.oom_kills)
    assert b.ts == published[kill.ts]  # the trigger when the demo showed it, not trace time
    assert b.name.startswith(
        dt.datetime.fromtimestamp(published[kill.ts], dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    )
    trace = [json.loads(x) for x in (b.path / "trace.jsonl").read_text().splitlines()]
    assert trace[-1]["ts"] == published[kill.ts]  # the samples moved by the same shift
    events = json.loads((b.path / "timeline.json").read_text())["events"]
    assert any(e["kind"] == "oom_kill" and e["ts"] == published[kill.ts] for e in events)


def test_an_engine_stall_on_thin_memory_writes_its_bundle_before_the_freeze(tmp_path):
    """open-gpu-kernel-modules#1358: the stall seconds before a silent wedge; the bundle is on disk at once, so
    it survives the power cycle that follows, and holds the seconds up to the stall."""
    from pathlib import Path

    from spark_watchd.sample.trace import read_trace

    wedge = (
        Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "wedge" / "engine_stall_wedge_5s.jsonl"
    )
    samples = list(read_trace(wedge))
    boot = next(i for i, s in enumerate(samples) if s.boot_id != samples[0].boot_id)
    feed(tmp_path, samples[:boot], close=False)  # the host froze: no close
    (b,) = list_bundles(tmp_path / "bundles")
    assert b.kind == "engine_stall" and "last sign before a wedge" in b.summary
    trace = [json.loads(x) for x in (b.path / "trace.jsonl").read_text().splitlines()]
    assert trace[-1]["serving"][0]["prompt_tokens_per_s"] == 0.0
    assert samples[boot - 1].ts - trace[-1]["ts"] <= 10  # written before the freeze, seconds before it
