"""Host facts for the operator commands: meminfo under a root, today's training budget after the OS reserve."""

from __future__ import annotations

import pytest

from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.preflight import hostinfo
from tests.conftest import FIXTURES

GB10_BARE = FIXTURES / "hosts" / "gb10-operator-bare"


def test_budget_is_mem_available_minus_reserve_from_a_gb10_meminfo():
    mi = hostinfo.read_meminfo(str(GB10_BARE))
    assert hostinfo.training_budget_gib(mi) == pytest.approx((118505911 * 1024 - 4 * 2**30) / 2**30)


def test_the_reserve_is_the_daemons_g3_reserve_and_the_budget_never_goes_negative():
    assert Thresholds().os_reserve_bytes == hostinfo.DEFAULT_OS_RESERVE_GIB * 2**30
    assert hostinfo.training_budget_gib({"MemAvailable": 1024}) == 0.0  # 1 MiB left: nothing to plan with
    assert hostinfo.training_budget_gib({"MemAvailable": 8 * 2**20}, reserve_gib=2) == 6.0


def test_a_missing_or_malformed_meminfo_raises_for_the_command_to_report(tmp_path):
    with pytest.raises(OSError):
        hostinfo.read_meminfo(str(tmp_path))
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text("garbage\n")
    with pytest.raises(ValueError):
        hostinfo.read_meminfo(str(tmp_path))
