"""Ray's GCS log tail: only new kills, bounded, across rotation and truncation; a missing file is silence."""

from __future__ import annotations

import os

from spark_watchd.sources import build_sources
from spark_watchd.sources.raylog import MAX_LINE, RayOomSource
from spark_watchd.sources.settings import SourcesSettings
from tests.sample.ray_log import LEASE_EXIT, LEASE_MEMORY, TASK_EXIT, TASK_MEMORY

NOISE = "[2023-05-27 13:36:07,700 I 114781 114781] (gcs_server) gcs_node_manager.cc:1: heartbeat\n"


def _append(path, text):
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def _pids(out):
    return [(k.killer, k.pid) for k in out.get("oom_kills", ())]


def test_only_kills_written_after_start_are_read_and_a_split_write_waits_for_its_line(tmp_path):
    log = tmp_path / "gcs_server.out"
    log.write_text(f"{TASK_EXIT}\n{TASK_MEMORY}\n")  # before the daemon started: not this run's
    src = RayOomSource(str(tmp_path), clock=lambda: 50.0)
    assert src.collect({}) == {}
    _append(log, NOISE + LEASE_EXIT + "\n" + LEASE_MEMORY[:80])
    assert src.collect({}) == {}
    _append(log, LEASE_MEMORY[80:] + "\n")
    out = src.collect({"oom_kills": ["kernel's"]})
    assert out["oom_kills"][0] == "kernel's" and _pids({"oom_kills": out["oom_kills"][1:]}) == [
        ("ray", 3048142)
    ]
    assert out["oom_kills"][1].ts == 50.0
    assert src.collect({}) == {}


def test_rotation_truncation_and_a_missing_file_are_survived(tmp_path):
    log = tmp_path / "gcs_server.out"
    src = RayOomSource(str(tmp_path))
    assert src.collect({}) == {}  # no Ray here yet: silence
    log.write_text(f"{TASK_EXIT}\n{TASK_MEMORY}\n")  # appeared after start: read from its start
    assert _pids(src.collect({})) == [("ray", 115205)]
    log.write_text(f"{LEASE_EXIT}\n{LEASE_MEMORY}\n"[:10])  # truncated (copytruncate), then written again
    src.collect({})
    log.write_text(f"{LEASE_EXIT}\n{LEASE_MEMORY}\n")
    assert _pids(src.collect({})) == [("ray", 3048142)]
    os.rename(log, tmp_path / "old.out")  # a new session: a new file
    log.write_text(f"{TASK_EXIT}\n{TASK_MEMORY}\n")
    assert _pids(src.collect({})) == [("ray", 115205)]
    log.unlink()
    assert src.collect({}) == {}


def test_an_endless_line_and_an_exit_without_its_continuation_are_dropped(tmp_path):
    log = tmp_path / "gcs_server.out"
    log.write_text("")
    src = RayOomSource(str(tmp_path))
    src.collect({})
    _append(log, "x" * (MAX_LINE + 10))
    assert src.collect({}) == {}
    _append(log, f"\n{TASK_EXIT}\n{NOISE}{TASK_MEMORY}\n")
    assert src.collect({}) == {}
    _append(log, f"{TASK_EXIT}\n{TASK_MEMORY}\n")
    assert _pids(src.collect({})) == [("ray", 115205)]


def test_the_log_dir_is_a_setting_and_empty_turns_it_off(tmp_path):
    assert SourcesSettings().ray_log_dir == "/tmp/ray/session_latest/logs"
    srcs = build_sources(SourcesSettings(ray_log_dir=str(tmp_path), driver_events=False), nvml=object())
    (ray,) = [s for s in srcs if s.name == "ray_oom"]
    assert ray.path == str(tmp_path / "gcs_server.out")
    srcs = build_sources(SourcesSettings(ray_log_dir="", driver_events=False), nvml=object())
    assert not [s for s in srcs if s.name == "ray_oom"]
