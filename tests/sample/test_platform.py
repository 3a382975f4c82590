"""The trace-v1 `platform` object: round trip, shape errors named, the one-pass reader agreeing."""

import copy
import json

import pytest

from spark_watchd.sample.model import Sample
from spark_watchd.sample.platform import PlatformReading
from spark_watchd.sample.trace import TraceError, parse_line, sample_from

# A Spark after OTA 2607 (anakronox/spark-dash docs/fleet-updates.md: kernel 6.17.0-1022-nvidia,
# SOC firmware 2.155.11, ConnectX-7 28.45.4028) on the open 580.173.02 modules.
SPARK = PlatformReading(
    kernel="6.17.0-1022-nvidia",
    driver="580.173.02",
    driver_flavour="open",
    cuda_driver="13.0",
    bios_version="5.36_0ACUM018",
    bios_date="07/10/2026",
    soc_firmware="2.155.11",
    ota="7.5.0",
    nic_firmware={"rocep1s0f0": "28.45.4028", "roceP2p1s0f0": "28.45.4028"},
)


def _line(platform) -> dict:
    d = Sample(ts=100.0, host="spark-a", boot_id="b1", uptime_s=5.0).to_dict()
    d["platform"] = platform
    return d


def test_a_sample_with_its_platform_round_trips_and_one_without_has_no_key():
    s = Sample(ts=1.0, platform=SPARK)
    d = s.to_dict()
    assert d["platform"]["nic_firmware"]["rocep1s0f0"] == "28.45.4028"
    assert Sample.from_dict(json.loads(json.dumps(d))) == s
    assert "platform" not in Sample(ts=1.0).to_dict()
    assert SPARK.cx7_firmware == "28.45.4028"


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"kernel": 6}, "platform.kernel"),
        ({"driver_flavour": "closed"}, "driver_flavour"),
        ({"nic_firmware": ["28.45.4028"]}, "platform.nic_firmware"),
        ({"nic_firmware": {"rocep1s0f0": 28}}, "nic_firmware.rocep1s0f0"),
        ("6.17", "'platform' must be an object"),
    ],
)
def test_a_wrong_shape_is_refused_naming_its_key_by_both_readers(bad, where):
    obj = _line(bad)
    with pytest.raises(TraceError, match=r"field 'platform") as exc:
        parse_line(json.dumps(obj))
    assert where in str(exc.value)
    assert sample_from(copy.deepcopy(obj)) is None


def test_the_one_pass_reader_builds_the_same_sample_as_the_exact_path():
    obj = _line(SPARK.to_dict())
    fast = sample_from(copy.deepcopy(obj))
    assert fast is not None and fast == Sample.from_dict(parse_line(json.dumps(obj)))
    assert fast.platform == SPARK


def test_changes_lists_only_parts_known_on_both_boots():
    before = PlatformReading(kernel="6.17.0-1031-nvidia", driver="580.173.02", ota=None)
    after = PlatformReading(kernel="7.0.0-1019-nvidia", driver="595.91.07", ota="7.5.0")
    assert after.changes(before) == [
        ("kernel", "6.17.0-1031-nvidia", "7.0.0-1019-nvidia"),
        ("driver", "580.173.02", "595.91.07"),
    ]
    assert after.changes(after) == []


def test_long_values_are_cut_and_a_map_is_bounded():
    p = PlatformReading.from_dict({"kernel": "x" * 500, "nic_firmware": {f"d{i}": "1" for i in range(40)}})
    assert len(p.kernel) == 64 and len(p.nic_firmware) == 16
