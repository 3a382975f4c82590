"""Which Host and Origin headers the daemon answers: the names it is reachable as, so DNS rebinding gets 421.

A page on evil.example whose name is re-pointed at 127.0.0.1 makes the
browser send `Host: evil.example:9761`; answering it would hand that page
/api/v1/status (command lines included). IP literals are always accepted
(nobody can re-point an address), as are `localhost` (and `*.localhost`,
which browsers pin to loopback), the listen address, the host's own names
(hostname, its short form, `.local`, the short name under each resolv.conf
search domain, the FQDN) and `[daemon] allowed_hosts` (exact names, `.example.org` for a domain and
its subdomains, `*` for any).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable
from urllib.parse import urlsplit


def _host_part(value: str) -> str | None:
    """The host of a Host header value (no port, no brackets, lower case); None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not value[end + 1 :].startswith(":")):
            return None
        return value[1:end]
    host, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    return host.rstrip(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _search_domains(resolv_conf: str = "/etc/resolv.conf") -> list[str]:
    """The resolver's `search`/`domain` suffixes: `spark-01.lan` is this host when `lan` is searched."""
    try:
        with open(resolv_conf, encoding="utf-8", errors="replace") as fh:
            lines = fh.read(65536).splitlines()
    except OSError:
        return []
    out: list[str] = []
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] in ("search", "domain"):
            out += [w.lower().rstrip(".") for w in words[1:7] if w.strip(".")]
    return out


def _getfqdn() -> str:
    """socket.getfqdn() for this host, with an ASCII name handed to the resolver as bytes: the stdlib passes
    str, which loads the idna codec with unicodedata and stringprep (about 0.4 MiB kept for good)."""
    name = socket.gethostname()
    try:
        hostname, aliases, _addrs = socket.gethostbyaddr(name.encode() if name.isascii() else name)
    except OSError:
        return name
    return next((n for n in (hostname, *aliases) if "." in n), hostname)


def _fqdn(timeout: float = 1.0) -> str | None:
    """socket.getfqdn(), given up after `timeout` s (a broken resolver must not hold the start)."""
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(_getfqdn()), name="fqdn", daemon=True)
    t.start()
    t.join(timeout)
    return box[0].lower().rstrip(".") if box else None


def own_names(resolv_conf: str = "/etc/resolv.conf") -> set[str]:
    """This host's names: hostname, short form, `NAME.local`, NAME under each search domain, the FQDN."""
    names: set[str] = set()
    try:
        full = socket.gethostname().lower().rstrip(".")
    except OSError:
        return names
    if full:
        short = full.split(".", 1)[0]
        names |= {full, short, short + ".local"}
        names |= {f"{short}.{domain}" for domain in _search_domains(resolv_conf)}
    fqdn = _fqdn()
    if fqdn and fqdn != "localhost" and not _is_ip(fqdn):
        names.add(fqdn)
    return names


class HostPolicy:
    """Decides whether a request's Host (and a cross-site Origin) belongs to this daemon."""

    def __init__(self, listen_host: str, allowed: Iterable[str] = (), names: Iterable[str] | None = None):
        allowed = [a.strip().lower().rstrip(".") for a in allowed]
        self.any = "*" in allowed
        self.suffixes = tuple(a for a in allowed if a.startswith("."))
        self.names = {"localhost", listen_host.lower()} | set(own_names() if names is None else names)
        self.names |= {a for a in allowed if a and not a.startswith(".") and a != "*"}

    def allows_host(self, header: str | None) -> bool:
        """True for a Host header naming this daemon (or none at all: HTTP/1.0 tools, never a browser)."""
        if header is None or self.any:
            return True
        host = _host_part(header)
        if not host:
            return False
        return (
            host in self.names
            or _is_ip(host)
            or host.endswith(".localhost")
            or any(host.endswith(s) or host == s[1:] for s in self.suffixes)
        )

    def allows_origin(self, origin: str | None, host_header: str | None) -> bool:
        """True when a state-changing request carries no Origin or comes from this daemon's own origin."""
        if origin is None:
            return True  # not a browser: trainers and scripts send none
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (sandboxed frames, file://) and anything odd
        if host_header is None or parts.netloc.lower() != host_header.strip().lower():
            return False
        return self.allows_host(parts.netloc)
