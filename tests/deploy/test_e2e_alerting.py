"""End to end: replayed GB10 traces -> spark-watchd -> real Prometheus (shipped rules) -> real Alertmanager -> webhook.

Two daemons replay the throttle and the eviction scenarios 600x faster than
recorded, looping. The shipped rules are regenerated with every `for:` and
range window scaled by TIME_SCALE (floor MIN_WINDOW): the documented test
mechanism of docs/alerts.md. The shipped Alertmanager config is used with its
receivers pointed at a webhook this test runs, and its group timers shortened.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import cli_env, free_port, require_binary
from tests.deploy.deploy_helpers import (
    DEPLOY,
    FLEET_ONLY,
    PROM,
    REPO,
    dashboard_queries,
    load_dashboards,
    rules_gen,
    runbook_anchors,
)
from tests.support.fakes import CaptureServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPEED = 600  # 30 s recorded samples every 50 ms: the 3 h throttle trace loops every 18 s
TIME_SCALE = 0.01  # 5 m windows -> 3 s, for: 1m -> 600 ms
MIN_WINDOW = "3s"  # at least three 1 s scrapes in any window
SCENARIOS = REPO / "spark_watchd" / "scenarios"
DEADLINE_S = 120  # the issue: a replayed throttle pages within two minutes of starting the stack


class Webhook(CaptureServer):
    """Alertmanager's receiver: records every notification per path (/pager, /chat)."""

    @property
    def received(self) -> list[tuple[str, dict]]:
        return [(r.path, json.loads(r.body)) for r in self.requests]

    def alerts(self, path: str | None = None) -> list[dict]:
        return [a for p, body in self.received if path in (None, p) for a in body["alerts"]]

    def wait_for_alerts(self, pred, timeout: float) -> list[dict]:
        """The alerts matching pred(path, alert), once there is at least one (or timeout passed)."""
        self.wait_until(lambda _reqs: any(pred(p, a) for p, b in self.received for a in b["alerts"]), timeout)
        return [a for p, b in self.received for a in b["alerts"] if pred(p, a)]


def get_json(url: str, params: dict | None = None) -> dict | list:
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # Prometheus says why a query is bad in the body
        raise AssertionError(f"{url}: {e.code} {e.read().decode()[:500]}") from None


def queries_without_data(prom: str, pending: list, timeout: float = 60.0) -> list:
    """The (name, where, expr) dashboard queries that still return no data over the last 2 minutes after
    polling `prom` until each has some or `timeout` passes; a query Prometheus refuses fails at once."""
    end = time.monotonic() + timeout
    while pending and time.monotonic() < end:
        still = []
        for name, where, expr in pending:
            now = time.time()
            res = get_json(
                f"{prom}/api/v1/query_range", {"query": expr, "start": now - 120, "end": now, "step": "1"}
            )
            assert res["status"] == "success", (name, where, expr, res)
            if not any(s["values"] for s in res["data"]["result"]):
                still.append((name, where, expr))
        pending = still
        if pending:
            time.sleep(1)
    return pending


class Spawner:
    """The processes of one e2e stack. Each logs to its own file, not a pipe a chatty process could fill
    (`proc.log_path`, which wait_ready quotes when one exits); stop() ends them all."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.procs: list[subprocess.Popen] = []

    def __call__(self, args: list[str], **kw) -> subprocess.Popen:
        log = open(self.logdir / f"{len(self.procs)}-{Path(args[0]).name}.log", "w")  # noqa: SIM115
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, text=True, **kw)
        p.log_path = log.name
        log.close()
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            with open(proc.log_path) as f:
                raise AssertionError(f"{proc.args[0]} exited {proc.returncode}: {f.read()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} not ready after {timeout}s")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    prometheus = require_binary("prometheus")
    alertmanager = require_binary("prometheus-alertmanager")
    tmp = tmp_path_factory.mktemp("e2e")
    generate = rules_gen()
    hook = Webhook()
    ports = {k: free_port() for k in ("throttle", "eviction", "prom", "am")}
    spawn = Spawner(tmp)
    started = time.monotonic()

    try:
        # The documented time-scale mechanism: the same generator, every duration scaled.
        rules = tmp / "rules.yml"
        assert (
            generate.main(["--time-scale", str(TIME_SCALE), "--min-window", MIN_WINDOW, "--out", str(rules)])
            == 0
        )

        am_cfg = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
        am_cfg["route"].update(group_wait="1s", group_interval="1s", repeat_interval="1m")
        for r in am_cfg["receivers"]:
            r["webhook_configs"][0]["url"] = f"{hook.url}/{r['name']}"
        (tmp / "am.yml").write_text(yaml.safe_dump(am_cfg))

        prom_cfg = yaml.safe_load((PROM / "prometheus-single.yml").read_text())
        prom_cfg["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        prom_cfg["rule_files"] = [str(rules)]
        prom_cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [
            f"127.0.0.1:{ports['am']}"
        ]
        job = prom_cfg["scrape_configs"][0]
        job["static_configs"] = [
            {"targets": [f"127.0.0.1:{ports[s]}"], "labels": {"scenario": s}}
            for s in ("throttle", "eviction")
        ]
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(prom_cfg))

        daemons = {}
        for scenario in ("throttle", "eviction"):
            daemons[scenario] = spawn(
                [sys.executable, "-m", "spark_watchd", "run", "--replay", str(SCENARIOS / f"{scenario}.jsonl"),
                 "--speed", str(SPEED), "--loop", "--interval", "1", "--listen", f"127.0.0.1:{ports[scenario]}",
                 "--state-dir", str(tmp / f"state-{scenario}")],
                env=cli_env(), cwd=str(REPO),
            )  # fmt: skip
        am = spawn(
            [alertmanager, f"--config.file={tmp / 'am.yml'}", f"--storage.path={tmp / 'am'}",
             f"--web.listen-address=127.0.0.1:{ports['am']}", "--cluster.listen-address="]
        )  # fmt: skip
        prom = spawn(
            [prometheus, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'prom'}",
             f"--web.listen-address=127.0.0.1:{ports['prom']}", "--rules.alert.resend-delay=1s"]
        )  # fmt: skip
        prom_url, am_url = f"http://127.0.0.1:{ports['prom']}", f"http://127.0.0.1:{ports['am']}"
        wait_ready(f"{am_url}/-/ready", am)
        wait_ready(f"{prom_url}/-/ready", prom)
        for scenario, p in daemons.items():
            wait_ready(f"http://127.0.0.1:{ports[scenario]}/metrics", p)
        yield {
            "hook": hook,
            "prom": prom_url,
            "am": am_url,
            "started": started,
            "instances": {s: f"127.0.0.1:{ports[s]}" for s in ("throttle", "eviction")},
            "procs": spawn.procs,
        }
    finally:
        spawn.stop()
        hook.close()


def page(path: str, alertname: str, gotcha: str, instance: str):
    def pred(p: str, a: dict) -> bool:
        lb = a["labels"]
        return (
            p == path
            and a["status"] == "firing"
            and lb.get("alertname") == alertname
            and lb.get("gotcha") == gotcha
            and lb.get("severity") == "critical"
            and lb.get("instance") == instance
        )

    return pred


def test_replayed_throttle_and_eviction_page_through_alertmanager(stack):
    hook, inst = stack["hook"], stack["instances"]
    left = DEADLINE_S - (time.monotonic() - stack["started"])
    g4 = hook.wait_for_alerts(
        page("/pager", "SparkWatchdThermalThrottleHurtingTraining", "G4", inst["throttle"]), left
    )
    g4_after = time.monotonic() - stack["started"]
    left = DEADLINE_S - (time.monotonic() - stack["started"])
    g6 = hook.wait_for_alerts(page("/pager", "SparkWatchdEviction", "G6", inst["eviction"]), left)
    got = sorted(
        {
            (p, a["labels"]["alertname"], a["labels"]["instance"])
            for p, b in hook.received
            for a in b["alerts"]
        }
    )
    assert g4, f"no G4 page within {DEADLINE_S}s; webhook got {got}"
    assert g6, f"no G6 page within {DEADLINE_S}s; webhook got {got}"
    print(f"\nG4 page delivered {g4_after:.1f}s after the stack started")
    # Pages go to the pager, never to chat; the throttle Spark is not paged for eviction.
    assert not any(a["labels"].get("severity") == "critical" for a in hook.alerts("/chat"))
    assert not any(
        a["labels"]["alertname"] == "SparkWatchdEviction" and a["labels"]["instance"] == inst["throttle"]
        for a in hook.alerts()
    )


def test_throttle_warning_is_inhibited_while_the_g4_page_fires(stack):
    end = time.monotonic() + 60
    seen = []
    while time.monotonic() < end:
        alerts = get_json(
            f"{stack['am']}/api/v2/alerts", {"filter": 'alertname="SparkWatchdThrottleSignature"'}
        )
        seen = [a["status"] for a in alerts if a["labels"]["instance"] == stack["instances"]["throttle"]]
        if any(s["state"] == "suppressed" and s["inhibitedBy"] for s in seen):
            return
        time.sleep(0.5)
    raise AssertionError(f"G4 warning never inhibited by the G4 page: {seen}")


def test_every_rule_evaluates_without_error(stack):
    groups = get_json(f"{stack['prom']}/api/v1/rules")["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == sum(
        len(g["rules"]) for g in yaml.safe_load((PROM / "rules.yml").read_text())["groups"]
    )
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad


def test_every_runbook_url_points_at_an_anchor_in_the_runbook(stack):
    anchors = runbook_anchors((REPO / "docs" / "runbook.md").read_text())
    groups = get_json(f"{stack['prom']}/api/v1/rules", {"type": "alert"})["data"]["groups"]
    urls = {r["name"]: r["annotations"]["runbook_url"] for g in groups for r in g["rules"]}
    urls.update({a["labels"]["alertname"]: a["annotations"]["runbook_url"] for a in stack["hook"].alerts()})
    assert len(urls) >= 10
    missing = {name: url for name, url in urls.items() if url.split("#", 1)[-1] not in anchors}
    assert not missing


def substitute(expr: str, instances: list[str]) -> str:
    """What Grafana sends: the variables replaced by their (All) values."""
    # Grafana escapes regex metacharacters twice inside PromQL strings.
    regex = "|".join(re.escape(i).replace("\\", "\\\\") for i in instances)
    return (
        expr.replace("$job", "spark-watchd")
        .replace("$instance", regex)
        .replace("$__rate_interval", "4s")
        .replace("$__range", "2m")
    )


def test_every_dashboard_query_returns_data(stack):
    instances = list(stack["instances"].values())
    pending = [
        (name, where, substitute(expr, instances))
        for name, dash in load_dashboards().items()
        for where, expr in dashboard_queries(dash)
        if not FLEET_ONLY.search(expr)  # board and cluster panels: test_e2e_fleet.py
    ]
    assert len(pending) > 30
    pending = queries_without_data(stack["prom"], pending)
    scrapes = get_json(f"{stack['prom']}/api/v1/query", {"query": "count_over_time(up[1m])"})["data"][
        "result"
    ]
    assert not pending, f"queries without data (scrapes in the last minute: {scrapes}):\n" + "\n".join(
        f"{n} {w}: {e}" for n, w, e in pending
    )
