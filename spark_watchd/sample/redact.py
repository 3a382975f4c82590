"""Secrets out of what is kept on disk: argv values of `--api-key`, `--token`... and `NAME=value` words whose
NAME looks like a secret (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`).

A server launched `vllm serve m --api-key sk-...` or `env HF_TOKEN=hf_... python train.py` has its argv in
every sample; the ring, the post-mortem bundles, `record` and the captures on trouble keep samples long
after the process is gone, so whatever persists argv passes it through `redact_argv` (or
`redact_sample_dict` for a whole trace-v1 sample) first: the ring (postmortem/ring.py), each bundle file
(postmortem/bundle.py) and every trace-v1 writer (sample/trace.py TraceWriter).
Flags are matched by their dash-separated words (`--hf-token`, `--api_key`, `--db-password`), not by
substring, so `--max-num-batched-tokens 8192` keeps its value; environment-style names by substring, as
the operator's own `*KEY*` glob would.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "<redacted>"
SECRET_ENV_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD")
_SECRET_FLAG_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials"}
)
_ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)=")
_BEARER = re.compile(
    r"^((?:authorization|proxy-authorization)\s*:\s*)?(bearer|basic|token)\s+\S", re.IGNORECASE
)


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable's name marks a secret (`OPENAI_API_KEY`, `HF_TOKEN`, `DB_PASSWORD`)."""
    upper = name.upper()
    return any(part in upper for part in SECRET_ENV_PARTS)


def is_secret_flag(flag: str) -> bool:
    """Whether `--api-key`, `--hf-token`, `-token`... names a secret (by its words, not a substring)."""
    words = re.split(r"[-_.]+", flag.lstrip("-").lower())
    return bool(words) and (
        words[-1] in _SECRET_FLAG_WORDS or any(w in ("token", "secret", "password") for w in words)
    )


def redact_argv(argv: Iterable[str]) -> tuple[str, ...]:
    """argv with secret values replaced by `<redacted>` (flag names kept, so the command still reads)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            hide_next = False
            if not arg.startswith("--"):
                out.append(REDACTED)
                continue
        if arg.startswith("-") and len(arg) > 1:
            name, eq, _ = arg.partition("=")
            if is_secret_flag(name):
                if eq:
                    out.append(f"{name}={REDACTED}")
                    continue
                hide_next = True
            out.append(arg)
            continue
        if arg.lower() in ("bearer", "basic"):  # `Authorization: Bearer TOKEN` split into words
            hide_next = True
            out.append(arg)
        elif (b := _BEARER.match(arg)) is not None:
            out.append(f"{b[1] or ''}{b[2]} {REDACTED}")
        elif " " in arg:  # a command line in one word: `sh -c "vllm serve m --api-key sk-..."`
            out.append(redact_command_line(arg))
        elif (m := _ENV_WORD.match(arg)) is not None and is_secret_env_name(m[1]):
            out.append(f"{m[1]}={REDACTED}")
        else:
            out.append(arg)
    return tuple(out)


def redact_command_line(text: str) -> str:
    """A space-joined command line (a workload row's `cmdline`) with its secret values redacted."""
    return " ".join(redact_argv(text.split(" ")))


def redact_sample_dict(d: dict[str, Any]) -> dict[str, Any]:
    """A trace-v1 sample object with each process's `cmdline` redacted (a copy where anything changed)."""
    procs = d.get("processes")
    if not isinstance(procs, list):
        return d
    changed = False
    new = []
    for p in procs:
        argv = p.get("cmdline") if isinstance(p, dict) else None
        if isinstance(argv, list) and all(type(a) is str for a in argv):
            red = list(redact_argv(argv))
            if red != argv:
                p = {**p, "cmdline": red}
                changed = True
        new.append(p)
    return {**d, "processes": new} if changed else d
