"""Helpers and fixtures shared by the deployment tests: the generators, the runbook anchors, the shipped rules."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PROM = DEPLOY / "prometheus"


def load_module(path: Path, name: str):
    """Import a generator script that is not part of the package."""
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses look their module up while the file runs
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(path.parent))


def runbook_anchors(text: str) -> set[str]:
    """Anchors a browser can jump to: explicit <a id> tags and GitHub heading slugs."""
    ids = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        ids.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return ids


def alert_rules(doc: dict) -> list[dict]:
    """Every alerting rule in a rules document."""
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


GRAFANA = REPO / "grafana"

# The metric names the daemon exports (docs/interfaces.md plus the team's fixed extensions).
SPEC_METRICS = {
    "up",
    "sparkwatchd_build_info",
    "sparkwatchd_source_up",
    "sparkwatchd_source_duration_seconds",
    "sparkwatchd_source_errors_total",
    "sparkwatchd_last_sample_timestamp_seconds",
    "sparkwatchd_gpu_info",
    "sparkwatchd_gpu_power_watts",
    "sparkwatchd_gpu_energy_joules_total",
    "sparkwatchd_gpu_temperature_celsius",
    "sparkwatchd_gpu_slowdown_temperature_celsius",
    "sparkwatchd_gpu_shutdown_temperature_celsius",
    "sparkwatchd_gpu_sm_clock_hertz",
    "sparkwatchd_gpu_applications_clock_hertz",
    "sparkwatchd_gpu_utilization_ratio",
    "sparkwatchd_gpu_clock_event_active",
    "sparkwatchd_gpu_clock_event_seconds_total",
    "sparkwatchd_gpu_memory_info_supported",
    *(
        f"sparkwatchd_memory_{k}_bytes"
        for k in (
            "total",
            "available",
            "available_min",
            "budget",
            "cached",
            "anon",
            "gpu_attributed",
            "swap_used",
        )
    ),
    "sparkwatchd_pressure_memory_waiting_seconds_total",
    "sparkwatchd_pressure_memory_stalled_seconds_total",
    "sparkwatchd_major_faults_total",
    "sparkwatchd_swap_out_pages_total",
    "sparkwatchd_oom_kills_total",
    "sparkwatchd_workloads",
    "sparkwatchd_workload_memory_bytes",
    "sparkwatchd_finding_level",
    "sparkwatchd_events_total",
    "sparkwatchd_throttled_seconds_total",
    "sparkwatchd_anomaly",
    "sparkwatchd_gpu_xid_errors_total",  # issue 15: driver faults (docs/driver-faults.md)
    "sparkwatchd_training_step_seconds",
    "sparkwatchd_training_tokens_per_second",
    "sparkwatchd_training_slowdown_ratio",
    "sparkwatchd_training_last_report_timestamp_seconds",
    # GB10 board telemetry (community spbm driver; README metrics table, docs/daemon.md)
    "sparkwatchd_board_power_watts",
    "sparkwatchd_board_power_limit_watts",
    "sparkwatchd_board_energy_joules_total",
    "sparkwatchd_board_temperature_celsius",
    "sparkwatchd_board_tj_headroom_celsius",
    "sparkwatchd_board_prochot",
    "sparkwatchd_board_power_limit_level",
    # The ConnectX-7 ports (issue 23; README metrics table, docs/sources.md)
    *(f"sparkwatchd_link_{k}" for k in ("up", "rate_bytes_per_second", "problem")),
    *(
        f"sparkwatchd_link_{k}_total"
        for k in (
            "downed",
            "symbol_errors",
            "receive_errors",
            "retransmits",
            "carrier_changes",
            "netdev_errors",
            "netdev_drops",
            "transmit_bytes",
            "receive_bytes",
        )
    ),  # fmt: skip
    # The inference servers' own telemetry (issue 21; README metrics table, docs/serving.md)
    *(
        f"sparkwatchd_serving_{k}"
        for k in (
            "up",
            "requests_running",
            "requests_waiting",
            "kv_cache_usage_ratio",
            "kv_cache_capacity_tokens",
            "generation_tokens_per_second",
            "prompt_tokens_per_second",
            "preemptions_per_second",
            "joules_per_token",
            "generation_tokens_total",
            "preemptions_total",
            "time_to_first_token_p50_seconds",
            "time_to_first_token_p95_seconds",
            "inter_token_latency_p50_seconds",
            "inter_token_latency_p95_seconds",
            "models_loaded",
            "model_memory_bytes",
            "model_expiry_seconds",
        )
    ),  # fmt: skip
}
# Queries whose series exist only on a Spark with the spbm driver, an RDMA link, an inference server or in a
# `cluster`: the replayed scenarios of test_e2e_alerting.py have neither; test_e2e_fleet.py checks these on its
# own stack (its traces carry board, link and serving[]).
FLEET_ONLY = re.compile(r"sparkwatchd_board_|sparkwatchd_link_|sparkwatchd:cluster_|sparkwatchd[_:]serving_")

METRIC_RE = re.compile(r"\b(sparkwatchd[:_][\w:]+|up)\{")


def dashboard_queries(dash: dict) -> list[tuple[str, str]]:
    """(where, expr) for every panel target and annotation query of a dashboard."""
    out = [
        (f"panel {p['title']!r} {t['refId']}", t["expr"]) for p in panels(dash) for t in p.get("targets", [])
    ]
    out += [(f"annotation {a['name']!r}", a["expr"]) for a in dash["annotations"]["list"] if "expr" in a]
    return out


def panels(dash: dict) -> list[dict]:
    """Every non-row panel."""
    return [p for p in dash["panels"] if p["type"] != "row"]


def load_dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((GRAFANA / "dashboards").glob("*.json"))}


@functools.cache
def rules_gen():
    """deploy/prometheus/generate.py as a module."""
    return load_module(PROM / "generate.py", "sparkwatchd_rules_generate")


def shipped_rules() -> dict:
    """The committed deploy/prometheus/rules.yml."""
    return yaml.safe_load((PROM / "rules.yml").read_text())
