"""What a hostile or broken kernel log costs the live driver-events feed (issue 18), through the real follower.

    python bench/driver_feed_abuse.py

Each case runs DriverEventsSource's kernel-log follower on a child process that prints journal JSON (as
`journalctl -k -f -o json` would), then one real Xid 79 line, and reports what came out: the events
recorded (and their counts), the lines rejected, the follower's CPU time and the growth of this process's
RSS, and whether the Xid 79 after the abuse still arrived. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from spark_watchd.sources.driver_events import DriverEventsSource  # noqa: E402

KERNEL = {"_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0", "SYSLOG_IDENTIFIER": "kernel"}
XID_79 = "NVRM: Xid (PCI:000f:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
FORGED = "tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.'"


def _entry(msg: str, i: int, **extra) -> str:
    return json.dumps(
        {"__REALTIME_TIMESTAMP": str(1764400000000000 + i * 4000), **KERNEL, "MESSAGE": msg, **extra}
    )


CASES = {
    "2,000 identical Xid 13 lines in 8 s": "\n".join(
        _entry(XID_79.replace(": 79,", ": 13,"), i) for i in range(2000)
    ),
    "2,000 forged lines (NVRM text inside a tmpfs message)": "\n".join(
        _entry(FORGED, i) for i in range(2000)
    ),
    "2,000 user space /dev/kmsg writes claiming NVRM": "\n".join(
        _entry(XID_79, i, SYSLOG_FACILITY="1", SYSLOG_IDENTIFIER="evil") for i in range(2000)
    ),
    "a 400-digit timestamp": json.dumps({"__REALTIME_TIMESTAMP": "9" * 400, **KERNEL, "MESSAGE": XID_79}),
    "a 5,000-digit Xid code": _entry("NVRM: Xid (PCI:000f:01:00): " + "7" * 5000, 0),
    "a line nested 50,000 deep": '{"MESSAGE": "NVRM", "x": ' + "[" * 50_000 + "]" * 50_000 + "}",
}
BIG = "32 MiB with no newline"


def follower(raw_file: str, big: bool) -> list[str]:
    good = _entry(XID_79, 9999)
    body = (
        "sys.stdout.write('y' * (32 * 1024 * 1024))"
        if big
        else f"sys.stdout.write(open({raw_file!r}).read())"
    )
    code = f"import sys, time\n{body}\nsys.stdout.write({chr(10) + good + chr(10)!r})\nsys.stdout.flush()\ntime.sleep(60)\n"
    return [sys.executable, "-c", code]


def run(name: str, raw: str | None, tmp: str) -> None:
    path = os.path.join(tmp, "raw.jsonl")
    with open(path, "w") as fh:
        fh.write(raw or "")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu0 = time.process_time()
    src = DriverEventsSource(
        None, nvml_events=False, runner=_no_journal, follow_argv=follower(path, raw is None)
    )
    src.collect({})
    got: list = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(e.xid == 79 for e in got):
        time.sleep(1.0)  # a tick
        got += src.collect({})["driver_events"]
    time.sleep(0.5)
    got += src.collect({})["driver_events"]
    cpu = time.process_time() - cpu0
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    status = src.feed_status()["kernel-log"]
    src.close()
    events = ", ".join(f"Xid {e.xid} x{e.count}" for e in got) or "none"
    print(
        f"{name}: events [{events}]; lines rejected {status['lines_rejected']}; feed {status['state']}; "
        f"CPU {cpu:.2f} s; max RSS +{rss:.0f} MB; Xid 79 after it {'arrived' if any(e.xid == 79 for e in got) else 'LOST'}"
    )


def _no_journal(argv, timeout):
    import subprocess

    return subprocess.CompletedProcess(list(argv), 0, "", "")


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, raw in CASES.items():
            run(name, raw, tmp)
        run(BIG, None, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
