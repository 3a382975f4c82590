"""sparkwatchd_gpu_xid_errors_total{gpu,xid}: rendered from the snapshot's Xid counts, bounded labels."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client.exposition import generate_latest

from spark_watchd.export import driver


def _snap(counts):
    return SimpleNamespace(extras={"xid_counts": counts})


def _values(fams):
    (fam,) = fams
    return {(s.labels["gpu"], s.labels["xid"]): s.value for s in fam.samples}


def test_each_count_becomes_one_sample_labelled_by_gpu_and_xid():
    fams = driver.families(_snap({"0:79": 2, "1:13": 1, "0:other": 4}))
    assert fams[0].name == "sparkwatchd_gpu_xid_errors" and fams[0].type == "counter"
    assert _values(fams) == {("0", "79"): 2.0, ("1", "13"): 1.0, ("0", "other"): 4.0}


def test_a_code_outside_the_bounded_labels_is_not_exported():
    assert _values(driver.families(_snap({"0:999": 3, "0:pid1234": 1, "0:43": 1}))) == {("0", "43"): 1.0}


def test_no_counts_still_gives_the_family_with_no_samples():
    for snap in (_snap({}), SimpleNamespace(extras=None), SimpleNamespace(), _snap(None)):
        fams = driver.families(snap)
        assert len(fams) == 1 and fams[0].samples == []


def test_the_exposition_names_the_counter_with_total():
    class Reg:
        def collect(self):
            return driver.families(_snap({"0:79": 2}))

    text = generate_latest(Reg()).decode()
    assert 'sparkwatchd_gpu_xid_errors_total{gpu="0",xid="79"} 2.0' in text
    assert "# TYPE sparkwatchd_gpu_xid_errors_total counter" in text


def test_a_broken_snapshot_gives_no_family_instead_of_breaking_the_scrape():
    assert driver.families(_snap({"0:79": "many"})) == []
    assert driver.families(_snap(["0:79"])) == []


def test_driver_feeds_give_the_rejected_lines_counter_and_one_state_per_feed():
    feeds = {
        "kernel-log": {"state": "restarting", "detail": "follower exited 1", "lines_rejected": 3},
        "previous-boot": {"state": "read", "detail": "read: 2", "lines_rejected": 1},
        "nvml-events": {"state": "not supported", "detail": "x", "lines_rejected": 0},
    }
    fams = {
        f.name: f for f in driver.families(SimpleNamespace(extras={"xid_counts": {}, "driver_feeds": feeds}))
    }
    rejected = {s.labels["feed"]: s.value for s in fams["sparkwatchd_driver_lines_rejected"].samples}
    assert rejected == {"previous-boot": 1.0, "kernel-log": 3.0}
    on = {
        (s.labels["feed"], s.labels["state"])
        for s in fams["sparkwatchd_driver_feed_state"].samples
        if s.value
    }
    assert on == {("kernel-log", "restarting"), ("previous-boot", "read"), ("nvml-events", "not supported")}
    assert len(fams["sparkwatchd_driver_feed_state"].samples) == 3 * 6  # bounded: every feed x every state
