"""The Grafana dashboards: generated, every panel with a unit, every query through the variables, known metrics."""

from __future__ import annotations

import yaml

from tests.deploy.deploy_helpers import (
    GRAFANA,
    METRIC_RE,
    PROM,
    SPEC_METRICS,
    dashboard_queries,
    load_dashboards,
    load_module,
    panels,
)


def test_committed_dashboards_match_the_generator():
    build = load_module(GRAFANA / "build.py", "sparkwatchd_grafana_build")
    assert set(load_dashboards()) == set(build.DASHBOARDS) == {"spark-overview.json", "spark-fleet.json"}
    for name, fn in build.DASHBOARDS.items():
        assert (GRAFANA / "dashboards" / name).read_text() == build.render(fn), (
            f"{name} stale: run grafana/build.py"
        )


def test_every_panel_sets_a_unit_and_reads_the_datasource_variable():
    for name, dash in load_dashboards().items():
        for p in panels(dash):
            assert p["fieldConfig"]["defaults"].get("unit"), f"{name}: panel {p['title']!r} has no unit"
            assert p["datasource"]["uid"] == "${datasource}"
            assert p["targets"], f"{name}: panel {p['title']!r} has no query"
            for t in p["targets"]:
                assert t["datasource"]["uid"] == "${datasource}"


def test_datasource_job_and_instance_are_template_variables():
    for name, dash in load_dashboards().items():
        by_name = {v["name"]: v for v in dash["templating"]["list"]}
        assert (
            by_name["datasource"]["type"] == "datasource" and by_name["datasource"]["query"] == "prometheus"
        )
        assert by_name["instance"]["type"] == "query" and "$job" in by_name["instance"]["definition"]
        assert by_name["instance"]["multi"] is (name == "spark-fleet.json")


def test_every_query_goes_through_job_and_instance_and_names_known_series():
    recorded = {
        r["record"]
        for g in yaml.safe_load((PROM / "rules.yml").read_text())["groups"]
        for r in g["rules"]
        if "record" in r
    }
    for name, dash in load_dashboards().items():
        for where, expr in dashboard_queries(dash):
            assert 'instance=~"$instance"' in expr and 'job=~"$job"' in expr, f"{name} {where}: {expr}"
            metrics = METRIC_RE.findall(expr)
            assert metrics, f"{name} {where}: no metric in {expr}"
            unknown = set(metrics) - SPEC_METRICS - recorded
            assert not unknown, f"{name} {where}: unknown series {unknown}"


def test_overview_has_the_panels_the_issue_asks_for_and_throttle_annotations():
    dash = load_dashboards()["spark-overview.json"]
    titles = {p["title"] for p in panels(dash)}
    assert {
        "Findings",
        "Power and temperature",
        "SM clock vs applications clock",
        "Throttle reasons (share of time)",
        "UMA composition",
        "Memory pressure (PSI)",
        "Swap-out and major faults",
        "Workloads",
        "Step time",
        "Tokens per second",
    } <= titles
    uma = next(p for p in panels(dash) if p["title"] == "UMA composition")
    legends = {t["legendFormat"] for t in uma["targets"]}
    assert {
        "available",
        "available (window minimum)",
        "budget",
        "page cache",
        "anon",
        "GPU-attributed",
        "unexplained",
    } <= legends
    power = next(p for p in panels(dash) if p["title"] == "Power and temperature")
    assert any("slowdown" in t["expr"] for t in power["targets"])
    names = {a["name"]: a for a in dash["annotations"]["list"]}
    assert 'gotcha="G4"' in names["Throttle (G4)"]["expr"] and "events_total" in names["Events"]["expr"]


def test_fleet_table_has_one_column_per_finding_and_the_key_readings():
    dash = load_dashboards()["spark-fleet.json"]
    table = next(p for p in panels(dash) if p["type"] == "table")
    rename = next(t for t in table["transformations"] if t["id"] == "organize")["options"]["renameByName"]
    assert set(rename.values()) == {"G3", "G4", "G6", "Power", "Temperature", "Available memory", "Step time"}
    assert all(t.get("instant") and t["format"] == "table" for t in table["targets"])
    units = {
        o["matcher"]["options"]: o["properties"][0]["value"] for o in table["fieldConfig"]["overrides"][1:]
    }
    assert units == {"Power": "watt", "Temperature": "celsius", "Available memory": "bytes", "Step time": "s"}


def test_provisioning_points_at_the_dashboards_the_compose_stack_mounts():
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert ds["datasources"][0]["type"] == "prometheus"
    prov = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "spark-watchd.yml").read_text())
    path = prov["providers"][0]["options"]["path"]
    compose = yaml.safe_load((PROM.parent / "docker-compose" / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert any(v.startswith("../../grafana/dashboards:") and v.split(":")[1] == path for v in mounts)


def test_the_workload_panels_draw_only_the_kinds_present():
    # The exporter keeps all kind x capped series (stable, mostly 0): drawn raw, 14 of 16 lines sat at zero.
    dash = load_dashboards()["spark-overview.json"]
    series = {p["title"]: p for p in panels(dash) if p.get("type") == "timeseries"}
    for title in ("Workloads", "Workload memory"):
        (target,) = series[title]["targets"]
        assert target["expr"].endswith(" > 0"), target["expr"]
