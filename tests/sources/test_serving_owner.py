"""Who owns a listening port: /proc/net/tcp* parsed from captures, and owners found in a procfs tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_watchd.sample.model import ProcessInfo
from spark_watchd.sources.serving import ServingSource
from spark_watchd.sources.serving_owner import (
    Listener,
    NotOwned,
    PortOwners,
    accepting,
    attribute,
    parse_net_tcp,
)
from spark_watchd.sources.serving_settings import ServingSettings

NET = Path(__file__).resolve().parent.parent / "fixtures" / "net"


def _listeners(name: str) -> list[Listener]:
    return parse_net_tcp((NET / name).read_text().splitlines())


def test_listening_sockets_are_parsed_from_a_captured_tcp_table():
    assert _listeners("tcp") == [
        Listener("127.0.0.1", 45643, 0, 36631),
        Listener("0.0.0.0", 2024, 0, 640),
        Listener("0.0.0.0", 33623, 0, 36632),
    ]  # the TIME_WAIT and ESTABLISHED sockets after them are never read


def test_listening_sockets_are_parsed_from_a_captured_tcp6_table():
    assert _listeners("tcp6") == [Listener("::1", 35597, 0, 36634), Listener("::", 42959, 0, 36633)]


def test_malformed_lines_are_skipped_and_an_empty_table_has_no_listeners():
    lines = (NET / "tcp").read_text().splitlines()
    bad = [lines[0], "   0: zz:07E8 00000000:0000 0A 0:0 00:0 0 0 0 1", "garbage", *lines[1:]]
    assert parse_net_tcp(bad) == _listeners("tcp")
    assert parse_net_tcp([]) == [] and parse_net_tcp(lines[:1]) == []


def test_a_connection_reaches_that_address_and_the_wildcards():
    every = _listeners("tcp") + _listeners("tcp6")
    assert accepting(every, "127.0.0.1", 45643) == [Listener("127.0.0.1", 45643, 0, 36631)]
    assert accepting(every, "127.0.0.1", 33623) == [Listener("0.0.0.0", 33623, 0, 36632)]
    assert accepting(every, "[::1]", 35597) == [Listener("::1", 35597, 0, 36634)]
    assert accepting(every, "127.0.0.1", 42959) == [Listener("::", 42959, 0, 36633)]  # dual-stack may take it
    assert accepting(every, "127.0.0.1", 35597) == [] and accepting(every, "localhost", 45643) == []
    # A [::] beside an IPv4 listener of the port is IPv6-only (Linux refuses a dual-stack one there): another
    # user's cannot stand between this host's IPv4 clients and the IPv4 server.
    both = [Listener("0.0.0.0", 8000, 0, 1), Listener("::", 8000, 1001, 2)]
    assert accepting(both, "127.0.0.1", 8000) == [Listener("0.0.0.0", 8000, 0, 1)]
    assert accepting(both, "[::1]", 8000) == [Listener("::", 8000, 1001, 2)]


def _proc_tree(tmp_path: Path) -> Path:
    """A procfs root over the captured tables: launcher 100 (uid 1000) holds 45643, its child 101 holds 33623,
    pid 200 (uid 0) holds 2024; pid 300's fd table is unreadable, as another user's is to an unprivileged daemon."""
    root = tmp_path / "proc"
    (root / "net").mkdir(parents=True)
    for name in ("tcp", "tcp6"):
        (root / "net" / name).write_text((NET / name).read_text())
    for pid, ppid, uid, inodes in ((100, 1, 1000, [36631]), (101, 100, 1000, [36632]), (200, 1, 0, [640]),
                                   (300, 1, 0, None)):  # fmt: skip
        d = root / str(pid)
        d.mkdir()
        (d / "stat").write_text(f"{pid} (vllm serve) S {ppid} {pid} {pid} 0 -1 4194560 0 0 0 0\n")
        (d / "status").write_text(f"Name:\tvllm\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        (d / "comm").write_text("vllm\n")
        if inodes is not None:
            (d / "fd").mkdir()
            os.symlink("/dev/null", d / "fd" / "0")
            for n, inode in enumerate(inodes, start=3):
                os.symlink(f"socket:[{inode}]", d / "fd" / str(n))
    return root


def test_the_port_is_the_claimants_when_it_or_its_child_holds_the_socket(tmp_path):
    owners = PortOwners(str(_proc_tree(tmp_path)))
    assert attribute(owners, "127.0.0.1", 45643, (100,), {0}) == (100, False)  # uid 1000's: no key for it
    assert attribute(owners, "127.0.0.1", 33623, (100,), {0}) == (100, False)  # held by its child 101
    assert attribute(owners, "127.0.0.1", 2024, (200,), {0}) == (200, True)
    assert attribute(owners, "127.0.0.1", 45643, (100,), {0, 1000}) == (100, True)
    assert attribute(owners, "127.0.0.1", 9, (100,), {0}) == (None, False)  # nothing listens


def test_a_port_held_by_another_process_names_its_holder(tmp_path):
    owners = PortOwners(str(_proc_tree(tmp_path)))
    with pytest.raises(NotOwned, match=r"port 2024 is held by pid 200 \(vllm, uid 0\), not by .*pid 100"):
        attribute(owners, "127.0.0.1", 2024, (100,), {0})
    with pytest.raises(NotOwned, match="port 45643 is held by pid 100"):
        attribute(owners, "127.0.0.1", 45643, (101,), {0})  # a parent is not a child


def test_where_no_fd_table_shows_the_holder_the_sockets_uid_must_be_the_claimants(tmp_path):
    root = _proc_tree(tmp_path)
    for d in (root / "200" / "fd",):  # now nobody readable holds inode 640 (uid 0's socket)
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    owners = PortOwners(str(root))
    assert attribute(owners, "127.0.0.1", 2024, (300,), {0}) == (300, True)  # uid 0 socket, uid 0 claimant
    with pytest.raises(NotOwned, match="port 2024 is held by uid 0"):
        attribute(owners, "127.0.0.1", 2024, (100,), {0})  # uid 1000 cannot claim root's socket


def _proc(pid, argv, resident):
    return ProcessInfo(pid, 1000.0 + pid, argv[0], tuple(argv), 1 << 30, None, resident)


def test_gpu_resident_servers_come_before_the_rest_and_configured_ones_first():
    s = ServingSettings(servers={"vllm:9005": {"url": "http://127.0.0.1:19005"}},
                        endpoints=[{"kind": "ollama", "url": "http://127.0.0.1:11500", "name": "box"}])  # fmt: skip
    src = ServingSource(s, own_addresses=frozenset(), max_servers=3)
    procs = [_proc(10 + i, ["vllm", "serve", "m", "--port", str(9000 + i)], i == 4) for i in range(6)]
    assert [t.server for t in src.targets(procs)] == ["box", "vllm:9005", "vllm:9004"]


def test_a_url_override_ties_its_reading_to_the_claimant_only_when_a_trusted_user_runs_it():
    me = os.getpid()  # a real process: its uid is read from /proc
    procs = [_proc(me, ["vllm", "serve", "m", "--port", "9100"], False)]
    pointed = {"vllm:9100": {"url": "http://127.0.0.1:19100"}}
    mine = ServingSource(
        ServingSettings(servers=pointed, auth_uids=[os.geteuid()]), own_addresses=frozenset()
    )
    assert [(t.base_url, t.pid) for t in mine.targets(procs)] == [("http://127.0.0.1:19100", me)]
    other = ServingSource(
        ServingSettings(servers=pointed, auth_uids=[os.geteuid() + 1]), own_addresses=frozenset()
    )
    assert [(t.base_url, t.pid) for t in other.targets(procs)] == [("http://127.0.0.1:19100", None)]
