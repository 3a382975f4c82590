"""systemd-oomd and earlyoom kills from their own units' journal entries, through a real follower process."""

from __future__ import annotations

import json
import sys
import textwrap
import time

from spark_watchd.sources.oomkillers import OomKillersSource, killer_argv, read_killer_entries
from tests.sample.test_kills import _messages

US = 1_764_500_000_000_000


def _entry(message, unit, comm, transport="journal", i=0):
    return {"MESSAGE": message, "_SYSTEMD_UNIT": unit, "_COMM": comm, "_TRANSPORT": transport,
            "__REALTIME_TIMESTAMP": str(US + i)}  # fmt: skip


def _fake_journalctl(tmp_path, entries):
    """A follower that prints entries as journalctl -o json does, then keeps the pipe open."""
    data = tmp_path / "entries.jsonl"
    data.write_text("".join(json.dumps(e) + "\n" for e in entries) + "not json\n")
    script = tmp_path / "journalctl.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.stdout.write(open({str(data)!r}).read()); sys.stdout.flush()
        time.sleep(30)
    """))  # fmt: skip
    return [sys.executable, str(script)]


def test_the_follower_argv_matches_each_killers_unit():
    argv = killer_argv("journalctl")
    assert argv[:2] == ["journalctl", "-f"] and "_SYSTEMD_UNIT=systemd-oomd.service" in argv
    assert argv[-3:] == ["_SYSTEMD_UNIT=systemd-oomd.service", "+", "_SYSTEMD_UNIT=earlyoom.service"]


def test_kills_reach_the_sample_after_the_kernels_and_forged_lines_do_not(tmp_path):
    oomd, _ = _messages("systemd_oomd_journal.txt")
    early, _ = _messages("earlyoom_journal.txt")
    entries = [
        _entry(oomd, "systemd-oomd.service", "systemd-oomd", i=1),
        _entry(early, "earlyoom.service", "earlyoom", i=2),
        _entry(oomd, "user@1000.service", "logger", "syslog", i=3),  # anyone can log these words
    ]
    src = OomKillersSource(argv=_fake_journalctl(tmp_path, entries), retry_s=0.1)
    try:
        got, deadline = [], time.monotonic() + 10
        kernel = object()
        while not got and time.monotonic() < deadline:
            out = src.collect({"oom_kills": [kernel]})
            got = out.get("oom_kills", [])
            time.sleep(0.05)
        assert got[0] is kernel  # the kernel's reports first, kept
        assert [(k.killer, k.pid) for k in got[1:]] == [("systemd-oomd", None), ("earlyoom", 29410)]
        assert src.collect({}) == {}  # nothing new: the partial's key is left alone
        assert src.rejected == 1
    finally:
        src.close()


def test_no_journalctl_is_a_state_not_an_error():
    src = OomKillersSource(None)
    assert src.collect({}) == {} and "off" in src.states["oom-killers"]
    assert read_killer_entries(["", "{", "[]"]).rejected == 2
