"""structlog setup: JSON lines when stderr is not a terminal (journald keeps them whole), readable on a terminal.

Every line goes through one stdlib handler whose formatter is structlog's
ProcessorFormatter: our structlog loggers and stdlib loggers alike (libraries
such as apscheduler) come out in the same format at the configured level, so in
JSON mode each stderr line is one JSON object.
"""

from __future__ import annotations

import logging
import sys

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
ROOT_LOGGER = "spark_watchd"  # the stdlib logger our structlog loggers write to

_handler: logging.Handler | None = None  # the one handler configure_logging installed on the root logger


def configure_logging(level: str = "info", fmt: str = "auto", stream=None) -> None:
    """Configure structlog and the stdlib root logger for the process; fmt is auto, json or console."""
    global _handler
    stream = stream if stream is not None else _Stderr()
    use_json = fmt == "json" or (fmt == "auto" and not _isatty(stream))
    numeric = LEVELS.get(level, logging.INFO)
    shared: list = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if use_json:
        render: list = [
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ]
    else:
        render = [structlog.dev.ConsoleRenderer(colors=_isatty(stream))]
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            # Records from stdlib loggers: the logger's name, the level and the time, as ours carry them.
            foreign_pre_chain=[*shared, _stdlib_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render],
        )
    )
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    root.addHandler(handler)
    root.setLevel(numeric)
    # apscheduler logs "Running job ..." and "executed successfully" at info on every tick: two lines
    # per interval in journald. Its warnings (missed runs) always come through; the rest at debug.
    logging.getLogger("apscheduler").setLevel(numeric if numeric <= logging.DEBUG else logging.WARNING)
    _handler = handler
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_logger_factory,
        cache_logger_on_first_use=False,
    )


def reset_logging() -> None:
    """Undo configure_logging: structlog's defaults, our stdlib handler removed (tests, embedders)."""
    global _handler
    if _handler is not None:
        logging.getLogger().removeHandler(_handler)
        _handler = None
    structlog.reset_defaults()


def get_logger(name: str = "spark_watchd"):
    """A structlog logger bound to a component name."""
    return structlog.get_logger(component=name)


def _logger_factory(*_args) -> logging.Logger:
    return logging.getLogger(ROOT_LOGGER)


def _stdlib_name(_logger, _method, event_dict: dict) -> dict:
    record = event_dict.get("_record")
    if record is not None:
        event_dict.setdefault("logger", record.name)
    return event_dict


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
