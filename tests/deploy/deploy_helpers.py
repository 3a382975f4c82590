"""Helpers and fixtures shared by the deployment tests: the generators, the runbook anchors, the shipped rules."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

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
