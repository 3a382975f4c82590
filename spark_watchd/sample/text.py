"""Foreign strings made safe for a terminal: `printable(s)` shows every control character as an escape.

Argv, process names, job names, cmdlines, error texts and trace fields come from other users and other
programs. Printed raw they can retitle a window (OSC), clear the screen (CSI), hide or reorder text (bidi
overrides) or break the encoder (lone surrogates from undecodable bytes). Every renderer that puts a string
the daemon did not write itself onto a terminal or into a log line passes it through `printable` first.
"""

from __future__ import annotations

import re
from typing import Any

# Bidi embeddings/overrides/isolates and marks: they reorder what follows on the line (CVE-2021-42574).
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# C0 (including ESC, TAB, CR, LF), DEL, C1 (CSI and OSC have 8-bit forms too), line/paragraph separators,
# the bidi controls, and surrogates (undecodable bytes kept by surrogateescape; unencodable as they are).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029" + _BIDI + "\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    cp = ord(match.group())
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if 0xDC80 <= cp <= 0xDCFF:  # surrogateescape: show the original byte
        return f"\\x{cp - 0xDC00:02x}"
    return f"\\u{cp:04x}"


def printable(value: Any) -> str:
    """`value` as text with every control, bidi and surrogate character shown as a visible escape.

    `None` is the empty string; anything else goes through `str()` first. Text with nothing to escape
    comes back unchanged (the same object), so it costs one regex scan.
    """
    if value is None:
        return ""
    s = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, s) if _UNSAFE.search(s) else s


def printable_tree(value: Any) -> Any:
    """A JSON-like document with `printable` applied to every string in it, keys included."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_tree(k): printable_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_tree(v) for v in value]
    return value
