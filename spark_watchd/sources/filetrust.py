"""Whose word a file is: a kill cause read from a file counts only when no other user could have written it.

A file (and every directory above it, and every link on the way to it) must belong to root or to one other
user, and none may be writable by group or others, so nobody else could have put the file there or changed a
byte of it. Another user who created `/tmp/ray` before Ray did owns that directory: a log under it is theirs,
whatever it says about root's processes. Two allowances, each closing no door an attacker could use:

- a root-owned directory with the sticky bit (`/tmp`, `/var/tmp`, `/dev/shm`) may be writable by all: the
  sticky bit stops anyone from renaming or removing an entry they do not own, and whatever another user
  creates there is theirs, which the ownership rule then refuses;
- write access for a group that is the owner's own user-private group (Ubuntu's default umask 002 makes a
  user's files 0664): that group holds only the owner.

Ray makes its temp, session and log directories 0777 (and not sticky) at start, so any local user may
rename or remove entries there: such a log is refused, with the reason said once; `chmod -R go-w` the Ray
temp dir after `ray start` (e.g. the Ray unit's ExecStartPost) to have its kills counted.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass


@dataclass(frozen=True)
class Trust:
    """Who a file's chain belongs to: `uid` (0 for root's alone, else the one other user), or why it cannot
    be trusted (`reason`, naming the path at fault); `ident` is the file's (dev, inode) as checked, None
    when it is no regular file (then it is not read at all)."""

    uid: int | None
    reason: str | None = None
    ident: tuple[int, int] | None = None


def _private_group(uid: int, gid: int) -> bool:
    """Whether gid is uid's user-private group (same name, primary, no other members)."""
    try:
        pw, gr = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    return pw.pw_gid == gid and gr.gr_name == pw.pw_name and all(m == pw.pw_name for m in gr.gr_mem)


def _writable_by_others(st: os.stat_result) -> str | None:
    """'others' or 'group' when someone besides the owner may write (after the allowances), else None."""
    mode = st.st_mode
    if stat.S_ISDIR(mode) and mode & stat.S_ISVTX and st.st_uid == 0:
        return None  # a root-owned sticky directory: see the module docstring
    if mode & stat.S_IWOTH:
        return "others"
    if mode & stat.S_IWGRP and not _private_group(st.st_uid, st.st_gid):
        return "group"
    return None


def _chain(path: str) -> list[str]:
    """The path's own components (links as links) and, where a link leads elsewhere, the real directories."""
    out: list[str] = []
    p = os.path.abspath(path)
    while True:
        out.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    real = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    while True:
        if real not in out:
            out.append(real)
        parent = os.path.dirname(real)
        if parent == real:
            break
        real = parent
    return out


def file_trust(path: str) -> Trust:
    """Whether the regular file at `path` could only have been written by root or by one other user (and
    which); a missing file raises FileNotFoundError, anything else unreadable gives a reason."""
    leaf = os.lstat(path)
    if stat.S_ISLNK(leaf.st_mode):
        return Trust(None, f"{path} is a symbolic link")
    if not stat.S_ISREG(leaf.st_mode):
        return Trust(None, f"{path} is not a regular file")
    if leaf.st_nlink != 1:
        return Trust(None, f"{path} has {leaf.st_nlink} hard links")
    ident = (leaf.st_dev, leaf.st_ino)
    users: set[int] = set()
    for p in _chain(path):
        try:
            st = leaf if p == os.path.abspath(path) else os.lstat(p)
        except OSError as exc:
            return Trust(None, f"{p} cannot be checked: {exc.strerror or exc}", ident)
        if st.st_uid != 0:
            users.add(st.st_uid)
        if stat.S_ISLNK(st.st_mode):
            continue  # a link's own mode means nothing; its owner counts, and where it leads is checked
        if (who := _writable_by_others(st)) is not None:
            return Trust(None, f"{p} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})", ident)
    if len(users) > 1:
        return Trust(
            None,
            f"{path} and the directories above it belong to more than one user "
            f"(uids {', '.join(map(str, sorted(users)))})",
            ident,
        )
    return Trust(users.pop() if users else 0, None, ident)
