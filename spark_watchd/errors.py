"""Exit codes (sysexits.h) and the error every layer raises for bad configuration."""

from __future__ import annotations

EX_SOFTWARE = 1
EX_USAGE = 2
EX_DATAERR = 65
EX_NOINPUT = 66  # an input file that does not exist (replay TRACE)
EX_TEMPFAIL = 75
EX_NOPERM = 77
EX_CONFIG = 78


# Every verb's --help lists these (a verb with verdicts of its own lists those first).
EXIT_CODES = (
    "exit status: 0 done, 1 failed, 2 usage, 65 bad input data, 66 input file not found, "
    "75 state directory held by another daemon, 77 needs root, 78 bad configuration"
)


class ConfigError(Exception):
    """Bad configuration: the message names the file (or variable / flag), the key and the reason."""

    exit_code = EX_CONFIG
