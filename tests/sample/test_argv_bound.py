"""Argv bounded where it enters (issue 20 §2): per argument, per process, with the launcher flags kept."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_watchd.sample.workloads import (
    ARG_MAX_BYTES,
    ARGV_MAX_BYTES,
    LAUNCHER_FLAGS,
    bound_argv,
    bound_cmdline,
    classify,
    read_caps,
)
from spark_watchd.sources.serving_endpoints import endpoint_for


def _raw(argv):
    return b"".join(a.encode() + b"\0" for a in argv)


def test_a_small_argv_is_kept_as_it_is():
    argv = ["vllm", "serve", "Qwen/Qwen3-32B", "--gpu-memory-utilization", "0.5"]
    assert bound_cmdline(_raw(argv)) == tuple(argv) == bound_argv(argv)
    assert bound_cmdline(_raw(["a", "... (5 more bytes)"])) == (
        "a",
        "... (5 more bytes)",
    )  # a literal is an arg


def test_padding_is_cut_with_a_visible_count_and_the_flags_after_it_are_kept():
    pad = ["x" * 127_000] * 15
    argv = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--port", "8001", *pad]
    argv += ["--gpu-memory-utilization", "0.9", "--port", "9000", "--gpu-memory-utilization=0.35"]
    got = bound_cmdline(_raw(argv))
    assert sum(map(len, got)) < ARGV_MAX_BYTES + 2 * ARG_MAX_BYTES
    assert got[5].endswith(f"... ({127_000 - ARG_MAX_BYTES} more bytes)")  # one argument cut
    markers = [a for a in got if a.startswith("... (")]
    assert len(markers) == 1 and markers[0].endswith(" more bytes)")
    assert got[-3:] == ("--port", "9000", "--gpu-memory-utilization=0.35")  # last occurrences, in order
    assert classify(got) == classify(argv) == "vllm"
    assert read_caps(got) == read_caps(argv)
    assert endpoint_for("vllm", got) == endpoint_for("vllm", argv)


def test_a_second_bound_adds_to_the_first_count():
    argv = ["ollama", "serve", *(["y" * 1000] * 40)]
    once = bound_cmdline(_raw(argv))
    twice = bound_argv(once, 512)
    n = int(twice[-1].split("(")[1].split()[0])
    assert n == sum(len(a) for a in argv) - sum(len(a) for a in twice[:-1])


def test_setproctitle_spaces_and_empty_cmdlines():
    assert bound_cmdline(b"sglang::scheduler TP0") == ("sglang::scheduler", "TP0")
    assert bound_cmdline(b"") == () == bound_cmdline(b"\0")
    assert bound_cmdline("é".encode() * 2000 + b"\0")[0].endswith(
        "more bytes)"
    )  # a cut mid-character is fine


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=ARG_MAX_BYTES + 8)
    | st.lists(st.sampled_from([b"\0", b" ", b"a", b"\xe2\x82", b"\xac", b"\xff"])).map(b"".join)
)
def test_a_short_cmdline_reads_as_each_argument_decoded_on_its_own(raw):
    """An argv short enough to keep whole is decoded at once: exactly what decoding each argument gives."""
    end = len(raw) - 1 if raw.endswith(b"\0") else len(raw)
    sep = b"\0" if b"\0" in raw[:end] or b" " not in raw[:end] else b" "
    want = tuple(a.decode("utf-8", "replace") for a in raw[:end].split(sep)) if end > 0 else ()
    if all(len(a) <= ARG_MAX_BYTES for a in raw[:end].split(sep)):
        assert bound_cmdline(raw) == want


_arg = st.one_of(
    st.sampled_from(sorted(LAUNCHER_FLAGS)),
    st.sampled_from(["0.3", "8000", "40G", "=", "... (5 more bytes)"]),
    st.text(max_size=3000),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_arg, max_size=60))
def test_any_argv_is_bounded_and_short_flag_values_survive(argv):
    argv = [a.replace("\0", "") for a in argv]
    got = bound_cmdline(_raw(argv))
    assert (
        sum(len(a.encode("utf-8", "surrogatepass")) for a in got)
        <= ARGV_MAX_BYTES + len(LAUNCHER_FLAGS) * (2 * ARG_MAX_BYTES + 40) + 40
    )
    if all(len(a.encode("utf-8", "surrogatepass")) <= 64 for a in argv):  # caps and ports read the same
        assert read_caps(got) == read_caps(argv)


def test_one_sample_holds_at_most_its_budget_of_argv():
    """Past SAMPLE_ARGV_MAX_BYTES together, each further process keeps its head and its launcher flags."""
    from spark_watchd.sample.model import ProcessInfo
    from spark_watchd.sample.workloads import ARGV_HEAD_BYTES, SAMPLE_ARGV_MAX_BYTES
    from spark_watchd.sources.processes import _within_sample_budget

    argv = bound_cmdline(_raw(["vllm", "serve", *(["z" * 1000] * 20), "--port", "8001"]))
    procs = [
        ProcessInfo(
            pid=i,
            create_time=1.0,
            name="vllm",
            cmdline=argv,
            rss_bytes=1,
            gpu_mem_bytes=None,
            gpu_resident=False,
            ppid=1,
        )  # fmt: skip
        for i in range(1, 101)
    ]
    out = _within_sample_budget(list(procs))
    total = sum(len(a) for p in out for a in p.cmdline)
    assert total <= SAMPLE_ARGV_MAX_BYTES + 100 * (ARGV_HEAD_BYTES + 64)
    assert out[0].cmdline == argv and len(out[-1].cmdline) < len(argv)
    assert all(p.cmdline[-2:] == ("--port", "8001") for p in out)
    assert all(any(a.endswith(" more bytes)") for a in p.cmdline) for p in out)
