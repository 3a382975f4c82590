"""docs/trace-v1.md says what the declarations say: every declared key has its row (or its place in its
record's row), with the type its kind reads as, and the tables list no key the code does not declare."""

from __future__ import annotations

import dataclasses
import re

import pytest

from spark_watchd.sample.board import BoardReading
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.kills import KillReport
from spark_watchd.sample.link import LinkPort
from spark_watchd.sample.model import (
    GpuReading,
    ProcessInfo,
    Sample,
    Sensor,
    ServingProgress,
    ThroughputReading,
)
from spark_watchd.sample.schema import BOOL, INT, STR, specs
from spark_watchd.sample.serving import OllamaModel, ServingReading
from tests.conftest import REPO

DOC = (REPO / "docs" / "trace-v1.md").read_text(encoding="utf-8")


def _table(heading: str) -> dict[str, str]:
    """{key: its type cell} of the key table under `heading`; a row naming several keys gives each its own
    type (`int, str, str`) or the one type they share."""
    section = DOC[DOC.index(f"\n{heading}\n") :]
    rows = {}
    for line in section.split("\n| key |", 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        keys, types = re.findall(r"`(\w+)`", cells[0]), [t.strip() for t in cells[1].split(", ")]
        rows |= {k: types[i] if len(types) == len(keys) else cells[1] for i, k in enumerate(keys)}
    return rows


def _word(spec) -> str:
    """The type a declared field reads as in the doc."""
    if spec.shape == "scalar":
        return {INT: "int", STR: "str", BOOL: "bool"}.get(spec.kind, "float")
    return {"records": "list", "strings": "list of str"}.get(spec.shape, "object")


TABLES = [("## Sample", Sample), ("### `gpus[]`", GpuReading), ("### `processes[]`", ProcessInfo)]
TABLES += [("### `throughput[]`", ThroughputReading), ("### `serving_progress[]`", ServingProgress)]


@pytest.mark.parametrize(("heading", "cls"), TABLES, ids=[t[1].__name__ for t in TABLES])
def test_each_key_table_lists_exactly_the_declared_keys_with_their_types(heading, cls):
    rows = _table(heading)
    declared = {s.key: _word(s) for s in specs(cls)} | ({"v": "int"} if cls is Sample else {})
    assert set(rows) == set(declared)
    assert {k: re.split(r" or | \(", t)[0] for k, t in rows.items()} == declared


def test_the_serving_table_lists_exactly_the_reading_fields():
    assert set(_table("### `serving[]`")) == {f.name for f in dataclasses.fields(ServingReading)}


# Records documented inside their parent's row, as `{"key", ...}`: each of their keys is named there.
INLINE = [("sensors", Sensor), ("driver_events", DriverEvent), ("board", BoardReading)]
INLINE += [("link", LinkPort), ("oom_kills", KillReport)]


@pytest.mark.parametrize(("key", "cls"), INLINE, ids=[k for k, _ in INLINE])
def test_records_described_in_their_parents_row_name_every_key(key, cls):
    row = next(ln for ln in DOC.splitlines() if ln.startswith(f"| `{key}` |"))
    assert [f.name for f in dataclasses.fields(cls) if f'"{f.name}"' not in row] == []


def test_ollama_models_are_described_key_for_key():
    row = next(ln for ln in DOC.splitlines() if ln.startswith("| `models` |"))
    assert [f.name for f in dataclasses.fields(OllamaModel) if f'"{f.name}"' not in row] == []


def test_a_key_missing_from_the_doc_fails_here(monkeypatch):
    """The check is real: a declared key the doc lacks, or a doc row for a key the code lacks, is found."""
    rows = _table("### `gpus[]`")
    assert "power_w" in rows
    monkeypatch.setattr(GpuReading, "__trace_specs__", specs(GpuReading)[1:])  # no `index`
    with pytest.raises(AssertionError):
        test_each_key_table_lists_exactly_the_declared_keys_with_their_types("### `gpus[]`", GpuReading)
