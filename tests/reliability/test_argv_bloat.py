"""Another user's argv is bounded where it enters (issue 20 §2): 10 processes with 1.9 MB of argv each made
/api/v1/status 19.4 MB and the daemon's RSS 54.8 -> 132 MB. A real daemon on loopback, real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.daemon_helpers import http_get, running_daemon

PAD = "x" * 127_000  # one argument may be at most 128 KiB (MAX_ARG_STRLEN)


def _bloated(n: int, args_each: int = 15) -> list[subprocess.Popen]:
    """N processes that classify as vLLM, each with ~1.9 MB of argv and its cap flag after the padding."""
    argv = ["vllm", "-c", "import time; time.sleep(120)", "serve", "m", *([PAD] * args_each)]
    argv += ["--gpu-memory-utilization", "0.3", "--port", "8123"]
    return [subprocess.Popen(argv, executable=sys.executable) for _ in range(n)]


def test_ten_processes_with_1_9_mb_of_argv_leave_status_small_and_caps_read(tmp_path):
    procs = _bloated(10)
    try:
        pids = {p.pid for p in procs}
        with running_daemon(
            "--interval", "1", "--state-dir", str(tmp_path / "s"), env={"SPARK_WATCHD_FAKE_NVML": "gb10"}
        ) as (_, base):  # fmt: skip
            deadline = time.monotonic() + 20
            while True:
                status, body = http_get(base + "/api/v1/status", timeout=10)
                doc = json.loads(body)
                seen = [p for p in doc["processes"] if p["pid"] in pids]
                if len(seen) == 10 or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            assert status == 200 and len(seen) == 10, len(seen)
            assert len(body) < 400_000, len(body)  # was 19.4 MB
            for p in seen:
                argv = p["cmdline"]
                assert sum(map(len, argv)) < 16_384
                assert any(a.startswith("... (") and a.endswith(" more bytes)") for a in argv), argv[-6:]
                assert argv[-4:] == ["--gpu-memory-utilization", "0.3", "--port", "8123"]  # kept past the cut
            workloads = [w for w in doc.get("workloads", []) if w.get("pid") in pids]
            assert len(workloads) == 10 and all(w["cap"] == "--gpu-memory-utilization 0.3" for w in workloads)
    finally:
        for p in procs:
            p.kill()
            p.wait()
