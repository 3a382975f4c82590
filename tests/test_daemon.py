"""The tick in-process: per-source isolation, publish by swap, subscribers, replay pacing and looping, reload."""

from __future__ import annotations

import json

import pytest
import structlog

from spark_watchd.app import build, runtime_for
from spark_watchd.config import load_settings
from spark_watchd.daemon import Daemon, Runner
from spark_watchd.sources.replay import ReplayFeed
from tests.conftest import REPO
from tests.support.fakes import FakeSource
from tests.support.poll import wait_until

EVICTION = REPO / "spark_watchd" / "scenarios" / "eviction.jsonl"


def _Flaky() -> FakeSource:  # noqa: N802 - reads like the class it stands for
    """A source that is down while `fail` is set, like NVML after the GPU falls off the bus."""
    return FakeSource(
        "nvml", {"gpus": [{"index": 0, "name": "NVIDIA GB10", "uuid": "GPU-1", "temp_c": 50.0}]}
    )


class _Mem:
    name = "meminfo"

    def collect(self, partial):
        # Sees what earlier sources returned this tick.
        return {"meminfo": {"MemAvailable": 10 + len(partial.get("gpus") or ())}}

    def close(self):
        raise OSError("close failure must not propagate")


@pytest.fixture
def settings():
    return load_settings(None, environ={})


def test_tick_publishes_a_new_snapshot_and_calls_subscribers(settings, tmp_path):
    d = build(settings, sources=(_Flaky(), _Mem()), state_dir=str(tmp_path), serve=False)
    before = d.snapshot()
    assert before.sample is None and not d.is_fresh()
    seen = []
    d.subscribe(seen.append)
    d.subscribe(lambda snap: 1 / 0)  # a broken subscriber does not stop the others or the tick
    snap = d.tick()
    assert d.snapshot() is snap and seen == [snap] and snap is not before
    assert set(snap.diagnosis.findings) >= {"G3", "G4", "G6"}
    assert d.is_fresh() and not d.is_fresh(now=snap.published_at + 3 * settings.daemon.interval + 1)
    d.tick()
    assert len(seen) == 2
    d.close()


def test_replay_without_loop_ends_and_stays_fresh(settings, tmp_path):
    lines = [json.dumps({"v": 1, "ts": 100.0 + i}) for i in range(3)]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    d = build(settings, replay=ReplayFeed(str(trace), speed=1000), state_dir=str(tmp_path), serve=False)
    snaps = []
    while (s := d.tick()) is not None:
        snaps.append(s)
    assert len(snaps) == 3 and d.snapshot() is snaps[-1]
    assert d.snapshot().sources["replay"].up and d.is_fresh(now=snaps[-1].published_at + 10_000)


def test_reload_applies_good_config_and_keeps_old_on_bad(settings, tmp_path):
    d = build(settings, sources=(_Mem(),), state_dir=str(tmp_path), serve=False)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[daemon]\ninterval = 7\n")
    r = Runner(d, reload=lambda: load_settings(str(cfg), environ={}))
    r.do_reload()
    assert d.settings.daemon.interval == 7
    cfg.write_text("[daemon]\ninterval = -1\n")
    with structlog.testing.capture_logs() as logs:
        r.do_reload()
    assert d.settings.daemon.interval == 7
    assert any("reload failed" in e["event"] and "daemon.interval" in e["error"] for e in logs)
    d.close()


def test_overrunning_tick_is_skipped_and_logged_not_stacked(settings, tmp_path):
    import threading

    class _Slow:
        """The first collect hangs until released: a tick longer than the 1 s interval."""

        name = "slow"
        running = 0
        most = 0
        lock = threading.Lock()
        release = threading.Event()

        def collect(self, partial):
            with self.lock:
                self.running += 1
                self.most = max(self.most, self.running)
            self.release.wait(10)
            with self.lock:
                self.running -= 1
            return {}

        def close(self):
            self.release.set()

    slow = _Slow()
    d = build(settings.model_copy(update={"daemon": settings.daemon.model_copy(update={"interval": 1.0})}),
               sources=(slow,), state_dir=str(tmp_path), serve=False)  # fmt: skip
    r = Runner(d)
    with structlog.testing.capture_logs() as logs:
        r.start()
        try:
            wait_until(lambda: d.overruns >= 1, what="a run falling due while the first tick hangs")
            slow.release.set()
            wait_until(lambda: d.ticks >= 2, what="ticking to go on after the overrun")
        finally:
            r.stop()
    assert slow.most == 1  # one tick at a time
    assert any(e["event"].startswith("tick overrun") for e in logs)


def test_throughput_tracker_contributes_like_a_source_and_extras_reach_the_snapshot(settings, tmp_path):
    from spark_watchd.sample.model import ThroughputReading

    class _Tracker:
        name = "progress"
        fail = False

        def collect(self, partial):
            if self.fail:
                raise RuntimeError("tracker bug")
            return {"throughput": (ThroughputReading("llama-lora", partial["ts"], 42, 1.5, 900.0),)}

    tracker = _Tracker()
    d = Daemon(
        settings,
        sources=(_Mem(),),
        runtime=runtime_for(settings, None),
        contributors=(tracker,),
        extras=(("jobs", lambda: ("llama-lora",)),),
    )
    snap = d.tick()
    assert snap.sample.throughput[0].step == 42 and snap.sources["progress"].up
    assert snap.extras["jobs"] == ("llama-lora",)
    tracker.fail = True
    snap = d.tick()
    assert snap.sample.throughput == () and not snap.sources["progress"].up
    assert snap.sources["progress"].error == "tracker bug" and snap.sources["meminfo"].up


def test_reload_rebuilds_sources_and_runtime_when_their_sections_change(settings, tmp_path):
    from tests.conftest import FIXTURES

    d = build(settings, state_dir=str(tmp_path), serve=False)
    root = FIXTURES / "hosts" / "daemon-vm" / "proc"
    avail = next(
        int(ln.split()[1])
        for ln in (root / "meminfo").read_text().splitlines()
        if ln.startswith("MemAvailable:")
    )
    old_runtime = d.runtime
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[sources]\nproc_root = "{root}"\n[thresholds]\nos_reserve_bytes = 1234\n')
    Runner(d, reload=lambda: load_settings(str(cfg), environ={})).do_reload()
    assert d.runtime is not old_runtime and d.runtime.thresholds.os_reserve_bytes == 1234
    snap = d.tick()
    assert snap.sample.meminfo["MemAvailable"] == avail  # read from the new root
    d.close()


def test_reload_with_a_changed_serving_section_rebuilds_the_sources(settings, tmp_path):
    d = build(settings, state_dir=str(tmp_path), serve=False)
    assert "serving" in [s.name for s in d.collector.sources]
    cfg = tmp_path / "c.toml"
    cfg.write_text("[serving]\nenabled = false\n")
    Runner(d, reload=lambda: load_settings(str(cfg), environ={})).do_reload()
    assert "serving" not in [s.name for s in d.collector.sources]  # the scrapers went with the old tuple
    d.close()
