"""The armed fast ring reads the servers' progress every second (issue 31 item 4): an engine whose counters stop
with a request running on a thin pool is a stall seconds later, not a tick later (its event, G3 critical and
its bundle); the 1 s lines carry the progress, the report draws it and replay judges it; a hung server never
holds the memory lines. Real HTTP servers speaking vLLM's real /metrics (tests/support/serving_fakes.py)."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from pathlib import Path

from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.daemon import Runner
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.postmortem import list_bundles
from spark_watchd.postmortem.fast import FastRing
from spark_watchd.sources.kernel import BootSource, MeminfoSource, PsiSource, VmstatSource
from spark_watchd.sources.serving import ServingSource
from spark_watchd.sources.serving_settings import ServingSettings
from tests.conftest import run_cli
from tests.support.poll import wait_until
from tests.support.serving_fakes import FakeEngine, FakeServer

HOST = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "gb10-eviction" / "proc"
QUIET_PSI = (
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500\n"
)


def _thin_host(tmp_path: Path, avail_gib: float = 10.0) -> Path:
    """The GB10 capture with MemAvailable at avail_gib and quiet PSI: a thin budget (G3 warning), no more."""
    proc = tmp_path / "proc"
    shutil.copytree(HOST, proc)
    mem = (proc / "meminfo").read_text()
    mem = re.sub(r"MemAvailable:\s+\d+ kB", f"MemAvailable:   {int(avail_gib * 1024 * 1024)} kB", mem)
    mem = re.sub(r"CmaFree:\s+\d+ kB", "CmaFree:               0 kB", mem)
    (proc / "meminfo").write_text(mem)
    (proc / "pressure" / "memory").write_text(QUIET_PSI)
    return proc


def _serving(*servers: FakeServer, timeout_s: float = 2.0) -> ServingSource:
    endpoints = [{"kind": "vllm", "url": s.url} for s in servers]
    settings = ServingSettings(endpoints=endpoints, timeout_s=timeout_s)
    return ServingSource(settings, interval_s=30.0, own_addresses=frozenset())


class _Flow:
    """Tokens flowing through a FakeEngine (one request running) until stop(); the request stays running."""

    def __init__(self, eng: FakeEngine):
        self.eng, self.stopped_at = eng, None
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.2):
            self.eng.step(0.2)

    def start(self):
        self.eng.running, self.eng.tps = 1, 400.0
        self.eng.step(0.2)
        self._t.start()
        return self

    def stop(self):
        self._stop.set()
        self._t.join()
        self.stopped_at = time.time()


def test_counters_stopping_with_a_request_running_on_a_thin_pool_are_a_stall_seconds_later_not_a_tick(
    tmp_path,
):
    """The 30 s tick alone finds it a tick or two later (the scrape before the stop still shows progress)."""
    proc = _thin_host(tmp_path)
    eng = FakeEngine("vllm")
    with FakeServer(eng) as srv:
        flow = _Flow(eng).start()
        settings = load_settings(None, environ={"SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path / "state")})
        root = str(proc)
        sources = (
            MeminfoSource(root, 0),
            PsiSource(root),
            VmstatSource(root),
            BootSource(root),
            _serving(srv),
        )
        daemon = build(settings, sources=sources)
        runner = Runner(daemon)
        runner.start()
        try:
            wait_until(lambda: (s := daemon.snapshot()).diagnosis and s.diagnosis.findings["G3"], timeout=20)
            g3 = daemon.snapshot().diagnosis.findings["G3"]
            assert g3.severity == "warning", g3.summary  # thin: the fast ring arms
            fast = tmp_path / "state" / "fast" / "fast-0.jsonl"
            wait_until(lambda: fast.exists() and fast.read_text().count('"serving"') >= 3, timeout=10)
            first_tick = daemon.snapshot().published_at
            flow.stop()
            snap = wait_until(
                lambda: (s := daemon.snapshot()).diagnosis.findings["G3"].severity == "critical" and s,
                timeout=25,
                what="G3 critical on the stall",
            )
        finally:
            runner.stop()
    found = snap.published_at - flow.stopped_at
    assert found <= Thresholds().engine_stall_min_s + 5 and snap.published_at - first_tick < 30  # not a tick
    assert (
        "Serving engine stalled with requests running while memory is thin"
        in snap.diagnosis.findings["G3"].summary
    )
    (stall,) = [e for e in snap.recent_events if e.kind == "engine_stall"]
    assert stall.details["thin"] and stall.details["server"] == f"vllm:{srv.port}"
    # The sample that judged it carries the 1 s reads it was judged on.
    assert len(snap.sample.serving_progress) >= 10
    assert all(r.requests_running == 1 for r in snap.sample.serving_progress)
    # Its bundle, on disk at once: the 1 s lines carry each second's progress; the report draws it.
    (b,) = [x for x in list_bundles(tmp_path / "state" / "bundles") if x.kind == "engine_stall"]
    lines = [json.loads(ln) for ln in (b.path / "fast.jsonl").read_text().splitlines()]
    progress = [ln["serving"][0] for ln in lines if ln.get("serving")]
    assert len(progress) >= 10 and all(p["server"] == f"vllm:{srv.port}" for p in progress)
    assert progress[-1]["requests_running"] == 1 and progress[-1]["generation_tokens_total"] > 0
    moving = [p["generation_tokens_per_s"] for p in progress if p["generation_tokens_per_s"]]
    assert moving and 200 <= max(moving) <= 1200  # 400 tokens/s, read a second apart
    html = (b.path / "report.html").read_text()
    assert "Serving progress, every second" in html and f"vllm:{srv.port}" in html
    assert "no prompt or generation progress since" in html
    # Replay of the final seconds judges the same stall from the 1 s progress alone.
    res = run_cli("replay", str(b.path / "fast.jsonl"), "--format", "jsonl")
    assert res.returncode == 0, res.stderr
    events = [
        e for ln in res.stdout.splitlines() for e in json.loads(ln)["events"] if e["kind"] == "engine_stall"
    ]
    assert len(events) == 1 and events[0]["ts"] - flow.stopped_at <= Thresholds().engine_stall_min_s + 3


def test_a_hung_server_never_delays_the_one_second_memory_lines(tmp_path):
    hung, ok = FakeEngine("vllm"), FakeEngine("vllm")
    hung.hang_s = 30.0
    with FakeServer(hung) as h, FakeServer(ok) as o:
        src = _serving(h, o, timeout_s=5.0)
        src.collect({})  # the scrapers exist (the hung one's first scrape is still waiting)
        ring = FastRing(tmp_path / "fast", proc_root=str(HOST), servers=lambda: src)
        flow = _Flow(ok).start()
        try:
            ring.arm()
            wait_until(lambda: ring.readings >= 7, timeout=15, what="seven 1 s lines")
            ring.disarm()
            carried = src.collect({}).get(
                "serving_progress", ()
            )  # the next sample has the reads, then no more
            asked = src.fast
        finally:
            flow.stop()
            src.close()
    lines = [json.loads(ln) for ln in (tmp_path / "fast" / "fast-0.jsonl").read_text().splitlines()]
    gaps = [b["ts"] - a["ts"] for a, b in zip(lines, lines[1:], strict=False)]
    assert gaps and max(gaps) < 1.5, gaps  # the memory line every second, the hung server or not
    assert all(ln["meminfo"]["MemAvailable"] > 0 for ln in lines)
    good = [s for ln in lines for s in ln.get("serving", []) if s["server"] == f"vllm:{o.port}"]
    assert len(good) == len(lines) and len({s["ts"] for s in good}) == len(lines)  # read afresh each second
    assert all(s["up"] and s["requests_running"] == 1 for s in good)
    slow = [s for ln in lines for s in ln.get("serving", []) if s["server"] == f"vllm:{h.port}"]
    assert slow and all(not s["up"] and s["error"] for s in slow)  # its one read at a time timed out at 5 s
    # Every read a line carried is in the next sample, once, in time order.
    assert {(r.server, r.ts) for r in carried} >= {
        (s["server"], s["ts"]) for ln in lines for s in ln["serving"]
    }
    assert len({(r.server, r.ts) for r in carried}) == len(carried) and list(carried) == sorted(
        carried, key=lambda r: r.ts
    )
    assert asked is None and ring.stalls.last == {}  # disarmed: no reads asked for, nothing held
