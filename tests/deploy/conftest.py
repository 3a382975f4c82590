"""Fixtures for the deployment tests: the rules generator and the shipped rules."""

from __future__ import annotations

import pytest
import yaml
from deploy_helpers import PROM, load_module


@pytest.fixture(scope="session")
def rules_gen():
    return load_module(PROM / "generate.py", "sparkwatchd_rules_generate")


@pytest.fixture(scope="session")
def shipped_rules() -> dict:
    return yaml.safe_load((PROM / "rules.yml").read_text())
