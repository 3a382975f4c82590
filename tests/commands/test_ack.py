"""`spark-watchd ack` against a real daemon: status, /metrics and the API agree, and it survives a restart."""

from __future__ import annotations

import json
import time

from spark_watchd.errors import EX_USAGE
from tests.conftest import FIXTURES, run_cli
from tests.daemon_helpers import http_get, running_daemon, samples, value

TRACE = FIXTURES / "traces" / "ollama_tenant_45s.jsonl"  # G6 warning from sample 80 to 145


def _cut(tmp_path):
    lines = TRACE.read_text().splitlines()[80:120]  # starts in the episode, as a restart beside it does
    path = tmp_path / "tenant.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _replayed(base: str) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        _, body = http_get(base + "/api/v1/status")
        doc = json.loads(body)
        if doc.get("findings", {}).get("G6", {}).get("severity") == "warning" and doc["extras"].get("replay"):
            return doc
        time.sleep(0.2)
    raise AssertionError("the replay never reached G6 warning")


def _status(base):
    return run_cli("status", "--url", base, "--color", "never")


def test_an_acknowledged_g6_warning_is_shown_stops_failing_status_and_survives_a_restart(tmp_path):
    trace, state = _cut(tmp_path), tmp_path / "state"
    args = ("--replay", str(trace), "--speed", "100000", "--state-dir", str(state))
    with running_daemon(*args) as (_proc, base):
        _replayed(base)
        assert _status(base).returncode == 1  # warning
        refused = run_cli("ack", "G3", "--url", base)
        assert refused.returncode == 1 and "G3 is ok" in refused.stderr
        res = run_cli("ack", "G6", "--for", "8h", "--note", "Ollama kept on purpose", "--url", base)
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith("G6 warning acknowledged until ") and "ollama:ollama" in res.stdout
        st = _status(base)
        assert st.returncode == 0, st.stdout  # an acknowledged finding no longer fails a scripted check
        assert "G6 WARNING" in st.stdout and "Ollama kept on purpose" in st.stdout  # shown, never hidden
        assert "overall: warning (ok once acknowledged findings are set aside)" in st.stdout
        _, text = http_get(base + "/metrics")  # published again at once: no waiting for a sample
        assert value(samples(text), "sparkwatchd_finding_acknowledged", gotcha="G6") == 1.0
        assert value(samples(text), "sparkwatchd_finding_acknowledged", gotcha="G3") == 0.0
        doc = json.loads(http_get(base + "/api/v1/status")[1])
        assert doc["findings"]["G6"]["acknowledged"]["note"] == "Ollama kept on purpose"
        assert doc["worst"] == "warning" and doc["worst_unacknowledged"] == "ok"
    with running_daemon(*args) as (_proc, base):  # the same state dir after a restart
        _replayed(base)
        assert _status(base).returncode == 0
        listed = run_cli("ack", "--list", "--url", base)
        assert listed.returncode == 0 and listed.stdout.startswith("G6 warning acknowledged until")
        assert run_cli("ack", "--clear", "G6", "--url", base).returncode == 0
        assert _status(base).returncode == 1
        assert run_cli("ack", "--list", "--url", base).stdout.strip() == "no acknowledgements in force"


def test_ack_says_when_the_daemon_cannot_be_reached_and_when_asked_wrongly():
    res = run_cli("ack", "G6", "--url", "127.0.0.1:9", "--timeout", "2")
    assert res.returncode == 3 and "127.0.0.1:9" in res.stderr
    assert run_cli("ack").returncode == EX_USAGE
    bad = run_cli("ack", "G6", "--for", "eight hours", "--url", "127.0.0.1:9")
    assert bad.returncode == EX_USAGE and "90m, 8h, 2d" in bad.stderr
