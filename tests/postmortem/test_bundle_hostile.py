"""Bundles are private and keep no secrets (issue 29 §9); a bad bundle is skipped, never fatal (§10)."""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest
import structlog

from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.postmortem import PostMortem, list_bundles
from spark_watchd.postmortem.bundle import prune, write_bundle
from spark_watchd.postmortem.ring import SEGMENTS
from spark_watchd.sample.findings import Event
from spark_watchd.snapshot import Snapshot
from tests.conftest import REPO, run_cli
from tests.daemon_helpers import http_get, running_daemon
from tests.postmortem.helpers import feed, scenario

SECRETS = ("sk-live-0123456789", "tok-abcdef", "hf_hub_secret", "pw-hunter2", "openai-key-xyz")


def _with_secrets(samples):
    """The vLLM scenario, its server launched with an API key, a token and secrets in env-style words."""
    argv_extra = (
        "--api-key", SECRETS[0], f"--token={SECRETS[1]}", "--port", "8000",
        f"HF_TOKEN={SECRETS[2]}", f"DB_PASSWORD={SECRETS[3]}", f"--openai-api-key={SECRETS[4]}",
    )  # fmt: skip
    out = []
    for s in samples:
        procs = tuple(
            replace(p, cmdline=(*p.cmdline, *argv_extra)) if p.name == "vllm" else p for p in s.processes
        )
        out.append(replace(s, processes=procs))
    return out


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_bundles_are_private_and_keep_no_argv_secrets_under_umask_022(tmp_path, umask_022):
    """Bundles of a daemon run by hand were 0755/0644 and kept `--api-key sk-...` after the process left."""
    feed(tmp_path, _with_secrets(scenario("vllm_creep_oom_30s")))
    root = tmp_path / "bundles"
    (b,) = list_bundles(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(b.path.stat().st_mode) == 0o700
    for f in b.path.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    ring = [tmp_path / "ring" / n for n in SEGMENTS if (tmp_path / "ring" / n).exists()]
    assert ring and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in ring)
    kept = [*b.path.iterdir(), *ring]
    for f in kept:
        text = f.read_text()
        assert not any(secret in text for secret in SECRETS), (f, [x for x in SECRETS if x in text])
    lines = [json.loads(x) for x in (b.path / "trace.jsonl").read_text().splitlines()]
    argv = next(p["cmdline"] for x in reversed(lines) for p in x["processes"] if p["name"] == "vllm")
    assert argv[-8:] == [
        "--api-key", "<redacted>", "--token=<redacted>", "--port", "8000", "HF_TOKEN=<redacted>",
        "DB_PASSWORD=<redacted>", "--openai-api-key=<redacted>",
    ]  # fmt: skip
    assert argv[3:6] == ["Qwen/Qwen3-32B", "--max-model-len", "131072"]  # what is no secret stays


def test_the_workload_table_of_a_bundle_keeps_no_argv_secrets(tmp_path, umask_022):
    samples = _with_secrets(scenario("vllm_creep_oom_30s"))[:20]  # the server still up: in the table
    trigger = Event("oom_kill", "G3", samples[-1].ts, "test trigger")
    path = write_bundle(tmp_path, trigger, samples, [], [], Thresholds())
    rows = json.loads((path / "workloads.json").read_text())
    (vllm,) = [r for r in rows if r["kind"] == "vllm"]
    assert "--api-key <redacted> --token=<redacted> --port 8000" in vllm["cmdline"]
    for f in path.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert not any(secret in f.read_text() for secret in SECRETS), f


def test_an_existing_bundles_directory_and_ring_are_made_private_at_start(tmp_path, umask_022):
    (tmp_path / "bundles").mkdir(mode=0o755)
    (tmp_path / "ring").mkdir()
    (tmp_path / "ring" / SEGMENTS[0]).write_text("")  # 0644, as an older release left it
    pm = PostMortem(tmp_path, Thresholds())
    assert stat.S_IMODE((tmp_path / "bundles").stat().st_mode) == 0o700
    pm(Snapshot(sample=scenario("vllm_creep_oom_30s")[0], diagnosis=None))
    assert stat.S_IMODE((tmp_path / "ring" / SEGMENTS[0]).stat().st_mode) == 0o600
    pm.close()


BAD_MANIFESTS = {
    "huge-bytes": '{"version":1,"trigger":{"ts":1764000000,"kind":"oom_kill"},"samples":1,"bytes":1e999}',
    "nan-ts": '{"version":1,"trigger":{"ts":NaN,"kind":"oom_kill"},"samples":1,"bytes":1}',
    "inf-ts": '{"version":1,"trigger":{"ts":1e999,"kind":"oom_kill"},"samples":1,"bytes":1}',
    "year-10000": '{"version":1,"trigger":{"ts":1e12,"kind":"oom_kill"},"samples":1,"bytes":1}',
    "wrong-types": '{"version":1,"trigger":{"ts":"soon","kind":["x"],"summary":{}},"samples":"many","bytes":-1}',
    "trigger-list": '{"version":1,"trigger":[1,2],"samples":1,"bytes":1}',
    "summary-dict": '{"version":1,"trigger":{"ts":1764000000,"kind":"oom_kill","summary":{"a":1}}}',
    "bool-samples": '{"version":1,"trigger":{"ts":1764000000,"kind":"oom_kill"},"samples":true}',
    "truncated": '{"version":1,"trigger":{"ts":1764000000,"ki',
    "not-an-object": "[1, 2, 3]",
    "deep": "[" * 200_000 + "]" * 200_000,
    "not-utf8": b'{"trigger":{"ts":1764000000,"kind":"\xff\xfe"}}',
    "empty": "",
}


def _plant_bad_bundles(root):
    for name, text in BAD_MANIFESTS.items():
        d = root / f"20251124T000000Z-{name}"
        d.mkdir()
        (d / "manifest.json").write_bytes(text if isinstance(text, bytes) else text.encode())
        (d / "report.html").write_text("<!doctype html><title>bad</title>")
    fifo = root / "20251124T000001Z-fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "manifest.json")  # read through, this would hang report, the API and the tick
    (root / "20251124T000002Z-none").mkdir()  # no manifest at all
    os.symlink(fifo, root / "20251124T000003Z-link")  # a link is not a bundle


def test_report_skips_a_bad_bundle_with_a_line_on_stderr_and_still_lists_and_opens_the_good_one(tmp_path):
    """A manifest with `"bytes": 1e999` made every form of `report` exit 1 with OverflowError."""
    feed(tmp_path, scenario("vllm_creep_oom_30s"))
    (good,) = list_bundles(tmp_path / "bundles")
    _plant_bad_bundles(tmp_path / "bundles")
    p = run_cli("report", "--state-dir", str(tmp_path), timeout=30)
    assert p.returncode == 0 and good.name in p.stdout, p.stderr
    assert not any(name in p.stdout for name in BAD_MANIFESTS), p.stdout  # listed: the good one alone
    assert "skipped" in p.stderr and "huge-bytes" in p.stderr and "must be a non-negative integer" in p.stderr
    assert "nan-ts" in p.stderr and "fifo" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("report", "--json", "--state-dir", str(tmp_path), timeout=30)
    assert p.returncode == 0 and [b["name"] for b in json.loads(p.stdout)] == [good.name], p.stderr
    p = run_cli("report", "--last", "--state-dir", str(tmp_path), timeout=30)
    assert p.returncode == 0 and p.stdout.strip() == str(good.path / "report.html"), p.stderr
    p = run_cli("report", "20251124T000000Z-huge-bytes", "--state-dir", str(tmp_path), timeout=30)
    assert p.returncode == 1 and "no bundle named" in p.stderr and "Traceback" not in p.stderr


def test_the_api_and_the_latest_report_skip_a_bad_bundle(tmp_path):
    """The same manifest made /api/v1/postmortem and /postmortem/latest answer 500."""
    feed(tmp_path, scenario("vllm_creep_oom_30s"))
    (good,) = list_bundles(tmp_path / "bundles")
    _plant_bad_bundles(tmp_path / "bundles")
    newest = tmp_path / "bundles" / "29991231T000000Z-oom_kill"  # newest by its trigger, but a FIFO report
    newest.mkdir()
    (newest / "manifest.json").write_text('{"trigger":{"ts":32503593600,"kind":"oom_kill"},"bytes":10}')
    os.mkfifo(newest / "report.html")
    env = {"SPARK_WATCHD_FAKE_NVML": "gb10"}
    with running_daemon("--interval", "1", "--state-dir", str(tmp_path), env=env) as (proc, base):
        status, body = http_get(base + "/api/v1/postmortem")
        assert status == 200 and [b["name"] for b in json.loads(body)["bundles"]] == [good.name, newest.name]
        status, body = http_get(base + "/postmortem/latest")
        assert status == 500 and "not a regular file" in body  # answered, not hung on the FIFO
        for f in newest.iterdir():
            f.unlink()
        newest.rmdir()
        status, body = http_get(base + "/postmortem/latest")
        assert status == 200 and body.startswith("<!doctype html>")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the status document's link follows at the next tick
            status, body = http_get(base + "/api/v1/status")
            if status != 200 or json.loads(body)["extras"]["postmortem"]["name"] == good.name:
                break
            time.sleep(0.2)
        assert status == 200 and json.loads(body)["extras"]["postmortem"]["name"] == good.name
        assert proc.poll() is None


def test_pruning_keeps_the_cap_with_bad_bundles_counted_by_their_size_on_disk(tmp_path):
    """By the code, a bad manifest stopped the bundle cap from pruning (OverflowError out of prune)."""
    root = tmp_path / "bundles"
    root.mkdir()
    _plant_bad_bundles(root)
    bad = len(BAD_MANIFESTS) + 2  # the manifests, the FIFO one and the one without a manifest
    with structlog.testing.capture_logs() as logs:
        gone = prune(root, keep=3, max_bytes=1 << 30)
        prune(root, keep=3, max_bytes=1 << 30)  # said once per bundle, not per pass
    left = sorted(p.name for p in root.iterdir())
    assert len(gone) == bad - 3 and len(left) == 4 and "20251124T000003Z-link" in left  # links are not ours
    skipped = [e for e in logs if e["event"] == "post-mortem bundle skipped"]
    assert len(skipped) == bad and all(e["reason"] for e in skipped)
    # A manifest that under-states its size does not get past the byte cap: the size on disk counts.
    feed(tmp_path / "s", scenario("vllm_creep_oom_30s"))
    (b,) = list_bundles(tmp_path / "s" / "bundles")
    m = json.loads((b.path / "manifest.json").read_text())
    (b.path / "manifest.json").write_text(json.dumps({**m, "bytes": 0}))
    assert prune(tmp_path / "s" / "bundles", keep=20, max_bytes=1000) == [b.name]


def _python_for_others(sys) -> str:
    """An interpreter of this one's version that another user may run (this one may sit under /root)."""
    for cand in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        parts = Path(cand).parents
        if all(p.stat().st_mode & 0o001 for p in parts) and os.stat(cand).st_mode & 0o001:
            import subprocess

            got = subprocess.run(
                [cand, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
            )
            if got.stdout.strip() == str(tuple(sys.version_info[:2])):
                return cand
    pytest.skip("no Python of this version that another user may run")


def test_report_by_a_user_the_private_bundles_are_closed_to_says_so(request):
    """Private bundles used to read as "no post-mortem bundle yet" to another user."""
    import shutil
    import subprocess
    import sys
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("needs root, to run report as another user")
    python = _python_for_others(sys)

    state = Path(tempfile.mkdtemp(prefix="swd-h29-report-", dir="/tmp"))  # reachable by the other user
    request.addfinalizer(lambda: shutil.rmtree(state, ignore_errors=True))
    state.chmod(0o755)
    feed(state, scenario("vllm_creep_oom_30s"))
    (state / "c.toml").write_text("")
    site = next(p for p in sys.path if p.endswith("site-packages"))
    p = subprocess.run(
        [python, "-m", "spark_watchd", "report", "--state-dir", str(state),
         "--config", str(state / "c.toml")],
        user=65534, group=65534, extra_groups=[], capture_output=True, text=True, timeout=60, cwd="/",
        env={"PYTHONPATH": f"{REPO}:{site}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert p.returncode == 77 and "is private to the daemon's user" in p.stderr, (p.returncode, p.stderr)
