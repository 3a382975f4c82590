"""The Xid table: meaning, next step and fatal flag per code, the bounded metric label."""

from __future__ import annotations

import pytest

from spark_watchd.diagnose import xid


def test_the_table_covers_the_common_codes_with_fatal_ones_marked():
    for code in (13, 31, 43, 45, 48, 61, 62, 63, 64, 69, 79, 92, 94, 95, 109, 119, 120, 154):
        info = xid.describe(code)
        assert code in xid.XIDS and info.meaning and info.next_step
    assert {48, 79, 95, 119, 120} <= xid.FATAL_XIDS and not {13, 31, 43, 45} & xid.FATAL_XIDS
    assert xid.xid_label(79) == "79" and xid.xid_label(999) == "other" and xid.xid_label(None) == "other"
    assert "catalog" in xid.describe(999).next_step


def test_fatal_set_is_exactly_the_codes_flagged_fatal_in_the_table():
    assert {c for c, info in xid.XIDS.items() if info.fatal} == xid.FATAL_XIDS
    assert all(xid.describe(c).fatal for c in xid.FATAL_XIDS)


def test_unknown_code_is_described_as_outside_the_table_and_not_fatal():
    info = xid.describe(12345)
    assert not info.fatal and "not in" in info.meaning
    assert info not in xid.XIDS.values()


def test_labels_are_every_table_code_in_numeric_order_then_other():
    assert xid.XID_LABELS[-1] == "other"
    codes = [int(label) for label in xid.XID_LABELS[:-1]]
    assert codes == sorted(xid.XIDS) and len(set(xid.XID_LABELS)) == len(xid.XID_LABELS)


@pytest.mark.parametrize("code", [13, 79, 154])
def test_label_of_a_known_code_is_its_decimal_text_and_a_listed_label(code):
    assert xid.xid_label(code) == str(code) and xid.xid_label(code) in xid.XID_LABELS


@pytest.mark.parametrize("code", [0, -1, 80, 1000])
def test_label_of_a_code_outside_the_table_is_other(code):
    assert xid.xid_label(code) == "other"


def test_hung_engine_codes_are_known_non_fatal_channel_faults():
    assert xid.HUNG_ENGINE_XIDS == (43, 109)
    assert all(c in xid.XIDS and not xid.XIDS[c].fatal for c in xid.HUNG_ENGINE_XIDS)
