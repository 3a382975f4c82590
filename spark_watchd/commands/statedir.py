"""One rule for where state lives, shared by every verb that writes or reads it (run, demo, runs, replay).

The configured directory when it is usable; when only the default was left in place and it is not writable
(an unprivileged user), `$XDG_STATE_HOME/spark-watchd` or `~/.local/state/spark-watchd`. Readers must use the
same rule or `runs` looks in /var/lib while `run` wrote under ~/.local/state (issue 14.1).
"""

from __future__ import annotations

import os

from spark_watchd.config import Settings
from spark_watchd.errors import ConfigError


def is_explicit(settings: Settings) -> bool:
    """Whether state_dir was set by file, environment or flag (then no silent fallback)."""
    return "state_dir" in settings.daemon.model_fields_set


def user_state_dir() -> str:
    """The per-user fallback: $XDG_STATE_HOME/spark-watchd, else ~/.local/state/spark-watchd."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "spark-watchd")


def _writable(path: str, create: bool) -> bool:
    try:
        if create:
            os.makedirs(path, exist_ok=True)
        elif not os.path.isdir(path):
            # A reader must not create /var/lib/...; judge by the nearest existing parent, as makedirs would.
            parent = os.path.dirname(os.path.abspath(path))
            while parent and not os.path.isdir(parent):
                parent = os.path.dirname(parent)
            return os.access(parent, os.W_OK)
        return os.access(path, os.W_OK)
    except OSError:
        return False


def resolve_state_dir(settings: Settings, *, explicit: bool | None = None, create: bool = True) -> str:
    """The state directory `run` uses; readers pass create=False and get the same answer without side effects."""
    path = settings.daemon.state_dir
    if explicit is None:
        explicit = is_explicit(settings)
    if _writable(path, create):
        return path
    if explicit:
        if not create and os.path.isdir(path):
            return path  # reading a daemon's directory we cannot write (runs as another user) is fine
        raise ConfigError(f"key 'daemon.state_dir': {path} is not a writable directory")
    fallback = user_state_dir()
    if create:
        os.makedirs(fallback, exist_ok=True)
    return fallback
