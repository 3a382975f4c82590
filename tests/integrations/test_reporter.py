"""ProgressReporter (standard library client) against the real progress handler on loopback."""

from __future__ import annotations

import json
import logging

from spark_watchd.integrations.reporter import ProgressReporter, job_name
from spark_watchd.throughput.settings import ProgressSettings
from tests.conftest import free_port
from tests.support.progress import ProgressServer


def test_reports_arrive_with_start_and_end_and_are_coalesced(progress_server):
    rep = ProgressReporter("my run (v2)", url=progress_server.url, min_interval=60)
    for step in range(100):
        rep.report(step, tokens=4096 * step, samples=2 * step)
    rep.close()
    bodies = [json.loads(b) for b in progress_server.wait_for(2)]
    assert bodies[0]["event"] == "start" and bodies[0]["step"] == 0
    assert bodies[-1]["event"] == "end" and bodies[-1]["step"] == 99 and bodies[-1]["tokens"] == 99 * 4096
    assert len(bodies) <= 3  # 100 reports inside one interval: the first, maybe one in flight, the last
    assert all(b["job"] == "my-run-v2" for b in bodies)
    (stats,) = progress_server.tracker.stats()
    assert (stats.step, stats.tokens, stats.ended) == (99, 99 * 4096, True)
    assert rep.sent == len(bodies)


def test_token_is_sent_as_bearer_header():
    srv = ProgressServer(ProgressSettings(token="t0k"))
    try:
        rep = ProgressReporter("j", url=srv.url + "/", token="t0k", min_interval=0)
        rep.report(1)
        rep.close()
        srv.wait_for(2)
        assert srv.headers[0]["authorization"] == "Bearer t0k"
        assert srv.tracker.stats()[0].ended
    finally:
        srv.close()


def test_credentials_in_the_url_go_as_basic_auth_and_the_token_in_its_own_header():
    srv = ProgressServer(ProgressSettings(token="t0k"))
    try:
        url = srv.url.replace("http://", "http://me:p%40ss@")
        rep = ProgressReporter("j", url=url, token="t0k", min_interval=0)
        rep.report(1)
        rep.close()
        srv.wait_for(2)
        assert srv.headers[0]["authorization"] == "Basic bWU6cEBzcw=="  # me:p@ss
        assert srv.headers[0]["x-progress-token"] == "t0k"
        assert srv.tracker.stats()[0].ended
    finally:
        srv.close()


def test_url_and_token_come_from_the_environment(progress_server, monkeypatch):
    monkeypatch.setenv("SPARK_WATCHD_URL", progress_server.url)
    monkeypatch.setenv("SPARK_WATCHD_PROGRESS__TOKEN", "from-env")
    rep = ProgressReporter("j", min_interval=0)
    assert rep.url == progress_server.url
    rep.report(3)
    rep.close()
    progress_server.wait_for(2)
    assert progress_server.headers[0]["authorization"] == "Bearer from-env"


def test_daemon_not_running_or_a_wrong_url_warns_once_and_never_raises(caplog):
    caplog.set_level(logging.DEBUG, logger="spark_watchd.integrations.reporter")
    rep = ProgressReporter("j", url=f"http://127.0.0.1:{free_port()}", min_interval=0)
    for step in range(50):
        rep.report(step)
    rep.close()
    assert rep.sent == 0 and rep.dropped > 0
    records = [r for r in caplog.records if r.name == "spark_watchd.integrations.reporter"]
    # One warning for 50 lost reports: a wrong URL is not silent forever, nor a log line per step.
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert "not reachable" in records[0].getMessage() and "SPARK_WATCHD_URL" in records[0].getMessage()


def test_refused_reports_warn_once_and_bad_arguments_never_raise(progress_server, caplog):
    caplog.set_level(logging.DEBUG, logger="spark_watchd.integrations.reporter")
    rep = ProgressReporter("j", url=progress_server.url, min_interval=0)
    rep.report("not a number")  # swallowed: the training loop must go on
    rep.report(-1)  # the daemon answers 400
    progress_server.wait_for(1)
    rep.report(-2)
    rep.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "400" in warnings[0].getMessage() and "step" in warnings[0].getMessage()


def test_report_after_close_is_ignored(progress_server):
    rep = ProgressReporter("j", url=progress_server.url, min_interval=0)
    rep.report(1)
    rep.close()
    rep.report(2)
    rep.close()
    assert [json.loads(b)["step"] for b in progress_server.wait_for(2)] == [1, 1]


def test_job_name_helper_matches_the_daemon_rules():
    assert job_name("output/run 1") == "output/run-1"
    assert job_name("") == "job"
    assert len(job_name("x" * 500)) == 128
