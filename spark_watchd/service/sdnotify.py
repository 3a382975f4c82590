"""systemd notify protocol (sd_notify(3)) with the standard library: READY, WATCHDOG, STOPPING, STATUS."""

from __future__ import annotations

import os
import socket

# READY/STOPPING wait at most this long for room in systemd's queue; WATCHDOG never waits.
SEND_TIMEOUT_S = 2.0


class SystemdNotifier:
    """Sends datagrams to $NOTIFY_SOCKET; a no-op when not run by systemd. Never raises."""

    def __init__(self, address: str | None = None):
        addr = address if address is not None else os.environ.get("NOTIFY_SOCKET")
        self.address = addr or None
        if self.address and self.address.startswith("@"):
            # Abstract namespace socket.
            self.address = "\0" + self.address[1:]
        usec = os.environ.get("WATCHDOG_USEC")
        pid = os.environ.get("WATCHDOG_PID")
        self.watchdog_usec = (
            int(usec) if usec and usec.isdigit() and (not pid or pid == str(os.getpid())) else None
        )

    @property
    def enabled(self) -> bool:
        """Whether systemd (or a test) gave us a notify socket."""
        return self.address is not None

    def notify(self, state: str, timeout: float | None = SEND_TIMEOUT_S) -> bool:
        """Send one datagram; False (never an exception) when it cannot be delivered in time."""
        if not self.address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                # A full receive queue (systemd busy, a test not reading) must not stall the tick.
                sock.settimeout(timeout)
                sock.connect(self.address)
                sock.sendall(state.encode("utf-8"))
            return True
        except OSError:  # includes socket.timeout and BlockingIOError
            return False

    def ready(self, status: str | None = None) -> bool:
        """READY=1: the first snapshot is published (Type=notify start-up is complete)."""
        msg = "READY=1" + (f"\nSTATUS={status}" if status else "")
        return self.notify(msg)

    def watchdog(self) -> bool:
        """WATCHDOG=1 on each publish; dropped rather than waited for (the next tick sends another)."""
        return self.notify("WATCHDOG=1", timeout=0.0)

    def set_watchdog_timeout(self, seconds: float) -> bool:
        """WATCHDOG_USEC=...: change WatchdogSec at run time (e.g. the interval grew since install)."""
        return self.notify(f"WATCHDOG_USEC={max(1, round(seconds * 1_000_000))}")

    def stopping(self) -> bool:
        """STOPPING=1: shutdown has begun."""
        return self.notify("STOPPING=1")

    def reloading(self) -> bool:
        """RELOADING=1: re-reading the configuration (SIGHUP)."""
        return self.notify("RELOADING=1")

    def status(self, text: str) -> bool:
        """STATUS=...: free text shown by `systemctl status`."""
        return self.notify(f"STATUS={text}")
