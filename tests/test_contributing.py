"""CONTRIBUTING.md walks real code: every file and test it names exists."""

from __future__ import annotations

import re

from tests.conftest import REPO

GUIDE = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
TEST_SOURCES = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("test_*.py"))


def _exists(name: str) -> bool:
    """A path from the repository root or the package, or a bare file name somewhere in either."""
    if "/" in name:
        return (REPO / name).exists() or (REPO / "spark_watchd" / name).exists()
    return any(REPO.glob(f"spark_watchd/**/{name}")) or (REPO / name).exists()


def test_every_file_the_guide_names_exists():
    names = set(re.findall(r"`([\w./-]+\.(?:py|md|js))`", GUIDE))
    assert {"spark_watchd/sample/model.py", "docs/trace-v1.md"} <= names
    assert sorted(n for n in names if not _exists(n)) == []


def test_every_test_the_guide_names_exists():
    named = set(re.findall(r"`(test_\w+)`", GUIDE))
    assert sorted(t for t in named if f"def {t}(" not in TEST_SOURCES) == []
