"""The shipped Prometheus rules: generated from one place, valid, unit-tested per alert, linked to the runbook."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import require_binary
from tests.deploy.deploy_helpers import (
    DEPLOY,
    PROM,
    REPO,
    alert_rules,
    rules_gen,
    runbook_anchors,
    shipped_rules,
)


def test_committed_rules_tests_and_prometheusrule_match_the_generator():
    for path, text in rules_gen().outputs().items():
        assert path.read_text() == text, (
            f"{path.relative_to(REPO)} is stale: run deploy/prometheus/generate.py"
        )


def test_no_stray_unit_test_files_beyond_the_generated_ones():
    generated = {p.name for p in rules_gen().outputs() if p.parent == PROM / "tests"}
    assert {p.name for p in (PROM / "tests").glob("*.yml")} == generated


def test_promtool_check_rules_accepts_the_shipped_rules():
    promtool = require_binary("promtool")
    out = subprocess.run(
        [promtool, "check", "rules", str(PROM / "rules.yml")], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_unit_tests_pass_for_every_case():
    promtool = require_binary("promtool")
    files = sorted(str(p) for p in (PROM / "tests").glob("*.yml"))
    out = subprocess.run(
        [promtool, "test", "rules", *files], capture_output=True, text=True, cwd=PROM / "tests"
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert out.stdout.count("SUCCESS") == len(files)


def test_every_alert_has_a_firing_case_and_a_quiet_case():
    fired, quiet = set(), set()
    for path in (PROM / "tests").glob("*.yml"):
        for t in yaml.safe_load(path.read_text())["tests"]:
            for check in t["alert_rule_test"]:
                (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {r["alert"] for r in alert_rules(shipped_rules())}
    assert names - fired == set(), "alerts never proven to fire"
    assert names - quiet == set(), "alerts never proven to stay quiet"


def test_every_alert_carries_severity_annotations_and_a_runbook_anchor_that_exists():
    anchors = runbook_anchors((REPO / "docs" / "runbook.md").read_text())
    rules = alert_rules(shipped_rules())
    assert len(rules) >= 10
    for r in rules:
        assert r["alert"].startswith("SparkWatchd"), r["alert"]
        assert r["labels"]["severity"] in ("warning", "critical")
        assert set(r["annotations"]) >= {"summary", "description", "runbook_url"}
        url = r["annotations"]["runbook_url"]
        assert url.split("#")[0].endswith("docs/runbook.md")
        assert url.split("#", 1)[1] in anchors, f"{r['alert']}: no anchor {url} in docs/runbook.md"


def test_the_pages_the_spec_requires_are_critical_with_their_gotcha():
    by_name = {r["alert"]: r["labels"] for r in alert_rules(shipped_rules())}
    for name, gotcha in [
        ("SparkWatchdThermalThrottleHurtingTraining", "G4"),
        ("SparkWatchdEviction", "G6"),
        ("SparkWatchdRebootAfterThrottle", "G4"),
        ("SparkWatchdOOMKill", "G3"),
        ("SparkWatchdStale", None),
        ("SparkWatchdDown", None),
    ]:
        assert by_name[name]["severity"] == "critical"
        assert by_name[name].get("gotcha") == gotcha
    for name, gotcha in [
        ("SparkWatchdThrottleSignature", "G4"),
        ("SparkWatchdMemoryPressure", "G3"),
        ("SparkWatchdUncappedCoTenant", "G6"),
        ("SparkWatchdPowerDeliveryFault", None),
        ("SparkWatchdNvmlLost", None),
    ]:
        assert by_name[name]["severity"] == "warning"
        assert by_name[name].get("gotcha") == gotcha


def test_the_job_selector_is_defined_in_one_place():
    other = rules_gen().dump(rules_gen().build_rules(rules_gen().Ctx(selector='job="dgx"')))
    assert 'job="spark-watchd"' not in other
    # Every raw series read goes through the selector; alerts read recorded series.
    for metric, matchers in re.findall(r"\b((?:sparkwatchd_\w+|up))\{([^}]*)\}", other):
        assert 'job="dgx"' in matchers, f"{metric}{{{matchers}}} bypasses the selector"


def test_time_scale_shrinks_every_for_and_window_and_stays_valid(tmp_path: Path):
    promtool = require_binary("promtool")
    out = tmp_path / "rules.yml"
    assert rules_gen().main(["--time-scale", "0.01", "--min-window", "3s", "--out", str(out)]) == 0
    scaled = yaml.safe_load(out.read_text())
    shipped = yaml.safe_load((PROM / "rules.yml").read_text())
    for s, r in zip(alert_rules(scaled), alert_rules(shipped), strict=True):
        if "for" in r:
            assert rules_gen().parse_duration(s["for"]) == pytest.approx(
                rules_gen().parse_duration(r["for"]) * 0.01
            )
    assert "[3s]" in out.read_text() and "[5m]" not in out.read_text()
    check = subprocess.run([promtool, "check", "rules", str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_prometheusrule_wraps_exactly_the_shipped_groups():
    pr = yaml.safe_load((DEPLOY / "kubernetes" / "prometheusrule.yaml").read_text())
    assert pr["kind"] == "PrometheusRule"
    assert pr["spec"] == shipped_rules()


@pytest.mark.parametrize("text,seconds", [("5m", 300), ("1h30m", 5400), ("500ms", 0.5), ("3s", 3)])
def test_durations_round_trip(text, seconds):
    assert rules_gen().parse_duration(text) == seconds
    assert rules_gen().format_duration(seconds) == text


def test_every_runbook_section_says_what_it_means_how_to_confirm_and_what_to_do():
    text = (REPO / "docs" / "runbook.md").read_text()
    sections = re.split(r'^<a id="', text, flags=re.M)[1:]
    by_anchor = {s.split('"', 1)[0]: s for s in sections}
    for r in alert_rules(shipped_rules()):
        body = by_anchor[r["alert"].lower()]
        assert f"## {r['alert']}" in body
        assert f"**Severity** {r['labels']['severity']}" in body
        for part in ("What it means", "**Confirm.**", "**What to do"):
            assert part in body, f"{r['alert']}: runbook section lacks {part!r}"
