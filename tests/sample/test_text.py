"""`printable`: foreign strings shown with every terminal control as a visible escape."""

from __future__ import annotations

import pytest

from spark_watchd.sample.text import printable, printable_tree


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;pwned\x07python train.py", "\\x1b]0;pwned\\x07python train.py"),  # window title (OSC)
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear screen (CSI)
        ("a\x9b31mb", "a\\x9b31mb"),  # 8-bit CSI (C1)
        ("del\x7f", "del\\x7f"),
        ("tab\there\nnext\r", "tab\\x09here\\x0anext\\x0d"),
        ("safe\u202eexe.txt", "safe\\u202eexe.txt"),  # right-to-left override
        ("\u2066isolate\u2069", "\\u2066isolate\\u2069"),
        ("line\u2028sep", "line\\u2028sep"),
        (b"caf\xff".decode("utf-8", "surrogateescape"), "caf\\xff"),  # an undecodable argv byte
    ],
)
def test_controls_become_visible_escapes(raw, shown):
    assert printable(raw) == shown
    shown.encode("ascii")  # nothing left that a terminal could act on or an encoder choke on


def test_ordinary_text_is_unchanged():
    text = "vllm serve Qwen/Qwen2.5-7B --gpu-memory-utilization 0.35 · 64 GiB, 86 °C, naïve 日本語"
    assert printable(text) is text


def test_none_and_non_strings():
    assert printable(None) == ""
    assert printable(5120) == "5120"


def test_tree_escapes_every_string_keys_included():
    doc = {"w\x1b": [{"cmdline": "x\x1b[2J"}, 3, None, ("\x07",)]}
    assert printable_tree(doc) == {"w\\x1b": [{"cmdline": "x\\x1b[2J"}, 3, None, ["\\x07"]]}
