"""Building blocks for the spark-watchd dashboards: queries through the variables, panels, layout, annotations."""

from __future__ import annotations

DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'job=~"$job", instance=~"$instance"'
LEVELS = [
    {"type": "value", "options": {"-1": {"text": "unknown", "color": "text", "index": 0}}},
    {"type": "value", "options": {"0": {"text": "ok", "color": "green", "index": 1}}},
    {"type": "value", "options": {"1": {"text": "warning", "color": "orange", "index": 2}}},
    {"type": "value", "options": {"2": {"text": "critical", "color": "red", "index": 3}}},
]


def m(metric: str, extra: str = "") -> str:
    """A metric read through the dashboard's job/instance variables."""
    return f"{metric}{{{SEL}{', ' + extra if extra else ''}}}"


def q(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> dict:
    t = {"datasource": DS, "expr": expr, "legendFormat": legend or "__auto", "refId": ref}
    if instant:
        t.update({"instant": True, "range": False, "format": "table"})
    return t


def refs(*targets: tuple) -> list[dict]:
    """Targets with refIds A, B, C... in order."""
    return [q(*t[:2], ref=chr(65 + i), instant=t[2] if len(t) > 2 else False) for i, t in enumerate(targets)]


class Layout:
    """Places panels left to right on a 24-column grid, wrapping rows."""

    def __init__(self):
        self.x = self.y = self.h = 0
        self.panels: list[dict] = []

    def row(self, title: str) -> None:
        self.y += self.h
        self.x = self.h = 0
        self.panels.append(
            {
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"x": 0, "y": self.y, "w": 24, "h": 1},
            }
        )
        self.y += 1

    def add(self, panel: dict, w: int = 12, h: int = 8) -> None:
        if self.x + w > 24:
            self.y += self.h
            self.x = self.h = 0
        panel["gridPos"] = {"x": self.x, "y": self.y, "w": w, "h": h}
        panel["id"] = len(self.panels) + 1
        self.x += w
        self.h = max(self.h, h)
        self.panels.append(panel)


def panel(kind: str, title: str, desc: str, targets: list[dict], unit: str, **extra) -> dict:
    defaults = {"unit": unit}
    for k in ("min", "max", "decimals", "mappings", "thresholds", "custom"):
        if k in extra:
            defaults[k] = extra.pop(k)
    p = {
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": extra.pop("overrides", [])},
        "options": extra.pop("options", {"legend": {"displayMode": "list", "placement": "bottom"}}),
    }
    p.update(extra)
    return p


def unit_override(pattern: str, unit: str, **props) -> dict:
    """Give series whose display name matches `pattern` their own unit (and axis)."""
    properties = [{"id": "unit", "value": unit}] + [{"id": k, "value": v} for k, v in props.items()]
    return {"matcher": {"id": "byRegexp", "options": pattern}, "properties": properties}


def threshold_steps(*steps: tuple) -> dict:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in steps]}


def variables(multi_instance: bool) -> dict:
    def query_var(name: str, label: str, query: str, multi: bool) -> dict:
        return {
            "name": name,
            "label": label,
            "type": "query",
            "datasource": DS,
            "query": {"query": query, "refId": f"{name}-var"},
            "definition": query,
            "refresh": 2,
            "sort": 1,
            "multi": multi,
            "includeAll": multi,
            "current": {},
        }

    return {
        "list": [
            {
                "name": "datasource",
                "label": "Data source",
                "type": "datasource",
                "query": "prometheus",
                "current": {},
                "refresh": 1,
            },
            query_var("job", "Job", "label_values(sparkwatchd_build_info, job)", False),
            query_var(
                "instance",
                "Spark",
                'label_values(sparkwatchd_build_info{job=~"$job"}, instance)',
                multi_instance,
            ),
        ]
    }


def annotations() -> dict:
    def ann(name: str, expr: str, color: str, title: str, text: str) -> dict:
        return {
            "name": name,
            "datasource": DS,
            "enable": True,
            "iconColor": color,
            "expr": expr,
            "step": "60s",
            "titleFormat": title,
            "textFormat": text,
            "tagKeys": "gotcha,kind",
        }

    builtin = {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }
    return {
        "list": [
            builtin,
            ann(
                "Throttle (G4)",
                m("sparkwatchd_finding_level", 'gotcha="G4"') + " >= 1",
                "red",
                "G4 throttle",
                "G4 finding warning or critical on {{instance}}",
            ),
            ann(
                "Findings (G3, G6)",
                m("sparkwatchd_finding_level", 'gotcha=~"G3|G6"') + " >= 1",
                "orange",
                "{{gotcha}} finding",
                "{{gotcha}} warning or critical on {{instance}}",
            ),
            ann(
                "Events",
                f"increase({m('sparkwatchd_events_total')}[2m]) > 0",
                "purple",
                "{{kind}}",
                "spark-watchd event {{kind}} on {{instance}}",
            ),
        ]
    }


def dashboard(uid: str, title: str, desc: str, panels: list[dict], multi_instance: bool) -> dict:
    return {
        "uid": uid,
        "title": title,
        "description": desc,
        "tags": ["spark-watchd", "dgx-spark", "gb10"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "schemaVersion": 39,
        "version": 1,
        "templating": variables(multi_instance),
        "annotations": annotations(),
        "links": [],
        "panels": panels,
    }
