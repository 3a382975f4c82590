"""The throughput area as the daemon holds it: tracker, optional ledger, log tails, closed tails-first, ledger-last."""

from __future__ import annotations

import threading

from spark_watchd.sample.model import Sample
from spark_watchd.snapshot import Snapshot
from spark_watchd.throughput import ledger as ledger_mod
from spark_watchd.throughput import logtail
from spark_watchd.throughput.ledger import LEDGER_FILE, RunLedger, read_runs
from spark_watchd.throughput.models import ProgressReport
from spark_watchd.throughput.service import Throughput
from spark_watchd.throughput.settings import LogTailSettings, ProgressSettings
from tests.support.poll import wait_until
from tests.support.progress import T0


def test_the_ledger_lives_in_the_state_dir_and_hears_every_run_end(tmp_path, clock):
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    assert isinstance(tp.ledger, RunLedger)
    tp.tracker.report(ProgressReport(job="a", step=0, ts=T0))
    tp.tracker.report(ProgressReport(job="a", step=4, ts=T0 + 10, event="end"))
    tp.close()
    (run,) = read_runs(tmp_path / LEDGER_FILE)[0]
    assert (run["job"], run["end_reason"]) == ("a", "end")


def test_without_the_ledger_nothing_is_written_and_observe_is_harmless(tmp_path, clock):
    tp = Throughput(ProgressSettings(ledger=False), tmp_path, clock)
    assert tp.ledger is None
    tp.observe(Snapshot(Sample(ts=T0), None))
    tp.tracker.report(ProgressReport(job="a", step=0, ts=T0))
    tp.tracker.report(ProgressReport(job="a", step=4, ts=T0 + 10, event="end"))
    tp.close()
    assert list(tmp_path.iterdir()) == []


def test_extras_are_the_tracker_job_table(tmp_path, clock):
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    assert list(tp.extras()) == ["jobs"] and len(tp.extras()["jobs"]) == 0
    tp.tracker.report(ProgressReport(job="sft", step=3, ts=T0))
    tp.tracker.report(ProgressReport(job="dpo", step=1, ts=T0))
    (jobs,) = tp.extras().values()
    assert [j.job for j in jobs] == ["dpo", "sft"]
    assert [j.step for j in jobs] == [1, 3]
    tp.close()


def test_close_ends_open_runs_as_shutdown_and_empties_the_table(tmp_path, clock):
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    tp.tracker.report(ProgressReport(job="a", step=0, ts=T0))
    tp.close()
    assert len(tp.extras()["jobs"]) == 0
    (run,) = read_runs(tmp_path / LEDGER_FILE)[0]
    assert run["end_reason"] == "shutdown"


def test_close_stops_the_tails_first_and_closes_the_ledger_last(tmp_path, clock, monkeypatch):
    order: list[str] = []
    for cls, meth, label in (
        (logtail.LogTailer, "close", "tails closed"),
        (ledger_mod.RunLedger, "on_run_end", "run ended"),
        (ledger_mod.RunLedger, "close", "ledger closed"),
    ):
        orig = getattr(cls, meth)

        def wrapped(self, *a, _orig=orig, _label=label):
            order.append(_label)
            return _orig(self, *a)

        monkeypatch.setattr(cls, meth, wrapped)
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    tp.tracker.report(ProgressReport(job="a", step=0, ts=T0))
    tp.tracker.report(ProgressReport(job="b", step=0, ts=T0))
    tp.close()
    assert order == ["tails closed", "run ended", "run ended", "ledger closed"]


def test_start_follows_the_configured_logs_into_the_tracker(tmp_path, clock):
    log = tmp_path / "train.log"
    log.write_text("step 7 of 100\n")
    settings = ProgressSettings(
        log_tail=[LogTailSettings(path=str(log), job="tail", pattern=r"step (?P<step>\d+)", from_start=True)],
        log_tail_poll_s=0.05,
    )
    tp = Throughput(settings, tmp_path / "state", clock)
    try:
        assert len(tp.extras()["jobs"]) == 0  # nothing is read before start()
        tp.start()
        wait_until(
            lambda: [j.step for j in tp.extras()["jobs"]] == [7], 10, what="the log's step in the tracker"
        )
    finally:
        tp.close()
    assert "spark-watchd-logtail" not in {t.name for t in threading.enumerate()}  # close() joined it
