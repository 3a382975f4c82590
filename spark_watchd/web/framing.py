"""Request framing by RFC 9110/9112, parsed once: the gate and the handler ask this module, nobody else.

Two readers disagreeing on where a request ends is how a worker gets held:
`Content-Length: +64` or `6_4` was no length to the gate's regex and 64 to the
handler's `int()`, so the handler waited the full timeout for a body the gate
never held for. Here a Content-Length is 1*DIGIT (no sign, no underscore, no
space inside, at most 12 digits), given once; a repeated or list-valued one,
one with Transfer-Encoding beside it, a header line with whitespace before its
colon or folded onto the next line (obs-fold) are refused (400). So are a
second Host and, on HTTP/1.1, none at all (RFC 9112 §3.2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_LENGTH_DIGITS = 12  # a terabyte: anything longer is not a body this daemon takes


class FramingError(ValueError):
    """The request's framing is ambiguous or malformed: answer 400 with str(self) and close."""


@dataclass(frozen=True, slots=True)
class Framing:
    length: int | None  # Content-Length, None when absent
    chunked: bool  # a Transfer-Encoding was given (the server takes no chunked bodies: 411)
    host: str | None  # the one Host value, None when absent (HTTP/1.0 only)


def _token(name: str) -> bool:
    return bool(name) and all(c.isascii() and (c.isalnum() or c in "!#$%&'*+-.^_`|~") for c in name)


def content_length(value: str) -> int:
    """One Content-Length field value as an int; FramingError unless it is 1*DIGIT."""
    v = value.strip(" \t")
    if not v or len(v) > MAX_LENGTH_DIGITS or not all("0" <= c <= "9" for c in v):
        raise FramingError(f"invalid Content-Length {value[:40]!r}: one decimal number expected")
    return int(v)


def framing(version: str, fields: Iterable[tuple[str, str]]) -> Framing:
    """Check the header fields that frame a request (`version` as in the request line, "HTTP/1.1")."""
    lengths: list[str] = []
    hosts: list[str] = []
    chunked = False
    for name, value in fields:
        key = name.lower()
        if key == "content-length":
            lengths.append(value)
        elif key == "transfer-encoding":
            chunked = True
        elif key == "host":
            hosts.append(value)
    if len(hosts) > 1:
        raise FramingError("more than one Host header")
    if not hosts and version == "HTTP/1.1":
        raise FramingError("HTTP/1.1 request without a Host header")
    length = None
    if lengths:
        if len(lengths) > 1:
            raise FramingError("more than one Content-Length header")
        if chunked:
            raise FramingError("both Transfer-Encoding and Content-Length")
        length = content_length(lengths[0])
    return Framing(length=length, chunked=chunked, host=hosts[0].strip(" \t") if hosts else None)


def parse_head(head: bytes) -> tuple[str, Framing] | None:
    """The request-line version and framing of a raw header block (ending at the blank line).

    None when the request line is not HTTP/1.x (the handler answers that one); FramingError when the
    header fields are malformed or frame the request ambiguously.
    """
    lines = head.decode("latin-1").split("\n")
    request_line = lines[0].rstrip("\r").split(" ")
    if len(request_line) != 3 or request_line[2] not in ("HTTP/1.0", "HTTP/1.1"):
        return None
    fields: list[tuple[str, str]] = []
    for raw in lines[1:]:
        line = raw.rstrip("\r")
        if not line:
            break
        if line[0] in " \t":
            raise FramingError("folded header line (obs-fold)")
        name, sep, value = line.partition(":")
        if not sep or not _token(name):
            raise FramingError(f"malformed header line {line[:40]!r}")
        fields.append((name, value.strip(" \t")))
    return request_line[2], framing(request_line[2], fields)
