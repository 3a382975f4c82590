"""Logs: one JSON object per line off a terminal (journald keeps them whole), readable text on one."""

from __future__ import annotations

import io
import json

from spark_watchd.logs import configure_logging, get_logger, reset_logging


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def teardown_function():
    reset_logging()  # structlog's defaults, our handler and hooks gone


def test_json_lines_when_not_a_terminal():
    out = io.StringIO()
    configure_logging("info", "auto", stream=out)
    get_logger("collector").warning("nvml down: GPU is lost", source="nvml")
    get_logger("collector").debug("filtered out at info")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["event"] == "nvml down: GPU is lost" and rec["level"] == "warning"
    assert rec["component"] == "collector" and rec["source"] == "nvml" and rec["timestamp"].endswith("Z")


def test_console_text_on_a_terminal():
    out = _Tty()
    configure_logging("debug", "auto", stream=out)
    get_logger("run").info("spark-watchd started", url="http://127.0.0.1:9761/")
    text = out.getvalue()
    assert "spark-watchd started" in text and "http://127.0.0.1:9761/" in text
    assert not text.lstrip().startswith("{")


def test_format_can_be_forced():
    out = _Tty()
    configure_logging("info", "json", stream=out)
    get_logger().info("x")
    assert json.loads(out.getvalue())["event"] == "x"


def test_stdlib_loggers_come_out_as_json_at_the_configured_level():
    import logging

    out = io.StringIO()
    configure_logging("debug", "json", stream=out)
    logging.getLogger("apscheduler.scheduler").debug("Looking for jobs to run")
    logging.getLogger("apscheduler.scheduler").log(5, "below debug: dropped")
    get_logger("tail").info("waiting", path="/x")
    recs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["event"], r["level"]) for r in recs] == [
        ("Looking for jobs to run", "debug"),
        ("waiting", "info"),
    ]
    assert recs[0]["logger"] == "apscheduler.scheduler" and recs[0]["timestamp"].endswith("Z")
    configure_logging("info", "json", stream=out)  # at info the scheduler's per-tick lines stay out
    logging.getLogger("apscheduler.executors.default").info('Running job "Daemon.tick"')
    logging.getLogger("apscheduler.scheduler").warning("Run time of job was missed")
    assert json.loads(out.getvalue().splitlines()[-1])["event"] == "Run time of job was missed"
    assert len(out.getvalue().splitlines()) == 3
    configure_logging("warning", "json", stream=out)  # reconfigured (SIGHUP): one handler, the new level
    logging.getLogger("x").info("dropped at warning")
    assert len(out.getvalue().splitlines()) == 3


def test_the_daemon_at_debug_writes_only_json_lines_with_the_log_tail_and_scheduler_lines(tmp_path):
    import subprocess
    import sys
    import time

    from tests.conftest import REPO, cli_env, free_port

    missing = tmp_path / "train.log"  # not there: the tail logs that it waits for it
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[daemon]\nlog_format = "json"\n'
        "[progress]\nlog_tail_poll_s = 0.2\n"
        f'[[progress.log_tail]]\npath = "{missing}"\njob = "sft"\n'
    )
    err = tmp_path / "stderr"
    with open(err, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{free_port()}",
             "--config", str(cfg), "--state-dir", str(tmp_path / "state"), "--log-level", "debug"],
            stdout=subprocess.DEVNULL, stderr=stderr, env=cli_env({"SPARK_WATCHD_FAKE_NVML": "gb10"}), cwd=str(REPO),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while (
                "waiting for it" not in err.read_text()
                and proc.poll() is None
                and time.monotonic() < deadline
            ):
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    lines = err.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert any(r["event"].startswith("log tail: file not there") and r["level"] == "info" for r in records), (
        lines
    )
    assert any(r.get("logger", "").startswith("apscheduler") and r["level"] == "debug" for r in records), (
        lines
    )
    assert all("timestamp" in r and "level" in r for r in records)


_HOSTILE_STDERR = r"""
import ctypes, logging, threading, warnings
from spark_watchd.logs import configure_logging
configure_logging("info", "json")
t = threading.Thread(target=lambda: 1 / 0, name="journal-follower"); t.start(); t.join()
class D:
    def __del__(self): raise RuntimeError("in a destructor")
D()
ctypes.CFUNCTYPE(ctypes.c_int)(lambda: [][1])()
warnings.warn("a library warning\nover two lines")
logging.getLogger("lib").info("bad %d format", "x")
logging.getLogger("apscheduler.executors.default").error("Job raised", exc_info=ValueError("v"))
raise KeyError("main thread")
"""


def test_exceptions_in_threads_destructors_callbacks_and_warnings_are_json_lines_too():
    """Issue 20 §4: what Python prints to stderr by itself (thread and main-thread tracebacks, unraisable
    exceptions from destructors and ctypes callbacks, warnings, the handler's own errors) is one JSON
    object per line in JSON mode, like every other line."""
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env

    proc = subprocess.run(
        [sys.executable, "-c", _HOSTILE_STDERR], capture_output=True, text=True, timeout=60,
        env=cli_env(), cwd=str(REPO),
    )  # fmt: skip
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    events = [r["event"] for r in records]
    assert len(records) == 7, events
    thread = records[0]
    assert thread["event"] == "uncaught exception in thread journal-follower" and thread["level"] == "error"
    assert "ZeroDivisionError" in thread["exception"]
    assert "in a destructor" in records[1]["exception"] and "ctypes callback" in records[2]["event"]
    assert records[3]["logger"] == "py.warnings" and "a library warning" in records[3]["event"]
    assert (
        records[4]["event"] == "log record could not be written" and records[4]["message"] == "bad %d format"
    )
    assert records[5]["exception"] == "ValueError: v"
    assert records[6]["level"] == "critical" and "KeyError: 'main thread'" in records[6]["exception"]


def test_reset_logging_gives_the_hooks_back():
    import sys
    import threading

    before = (threading.excepthook, sys.excepthook, sys.unraisablehook)
    configure_logging("info", "json", stream=io.StringIO())
    configure_logging("info", "json", stream=io.StringIO())  # twice (SIGHUP): still the originals saved
    assert threading.excepthook is not before[0]
    reset_logging()
    assert (threading.excepthook, sys.excepthook, sys.unraisablehook) == before


def test_foreign_strings_in_log_lines_cannot_drive_the_terminal():
    """Issue 20 §2: argv, job names and errors from other users reach log lines; an OSC window title or a
    CSI clear-screen in them is shown escaped on a terminal, and JSON escapes them on its own."""
    evil = "vllm\x1b]0;pwned\x07 serve\x1b[2J\u202e"
    out = _Tty()
    configure_logging("info", "console", stream=out)
    get_logger("collector").warning(f"processes down: {evil}", cmdline=evil)
    text = out.getvalue()
    assert "\x1b]0" not in text and "\x1b[2J" not in text and "\u202e" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07" in text and "\\u202e" in text
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    get_logger("collector").warning(f"processes down: {evil}", cmdline=evil)
    line = out.getvalue()
    assert "\x1b" not in line and "\u202e" not in line and json.loads(line)["cmdline"] == evil
