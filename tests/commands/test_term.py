"""The terminal helpers every verb prints through: tables that fit, units from evidence keys, no raw bytes."""

from __future__ import annotations

import pytest

from spark_watchd.commands import term
from tests.support.findings import ALL_TRACES, findings_of


def _keys(evidence: dict, out: set) -> set:
    for k, v in evidence.items():
        out.add((k, type(v).__name__))
        rows = v if isinstance(v, list) else [v]
        for r in rows:
            if isinstance(r, dict):
                _keys(r, out)
    return out


def test_every_evidence_key_the_classifiers_give_has_a_unit_or_is_declared_unitless():
    keys: set = set()
    for trace in ALL_TRACES:
        for *_, evidence, _ in findings_of(trace):
            _keys(evidence, keys)
    assert len(keys) > 20
    for key, kind in sorted(keys):
        if kind not in ("int", "float") or key in term.IDS or key in term.UNITLESS:
            continue
        assert term.unit_of(key)[1] is not None, f"evidence {key} ({kind}) has no unit: name it by its unit"


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("mem_available_bytes", 68622493696, "63.9 GiB"),
        ("thermal_counter_share", 0.689, "68.9 %"),
        ("step_seconds_baseline", 1.0, "1 s"),
        ("step_time_ratio", 1.16, "x1.16"),
        ("throttled_seconds_total", 754.0, "12m34s"),
        ("members", [5120, 5121], "5120, 5121"),
        ("pid", 5120, "5120"),
        ("temp_c", 85.2, "85.2 C"),
        ("sm_clock_mhz", 2418, "2418 MHz"),
        ("capped", None, "-"),
        ("thermal_reasons_active", False, "no"),
        ("workloads", [{"pid": 7, "kind": "vllm", "members": [7, 8], "capped": True,
                        "cap": "--kv-cache-memory-bytes 40GiB", "footprint_bytes": 64 * 2**30}],
         "vllm pid 7 +1 64.0 GiB capped --kv-cache-memory-bytes 40GiB"),
    ],
)  # fmt: skip
def test_evidence_values_read_as_a_person_writes_them(key, value, shown):
    assert term.evidence_text(key, value) == shown


def test_evidence_lines_skip_empty_lists_and_label_by_unit():
    lines = term.evidence_lines({"workloads": [], "heavy_workloads": 0, "psi_some_avg60_pct": 0.1})
    assert lines == ["heavy workloads 0", "psi some avg60 0.1 %"]


ROWS = [
    ("vllm", "7000 +2", "44.0 GiB", "--gpu-memory-utilization 0.35", "vllm serve " + "m" * 240),
    ("trainer", "5120", "14.0 GiB", "-", "python3 train.py"),
]
COLS = (
    term.Column("KIND"),
    term.Column("PID"),
    term.Column("MEMORY", ">"),
    term.Column("CAP", flex=True, min_width=10),
    term.Column("COMMAND", flex=True, min_width=12),
)


@pytest.mark.parametrize("cols", [200, 100, 80, 60, 40])
def test_a_table_fits_the_width_eliding_the_last_flexible_column_first_then_folding(cols):
    lines = term.table(COLS, ROWS, cols)
    assert max(map(len, lines)) <= cols
    if cols >= 80:
        assert lines[0].split() == ["KIND", "PID", "MEMORY", "CAP", "COMMAND"]
        assert "--gpu-memory-utilization 0.35" in lines[1] and lines[1].endswith("...")
    elif cols >= 60:  # the command is at its floor: the cap gives way next
        assert lines[0].split() == ["KIND", "PID", "MEMORY", "CAP", "COMMAND"]
        assert "--gpu-memory-ut..." in lines[1]
    else:  # too narrow for columns: one block per row, nothing lost but the command's tail
        assert lines[0] == "KIND vllm"
        assert "MEMORY 44.0 GiB" in " ".join(lines)


def test_wrap_keeps_a_number_with_its_unit_and_escapes_controls():
    lines = term.wrap("memory: 100.0 GiB available of 121.7 GiB, swap used 0 B \x1b[2J", "    ", cols=40)
    assert all(len(x) <= 40 for x in lines)
    assert not any(x.rstrip().endswith(("GiB", "B")) and x.split()[-1] in ("GiB", "B") and
                   x.split()[-2][-1:].isalpha() for x in lines)  # fmt: skip
    joined = " ".join(x.strip() for x in lines)
    assert "0 B" in joined and "\\x1b[2J" in joined and "\x1b" not in joined
    assert not any(x.strip() in ("B", "GiB") for x in lines)


@pytest.mark.parametrize(
    ("n", "shown"), [(None, "-"), (0, "0 B"), (1536, "1.5 KiB"), (64 * 2**30, "64.0 GiB"), (2**41, "2.0 TiB")]
)
def test_human_bytes(n, shown):
    assert term.human_bytes(n) == shown


@pytest.mark.parametrize(
    ("s", "shown"), [(None, "-"), (4.5, "4.5 s"), (42, "42 s"), (754, "12m34s"), (7380, "2h03m")]
)
def test_human_seconds(s, shown):
    assert term.human_seconds(s) == shown


def test_unknown_figures_draw_no_line_and_a_tiny_fall_is_never_minus_zero():
    """Issue 34: `runway -` beside `runway known yes` said nothing; `-0 B` read as a fall."""
    from spark_watchd.commands.term import evidence_lines, human_bytes

    lines = evidence_lines({"runway_s": None, "runway_known": True, "fall_bytes_per_s": -0.4})
    assert lines == ["runway known yes", "fall 0 B/s"]
    assert human_bytes(-0.4) == "0 B" and human_bytes(-5 * 1024**3) == "-5.0 GiB"
