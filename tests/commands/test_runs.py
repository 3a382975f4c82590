"""`spark-watchd runs`: the ledger's runs filtered by job and count, as JSON or a table a person reads."""

from __future__ import annotations

import json
import re

from spark_watchd.commands.runs import format_table
from tests.conftest import run_cli

RUN = {
    "start": "2026-11-29T08:00:00Z",
    "job": "sft",
    "duration_s": 3725.4,
    "steps": 1200,
    "tokens": 7_626_000,
    "mean_tokens_per_second": 2048.4,
    "mean_step_seconds": 3.1042,
    "max_slowdown_ratio": 1.375,
    "throttle_seconds": {"hw_slowdown": 30, "sw_thermal": 12.4, "power_cap": 600},
    "energy_j": 345600,
    "peak_temp_c": 86.2,
    "mem_available_min_bytes": 5 * 2**30,
    "evictions": 1,
    "oom_kills": 0,
    "end_reason": "finished",
}


def _ledger(tmp_path, *runs) -> str:
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    return str(tmp_path)


def test_table_row_shows_each_figure_in_its_unit():
    header, row = format_table([RUN], cols=200).splitlines()
    assert header.split()[:4] == ["START", "(UTC)", "JOB", "DURATION"]
    cells = row.split("  ")
    cells = [c.strip() for c in cells if c.strip()]
    # 1 h 02 m; tokens/s rounded; thermal = slowdown + sw thermal (42 s), the power cap apart; kJ; J/token; GiB.
    assert cells == [
        "2026-11-29 08:00",
        "sft",
        "1h02m",
        "1200",
        "7.63 M",
        "2,048",
        "3.1",
        "x1.38",
        "42 s",
        "10m00s",
        "345.6 kJ",
        "0.0453",  # 345.6 kJ over 7.626 M tokens (no joules_per_token in this older line)
        "86",
        "5.0 GiB",
        "1",
        "0",
        "finished",
    ]


def test_at_80_columns_the_rarer_columns_give_way_and_say_so():
    lines = format_table([RUN, dict(RUN, job="llama-70b-qlora-long-context", end_reason="evicted")], cols=80)
    assert max(map(len, lines.splitlines())) <= 80
    assert lines.splitlines()[0].split() == [
        "START", "(UTC)", "JOB", "DURATION", "TOK/S", "SLOW", "THERMAL", "EVICT", "OOM", "END"
    ]  # fmt: skip
    assert re.search(r"  llam\w*\.\.\.  ", lines) and lines.splitlines()[2].endswith("evicted")
    assert lines.split("\n(")[1].replace("\n", " ") == (
        "not shown at this width: STEPS, TOKENS, STEP S, PWRCAP, ENERGY, J/TOKEN, PEAK C, MIN AVAIL)"
    )


def test_missing_figures_are_dashes_and_short_runs_show_minutes_and_seconds():
    (row,) = format_table([{"job": "x", "duration_s": 65}], cols=200).splitlines()[1:]
    assert row.split() == [
        "-",
        "x",
        "1m05s",
        "-",
        "-",
        "-",
        "-",
        "-",
        "0",
        "s",
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
    ]


def test_verb_filters_by_job_and_keeps_the_last_n(tmp_path):
    state = _ledger(
        tmp_path, {**RUN, "job": "a", "steps": 1}, {**RUN, "job": "b"}, {**RUN, "job": "a", "steps": 3}
    )
    out = run_cli("runs", "--json", "--state-dir", state, "--job", "a", "--last", "1")
    assert out.returncode == 0, out.stderr
    assert [(r["job"], r["steps"]) for r in json.loads(out.stdout)] == [("a", 3)]


def test_a_torn_last_line_is_skipped_with_a_warning_and_no_ledger_is_no_runs(tmp_path):
    state = _ledger(tmp_path, RUN)
    with open(tmp_path / "runs.jsonl", "a") as fh:
        fh.write('{"job": "torn", "dur')  # the daemon was killed mid-write
    out = run_cli("runs", "--state-dir", state, env={"COLUMNS": "200"})
    assert out.returncode == 0 and "skipped 1 unreadable line(s)" in out.stderr
    assert len(out.stdout.splitlines()) == 2  # the header and the one whole run
    empty = run_cli("runs", "--state-dir", str(tmp_path / "none"))
    assert empty.returncode == 0 and empty.stdout == "" and "no finished runs" in empty.stderr


def test_a_bad_configuration_exits_78(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[daemon]\nno_such_key = 1\n")
    out = run_cli("runs", "--config", str(cfg))
    assert out.returncode == 78 and "no_such_key" in out.stderr
