"""The `platform` source: its parsers on published banners, a Spark-shaped tree, this machine, each part alone."""

from __future__ import annotations

import os
import shutil

import pytest

from spark_watchd.sources.platform import (
    PlatformSource,
    Unparsable,
    parse_dgx_release,
    parse_nvidia_version,
    parse_taint,
    read_platform,
)
from tests.conftest import FIXTURES

SPARK = FIXTURES / "hosts" / "gb10-platform"

# Banners as published: the open 580.173.02 one from a GB300 parser's captured fixture (with its GCC line,
# whose version-shaped number must not be taken); the proprietary ones in the shape NVIDIA prints them
# (595.91.07 and an x86_64 two-part version, from the same parser's tests). Start9Labs/start-technologies
# PR 3693 is the proprietary 580.173.02 on a GB10 that never initialises.
OPEN_580 = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.173.02  Release Build  "
    "(dvs-builder@U22-A24-5-4)  Tue Jun 23 08:34:19 UTC 2026\n"
    "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04.1) \n"
)
PROPRIETARY_595 = "NVRM version: NVIDIA UNIX aarch64 Kernel Module  595.91.07  Mon Sep  1 10:00:00 UTC 2026\n"
PROPRIETARY_X86 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54  Fri\n"


@pytest.mark.parametrize(
    "text, want",
    [
        (OPEN_580, ("580.173.02", "open")),
        (PROPRIETARY_595, ("595.91.07", "proprietary")),
        (PROPRIETARY_X86, ("550.54", "proprietary")),
        ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.142", ("580.142", "open")),
    ],
)
def test_the_driver_version_and_flavour_come_from_the_nvrm_line(text, want):
    assert parse_nvidia_version(text) == want


def test_a_banner_without_its_nvrm_line_is_refused_not_guessed_from_the_gcc_line():
    with pytest.raises(Unparsable, match="NVRM version"):
        parse_nvidia_version("GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04.1)\n")


def test_the_taint_flags_say_the_flavour():
    assert parse_taint("POE\n") == "proprietary" and parse_taint("OE\n") == "open"
    with pytest.raises(Unparsable):
        parse_taint("pOE??")


def test_dgx_release_assignments_are_read_quoted_or_not():
    got = parse_dgx_release('DGX_SWBUILD_VERSION="7.2.3"\nDGX_OTA_VERSION=7.5.0\n# comment\n\nbad line\n')
    assert got == {"DGX_SWBUILD_VERSION": "7.2.3", "DGX_OTA_VERSION": "7.5.0"}


def test_a_spark_shaped_tree_gives_every_part():
    p = read_platform(
        str(SPARK / "proc"), str(SPARK / "sys"), str(SPARK / "etc/dgx-release"), "b488217b", "13.0"
    )
    assert p is not None and p.errors == {}
    assert (p.kernel, p.driver, p.driver_flavour, p.cuda_driver) == (
        "6.17.0-1031-nvidia",
        "580.173.02",
        "open",
        "13.0",
    )
    assert (p.bios_version, p.bios_date, p.soc_firmware, p.ota) == (
        "5.36_0ACUM018",
        "07/10/2026",
        "43712523",
        "7.5.0",
    )
    assert set(p.nic_firmware) == {"rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"}
    assert p.cx7_firmware == "28.45.4028"


def _copy(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(SPARK, root)
    return root


def _read(root, soc="b488217b"):
    return read_platform(str(root / "proc"), str(root / "sys"), str(root / "etc/dgx-release"), soc)


def test_each_part_fails_alone_naming_its_file(tmp_path):
    root = _copy(tmp_path)
    (root / "proc/driver/nvidia/version").write_text("garbage\n")
    os.remove(root / "sys/class/dmi/id/bios_version")
    (root / "sys/class/dmi/id/bios_version").mkdir()  # unreadable as a file
    (root / "sys/class/infiniband/rocep1s0f1/fw_ver").write_text("28.45.4028\nand more\n")
    p = _read(root)
    assert "version" in p.errors["driver"] and "NVRM" in p.errors["driver"]
    assert "bios_version" in p.errors["bios_version"]
    assert "fw_ver" in p.errors["nic_firmware"]
    # the rest is read: the driver from the module's own files, the other NICs, the kernel, the OTA level
    assert (p.kernel, p.driver, p.driver_flavour, p.ota) == (
        "6.17.0-1031-nvidia",
        "580.173.02",
        "open",
        "7.5.0",
    )
    assert p.bios_version is None and p.bios_date == "07/10/2026"
    assert "rocep1s0f1" not in p.nic_firmware and len(p.nic_firmware) == 3


def test_without_proc_driver_nvidia_the_module_files_give_version_and_flavour(tmp_path):
    root = _copy(tmp_path)
    shutil.rmtree(root / "proc/driver")
    (root / "sys/module/nvidia/taint").write_text("POE\n")
    p = _read(root)
    assert (p.driver, p.driver_flavour) == ("580.173.02", "proprietary") and p.errors == {}


def test_absent_files_are_not_exposed_not_errors(tmp_path):
    root = tmp_path / "bare"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0-1-generic\n")
    p = read_platform(str(root / "proc"), str(root / "sys"), str(root / "etc/dgx-release"), "b488217b")
    assert p.kernel == "6.8.0-1-generic" and p.errors == {}
    assert p.driver is None and p.ota is None and p.nic_firmware == {} and p.soc_firmware is None
    assert read_platform(str(tmp_path / "none"), str(tmp_path / "none"), str(tmp_path / "none")) is None


def test_this_machine_reads_its_own_kernel_release():
    p = read_platform()
    assert p is not None and p.kernel == os.uname().release
    assert p.driver is None or p.driver_flavour in ("open", "proprietary", None)


class _Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_the_source_returns_the_platform_once_then_only_when_it_changes(tmp_path):
    root = _copy(tmp_path)
    clock = _Clock()
    src = PlatformSource(
        str(root / "proc"), str(root / "sys"), str(root / "etc/dgx-release"), refresh_s=600, clock=clock
    )
    first = src.collect({})["platform"]
    assert first.kernel == "6.17.0-1031-nvidia" and first.cuda_driver is None
    clock.t += 30
    assert src.collect({}) == {}  # nothing new: no key, nothing read
    late = src.collect({"_cuda_driver_version": "13.0"})  # NVML answered late
    assert late["platform"].cuda_driver == "13.0"
    assert src.collect({"_cuda_driver_version": "13.0"}) == {}
    (root / "proc/driver/nvidia/version").write_text(PROPRIETARY_595)  # a driver reload
    clock.t += 599
    assert src.collect({}) == {}  # not due yet
    clock.t += 1
    again = src.collect({})["platform"]
    assert (again.driver, again.driver_flavour, again.cuda_driver) == ("595.91.07", "proprietary", "13.0")
