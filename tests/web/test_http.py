"""The request/response types of every route: loopback detection, defaults, HOST:PORT parsing."""

from __future__ import annotations

import dataclasses

import pytest

from spark_watchd.web.http import Request, Response, Route, parse_listen


def _req(client: str) -> Request:
    return Request("GET", "/metrics", {}, {}, b"", client)


@pytest.mark.parametrize("client", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_loopback_clients_in_every_spelling_are_loopback(client):
    assert _req(client).from_loopback


@pytest.mark.parametrize("client", ["10.0.0.5", "192.168.1.127", "::ffff:10.0.0.1", "fe80::1", "1270.0.0.1"])
def test_other_clients_are_not_loopback(client):
    # "1270.0.0.1" is no address, but a prefix test on "127" would let it (or 127-looking names) in.
    assert _req(client).from_loopback is (client.startswith("127."))


def test_responses_default_to_plain_text_and_routes_to_no_body():
    r = Response(204)
    assert (r.body, r.content_type, dict(r.headers)) == (b"", "text/plain; charset=utf-8", {})
    assert Route("GET", "/x", lambda req: r).max_body == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = 200  # type: ignore[misc] - handlers share responses; nobody may change one


@pytest.mark.parametrize(
    ("listen", "want"),
    [
        ("127.0.0.1:9761", ("127.0.0.1", 9761)),
        ("[::1]:80", ("::1", 80)),
        (":9761", ("0.0.0.0", 9761)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
        ("[::]:65535", ("::", 65535)),
        ("[fe80::1%lo]:9761", ("fe80::1%lo", 9761)),
    ],
)
def test_parse_listen_splits_host_and_port(listen, want):
    assert parse_listen(listen) == want


@pytest.mark.parametrize(
    "listen",
    [
        "localhost",
        "127.0.0.1:",
        "127.0.0.1:http",
        "127.0.0.1:65536",
        "",
        "[::1]",
        "[::1]x:1",
        "[::1:80",
        ":٩",
    ],
)
def test_parse_listen_refuses_what_is_not_host_port_naming_it(listen):
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        parse_listen(listen)


@pytest.mark.parametrize("listen", ["::1", "::", "::1:9761", "fe80::1:80"])
def test_parse_listen_refuses_ipv6_without_brackets_saying_how(listen):
    """`--listen ::1` parsed as host ':' port 1 and died at bind with "Name or service not known"."""
    with pytest.raises(ValueError, match=r"IPv6 address in brackets with a port, e.g. \[::1\]:9761"):
        parse_listen(listen)


def test_parse_listen_refuses_a_bracketed_name():
    with pytest.raises(ValueError, match="not an IPv6 address"):
        parse_listen("[localhost]:9761")
