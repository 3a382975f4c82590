"""Host and Origin policy: the names the daemon is reachable as, nothing a rebinding page can claim."""

from __future__ import annotations

import pytest

from spark_watchd.web.hosts import HostPolicy


@pytest.fixture
def policy():
    return HostPolicy("0.0.0.0", ["grafana.lan", ".corp.example"], names={"spark", "spark.local"})


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:9761", "localhost:9761", "LOCALHOST", "[::1]:9761", "10.1.2.3", "spark:9761", "spark.local",
     "grafana.lan:80", "corp.example", "a.corp.example:9761", "app.localhost", None],
)  # fmt: skip
def test_allowed_hosts(policy, host):
    assert policy.allows_host(host)


@pytest.mark.parametrize(
    "host",
    ["evil.example:9761", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example", "xcorp.example",
     "", "[::1", "spark:port", "grafana.lan.evil"],
)  # fmt: skip
def test_foreign_hosts(policy, host):
    assert not policy.allows_host(host)


def test_star_allows_any_host():
    assert HostPolicy("127.0.0.1", ["*"]).allows_host("anything.example")


@pytest.mark.parametrize(
    ("origin", "host", "ok"),
    [
        (None, "localhost:9761", True),
        ("http://localhost:9761", "localhost:9761", True),
        ("https://127.0.0.1:9761", "127.0.0.1:9761", True),
        ("http://evil.example", "localhost:9761", False),
        ("http://localhost:3000", "localhost:9761", False),  # another local site is another origin
        ("null", "localhost:9761", False),
        ("http://evil.example:9761", "evil.example:9761", False),  # rebinding: same origin, foreign host
    ],
)
def test_origin_must_be_this_daemon(policy, origin, host, ok):
    assert policy.allows_origin(origin, host) is ok


def test_own_names_include_the_search_domains(tmp_path, monkeypatch):
    """`spark-01.lan:9761` (deploy/prometheus/targets/sparks.json) is this host when `lan` is searched."""
    from spark_watchd.web import hosts

    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 192.0.2.1\nsearch lan corp.example.\n")
    monkeypatch.setattr(hosts.socket, "gethostname", lambda: "spark-01")
    monkeypatch.setattr(
        hosts.socket, "gethostbyaddr", lambda name: ("spark-01", ["spark-01.lan"], ["192.0.2.7"])
    )
    names = hosts.own_names(str(resolv))
    assert {"spark-01", "spark-01.local", "spark-01.lan", "spark-01.corp.example"} <= names
    policy = HostPolicy("0.0.0.0", names=names)
    assert policy.allows_host("spark-01.lan:9761") and not policy.allows_host("spark-02.lan:9761")


def test_a_hung_resolver_does_not_hold_the_start(monkeypatch):
    import threading
    import time

    from spark_watchd.web import hosts

    never = threading.Event()

    def hung(name):
        never.wait(5)
        return "late.example", [], []

    monkeypatch.setattr(hosts.socket, "gethostbyaddr", hung)
    t0 = time.monotonic()
    assert hosts._fqdn(timeout=0.2) is None
    assert time.monotonic() - t0 < 1
    never.set()


def test_the_fqdn_is_the_standard_librarys_answer():
    """The resolver gets an ASCII name as bytes (no idna codec), and the answer is socket.getfqdn()'s."""
    import socket

    from spark_watchd.web import hosts

    assert hosts._getfqdn() == socket.getfqdn()
