"""structlog setup: JSON lines when stderr is not a terminal (journald keeps them whole), readable on a terminal."""

from __future__ import annotations

import logging
import sys

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(level: str = "info", fmt: str = "auto", stream=None) -> None:
    """Configure structlog for the process; fmt is auto, json or console."""
    stream = stream if stream is not None else _Stderr()
    use_json = fmt == "json" or (fmt == "auto" and not _isatty(stream))
    processors: list = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if use_json:
        processors += [
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=_isatty(stream)))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "spark_watchd"):
    """A structlog logger bound to a component name."""
    return structlog.get_logger(component=name)


class _Stderr:
    """Whatever sys.stderr is at write time (tests and embedders swap it after configuration)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return _isatty(sys.stderr)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
