"""Who owns a listening port: /proc/net/tcp* (LISTEN sockets, their uid and inode) and /proc/PID/fd links.

A server is found by its command line, and any local user can write any command line: `vllm serve m --port
8000` in a process that does not listen, or a fake server on a port of its own. So before a discovered
server is scraped, the port it names is looked up here: its listening socket's inode is found among the
claimant's open files or its descendants' (the launcher, or a worker it started, holds it); its uid says
whether the operator's credentials may go there. Where another user's /proc/PID/fd cannot be read (the
daemon runs as its own unprivileged user), the socket's uid must be the claimant's uid instead.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from collections.abc import Collection, Iterable, Sequence
from typing import NamedTuple

_LISTEN = "0A"  # include/net/tcp_states.h TCP_LISTEN, as /proc/net/tcp prints it


class Listener(NamedTuple):
    """One listening TCP socket: its local address (text), port, owner uid (the socket's) and inode."""

    address: str
    port: int
    uid: int
    inode: int


def _address(hex_text: str) -> str:
    """A /proc/net/tcp address: each 32-bit word printed in host byte order (%08X of a __be32)."""
    raw = bytes.fromhex(hex_text)
    if sys.byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(raw))


def parse_net_tcp(lines: Iterable[str]) -> list[Listener]:
    """The LISTEN sockets of /proc/net/tcp or /proc/net/tcp6 text (header line first); malformed lines skipped.

    The kernel lists the listening hash before the established one (tcp_seq_start), so reading stops at the
    first socket in another state: a busy server's thousands of connections are never read.
    """
    out: list[Listener] = []
    it = iter(lines)
    next(it, None)  # the header
    for line in it:
        f = line.split(None, 10)
        if len(f) < 10:
            continue
        if f[3] != _LISTEN:
            break
        addr, _, port = f[1].partition(":")
        try:
            out.append(Listener(_address(addr), int(port, 16), int(f[7]), int(f[9])))
        except ValueError:
            continue
    return out


def accepting(listeners: Iterable[Listener], host: str, port: int) -> list[Listener]:
    """The listeners a connection to host:port may reach: that address's and its family's wildcard's.

    An IPv4 connection reaches an IPv6 wildcard only when no IPv4 listener has the port: Linux refuses to
    listen on 0.0.0.0 or 127.0.0.1 beside a dual-stack [::] (other than in one user's SO_REUSEPORT group),
    so a [::] beside an IPv4 listener is IPv6-only, and another user's cannot take IPv4 connections from it.
    """
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return []
    same = [x for x in listeners if x.port == port]
    if ip.version == 6:
        return [x for x in same if x.address in (str(ip), "::")]
    v4 = [x for x in same if x.address in (str(ip), "0.0.0.0")]
    return v4 or [x for x in same if x.address in ("::", f"::ffff:{ip}")]


class Owner(NamedTuple):
    """Who holds a listening socket: pid None where no readable /proc/PID/fd holds it."""

    pid: int | None
    uids: tuple[int, ...]  # the process's real and effective uid, else the socket's
    name: str


class PortOwners:
    """Reads the listening sockets and their owners under a procfs root; caches what cannot change."""

    def __init__(self, proc_root: str = "/proc", clock=time.monotonic):
        self.proc_root, self.clock = proc_root, clock
        # inode -> (pid or None, when found): a live socket's inode stays with its process; "no readable
        # holder" (another user's fd tables, to an unprivileged daemon) is looked for again after a minute.
        self._owner: dict[int, tuple[int | None, float]] = {}

    def listeners(self, table: str) -> list[Listener]:
        """The listening sockets of /proc/net/`table` (tcp, tcp6) in this network namespace, read afresh at
        each call (just before a scrape: a port that changed hands since is seen); only its listening part."""
        try:
            with open(os.path.join(self.proc_root, "net", table), encoding="ascii") as fh:
                return parse_net_tcp(fh)
        except (OSError, UnicodeDecodeError):
            return []  # no IPv6 in this kernel

    def _read(self, pid: int, name: str) -> str | None:
        try:
            with open(os.path.join(self.proc_root, str(pid), name), encoding="utf-8", errors="replace") as fh:
                return fh.read(4096)
        except OSError:
            return None

    def uids(self, pid: int) -> tuple[int, ...] | None:
        """The real and effective uid of pid (/proc/PID/status), None when it is gone."""
        text = self._read(pid, "status")
        for line in (text or "").splitlines():
            if line.startswith("Uid:"):
                try:
                    return tuple(sorted({int(x) for x in line.split()[1:3]}))
                except ValueError:
                    return None
        return None

    def ppid(self, pid: int) -> int | None:
        text = self._read(pid, "stat")
        try:
            return int(text[text.rindex(")") + 2 :].split()[1])  # type: ignore[union-attr]
        except (AttributeError, ValueError, IndexError):
            return None

    def name(self, pid: int) -> str:
        text = (self._read(pid, "comm") or "?").strip()[:32]
        return "".join(c if c.isprintable() else "?" for c in text)  # any user names their process

    def _holds(self, pid: int, inodes: Collection[int]) -> bool | None:
        """Whether pid has one of the socket inodes open; None when its fd table cannot be read."""
        fd_dir = os.path.join(self.proc_root, str(pid), "fd")
        try:
            entries = list(os.scandir(fd_dir))
        except OSError:
            return None
        for e in entries:
            try:
                link = os.readlink(e.path)
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1].isdigit() and int(link[8:-1]) in inodes:
                return True
        return False

    def owner_pid(self, inode: int, first: Sequence[int]) -> int | None:
        """The pid holding the socket inode: the `first` pids are looked at before every other process."""
        now = self.clock()
        pid, when = self._owner.get(inode, (None, None))
        if pid is not None and self._holds(pid, (inode,)):
            return pid
        if pid is None and when is not None and now - when < 60:
            return None
        found = None
        for p in [*first, *(p for p in self._pids() if p not in first)]:
            if self._holds(p, (inode,)):
                found = p
                break
        if len(self._owner) > 1024:
            self._owner.clear()
        self._owner[inode] = (found, now)
        return found

    def _pids(self) -> list[int]:
        try:
            return [int(d) for d in os.listdir(self.proc_root) if d.isdigit()]
        except OSError:
            return []

    def descends(self, pid: int, ancestors: Collection[int]) -> int | None:
        """The one of `ancestors` that pid is, or descends from (its parents followed up to init)."""
        seen = 0
        cur: int | None = pid
        while cur is not None and cur > 0 and seen < 64:
            if cur in ancestors:
                return cur
            cur, seen = self.ppid(cur), seen + 1
        return None

    def owner(self, listener: Listener, first: Sequence[int]) -> Owner:
        """Who holds a listener: the process where its fd is readable, else only the socket's uid."""
        pid = self.owner_pid(listener.inode, first)
        if pid is None:
            return Owner(None, (listener.uid,), "?")
        return Owner(pid, self.uids(pid) or (listener.uid,), self.name(pid))


class NotOwned(Exception):
    """The port a server's command line names is another process's (who, in words)."""


def attribute(
    owners: PortOwners,
    host: str,
    port: int,
    claimants: Sequence[int],
    allowed_uids: Collection[int],
) -> tuple[int | None, bool]:
    """(the claimant the port's listener belongs to, whether credentials may go there).

    The claimant is the pid that is, or is an ancestor of, every process holding a listener a connection to
    host:port may reach; where a holder's fd table is unreadable, the claimant whose uid is the socket's.
    No listener: (None, False), nothing to send anything to. Raises NotOwned naming the holder otherwise.
    Credentials may go only where every such listener, and every process known to hold one, is of an
    allowed uid.
    """
    # tcp6 only where it matters: an IPv4 listener of the port takes every IPv4 connection (accepting), and
    # a near-empty tcp6 table costs the kernel a walk of its whole connection hash (~3 ms here).
    v6 = ":" in host
    found = [] if v6 else accepting(owners.listeners("tcp"), host, port)
    found = found or accepting(owners.listeners("tcp6"), host, port)
    if not found:
        return None, False
    who: int | None = None
    trusted = True
    for lst in found:
        o = owners.owner(lst, claimants)
        if o.pid is not None:
            c = owners.descends(o.pid, claimants)
        else:  # the holder's fd table is not ours to read: the socket's uid must be a claimant's
            c = next((c for c in claimants if lst.uid in (owners.uids(c) or ())), None)
        if c is None or (who is not None and c != who):
            held = f"pid {o.pid} ({o.name}, uid {o.uids[-1]})" if o.pid is not None else f"uid {lst.uid}"
            raise NotOwned(
                f"port {port} is held by {held}, not by the process that names it (pid "
                f"{', '.join(map(str, claimants))}) or its children: not scraped"
            )
        who = c
        trusted = trusted and lst.uid in allowed_uids and all(u in allowed_uids for u in o.uids)
    return who, trusted
