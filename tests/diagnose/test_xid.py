"""The Xid table: NVIDIA's catalog codes with meaning, resolution and next step; the bounded metric label."""

from __future__ import annotations

import pytest

from spark_watchd.diagnose import xid


def test_the_table_covers_the_common_codes_with_fatal_ones_marked():
    for code in (13, 31, 43, 45, 48, 61, 62, 63, 64, 69, 79, 92, 94, 95, 109, 119, 120, 154):
        info = xid.describe(code)
        assert code in xid.XIDS and info.meaning and info.next_step
    assert {48, 79, 95, 119, 120} <= xid.FATAL_XIDS and not {13, 31, 43, 45} & xid.FATAL_XIDS
    assert xid.xid_label(79) == "79" and xid.xid_label(999) == "other" and xid.xid_label(None) == "other"


# Issue 18: codes whose documented resolution is a GPU reset or a node reboot were missing or marked
# "restart the job", so they were never named as the fault that ended a boot.
RESET_OR_REBOOT = (46, 109, 110, 136, 140, 143, 151, 155, 156, 158)


@pytest.mark.parametrize("code", RESET_OR_REBOOT)
def test_codes_the_catalog_resolves_by_reset_or_reboot_are_fatal(code):
    info = xid.describe(code)
    assert code in xid.XIDS and info.fatal and info.resolution in ("reset the GPU", "reboot the node")
    assert xid.xid_label(code) == str(code)


@pytest.mark.parametrize(
    ("code", "resolution"),
    [
        (13, "restart the application"),
        (31, "restart the application"),
        (43, "none"),
        (45, "none"),
        (63, "none"),
        (79, "reboot the node"),
        (94, "restart the application"),
        (95, "reset the GPU"),
        (119, "reset the GPU"),
        (121, "none"),
        (151, "reboot the node"),
        (154, "reboot the node"),
    ],
)
def test_each_code_has_the_catalogs_resolution(code, resolution):
    assert xid.describe(code).resolution == resolution


def test_every_resolution_is_one_of_the_four_and_fatal_means_reset_or_reboot():
    for info in xid.XIDS.values():
        assert info.resolution in ("none", "restart the application", "reset the GPU", "reboot the node")
        assert info.fatal == (info.resolution in ("reset the GPU", "reboot the node"))
    assert {c for c, info in xid.XIDS.items() if info.fatal} == xid.FATAL_XIDS


def test_an_unknown_code_says_so_and_is_treated_as_possibly_fatal():
    info = xid.describe(12345)
    assert info.meaning == "unknown Xid 12345: see NVIDIA's Xid catalog"
    assert info.fatal and info.resolution == "unknown" and "catalog" in info.next_step
    assert info not in xid.XIDS.values()


def test_labels_are_the_fatal_and_common_codes_in_numeric_order_then_other():
    assert xid.XID_LABELS[-1] == "other"
    codes = [int(label) for label in xid.XID_LABELS[:-1]]
    assert codes == sorted(codes) and len(set(xid.XID_LABELS)) == len(xid.XID_LABELS)
    assert set(codes) >= xid.FATAL_XIDS and all(c in xid.XIDS for c in codes)


@pytest.mark.parametrize("code", [13, 79, 154])
def test_label_of_a_known_code_is_its_decimal_text_and_a_listed_label(code):
    assert xid.xid_label(code) == str(code) and xid.xid_label(code) in xid.XID_LABELS


@pytest.mark.parametrize("code", [0, -1, 81, 1000])
def test_label_of_a_code_outside_the_labels_is_other(code):
    assert xid.xid_label(code) == "other"


def test_hung_engine_codes_are_known_channel_faults():
    assert xid.HUNG_ENGINE_XIDS == (43, 109)
    assert all(c in xid.XIDS for c in xid.HUNG_ENGINE_XIDS)
