"""structlog setup: JSON lines when stderr is not a terminal (journald keeps them whole), readable on a terminal.

Every line goes through one stdlib handler whose formatter is structlog's
ProcessorFormatter: our structlog loggers and stdlib loggers alike (libraries
such as apscheduler) come out in the same format at the configured level, so in
JSON mode each stderr line is one JSON object. What Python itself would print
to stderr goes through the same handler: an exception that escapes a thread
(threading.excepthook), the main thread (sys.excepthook), a destructor or a
ctypes callback (sys.unraisablehook), warnings (logging.captureWarnings) and
the handler's own failures ("--- Logging error ---").
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback

import structlog

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.text import printable

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
            structlog.processors.JSONRenderer(serializer=dumps_strict, sort_keys=False),
        ]
    else:
        # JSON escapes control and non-ASCII characters itself; text on a terminal needs printable().
        render = [_printable_values, structlog.dev.ConsoleRenderer(colors=_isatty(stream))]
    handler = _Handler(stream)
    handler.json_mode = use_json
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
    _install_hooks()
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
    _remove_hooks()
    structlog.reset_defaults()


def report(message: str, component: str = "run") -> None:
    """A message for the operator on stderr (why the daemon exits): a JSON line at error when logging is
    configured for JSON, plain text otherwise (a terminal, or before logging is configured)."""
    if _handler is not None and getattr(_handler, "json_mode", False):
        get_logger(component).error(message)
    else:
        print(message, file=sys.stderr)


def get_logger(name: str = "spark_watchd"):
    """A structlog logger bound to a component name."""
    return structlog.get_logger(component=name)


def _thread_hook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return  # the default hook ignores it too
    name = args.thread.name if args.thread is not None else "?"
    get_logger("thread").error(
        f"uncaught exception in thread {name}",
        thread=name,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


def _main_hook(exc_type, exc_value, exc_tb) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        return sys.__excepthook__(exc_type, exc_value, exc_tb)
    get_logger("main").critical("uncaught exception", exc_info=(exc_type, exc_value, exc_tb))


def _unraisable_hook(unraisable) -> None:
    what = unraisable.err_msg or "Exception ignored in"
    try:
        obj = repr(unraisable.object)[:200] if unraisable.object is not None else ""
    except Exception:  # a repr that raises must not lose the line
        obj = "<unrepresentable>"
    exc_info = (unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback)
    get_logger("unraisable").error(f"{what}: {obj}" if obj else what, exc_info=exc_info)


_HOOKS = (
    (threading, "excepthook", _thread_hook),
    (sys, "excepthook", _main_hook),
    (sys, "unraisablehook", _unraisable_hook),
)
_saved: dict[str, object] = {}


def _install_hooks() -> None:
    for module, attr, hook in _HOOKS:
        key = f"{module.__name__}.{attr}"
        current = getattr(module, attr)
        if current is not hook:
            _saved.setdefault(key, current)
            setattr(module, attr, hook)
    logging.captureWarnings(True)


def _remove_hooks() -> None:
    for module, attr, hook in _HOOKS:
        key = f"{module.__name__}.{attr}"
        if getattr(module, attr) is hook and key in _saved:
            setattr(module, attr, _saved.pop(key))
    logging.captureWarnings(False)


class _Handler(logging.StreamHandler):
    """A StreamHandler whose own failures (a record that cannot be formatted) come out as one line too."""

    json_mode = True

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - the stdlib's name
        if not logging.raiseExceptions:
            return
        try:
            import json

            exc = traceback.format_exc(limit=5)
            line = {
                "event": "log record could not be written",
                "level": "error",
                "logger": record.name,
                "message": str(getattr(record, "msg", ""))[:500],
                "exception": exc,
            }
            text = (
                json.dumps(line) if self.json_mode else f"log record could not be written: {line['message']}"
            )
            self.stream.write(text + self.terminator)
            self.flush()
        except Exception:  # nothing left to report it with
            pass


def _logger_factory(*_args) -> logging.Logger:
    return logging.getLogger(ROOT_LOGGER)


def _printable_values(_logger, _method, event_dict: dict) -> dict:
    """Every string field shown with its control characters escaped (argv, job names, errors from others)."""
    for key, value in event_dict.items():
        if isinstance(value, str) and key not in ("exception", "stack"):
            event_dict[key] = printable(value)
    return event_dict


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
