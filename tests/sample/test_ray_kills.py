"""Ray's memory monitor kills: the GCS's NODE_OUT_OF_MEMORY line and its continuation, and what is not one."""

from __future__ import annotations

import pytest

from spark_watchd.sample.kills import KILLERS, KillReport, parse_ray_oom
from tests.sample.ray_log import LEASE_EXIT, LEASE_MEMORY, TASK_EXIT, TASK_MEMORY


def test_the_task_wording_names_the_victim_its_memory_and_the_node_against_the_threshold():
    k = parse_ray_oom(10.0, f"{TASK_EXIT}\n{TASK_MEMORY}")
    assert "ray" in KILLERS
    assert (k.ts, k.killer, k.pid, k.name) == (10.0, "ray", 115205, "download_batch")
    assert (k.used_gb, k.node_used_gb, k.node_total_gb, k.node_fraction, k.threshold) == (
        0.18, 14.67, 15.44, 0.95015, 0.95,
    )  # fmt: skip


def test_the_lease_wording_of_newer_ray_is_read_the_same_and_survives_a_trace_round_trip():
    k = parse_ray_oom(5.0, f"{LEASE_EXIT}\n{LEASE_MEMORY}")
    assert (k.pid, k.name, k.used_gb, k.node_fraction) == (
        3048142, "ray::WorkerDict.actor_rollout_generate_sequences", 49.21, 0.957347,
    )  # fmt: skip
    assert KillReport.from_dict(k.to_dict()) == k


@pytest.mark.parametrize(
    "text",
    [
        "",
        TASK_EXIT,  # the continuation never came
        TASK_MEMORY,  # no NODE_OUT_OF_MEMORY exit line
        f"{TASK_EXIT}\n{TASK_MEMORY[:120]}",  # cut mid-line
        TASK_EXIT.replace("NODE_OUT_OF_MEMORY", "INTENDED_USER_EXIT") + "\n" + TASK_MEMORY,
        f"{TASK_EXIT}\n" + TASK_MEMORY.replace("pid=115205", "pid=abc"),
        "\x00\xff garbage exit_type = NODE_OUT_OF_MEMORY Memory on the node (",
    ],
)
def test_garbage_truncated_and_other_exits_are_no_report(text):
    assert parse_ray_oom(1.0, text) is None


def test_a_trace_report_with_a_bad_number_is_a_clear_error():
    with pytest.raises(ValueError, match="'threshold'"):
        KillReport.from_dict({"ts": 1.0, "killer": "ray", "threshold": "high"})
