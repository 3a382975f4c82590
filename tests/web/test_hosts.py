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
