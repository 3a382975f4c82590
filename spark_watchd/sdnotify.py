"""systemd notify protocol (sd_notify(3)) with the standard library: READY, WATCHDOG, STOPPING, STATUS."""

from __future__ import annotations

import os
import socket


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
        return self.address is not None

    def notify(self, state: str) -> bool:
        if not self.address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(self.address)
                sock.sendall(state.encode("utf-8"))
            return True
        except OSError:
            return False

    def ready(self, status: str | None = None) -> bool:
        msg = "READY=1" + (f"\nSTATUS={status}" if status else "")
        return self.notify(msg)

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def reloading(self) -> bool:
        return self.notify("RELOADING=1")

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")
