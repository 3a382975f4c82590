"""Ray's memory monitor kills as Ray's GCS writes them to `<ray temp dir>/session_latest/logs/gcs_server.out`.

Provenance (public): TASK_* are verbatim from a public Ray issue thread (Ray 2.x, 2023): the GCS's
`Reporting worker exit ... exit_type = NODE_OUT_OF_MEMORY, exit_detail = Task was killed due to the node
running low on memory.` line and its `Memory on the node ...` continuation. LEASE is the newer wording
("where the lease (lease ID: ..., name=..., pid=3048142, memory used=49.21GB) was running was 59.84GB /
62.51GB (0.957347)") from a public verl/Ray traceback (2025). Ray's docs
(doc/source/ray-core/scheduling/ray-oom-prevention.rst) show the same "Task was killed due to the node
running low on memory." text.
"""

TASK_EXIT = (
    "[2023-05-27 13:36:07,742 W 114781 114781] (gcs_server) gcs_worker_manager.cc:55: Reporting worker exit, "
    "worker id = 1c42378b72acbfbbddde06a70a3fc7c0a50d6870069bcc339a0f1ff1, node id = "
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffff, address = , exit_type = NODE_OUT_OF_MEMORY, "
    "exit_detail = Task was killed due to the node running low on memory."
)
TASK_MEMORY = (
    "Memory on the node (IP: 10.97.37.135, ID: 50eef2b904b8560b750470569043954872b03131ec93d5a67a7c91e9) "
    "where the task (task ID: NIL_ID, name=download_batch, pid=115205, memory used=0.18GB) was running was "
    "14.67GB / 15.44GB (0.95015), which exceeds the memory usage threshold of 0.95. Ray killed this worker "
    "(ID: 1c42378b72acbfbbddde06a70a3fc7c0a50d6870069bcc339a0f1ff1) because it was the most recently "
    "scheduled task; to see more information about memory usage on this node, use "
    "`ray logs raylet.out -ip 10.97.37.135`."
)
LEASE_EXIT = (
    "[2025-03-02 08:14:51,019 W 3047001 3047001] (gcs_server) gcs_worker_manager.cc:55: Reporting worker exit, "
    "worker id = 9a1d0c, node id = 5b7e, address = 10.0.0.7, exit_type = NODE_OUT_OF_MEMORY, "
    "exit_detail = Task was killed due to the node running low on memory."
)
LEASE_MEMORY = (
    "Memory on the node (IP: 10.0.0.7, ID: 5b7e) where the lease (lease ID: 04000000ffff, "
    "name=ray::WorkerDict.actor_rollout_generate_sequences, pid=3048142, memory used=49.21GB) was running "
    "was 59.84GB / 62.51GB (0.957347), which exceeds the memory usage threshold of 0.95. Ray killed this "
    "worker (ID: 9a1d0c) because it was the most recently scheduled task."
)
