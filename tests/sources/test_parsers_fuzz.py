"""Any text at all: the parsers answer data or a ValueError naming the problem, never anything else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_watchd.sample.workloads import KINDS, classify, read_caps
from spark_watchd.sources.memwatch import scan_mem_available_kb, scan_psi_some_avg10
from spark_watchd.sources.parsers import parse_boot_id, parse_meminfo, parse_psi, parse_uptime, parse_vmstat
from spark_watchd.sources.smi import parse_smi_csv, parse_smi_performance

# Text shaped like the real files (keys, colons, numbers, units) plus anything.
_TOKENS = st.sampled_from(
    [
        "MemTotal:",
        "MemAvailable:",
        " kB",
        "some",
        "full",
        "avg10=",
        "total=",
        "1.5",
        "12",
        "-3",
        " ",
        "\n",
        ", ",
        "[N/A]",
        " W",
        " %",
        "0x1F",
        "us",
        ":",
        "=",
        "\t",
        "HW Thermal Slowdown",
        "Clocks Event Reasons Counters",
        "GPU 0000:01:00.0",
        "    ",
    ]
)
TEXT = st.one_of(st.text(max_size=200), st.lists(_TOKENS, max_size=40).map("".join))


@settings(max_examples=60, deadline=None)
@given(TEXT)
def test_proc_parsers_raise_only_value_error(text):
    for parser in (parse_meminfo, parse_psi, parse_vmstat, parse_uptime, parse_boot_id, parse_smi_csv):
        try:
            parser(text)
        except ValueError:
            pass
    parse_smi_performance(text)  # lenient: takes what it recognises
    scan_mem_available_kb(text.encode("utf-8", "replace"))
    scan_psi_some_avg10(text.encode("utf-8", "replace"))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=30),
            _TOKENS,
            st.sampled_from(["--gpu-memory-utilization", "--kv-cache-memory-bytes", "-m", "python3", "vllm"]),
        ),
        max_size=8,
    ),
    st.text(max_size=15),
    st.booleans(),
)
def test_workload_functions_take_any_argv(argv, name, resident):
    assert classify(argv, name, resident) in KINDS
    caps = read_caps(argv)
    assert set(caps) == {
        "gpu_memory_utilization",
        "kv_cache_memory_bytes",
        "mem_fraction_static",
        "kv_cache_free_gpu_memory_fraction",
    }
