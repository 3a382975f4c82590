"""`spark-watchd once`: one sample from a fixture host, classified, printed as a trace-v1 line."""

from __future__ import annotations

import json

from spark_watchd.sample.trace import parse_line
from spark_watchd.sources.parsers import parse_meminfo
from tests.conftest import FIXTURES, run_cli

VM_ROOT = FIXTURES / "hosts" / "daemon-vm" / "proc"


def test_once_json_is_a_trace_v1_line_with_findings(tmp_path):
    res = run_cli("once", "--json", env={"SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT)})
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert parse_line(res.stdout)["v"] == 1
    assert obj["meminfo"]["MemAvailable"] == parse_meminfo((VM_ROOT / "meminfo").read_text())["MemAvailable"]
    assert set(obj["findings"]) >= {"G3", "G4", "G6"} and obj["sources"]["nvml"]["up"] is False


def test_once_prints_memory_gpu_down_sources_and_every_finding_for_a_person(tmp_path):
    env = {"SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT), "SPARK_WATCHD_FAKE_NVML": "gb10"}
    res = run_cli("once", env=env)
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    meminfo = parse_meminfo((VM_ROOT / "meminfo").read_text())
    assert f"memory: {meminfo['MemAvailable'] / 1024**2:.1f} GiB available" in res.stdout
    assert any(line.startswith("gpu 0 NVIDIA GB10: ") for line in out)
    for gotcha in ("G3", "G4", "G6"):
        assert any(line.startswith(f"{gotcha} ") for line in out), gotcha


def test_once_prints_the_board_line_only_with_the_spbm_driver(tmp_path):
    env = {
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT),
        "SPARK_WATCHD_FAKE_NVML": "gb10",
        "COLUMNS": "120",
    }
    res = run_cli(
        "once", env={**env, "SPARK_WATCHD_SOURCES__SYS_ROOT": str(FIXTURES / "hosts" / "gb10-spbm" / "sys")}
    )
    assert res.returncode == 0, res.stderr
    assert "board: system 128.4 W dc_input 135.6 W Tj 72.5 C (headroom 13.5 C) PROCHOT 0" in res.stdout
    res = run_cli("once", env={**env, "SPARK_WATCHD_SOURCES__SYS_ROOT": str(tmp_path)})
    assert res.returncode == 0 and "board:" not in res.stdout


def test_once_with_a_bad_config_exits_78_naming_the_key(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[daemon]\ninterval = 0\n")
    res = run_cli("once", "--config", str(cfg))
    assert res.returncode == 78 and "daemon.interval" in res.stderr


def test_once_prints_each_connectx7_port_with_its_state_and_rate(tmp_path):
    env = {
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT),
        "SPARK_WATCHD_FAKE_NVML": "gb10",
        "COLUMNS": "120",
        "SPARK_WATCHD_SOURCES__SYS_ROOT": str(FIXTURES / "hosts" / "gb10-cx7" / "sys"),
    }
    res = run_cli("once", env=env)
    assert res.returncode == 0, res.stderr
    assert "link rocep1s0f0/1 (enp1s0f0np0): up 200 Gb/s" in res.stdout
    assert "link rocep1s0f1/1 (enp1s0f1np1): down" in res.stdout
    res = run_cli("once", env={**env, "SPARK_WATCHD_SOURCES__SYS_ROOT": str(tmp_path)})
    assert res.returncode == 0 and "link " not in res.stdout
