"""The /proc reader under any root: stat parsed past a hostile comm, create_time as psutil computes it, gone = NoSuchProcess."""

from __future__ import annotations

import os

import psutil
import pytest

from spark_watchd.sources.procfs import ProcEntry, boot_time, iter_root, parse_stat, read_argv, read_bytes

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(comm: str = "python3", ppid: int = 1, start: int = 500, rss: int = 256) -> str:
    """A /proc/PID/stat line: pid (comm) state, then fields 4.. with ppid, starttime (22) and rss (24) placed."""
    after = ["S", str(ppid)] + ["0"] * 17 + [str(start), "0", str(rss)] + ["0"] * 28
    return f"42 ({comm}) " + " ".join(after) + "\n"


def _host(tmp_path, procs: dict[int, tuple[str, list[str]]], btime: int = 1_700_000_000):
    root = tmp_path / "proc"
    root.mkdir()
    (root / "stat").write_text(f"cpu  1 2 3\nbtime {btime}\nprocesses 9\n")
    for pid, (stat, argv) in procs.items():
        d = root / str(pid)
        d.mkdir()
        (d / "stat").write_text(stat)
        (d / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    return root


# parse_stat


def test_parse_stat_reads_comm_ppid_start_and_rss():
    assert parse_stat(_stat("vllm", ppid=7, start=12345, rss=999)) == ("vllm", 7, 12345, 999)


def test_a_comm_holding_spaces_and_parens_is_split_after_the_last_paren():
    assert parse_stat(_stat("a) (b c) 9 9", ppid=3))[:2] == ("a) (b c) 9 9", 3)


def test_an_empty_comm_is_kept():
    assert parse_stat(_stat(""))[0] == ""


@pytest.mark.parametrize("text", ["", "42 python 1 2 3", "42 python) S 1"])
def test_a_stat_without_parenthesised_comm_is_refused(text):
    with pytest.raises(ValueError, match=r"no '\(comm\)'"):
        parse_stat(text)


def test_a_truncated_stat_is_refused_with_the_field_count():
    with pytest.raises(ValueError, match="21 fields after comm, expected at least 22"):
        parse_stat("42 (x) " + " ".join(["0"] * 21))


@pytest.mark.parametrize("bad", ["x", "1.5", "١٢", "9" * 21, ""])
def test_a_non_number_in_a_read_field_is_refused(bad):
    fields = _stat().split(") ")[1].split()
    fields[1] = bad or "--"
    with pytest.raises(ValueError, match="not a number"):
        parse_stat("42 (x) " + " ".join(fields))


@pytest.mark.parametrize(
    "kw", [{"ppid": -1}, {"ppid": 2**31 + 1}, {"start": -5}, {"rss": -1}, {"rss": 2**64 // PAGE + 1}]
)
def test_values_out_of_range_are_refused(kw):
    with pytest.raises(ValueError, match="out of range"):
        parse_stat(_stat(**kw))


def test_values_at_the_range_edges_are_accepted():
    assert parse_stat(_stat(ppid=2**31, start=2**64 - 1, rss=0))[1:] == (2**31, 2**64 - 1, 0)


# boot_time


def test_boot_time_is_the_btime_line(tmp_path):
    assert boot_time(str(_host(tmp_path, {}, btime=1_650_000_000))) == 1_650_000_000.0


def test_boot_time_without_a_btime_line_is_a_value_error(tmp_path):
    (tmp_path / "stat").write_text("cpu 1 2 3\n")
    with pytest.raises(ValueError, match="no btime line"):
        boot_time(str(tmp_path))


@pytest.mark.parametrize("value", ["-1", str(2**40)])
def test_an_impossible_btime_is_a_value_error(tmp_path, value):
    (tmp_path / "stat").write_text(f"btime {value}\n")
    with pytest.raises(ValueError, match="impossible btime"):
        boot_time(str(tmp_path))


def test_boot_time_of_a_root_without_stat_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        boot_time(str(tmp_path))


# ProcEntry


def test_entry_reads_name_ppid_argv_and_rss(tmp_path):
    root = _host(
        tmp_path, {9: (_stat("vllm", ppid=4, rss=100), ["vllm", "serve", "--gpu-memory-utilization=0.5"])}
    )
    e = ProcEntry(str(root), 9, 0.0)
    assert (e.pid, e.name(), e.ppid()) == (9, "vllm", 4)
    assert e.cmdline() == ["vllm", "serve", "--gpu-memory-utilization=0.5"]
    assert e.memory_info().rss == 100 * PAGE
    assert e.is_running()


def test_create_time_is_boot_time_plus_start_ticks(tmp_path):
    root = _host(tmp_path, {9: (_stat(start=CLK_TCK * 250 + CLK_TCK // 2), ["x"])})
    assert ProcEntry(str(root), 9, 1_700_000_000.0).create_time() == 1_700_000_250.5


def test_rss_is_read_fresh_while_identity_is_cached(tmp_path):
    root = _host(tmp_path, {9: (_stat("before", rss=10), ["x"])})
    e = ProcEntry(str(root), 9, 0.0)
    assert e.name() == "before"
    (root / "9" / "stat").write_text(_stat("after", rss=20))
    assert e.name() == "before"  # the scan judges one consistent identity
    assert e.memory_info().rss == 20 * PAGE


def test_a_cmdline_without_trailing_nul_keeps_its_last_argument(tmp_path):
    root = _host(tmp_path, {9: (_stat(), [])})
    (root / "9" / "cmdline").write_bytes(b"python\0train.py")  # a process that rewrote its argv
    assert ProcEntry(str(root), 9, 0.0).cmdline() == ["python", "train.py"]


def test_an_empty_cmdline_is_a_kernel_thread(tmp_path):
    root = _host(tmp_path, {2: (_stat("kthreadd"), [])})
    assert ProcEntry(str(root), 2, 0.0).cmdline() == []


def test_undecodable_argv_is_replaced_not_raised(tmp_path):
    root = _host(tmp_path, {9: (_stat(), [])})
    (root / "9" / "cmdline").write_bytes(b"py\xffthon\0")
    assert ProcEntry(str(root), 9, 0.0).cmdline() == ["py\ufffdthon"]


def test_a_gone_process_is_no_such_process(tmp_path):
    root = _host(tmp_path, {})
    e = ProcEntry(str(root), 77, 0.0)
    assert not e.is_running()
    for call in (e.name, e.ppid, e.create_time, e.cmdline, e.memory_info):
        with pytest.raises(psutil.NoSuchProcess):
            call()


def test_a_malformed_stat_is_a_value_error(tmp_path):
    root = _host(tmp_path, {9: ("garbage", ["x"])})
    with pytest.raises(ValueError):
        ProcEntry(str(root), 9, 0.0).name()


def test_oneshot_is_a_context_manager(tmp_path):
    root = _host(tmp_path, {9: (_stat("x"), ["x"])})
    e = ProcEntry(str(root), 9, 0.0)
    with e.oneshot():
        assert e.name() == "x"


def test_read_bytes_reads_past_its_first_read_to_the_end_or_the_limit(tmp_path):
    f = tmp_path / "f"
    data = bytes(range(256)) * 12_000  # 3 MB: many reads past the first
    f.write_bytes(data)
    assert read_bytes(str(f), 8 << 20) == data
    assert read_bytes(str(f), 1 << 20) == data[: 1 << 20]
    assert read_bytes(str(f), 100) == data[:100]
    f.write_bytes(b"")
    assert read_bytes(str(f), 4096) == b""


def test_a_cap_flag_after_a_megabyte_of_argv_is_read(tmp_path):
    root = _host(
        tmp_path, {9: (_stat(), ["vllm", "serve", "x" * 2_000_000, "--gpu-memory-utilization", "0.4"])}
    )
    argv = read_argv(str(root), 9)
    assert argv[:2] == ("vllm", "serve") and argv[-2:] == ("--gpu-memory-utilization", "0.4")


# iter_root


def test_iter_root_yields_only_numeric_directories_with_the_boot_time(tmp_path):
    root = _host(tmp_path, {1: (_stat("init", ppid=0, start=0), ["init"]), 30: (_stat("sh"), ["sh"])})
    for name in ("self", "sys", "1a", "١"):
        (root / name).mkdir()
    entries = sorted(iter_root(str(root)), key=lambda e: e.pid)
    assert [e.pid for e in entries] == [1, 30]
    assert entries[0].create_time() == 1_700_000_000.0


def test_a_tree_without_processes_needs_no_stat(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal: 1 kB\n")
    assert list(iter_root(str(tmp_path))) == []


def test_a_missing_root_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        list(iter_root(str(tmp_path / "absent")))


def test_a_root_with_processes_but_no_stat_is_an_os_error(tmp_path):
    (tmp_path / "5").mkdir()
    with pytest.raises(OSError):
        list(iter_root(str(tmp_path)))


def test_the_real_proc_lists_this_process_as_psutil_does():
    (me,) = [e for e in iter_root("/proc") if e.pid == os.getpid()]
    real = psutil.Process()
    assert me.cmdline() == real.cmdline()
    assert me.ppid() == real.ppid()
    assert me.create_time() == pytest.approx(real.create_time(), abs=0.02)
