"""The one framing parse (issue 20 §1): RFC 9110/9112 Content-Length, Transfer-Encoding and Host rules."""

from __future__ import annotations

import pytest

from spark_watchd.web.framing import FramingError, content_length, framing, parse_head


@pytest.mark.parametrize("value", ["0", "64", " 64 ", "000123", "1" * 12])
def test_digits_only_lengths_are_read(value):
    assert content_length(value) == int(value)


@pytest.mark.parametrize(
    "value", ["+64", "-1", "6_4", "0x40", "64 64", "64,64", "", " ", "1e3", "٦٤", "1" * 13]
)
def test_anything_else_is_refused(value):
    with pytest.raises(FramingError, match="Content-Length"):
        content_length(value)


def test_int_would_have_accepted_what_the_parse_refuses():
    for value in ("+64", "6_4", "٦٤"):  # int() reads all of these as 64
        assert int(value) == 64
        with pytest.raises(FramingError):
            content_length(value)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ([("Host", "a"), ("Content-Length", "1"), ("content-length", "1")], "more than one Content-Length"),
        ([("Host", "a"), ("Content-Length", "1"), ("Transfer-Encoding", "chunked")], "Transfer-Encoding"),
        ([("Host", "a"), ("HOST", "b")], "more than one Host"),
        ([], "without a Host"),
    ],
)
def test_ambiguous_framing_is_refused(fields, why):
    with pytest.raises(FramingError, match=why):
        framing("HTTP/1.1", fields)


def test_http10_needs_no_host_and_chunked_alone_is_flagged():
    assert framing("HTTP/1.0", []).host is None
    f = framing("HTTP/1.1", [("Host", " localhost:9761 "), ("Transfer-Encoding", "chunked")])
    assert f.host == "localhost:9761" and f.chunked and f.length is None


def test_parse_head_reads_the_raw_block_and_refuses_folds_and_space_before_colon():
    version, f = parse_head(b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n")
    assert version == "HTTP/1.1" and f.length == 5 and f.host == "h"
    assert parse_head(b"GET /x HTTP/1.1\nHost: h\n\n")[1].host == "h"  # bare LF as the gate accepts it
    assert parse_head(b"\x00garbage\r\n\r\n") is None  # the handler answers the request line
    for head in (b"GET / HTTP/1.1\r\nHost: h\r\n X-Folded: y\r\n\r\n", b"GET / HTTP/1.1\r\nHost : h\r\n\r\n"):
        with pytest.raises(FramingError):
            parse_head(head)
