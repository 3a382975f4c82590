"""`spark-watchd status` against a loopback HTTP server answering like the daemon's /api/v1/status."""

from __future__ import annotations

import base64
import json

import pytest

from spark_watchd import cli
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import ThroughputReading
from tests.conftest import free_port, run_cli
from tests.support.fakes import CaptureServer, Recorded, Reply

GIB = 1024**3


def _doc(g3="ok", g4="ok", g6="ok", fresh=True):
    findings = {
        "G3": Finding(
            "G3",
            g3,
            "MemAvailable 14.2 GiB, PSI full 3.1%" if g3 != "ok" else "memory comfortable",
            {"mem_available_bytes": 15_200_000_000, "psi_full_avg10": 3.1},
            ("Drop the page cache before loading (sync; echo 3 > /proc/sys/vm/drop_caches).",),
        ),
        "G4": Finding(
            "G4",
            g4,
            "GPU at 85 C with power flat at 31 W: thermal throttling" if g4 != "ok" else "cool",
            {"temp_c": 85.0, "power_w": 31.0, "sm_clock_mhz": 1402},
            ("Improve airflow around the Spark; keep the vents clear.",),
        ),
        "G6": Finding(
            "G6",
            g6,
            "vLLM uncapped next to a trainer" if g6 != "ok" else "no contention",
            {"kinds": ["vllm", "trainer"]},
            ("Start vLLM with --gpu-memory-utilization 0.3.",),
        ),
    }
    return {
        "version": "0.1.0",
        "mode": "live",
        "fresh": fresh,
        "age_seconds": 12.0 if fresh else 600.0,
        "ts": 1764403200.0,
        "host": "spark-01",
        "memory": {
            "total_bytes": 127600748 * 1024,
            "available_bytes": 100 * GIB,
            "budget_bytes": 92 * GIB,
            "swap_used_bytes": 0,
        },
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA GB10",
                "temp_c": 67.0,
                "power_w": 16.0,
                "sm_clock_mhz": 2418,
                "slowdown_temp_c": 86.0,
            }
        ],
        "throughput": [ThroughputReading("qlora-70b", 1764403195.0, 1200, 1.024, 4000.0).to_dict()],
        "worst": max((g3, g4, g6), key=["unknown", "ok", "warning", "critical"].index),
        "findings": {g: f.to_dict() for g, f in findings.items()},
        "recent_events": [
            Event("eviction", "G6", 1764403100.0, "trainer pid gone while vLLM grew").to_dict()
        ],
        "sources": {"meminfo": {"up": True, "error": None}, "nvml": {"up": False, "error": "GPU is lost"}},
    }


@pytest.fixture
def status(capsys, monkeypatch):
    """Run `spark-watchd status ARGS` in this process; returns (exit code, stdout, stderr)."""
    for var in (
        "SPARK_WATCHD_URL",
        "SPARK_WATCHD_USER",
        "SPARK_WATCHD_PASSWORD",
        "SPARK_WATCHD_TOKEN",
        "NO_COLOR",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "80")  # the width a terminal reports, whatever runs the tests

    def call(*argv, env=None):
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        code = cli.main(["status", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


class _Server(CaptureServer):
    """A stand-in daemon serving one canned /api/v1/status document, optionally behind basic auth."""

    def __init__(self, body, status=200, user=None, password=None):
        self.body, self.status = body, status
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode() if user else None
        super().__init__(self._answer)

    def _answer(self, req: Recorded) -> Reply:
        if req.path != "/api/v1/status":
            return Reply(404)
        if self.expected and req.headers.get("Authorization") != self.expected:
            return Reply(401, headers={"WWW-Authenticate": 'Basic realm="spark-watchd"'})
        payload = self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()
        return Reply(self.status, payload, {"Content-Type": "application/json"})

    @property
    def seen_auth(self) -> list[str | None]:
        return [r.headers.get("Authorization") for r in self.requests]


@pytest.mark.parametrize(
    ("severities", "code"),
    [
        (("ok", "ok", "ok"), 0),
        (("warning", "ok", "ok"), 1),
        (("ok", "critical", "warning"), 2),
        (("unknown", "unknown", "unknown"), 3),
    ],
)
def test_exit_code_is_the_worst_severity(status, severities, code):
    with _Server(_doc(*severities)) as srv:
        got, out, err = status("--url", srv.url)
    assert got == code, err
    assert out.splitlines()[-1] == "overall: " + ["ok", "warning", "critical", "unknown"][code]


def test_the_installed_command_exits_with_the_severity():
    with _Server(_doc(g6="critical")) as srv:
        proc = run_cli("status", "--url", srv.url)
    assert proc.returncode == 2, proc.stderr
    assert "G6 CRITICAL vLLM uncapped next to a trainer" in proc.stdout


def test_prints_findings_with_evidence_and_advice_but_not_for_ok(status):
    with _Server(_doc(g4="critical")) as srv:
        code, out, _ = status("--url", srv.url)
    assert code == 2
    assert "spark-watchd 0.1.0 on spark-01 (live, sample 12 s ago, fresh)" in out
    assert "GPU 0 NVIDIA GB10: 67 C (slowdown 86 C) 16.0 W SM 2418 MHz" in out
    assert "training qlora-70b: step 1200, 1.02 s/step, 4,000 tokens/s" in out
    assert "G4 CRITICAL GPU at 85 C with power flat at 31 W: thermal throttling" in out
    assert "    evidence: temp 85 C; power 31 W; sm clock 1402 MHz" in out
    assert "    advice: Improve airflow around the Spark; keep the vents clear." in out
    assert "G3 OK       memory comfortable" in out
    assert "Drop the page cache" not in out  # advice only where something is wrong
    assert "source down: nvml (GPU is lost)" in out
    assert "eviction G6: trainer pid gone while vLLM grew" in out
    assert "\033[" not in out  # not a terminal: no colour


def test_prints_one_row_per_workload_with_its_launcher_cap_and_members(status, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    doc = _doc()
    doc["workloads"] = [
        {
            "pid": 5120,
            "kind": "trainer",
            "members": [5120],
            "footprint_bytes": 14 * GIB,
            "capped": None,
            "cap": None,
            "cmdline": "python3 train.py",
        },
        {
            "pid": 7000,
            "kind": "vllm",
            "members": [7000, 7001, 7002],
            "footprint_bytes": 44 * GIB,
            "capped": True,
            "cap": "--gpu-memory-utilization 0.35",
            "cmdline": "vllm serve m --gpu-memory-utilization 0.35",
        },
    ]
    with _Server(doc) as srv:
        _, out, _ = status("--url", srv.url)
    table = out.split("workloads:\n")[1].split("\n\n")[0].splitlines()
    assert table == [
        "KIND     PID        MEMORY  CAP                            COMMAND",
        "vllm     7000 +2  44.0 GiB  --gpu-memory-utilization 0.35  vllm serve m --gpu-memory-utilization 0.35",
        "trainer  5120     14.0 GiB  -                              python3 train.py",
    ]


def test_colour_on_request(status):
    with _Server(_doc(g6="warning")) as srv:
        _, out, _ = status("--url", srv.url, "--color", "always")
    assert "\033[33mWARNING \033[0m" in out


def test_stale_sample_is_unknown_even_when_findings_look_fine(status):
    with _Server(_doc(fresh=False)) as srv:
        code, out, _ = status("--url", srv.url)
    assert code == 3
    assert "overall: unknown (sample is stale)" in out


def test_json_passes_the_document_through(status):
    with _Server(_doc(g3="warning")) as srv:
        code, out, _ = status("--url", srv.url, "--json")
    assert code == 1
    assert json.loads(out)["findings"]["G3"]["severity"] == "warning"


def test_basic_auth_from_user_flag_and_password_environment(status):
    with _Server(_doc(), user="ops", password="s3cret") as srv:
        denied = status("--url", srv.url)
        allowed = status("--url", srv.url, "--user", "ops", env={"SPARK_WATCHD_PASSWORD": "s3cret"})
    assert denied[0] == 3 and "HTTP 401" in denied[2] and "--user" in denied[2]
    assert allowed[0] == 0, allowed[2]


def test_bearer_token_from_environment(status):
    with _Server(_doc()) as srv:
        status("--url", srv.url, env={"SPARK_WATCHD_TOKEN": "tok-123"})
    assert srv.seen_auth == ["Bearer tok-123"]


def test_unreachable_daemon_is_unknown(status):
    code, _, err = status("--url", f"http://127.0.0.1:{free_port()}", "--timeout", "2")
    assert code == 3
    assert err.startswith("spark-watchd status: UNKNOWN: http://127.0.0.1:")


@pytest.mark.parametrize("body", [b"<html>hello</html>", b'{"metrics": 1}', b"[1, 2]"])
def test_something_that_is_not_spark_watchd_is_unknown(status, body):
    with _Server(body) as srv:
        code, _, err = status("--url", srv.url)
    assert code == 3
    assert "UNKNOWN" in err


def test_no_terminal_escape_from_a_foreign_string_reaches_the_terminal(status, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    doc = _doc(g6="critical")
    doc["workloads"] = [
        {
            "pid": 6666,
            "kind": "trainer",
            "members": [6666],
            "footprint_bytes": GIB,
            "capped": None,
            "cap": None,
            "cmdline": "python \x1b]0;owned\x07 \x1b[2J\x1b[H train.py \u202egnp.exe",
        }
    ]
    doc["throughput"][0]["job"] = "job\x1b[31m"
    doc["sources"]["nvml"]["error"] = "bad \x9b2J"
    doc["findings"]["G6"]["summary"] = "vLLM \x1b[8m hidden"
    with _Server(doc) as srv:
        for colour in ("never", "always"):
            _, out, _ = status("--url", srv.url, "--color", colour)
            assert "\x07" not in out and "\x9b" not in out and "\u202e" not in out
            assert "\x1b]" not in out and "\x1b[2J" not in out and "\x1b[31m" not in out
            assert "python \\x1b]0;owned\\x07 \\x1b[2J\\x1b[H train.py \\u202egnp.exe" in out
            assert "training job\\x1b[31m" in out
            assert "nvml (bad \\x9b2J)" in out
    assert "\x1b[1;31mCRITICAL\x1b[0m" in out  # the daemon's own colour still goes out


def test_prints_the_runway_and_the_fastest_growing_workloads():
    from spark_watchd.commands.status import render

    doc = _doc()
    doc["findings"]["G3"]["evidence"].update(
        runway_known=True,
        runway_s=840.0,
        runway_window_s=1200.0,
        workload_growth=[
            {"name": "vllm", "growth_gib_per_h": 57.0},
            {"name": "python3", "growth_gib_per_h": 0.0},
        ],
    )
    doc["memory"]["cma_free_bytes"] = 8 * GIB
    text = render(doc, colour=False, cols=200)
    assert "runway: 14m00s at the last 20 minutes' rate; growth vllm +57.0 GiB/h" in text
    assert "CmaFree 8.0 GiB" in text
    doc["findings"]["G3"]["evidence"]["runway_s"] = None
    assert "runway: budget not falling steadily" in render(doc, colour=False, cols=200)
