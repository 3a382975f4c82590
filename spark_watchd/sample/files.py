"""The state directory is ours: one daemon holds it (an flock), and its files are opened without following links.

Two daemons on one state dir doubled every event in `events.jsonl`; a FIFO as
`state.json` hung the start (nothing served, nothing logged); a symlink as
`events.jsonl` or `runs.jsonl` had our lines appended to its target. Every
state file is opened here with O_NOFOLLOW (and O_NONBLOCK, so a FIFO cannot
block the open) and refused unless it is a regular file: StateFileError, which
`run` reports with exit 78 naming the path.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from spark_watchd.errors import ConfigError

LOCK_FILE = "lock"


class StateFileError(ConfigError):
    """A state file is a link, a FIFO, a directory or a device: refused (exit 78 naming the path)."""


class StateDirBusy(ConfigError):
    """Another process holds the state directory's lock (its pid is in the message)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o644) -> int | None:
    """A descriptor on the regular file at `path`, never through a symlink; None when it does not exist
    (and `flags` has no O_CREAT). StateFileError for a link or anything but a regular file."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except FileNotFoundError:
        if flags & os.O_CREAT:
            raise
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateFileError(f"state file {path} is a symbolic link: refusing to follow it") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            raise StateFileError(f"state file {path} is not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StateFileError(f"state file {path} is {_kind(st.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular(path: str | os.PathLike) -> None:
    """StateFileError unless `path` is absent or a regular file (checked without following a link)."""
    try:
        st = os.lstat(path)
    except OSError:  # absent, or its directory cannot be reached: the first write says so (logged)
        return
    if stat.S_ISLNK(st.st_mode):
        raise StateFileError(f"state file {path} is a symbolic link: refusing to follow it")
    if not stat.S_ISREG(st.st_mode):
        raise StateFileError(f"state file {path} is {_kind(st.st_mode)}, not a regular file")


def lock_state_dir(directory: str | os.PathLike) -> int:
    """Take the state directory's exclusive lock for the life of the process; the descriptor holding it.

    StateDirBusy (naming the holder's pid) when another daemon or `run --replay` already has it. The lock is
    an flock on DIR/lock: the kernel drops it when the holder exits, however it exits (kill -9 included).
    """
    path = os.path.join(directory, LOCK_FILE)
    fd = open_regular(path, os.O_RDWR | os.O_CREAT, 0o644)
    assert fd is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise StateDirBusy(
            f"key 'daemon.state_dir': {directory} is in use by another spark-watchd (pid {holder}, lock {path});"
            " stop it or give this one its own --state-dir"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
