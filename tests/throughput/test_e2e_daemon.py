"""End to end: a real daemon receives progress reports, exports them, refuses garbage, keeps a ledger."""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spark_watchd.throughput.ledger import read_runs
from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # starts a real daemon (a few seconds)


def metric(daemon, name: str, job: str) -> float | None:
    status, body = daemon.request("GET", "/metrics")
    assert status == 200
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            if s.name == name and s.labels.get("job") == job:
                return s.value
    return None


def post(daemon, payload) -> tuple[int, dict]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    status, body = daemon.request("POST", "/api/v1/progress", raw)
    return status, json.loads(body) if body.strip().startswith(b"{") else {}


def test_six_reports_give_step_time_tokens_rate_and_a_ledger_run(daemon):
    # Reports 20 s apart ending a few seconds from now, so the daemon's own samples fall inside the run.
    t0 = time.time() - 99
    for i in range(6):
        status, reply = post(
            daemon, {"job": "e2e-sft", "step": 10 * i, "tokens": 40960 * i, "ts": t0 + 20 * i}
        )
        assert status == 200, reply
    assert (reply["step_seconds"], reply["tokens_per_second"]) == (2.0, 2048.0)
    daemon.wait_until(
        lambda: metric(daemon, "sparkwatchd_training_step_seconds", "e2e-sft") == 2.0, "step seconds"
    )
    assert metric(daemon, "sparkwatchd_training_tokens_per_second", "e2e-sft") == 2048.0
    assert metric(daemon, "sparkwatchd_training_last_report_timestamp_seconds", "e2e-sft") == t0 + 100

    # Garbage is refused with the reason and the daemon keeps serving.
    status, reply = post(daemon, {"job": "e2e-sft", "step": "60"})
    assert status == 400 and "step" in reply["error"] and "integer" in reply["error"]
    assert post(daemon, b"\x00garbage{")[0] == 400
    assert post(daemon, b'{"job": "e2e-sft", "step": 1, "pad": "' + b"x" * 200_000 + b'"}')[0] == 413
    assert daemon.request("GET", "/healthz")[0] == 200
    assert metric(daemon, "sparkwatchd_training_step_seconds", "e2e-sft") == 2.0

    # The explicit end closes the run; the ledger line is written once a sample covers its end.
    status, reply = post(
        daemon, {"job": "e2e-sft", "step": 50, "tokens": 204800, "ts": t0 + 100, "event": "end"}
    )
    assert status == 200 and reply["ended"] is True
    # A finished job leaves /metrics with the next tick, not after the 15-minute expiry.
    daemon.wait_until(
        lambda: metric(daemon, "sparkwatchd_training_last_report_timestamp_seconds", "e2e-sft") is None,
        "the ended job's series to go",
    )
    ledger = daemon.state_dir / "runs.jsonl"
    daemon.wait_until(lambda: any(r["job"] == "e2e-sft" for r in read_runs(ledger)[0]), "the ledger line")
    out = run_cli("runs", "--json", "--state-dir", str(daemon.state_dir), "--job", "e2e-sft")
    assert out.returncode == 0, out.stderr
    (run,) = json.loads(out.stdout)
    assert (run["end_reason"], run["duration_s"], run["steps"], run["tokens"]) == ("end", 100.0, 50, 204800)
    assert (run["mean_step_seconds"], run["mean_tokens_per_second"]) == (2.0, 2048.0)
    # The daemon's own samples (fake GB10 at 81 C, this machine's /proc/meminfo) were lined up with the run.
    assert run["sample_intervals"] >= 1
    assert run["peak_temp_c"] == 81.0
    assert run["mem_available_min_bytes"] > 0
    assert run["energy_j"] == 0.0 and run["throttle_seconds"]["sw_thermal"] == 0.0
    table = run_cli("runs", "--state-dir", str(daemon.state_dir))
    assert "e2e-sft" in table.stdout and "2,048" in table.stdout  # tokens/s humanised (issue 19 §5)


def test_configured_log_tail_feeds_the_running_daemon(daemon):
    # The tail opened the (empty) file at start-up; what the trainer prints from now on counts.
    with open(daemon.train_log, "a") as fh:
        fh.write("\r 10%|█         | 100/1000 [00:50<07:30,  2.00it/s]")
        fh.write("\n{'loss': '2.1', 'num_input_tokens_seen': 409600, 'epoch': '0.1'}\n")
        fh.flush()
    daemon.wait_until(
        lambda: metric(daemon, "sparkwatchd_training_last_report_timestamp_seconds", "tailed-run"),
        "the tailed job",
    )
    status, body = daemon.request("GET", "/api/v1/status")
    assert status == 200
    jobs = json.loads(body)["extras"]["jobs"]
    (job,) = [j for j in (jobs.values() if isinstance(jobs, dict) else jobs) if j["job"] == "tailed-run"]
    assert (job["step"], job["tokens"]) == (100, 409600)
