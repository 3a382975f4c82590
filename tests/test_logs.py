"""Logs: one JSON object per line off a terminal (journald keeps them whole), readable text on one."""

from __future__ import annotations

import io
import json

import structlog

from spark_watchd.logs import configure_logging, get_logger


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def teardown_function():
    structlog.reset_defaults()


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
