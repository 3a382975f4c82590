"""`once --format envelope`: NVIDIA's fleet-tool JSON envelope, and a quiet `once` on a terminal (issue 34)."""

from __future__ import annotations

import json
import re

from spark_watchd.commands import envelope
from spark_watchd.sample.findings import Diagnosis, Finding
from spark_watchd.sample.trace import read_trace
from spark_watchd.snapshot import SourceStatus
from tests.conftest import FIXTURES, run_cli

VM_ROOT = FIXTURES / "hosts" / "daemon-vm" / "proc"
ENV = {"SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT), "SPARK_WATCHD_FAKE_NVML": "gb10"}


def assert_is_envelope(doc: dict) -> None:
    """The documented contract (common/output.py of NVIDIA's DGX Spark Enterprise Manageability scripts)."""
    assert set(doc) == {"ok", "data", "errors", "meta"}
    assert isinstance(doc["ok"], bool)
    assert (doc["data"] is None) is (not doc["ok"])  # ok: false sets data: null
    assert isinstance(doc["errors"], list)
    for e in doc["errors"]:
        assert set(e) == {"code", "message", "detail", "hint", "severity"}
        assert e["severity"] in ("error", "warning") and all(isinstance(e[k], str) for k in e)
    assert doc["ok"] is not any(e["severity"] == "error" for e in doc["errors"])
    assert set(doc["meta"]) >= {"tool", "version", "collected_at_utc"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["meta"]["collected_at_utc"])


def test_once_envelope_on_a_healthy_gb10_is_ok_with_the_sample_as_data():
    res = run_cli("once", "--format", "envelope", env=ENV)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)  # one document on stdout, nothing else
    assert_is_envelope(doc)
    assert doc["ok"] is True and doc["meta"]["tool"] == "spark_watchd"
    assert doc["data"]["gpus"][0]["name"] == "NVIDIA GB10"
    assert set(doc["data"]["findings"]) >= {"G3", "G4", "G6"}
    assert doc["data"]["memory"]["available_bytes"] > 0


def test_once_envelope_with_a_bad_config_exits_2_with_the_key_named(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[daemon]\ninterval = -5\n")
    res = run_cli("once", "--format", "envelope", "--config", str(cfg), env=ENV)
    assert res.returncode == 2
    doc = json.loads(res.stdout)
    assert_is_envelope(doc)
    assert doc["ok"] is False and doc["errors"][0]["code"] == "BAD_CONFIGURATION"
    assert "interval" in doc["errors"][0]["message"]


def _tick(findings: dict[str, Finding], down: dict[str, str] | None = None):
    sample = next(iter(read_trace(FIXTURES / "traces" / "public" / "healthy.jsonl")))
    statuses = {"meminfo": SourceStatus("meminfo", True)}
    for name, err in (down or {}).items():
        statuses[name] = SourceStatus(name, False, 0.0, 1, err)
    return sample, None, Diagnosis(ts=sample.ts, findings=findings, events=()), statuses


def test_a_critical_finding_fails_the_envelope_with_evidence_as_detail_and_advice_as_hint():
    g6 = Finding(
        "G6",
        "critical",
        "Eviction: trainer lost 40 GiB",
        {"lost_bytes": 42949672960},
        ("cap vLLM with --gpu-memory-utilization 0.5", "restart the trainer"),
    )
    doc, code = envelope.from_tick(*_tick({"G6": g6, "G3": Finding("G3", "warning", "Budget thin")}))
    assert_is_envelope(doc)
    assert code == 1 and doc["ok"] is False and doc["data"] is None
    by_code = {e["code"]: e for e in doc["errors"]}
    assert by_code["G6_CRITICAL"]["severity"] == "error"
    assert by_code["G6_CRITICAL"]["hint"] == "cap vLLM with --gpu-memory-utilization 0.5"
    assert by_code["G6_CRITICAL"]["detail"] == "lost_bytes=42949672960"
    assert by_code["G3_WARNING"]["severity"] == "warning"


def test_warnings_and_a_down_source_keep_the_envelope_ok_and_say_so():
    tick = _tick({"G4": Finding("G4", "warning", "Near the slowdown")}, down={"nvml": "Driver Not Loaded"})
    doc, code = envelope.from_tick(*tick)
    assert_is_envelope(doc)
    assert code == 0 and doc["ok"] is True and doc["data"]["worst"] == "warning"
    assert [(e["code"], e["severity"]) for e in doc["errors"]] == [
        ("G4_WARNING", "warning"),
        ("SOURCE_DOWN", "warning"),
    ]
    assert doc["errors"][1]["detail"] == "Driver Not Loaded"


def test_once_on_a_terminal_prints_its_answer_without_the_daemons_info_lines():
    res = run_cli("once", env={"SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT)})
    assert res.returncode == 0
    assert "source nvml down" in res.stdout  # the answer says it
    assert '"level": "info"' not in res.stderr and "[info" not in res.stderr, res.stderr
    loud = run_cli("once", "--log-level", "info", env={"SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT)})
    assert "nvml" in loud.stderr  # asked for: given
