"""Exit codes (sysexits.h) and the error every layer raises for bad configuration."""

from __future__ import annotations

EX_SOFTWARE = 1
EX_USAGE = 2
EX_DATAERR = 65
EX_TEMPFAIL = 75
EX_NOPERM = 77
EX_CONFIG = 78


class ConfigError(Exception):
    """Bad configuration: the message names the file (or variable / flag), the key and the reason."""

    exit_code = EX_CONFIG
