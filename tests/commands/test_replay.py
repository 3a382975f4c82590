"""`spark-watchd replay`: trace-v1 replay output, the table, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import cli_env, run_cli

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def test_jsonl_is_one_replay_object_per_sample():
    trace = TRACES / "throttle_60s_slowdown84.jsonl"
    samples = [json.loads(x) for x in trace.read_text().splitlines()]
    p = run_cli("replay", str(trace), "--format", "jsonl")
    assert p.returncode == 0, p.stderr
    out = [json.loads(x) for x in p.stdout.splitlines()]
    assert len(out) == len(samples)
    assert [o["ts"] for o in out] == [s["ts"] for s in samples]
    for o in out:
        assert set(o["findings"]) >= {"G3", "G4", "G6"}
        assert all(f["severity"] in ("ok", "warning", "critical", "unknown") for f in o["findings"].values())
    assert any(o["findings"]["G4"]["severity"] == "critical" for o in out)
    assert any(e["kind"] == "throttle_start" for o in out for e in o["events"])


def test_table_shows_changes_and_events():
    p = run_cli("replay", str(TRACES / "reboot_no_throttle_40s.jsonl"), "--format", "table")
    assert p.returncode == 0, p.stderr
    assert "event reboot after_throttle=false" in p.stdout
    assert p.stdout.rstrip().endswith("180 samples replayed")


def test_bad_line_names_the_line_number(tmp_path):
    trace = tmp_path / "t.jsonl"
    lines = (TRACES / "oom_kill_45s.jsonl").read_text().splitlines()[:5]
    lines.insert(2, '{"v": 1, "host": "no ts"}')
    trace.write_text("\n".join(lines) + "\n")
    p = run_cli("replay", str(trace), "--format", "jsonl")
    assert p.returncode != 0
    assert f"{trace}:3: missing key 'ts'" in p.stderr


def test_skip_bad_warns_and_goes_on(tmp_path):
    trace = tmp_path / "t.jsonl"
    lines = (TRACES / "oom_kill_45s.jsonl").read_text().splitlines()[:5]
    lines.insert(1, "not json at all")
    trace.write_text("\n".join(lines) + "\n")
    p = run_cli("replay", str(trace), "--format", "jsonl", "--skip-bad")
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 5
    assert ":2:" in p.stderr and "warning" in p.stderr


def test_missing_file_is_an_error(tmp_path):
    p = run_cli("replay", str(tmp_path / "nope.jsonl"))
    assert p.returncode == 66  # EX_NOINPUT: the input is missing, not malformed (65)
    assert "no such file" in p.stderr


def test_a_malformed_field_past_the_checks_names_its_line(tmp_path):
    trace = tmp_path / "t.jsonl"
    lines = (TRACES / "oom_kill_45s.jsonl").read_text().splitlines()[:5]
    bad = json.loads(lines[2])
    bad["link"] = 5  # trace-v1 `link` is an object: Sample.from_dict refuses it after the field checks
    lines[2] = json.dumps(bad)
    trace.write_text("\n".join(lines) + "\n")
    p = run_cli("replay", str(trace), "--format", "jsonl")
    assert p.returncode == 65
    assert (
        f"{trace}:3: sample at ts={bad['ts']!r} has a malformed field: 'link' must be an object" in p.stderr
    )
    assert len(p.stdout.splitlines()) == 2  # the samples before it were judged and written
    p = run_cli("replay", str(trace), "--format", "jsonl", "--skip-bad")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 4
    assert f"{trace}:3: sample at ts=" in p.stderr


def test_jsonl_is_the_same_on_a_text_stream_and_does_not_import_the_daemon():
    import argparse
    import contextlib
    import io
    import subprocess
    import sys

    from spark_watchd.commands import replay

    trace = TRACES / "public" / "throttle_reboot.jsonl"
    code = (
        "import sys; from spark_watchd import cli; rc = cli.main(['replay', sys.argv[1], '--format', 'jsonl']);"
        "sys.stdout.flush(); print(' '.join(sorted(sys.modules)), file=sys.stderr); sys.exit(rc)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(trace)], capture_output=True, text=True, check=True, env=cli_env()
    )
    # The composition root, yes (settings_for, diagnoser); the daemon and what it wires, no.
    loaded = set(p.stderr.split())
    assert "spark_watchd.app" in loaded
    assert not {"spark_watchd.daemon", "spark_watchd.web.api", "spark_watchd.export.prometheus"} & loaded
    text = io.StringIO()  # no byte buffer: the lines go as text
    args = argparse.Namespace(trace=str(trace), format="jsonl", skip_bad=False, state_dir=None, config=None)
    with contextlib.redirect_stdout(text):
        assert replay.main(args) == 0
    assert text.getvalue() == p.stdout and len(p.stdout.splitlines()) == len(trace.read_text().splitlines())
