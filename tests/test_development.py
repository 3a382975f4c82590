"""README's Development section stays true: the files it names exist, the rules it states hold."""

from __future__ import annotations

import dataclasses
import re

from spark_watchd.sample.model import Sample
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
DEVELOPMENT = README[README.index("## Development") :]
PACKAGE = REPO / "spark_watchd"
MAX_LINES = 400  # a module past this is asking to be split along a seam the flow already has
MAX_TOP_MODULES = 8


def test_no_module_is_over_400_lines():
    long = {
        str(p.relative_to(REPO)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8", errors="replace").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these along a seam of the flow (docs/architecture.md): {long}"


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
