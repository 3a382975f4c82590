"""README's Development section stays true: the files it names exist, the rules it states hold."""

from __future__ import annotations

import dataclasses
import re

from spark_watchd.sample.model import Sample
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
DEVELOPMENT = README[README.index("## Development") :]
PACKAGE = REPO / "spark_watchd"
# A module past SOFT_LINES is asking to be split along a seam the flow already has, unless it is one concept
# that a split would cut in two: then it is named below with why, and still stops at HARD_LINES. A number alone
# was met by packing lines (`# fmt: skip`) instead of by splitting, which helps no reader.
SOFT_LINES = 400
HARD_LINES = 500
ONE_CONCEPT = {
    "spark_watchd/config.py": "the settings: every section composed, read from file < environment < flags "
    "and validated once, each error naming its key and where it came from",
    "spark_watchd/diagnose/g3.py": "one gotcha's three stages (G4's and G6's modules have the same): the "
    "signals record, the one advance() that moves its windows, latches and holds, and the finding's words",
    "spark_watchd/daemon.py": "the daemon's life: the tick over its parts and the runner that schedules, "
    "reloads and stops it (one lock, one snapshot)",
    "spark_watchd/sample/workloads.py": "what a process's argv says: its kind, its caps, and the bounded argv "
    "that must keep every flag the caps are read from",
}
MAX_TOP_MODULES = 8


def _lines() -> dict[str, int]:
    return {
        str(p.relative_to(REPO)): len(p.read_text(encoding="utf-8", errors="replace").splitlines())
        for p in PACKAGE.rglob("*.py")
    }


def test_a_module_past_the_soft_limit_is_one_concept_named_with_why_and_under_the_hard_cap():
    lines = _lines()
    long = {path: n for path, n in lines.items() if n > SOFT_LINES and path not in ONE_CONCEPT}
    assert long == {}, (
        f"split these along a seam of the flow (docs/architecture.md), or name the concept: {long}"
    )
    over = {path: n for path, n in lines.items() if n > HARD_LINES}
    assert over == {}, f"past {HARD_LINES} lines even one concept has a seam: {over}"
    short = {path for path in ONE_CONCEPT if lines.get(path, 0) <= SOFT_LINES}
    assert short == set(), f"back under {SOFT_LINES} lines (or gone): drop them from ONE_CONCEPT"


def test_no_line_is_packed_past_the_formatter():
    packed = {
        str(p.relative_to(REPO))
        for p in PACKAGE.rglob("*.py")
        if "# fmt: skip" in p.read_text(encoding="utf-8", errors="replace")
    }
    assert packed == set(), "let `ruff format` lay these out; split the module if it grows too long"


def test_at_most_eight_modules_at_the_top_of_the_package():
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_every_file_the_development_section_names_exists():
    named = set(re.findall(r"`((?:spark_watchd|tests|docs|deploy|grafana)/[\w/.*<>-]+)`", DEVELOPMENT))
    assert len(named) > 25
    for path in sorted(named):
        if "<" in path or "*" in path:  # a pattern: its directory must exist
            path = path[: path.find("<") if "<" in path else path.find("*")].rsplit("/", 1)[0]
        assert (REPO / path).exists(), f"README's Development section names {path}, which does not exist"


def test_every_sample_field_has_its_row_in_trace_v1_md():
    doc = (REPO / "docs" / "trace-v1.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Sample") :].split("\n### ")[0]
    rows = set(re.findall(r"^\| `(\w+)`", table, re.M))
    fields = {f.name for f in dataclasses.fields(Sample)} | {"v"}
    assert fields - rows == set(), "document each new Sample field in docs/trace-v1.md"
