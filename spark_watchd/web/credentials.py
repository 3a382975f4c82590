"""bcrypt basic auth that a password flood cannot turn into a scrape outage or a username oracle.

One bcrypt check at cost 12 holds a worker ~270 ms: twelve clients sending
wrong passwords used to occupy every worker. So (1) verified credentials are
remembered, keyed by a digest of user, password and hash, as the Prometheus
exporter-toolkit does: a scraper pays bcrypt once, not per scrape; (2) at most
`verifiers` bcrypt checks run at once, and a request finding them all busy is
answered 429 at once instead of waiting; (3) each client gets `failures`
wrong attempts per `window_s` (a token bucket), then 429 without any bcrypt
work; (4) an unknown user is checked against a dummy hash of the same cost as
the configured ones, so it takes as long as a wrong password.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from enum import Enum

BCRYPT_HASH = re.compile(rb"^\$2[abxy]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")
_MAX_CLIENTS = 4096  # failure buckets kept; beyond this the oldest go (a spoofing flood cannot grow memory)


class Verdict(Enum):
    OK = "ok"
    DENIED = "denied"  # 401
    LIMITED = "limited"  # 429: too many failures from this client, or every verifier busy


def _cost(hashed: bytes) -> int:
    m = BCRYPT_HASH.match(hashed)
    return int(m.group(1)) if m else 10


class BasicAuth:
    """Checks `Authorization: Basic` headers against bcrypt hashes; thread-safe."""

    def __init__(
        self,
        users: Mapping[str, bytes],
        *,
        verifiers: int = 2,
        failures: int = 10,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        import bcrypt

        self._bcrypt = bcrypt
        self.users = dict(users)
        self.failures = failures
        self.window_s = window_s
        self._clock = clock
        self._slots = threading.BoundedSemaphore(verifiers)
        self._lock = threading.Lock()
        self._verified: dict[str, bytes] = {}  # user -> digest of a password that passed bcrypt
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens left, at)
        cost = max((_cost(h) for h in self.users.values()), default=10)
        # Same cost as the real hashes: an unknown user then costs exactly the work of a wrong password.
        self._dummy = bcrypt.hashpw(os.urandom(16).hex().encode(), bcrypt.gensalt(rounds=cost))

    def check(self, header: str | None, client: str = "") -> Verdict:
        """OK, DENIED or LIMITED for one request's Authorization header from `client` (its IP address)."""
        creds = _parse(header)
        if creds is None:
            return Verdict.DENIED
        user, password = creds
        hashed = self.users.get(user)
        digest = hashlib.sha256(b"\0".join((user.encode(), password, hashed or b""))).digest()
        with self._lock:
            known = self._verified.get(user)
        if known is not None and hmac.compare_digest(known, digest):
            return Verdict.OK
        if not self._take_token(client):
            return Verdict.LIMITED
        if not self._slots.acquire(blocking=False):
            return Verdict.LIMITED
        try:
            # bcrypt reads 72 bytes at most (newer bcrypt raises on more): cut, as Go's bcrypt effectively does.
            ok = self._bcrypt.checkpw(password[:72], hashed if hashed is not None else self._dummy)
        except ValueError:
            ok = False
        finally:
            self._slots.release()
        if ok and hashed is not None:
            with self._lock:
                self._verified[user] = digest
            self._refund(client)
            return Verdict.OK
        return Verdict.DENIED

    def _take_token(self, client: str) -> bool:
        """Spend one attempt from the client's bucket (refilled at failures/window_s per second)."""
        now = self._clock()
        rate = self.failures / self.window_s
        with self._lock:
            tokens, at = self._buckets.pop(client, (float(self.failures), now))
            tokens = min(float(self.failures), tokens + (now - at) * rate)
            if len(self._buckets) >= _MAX_CLIENTS:
                self._buckets.pop(next(iter(self._buckets)))
            if tokens < 1.0:
                self._buckets[client] = (tokens, now)
                return False
            self._buckets[client] = (tokens - 1.0, now)
            return True

    def _refund(self, client: str) -> None:
        """A successful login gives its token back: only failures count."""
        with self._lock:
            if client in self._buckets:
                tokens, at = self._buckets[client]
                self._buckets[client] = (min(float(self.failures), tokens + 1.0), at)


def _parse(header: str | None) -> tuple[str, bytes] | None:
    """(user, password bytes) from a Basic Authorization header, or None when it is not one."""
    if not header or header[:6].lower() != "basic ":
        return None
    try:
        raw = base64.b64decode(header[6:].strip(), validate=True)
        user, sep, password = raw.decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if not sep:
        return None
    return user, password.encode("utf-8")
