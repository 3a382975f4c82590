"""The README's tables say what the code does: every exported family, the event kinds, the exit codes."""

from __future__ import annotations

import re

from spark_watchd.errors import EX_CONFIG, EX_DATAERR, EX_NOPERM, EX_SOFTWARE, EX_USAGE
from spark_watchd.export.diagnosis import EVENT_KINDS
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _families() -> set[str]:
    names = set()
    for golden in (REPO / "tests" / "golden").glob("*.prom"):
        names |= set(re.findall(r"^# TYPE (sparkwatchd_\S+) ", golden.read_text(), re.M))
    return names


def test_every_exported_family_is_in_the_readme():
    names = _families()
    assert "sparkwatchd_thermal_throttle_active" in names
    # Rows shorten later names of a group to their tail (`sparkwatchd_memory_total_bytes`, `_available_bytes`).
    missing = [
        n for n in sorted(names)
        if n[len("sparkwatchd"):] not in README and n[len("sparkwatchd_memory"):] not in README
    ]  # fmt: skip
    assert missing == []


def test_the_event_kinds_listed_are_the_exported_ones():
    row = next(ln for ln in README.splitlines() if ln.startswith("| `sparkwatchd_events_total`"))
    listed = re.findall(r"`(\w+)`", row.split("|")[2])
    assert listed[0] == "kind" and tuple(listed[1:]) == EVENT_KINDS


def test_every_exit_code_is_listed():
    para = README[README.index("Exit codes:") :][:900]
    for code in (0, EX_SOFTWARE, EX_USAGE, EX_DATAERR, EX_NOPERM, EX_CONFIG):
        assert re.search(rf"(?<![\d.]){code}(?![\d.])", para), code


def test_the_training_job_label_rename_is_said():
    assert "exported_job" in README
