"""sd_notify(3) over a real AF_UNIX datagram socket standing in for systemd's notify socket."""

from __future__ import annotations

import os
import socket
import threading
import uuid

import pytest

from spark_watchd.service.sdnotify import SystemdNotifier


@pytest.fixture
def notify_socket(tmp_path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify.sock")
    sock.bind(path)
    sock.settimeout(5)
    yield path, sock
    sock.close()


def _recv(sock) -> str:
    return sock.recv(4096).decode()


def test_ready_watchdog_stopping_arrive_in_order(notify_socket, monkeypatch):
    path, sock = notify_socket
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    n = SystemdNotifier()
    assert n.enabled
    assert n.ready(status="first snapshot published")
    assert n.watchdog()
    assert n.watchdog()
    assert n.stopping()
    assert _recv(sock) == "READY=1\nSTATUS=first snapshot published"
    assert _recv(sock) == "WATCHDOG=1"
    assert _recv(sock) == "WATCHDOG=1"
    assert _recv(sock) == "STOPPING=1"


def test_abstract_namespace_address(monkeypatch):
    name = f"spark-watchd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        n = SystemdNotifier()
        assert n.ready()
        assert sock.recv(100) == b"READY=1"


def test_without_notify_socket_everything_is_a_quiet_no_op(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    n = SystemdNotifier()
    assert not n.enabled
    assert n.ready() is False
    assert n.watchdog() is False
    assert n.stopping() is False


def test_vanished_socket_never_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "gone.sock"))
    n = SystemdNotifier()
    assert n.enabled
    assert n.watchdog() is False


def test_watchdog_usec_read_only_for_this_pid(monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "120000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert SystemdNotifier(address="").watchdog_usec == 120_000_000
    # The variables were meant for another process (e.g. inherited by a child): ignore them.
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    assert SystemdNotifier(address="").watchdog_usec is None
    monkeypatch.setenv("WATCHDOG_USEC", "soon")
    monkeypatch.delenv("WATCHDOG_PID")
    assert SystemdNotifier(address="").watchdog_usec is None


def test_a_notify_socket_nobody_reads_never_stalls_the_daemon(notify_socket, monkeypatch):
    path, sock = notify_socket
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    n = SystemdNotifier()
    results = []
    # The receive queue of an unread datagram socket holds only a handful of messages.
    worker = threading.Thread(target=lambda: results.extend(n.watchdog() for _ in range(500)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "watchdog() blocked on a full notify queue"
    assert results[0] is True and results[-1] is False  # delivered while there was room, then dropped
    assert _recv(sock) == "WATCHDOG=1"


def test_watchdog_timeout_can_be_changed_at_run_time(notify_socket, monkeypatch):
    path, sock = notify_socket
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    assert SystemdNotifier().set_watchdog_timeout(240)
    assert _recv(sock) == "WATCHDOG_USEC=240000000"
