"""The serving source against a local attacker: another user's fake servers, found by the real process scan.

Each attack runs as an unprivileged second user (`swd-attacker`, created when the tests run as root, as CI
does) starting `python3 .../vllm serve M --port P` (tests/support/plain_server.py: a real HTTP server serving
vLLM's exposition as prometheus_client writes it). The operator's own server is the same program run by
root. Discovery goes through ProcessSource's scan of the real /proc, and port ownership through the real
/proc/net/tcp and /proc/PID/fd.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from spark_watchd.sample.serving import ServingReading
from spark_watchd.sample.trace import read_trace
from spark_watchd.sources.processes import ProcessSource
from spark_watchd.sources.serving import Scraper, ServingSource, finite, http_get, reading
from spark_watchd.sources.serving_endpoints import Endpoint
from spark_watchd.sources.serving_parse import ExpositionError, parse_metrics
from spark_watchd.sources.serving_settings import ServingSettings
from tests.conftest import REPO, free_port, run_cli
from tests.daemon_helpers import http_get as daemon_get
from tests.daemon_helpers import running_daemon
from tests.support.poll import wait_until
from tests.support.serving_fakes import FakeEngine, FakeServer, series_flood

ATTACKER = "swd-attacker"


@pytest.fixture(scope="module")
def attacker() -> tuple[int, int]:
    """(uid, gid) of an unprivileged second user; created (system user, no home) when running as root."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the attacks run a server as a second, unprivileged user, created as root")
    try:
        pw = pwd.getpwnam(ATTACKER)
    except KeyError:  # another test worker may be creating it at the same moment: look again after
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ATTACKER])
        pw = pwd.getpwnam(ATTACKER)
    return pw.pw_uid, pw.pw_gid


def _python_for(user: tuple[int, int] | None) -> str:
    """A python the user can run (the attacker cannot read root's virtual environment, as here /root/.pyenv)."""
    for py in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        kw = {"user": user[0], "group": user[1], "extra_groups": []} if user else {}
        try:
            if (
                subprocess.run(
                    [py, "-c", "import http.server"], cwd="/", capture_output=True, **kw
                ).returncode
                == 0
            ):
                return py
        except OSError:
            continue
    pytest.skip("no python the second user can run (the attacks need one for their fake server)")


class Lab:
    """Fake servers as processes: root's, or the attacker's (a world-readable copy of the server script)."""

    def __init__(self, attacker: tuple[int, int] | None):
        self.attacker = attacker
        # /tmp itself: a private TMPDIR would keep the second user out of its own server's files.
        self.dir = Path(
            tempfile.mkdtemp(prefix="swd-serving-", dir="/tmp" if os.path.isdir("/tmp") else None)
        )
        self.dir.chmod(0o755)
        self.script = self.dir / "vllm"
        shutil.copy(REPO / "tests" / "support" / "plain_server.py", self.script)
        self.script.chmod(0o755)
        self.procs: list[subprocess.Popen] = []
        self.python = _python_for(attacker) if attacker else sys.executable

    def exposition(self, text: bytes | None = None) -> Path:
        path = Path(tempfile.mkstemp(dir=self.dir, suffix=".prom")[1])
        path.write_bytes(text if text is not None else generate_latest(_engine().registry))
        path.chmod(0o644)
        return path

    def start(self, port: int, *, as_attacker: bool = False, listen: bool = True, text: bytes | None = None):
        """`python3 DIR/vllm serve m --port PORT`; returns (process, file of the Authorization headers it got)."""
        seen = self.dir / f"seen-{port}-{len(self.procs)}"
        seen.touch()
        user = {}
        if as_attacker:
            uid, gid = self.attacker
            os.chown(seen, uid, gid)
            user = {"user": uid, "group": gid, "extra_groups": []}
        env = {
            "PATH": "/usr/bin:/bin",
            "FAKE_EXPOSITION": str(self.exposition(text)),
            "FAKE_SEEN": str(seen),
            "FAKE_LISTEN": "1" if listen else "0",
        }
        argv = [self.python, str(self.script), "serve", "m", "--port", str(port)]
        p = subprocess.Popen(
            argv, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **user
        )
        self.procs.append(p)
        if listen:
            wait_until(lambda: _listening(port) or p.poll() is not None, timeout=20, what=f"server on {port}")
            if p.poll() is not None:
                pytest.fail(f"the fake server exited: {p.stderr.read().decode()[-500:]}")
        else:
            wait_until(lambda: "serve" in _argv(p.pid), timeout=20, what="the claimant's argv")
        return p, seen

    def close(self) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def _engine() -> FakeEngine:
    eng = FakeEngine("vllm")
    eng.step(2)
    return eng


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _argv(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


@pytest.fixture
def lab(attacker):
    lab = Lab(attacker)
    yield lab
    lab.close()


class Log:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def warning(self, msg, **kw):
        self.lines.append(("warning", msg))

    def info(self, msg, **kw):
        self.lines.append(("info", msg))

    debug = info


def _source(**settings) -> ServingSource:
    src = ServingSource(ServingSettings(**settings), interval_s=0.2, own_addresses=frozenset())
    src.log = Log()
    return src


def _read(src: ServingSource, scan: ProcessSource) -> dict:
    """One tick: the real process scan, then the serving source; its readings by server label."""
    procs = scan.collect({})["processes"]
    return {r.server: r for r in src.collect({"processes": procs})["serving"]}


def _seen(path: Path) -> list[str]:
    return path.read_text().splitlines()


# 1. The operator's key goes to the operator's servers only.


def test_the_auth_header_goes_to_roots_server_and_never_to_a_server_another_user_started(lab, tmp_path):
    key = tmp_path / "key"
    key.write_text("Bearer op-s3cret\n")
    port_mine, port_theirs = free_port(), free_port()
    p_theirs, seen_theirs = lab.start(port_theirs, as_attacker=True)
    p_mine, seen_mine = lab.start(port_mine)
    src, scan = _source(auth_header_file=str(key)), ProcessSource()
    mine, theirs = f"vllm:{port_mine}", f"vllm:{port_theirs}"
    try:
        got = wait_until(
            lambda: (r := _read(src, scan)).get(mine) and r[mine].up and r.get(theirs) and r[theirs].up and r,
            timeout=20,
            what="both servers scraped",
        )
        time.sleep(0.5)  # a few more scrapes of each
        _read(src, scan)
    finally:
        src.close()
        scan.close()
    assert got[mine].pid == p_mine.pid and got[mine].requests_running == 4
    assert any(line.endswith("Bearer op-s3cret") for line in _seen(seen_mine))
    # Their server is read for what it is (theirs, tied to their pid), without the operator's key.
    assert got[theirs].pid == p_theirs.pid
    assert _seen(seen_theirs) and not [ln for ln in _seen(seen_theirs) if "op-s3cret" in ln]


def test_auth_uids_names_who_else_may_receive_the_key(lab, tmp_path, attacker):
    key = tmp_path / "key"
    key.write_text("Bearer op-s3cret\n")
    port = free_port()
    _p, seen = lab.start(port, as_attacker=True)
    src, scan = _source(auth_header_file=str(key), auth_uids=[0, attacker[0]]), ProcessSource()
    try:
        wait_until(lambda: (r := _read(src, scan).get(f"vllm:{port}")) and r.up, timeout=20, what="scraped")
    finally:
        src.close()
        scan.close()
    assert any(line.endswith("Bearer op-s3cret") for line in _seen(seen))


# 4. A reading goes to the process holding the port, not to whoever names it.


def test_a_process_naming_roots_port_gets_none_of_its_readings(lab):
    port = free_port()
    claim, _ = lab.start(port, as_attacker=True, listen=False)  # first: first in the workload table
    p_mine, _ = lab.start(port)
    src, scan = _source(), ProcessSource()
    server = f"vllm:{port}"
    try:
        seen = []
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and len([r for r in seen if r.up]) < 5:
            r = _read(src, scan).get(server)
            if r is not None:
                seen.append(r)
            time.sleep(0.2)
    finally:
        src.close()
        scan.close()
    up = [r for r in seen if r.up]
    assert up, seen
    assert {r.pid for r in up} == {p_mine.pid}, (claim.pid, p_mine.pid)


def test_a_port_held_by_another_process_is_not_scraped_and_its_holder_is_named_once(lab):
    with FakeServer(_engine()) as srv:  # held by this test process: not a vllm by its command line
        claim, _ = lab.start(srv.port, as_attacker=True, listen=False)
        src, scan = _source(), ProcessSource()
        server = f"vllm:{srv.port}"
        try:
            r = wait_until(lambda: _read(src, scan).get(server), timeout=20, what="a reading")
            for _ in range(5):
                time.sleep(0.2)
                r = _read(src, scan)[server]
        finally:
            src.close()
            scan.close()
    assert not r.up and r.pid is None, r
    assert f"port {srv.port} is held by pid {os.getpid()}" in r.error and f"pid {claim.pid}" in r.error
    named = [m for _, m in src.log.lines if f"held by pid {os.getpid()}" in m]
    assert len(named) == 1, src.log.lines


# 3. The cap is filled by priority: one user's many servers cannot crowd out another's.


@pytest.mark.slow
def test_twenty_fake_servers_of_one_user_leave_room_for_roots_real_one(lab):
    ports = [free_port() for _ in range(20)]
    fakes = [lab.start(p, as_attacker=True, listen=False)[0] for p in ports]
    port = free_port()
    p_mine, _ = lab.start(port)  # started after them
    src, scan = _source(), ProcessSource()
    try:
        r = wait_until(
            lambda: (x := _read(src, scan).get(f"vllm:{port}")) and x.up and x,
            timeout=20,
            what="root's server",
        )

        # On a loaded machine the last fakes may still be starting (not yet `vllm serve` in their argv) when
        # root's server answers: read until the left-out list names all five the cap leaves out.
        def five_left_out():
            _read(src, scan)
            last = [m for lvl, m in src.log.lines if "scraped at most" in m][-1:]
            return bool(last) and last[0].count("vllm:") >= 5

        wait_until(five_left_out, timeout=20, what="the five servers past the cap named")
        scraped = len(src.scrapers)
    finally:
        src.close()
        scan.close()
    assert r.pid == p_mine.pid and r.requests_running == 4 and scraped == 16
    left = [m for lvl, m in src.log.lines if "scraped at most" in m]
    # Logged once, though scanned on every tick; again only if the list changes (another process on this
    # shared host coming or going can change it).
    assert left and all(a != b for a, b in zip(left, left[1:], strict=False)), src.log.lines
    # 21 servers (more where another test's server runs beside): the ones left out are all the attacker's.
    assert "16 scraped at most" in left[-1] and left[-1].count("vllm:") >= 5
    left_pids = {int(x.split(")")[0]) for x in left[-1].split("(pid ")[1:]}
    assert left_pids and left_pids <= {f.pid for f in fakes}, left[-1]


# 11. Parse cost is bounded: a flood of distinct series is refused, naming the bound.


@pytest.fixture(scope="module")
def flood() -> bytes:
    return series_flood(3_900_000)


class _Fixed(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


@contextlib.contextmanager
def _serving(body: bytes):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Fixed,), {"body": body}))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _scrape(url: str, **settings):
    ep = Endpoint(f"vllm:{url.rsplit(':', 1)[1]}", "vllm", url)
    return Scraper(ep, ServingSettings(**settings), 60, http_get, Log(), time.time).scrape_once()


def test_a_flood_of_distinct_series_marks_the_server_down_naming_the_bound(flood):
    assert len(flood) >= 3_900_000
    with _serving(flood) as url:
        by_bytes = _scrape(url)
        by_series = _scrape(url, max_response_bytes=8 << 20)
    assert not by_bytes.up and "(max_response_bytes)" in by_bytes.error, by_bytes.error
    assert not by_series.up and "over the bound of 5000 (max_series)" in by_series.error, by_series.error


def test_the_series_bound_counts_sample_lines_not_comments():
    text = series_flood(40_000).decode()
    n = text.count("\nvllm:")
    assert 400 < n < 600
    assert parse_metrics("vllm", text, max_series=n)["running"] == n
    with pytest.raises(ExpositionError, match=f"{n} series, over the bound of {n - 1} \\(max_series\\)"):
        parse_metrics("vllm", text, max_series=n - 1)
    other = text + "".join(f"# HELP other_{i} x\n# TYPE other_{i} gauge\nother_{i} 1\n" for i in range(100))
    assert parse_metrics("vllm", other, max_series=n + 100)["running"] == n
    with pytest.raises(ExpositionError, match="max_series"):
        parse_metrics("vllm", other, max_series=n + 99)


# 5. Nothing non-finite or negative leaves a server's exposition.


def _overflowing() -> bytes:
    """Two engines exporting 1e308 (sums to inf), a NaN, a negative gauge, beside one sane figure."""
    reg, lab = CollectorRegistry(), ["model_name", "engine"]
    gen = Counter("vllm:generation_tokens", "Number of generation tokens processed.", lab, registry=reg)
    run = Gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", lab, registry=reg
    )
    wait = Gauge(
        "vllm:num_requests_waiting", "Number of requests waiting to be processed.", lab, registry=reg
    )
    kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", lab, registry=reg)
    ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", lab,
                     buckets=[0.1, 1.0], registry=reg)  # fmt: skip
    for e in ("0", "1"):
        gen.labels("m", e).inc(1e308)
        run.labels("m", e).set(1e308)
        ttft.labels("m", e).observe(0.05)
    wait.labels("m", "0").set(float("nan"))
    kv.labels("m", "0").set(0.5)
    text = generate_latest(reg).decode()
    # Bucket counts past float range (prometheus_client cannot count that far itself).
    return text.replace('le="0.1",model_name="m"} 1.0', 'le="0.1",model_name="m"} 1e308').encode() + (
        b"# TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total -3.0\n"
    )


def test_sums_past_float_range_nan_and_negatives_are_dropped_after_summing():
    got = parse_metrics("vllm", _overflowing().decode())
    assert got["kv_usage"] == 0.5
    for fig in ("running", "waiting", "generation_tokens", "preemptions", "ttft"):
        assert fig not in got, (fig, got.get(fig))


def test_a_reading_keeps_only_finite_non_negative_figures():
    with _serving(_overflowing()) as url:
        r = _scrape(url)
    assert r.up and r.kv_usage == 0.5
    assert r.requests_running is None and r.generation_tokens_total is None and r.preemptions_total is None
    raw = ServingReading("vllm:1", "vllm", True, 1.0, None, None, None, None, None, math.inf, math.nan, -0.5,
                         1e308, 1e308, 2e308, None, 2e308 / 0.01)  # fmt: skip
    clean = finite(raw)
    assert clean.requests_running is None and clean.requests_waiting is None and clean.kv_usage is None
    assert clean.kv_capacity_tokens == 1e308 and clean.generation_tokens_total is None
    assert clean.prompt_tokens_per_s is None and json.dumps(clean.to_dict(), allow_nan=False)


@pytest.mark.slow
def test_a_recorded_overflowing_server_replays(tmp_path):
    lab = Lab(None)
    try:
        port = free_port()
        lab.start(port, text=_overflowing())
        trace = tmp_path / "rec.jsonl"
        env = {"SPARK_WATCHD_FAKE_NVML": "gb10"}
        res = run_cli("record", str(trace), "--interval", "1", "--duration", "4", env=env)
        assert res.returncode == 0, res.stderr
    finally:
        lab.close()
    text = trace.read_text()
    assert "Infinity" not in text and "NaN" not in text
    ours = [r for s in read_trace(trace) for r in s.serving if r.server == f"vllm:{port}" and r.up]
    assert ours and all(r.kv_usage == 0.5 and r.requests_running is None for r in ours)
    res = run_cli("replay", str(trace), "--format", "jsonl")
    assert res.returncode == 0, res.stderr
    assert "Infinity" not in res.stdout and "NaN" not in res.stdout


_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 1.7e308, 0.0, -1.0, 5e-324]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_VALUES, min_size=12, max_size=12), st.lists(_VALUES, min_size=12, max_size=12))
def test_any_numbers_in_two_scrapes_give_a_reading_that_is_strict_json(first, second):
    """Two scrapes of a two-engine vLLM whose every value is drawn from floats (huge, NaN, negative)."""

    def text(vals):
        it = iter(vals)
        out = []
        for name, kind in (("vllm:num_requests_running", "gauge"), ("vllm:kv_cache_usage_perc", "gauge"),
                           ("vllm:generation_tokens", "counter"), ("vllm:prompt_tokens", "counter")):  # fmt: skip
            out.append(f"# TYPE {name} {kind}")
            suffix = "_total" if kind == "counter" else ""
            out += [f'{name}{suffix}{{engine="{e}",model_name="m"}} {next(it)!r}' for e in ("0", "1")]
        out.append("# TYPE vllm:time_to_first_token_seconds histogram")
        for le in ("0.1", "+Inf"):
            out += [f'vllm:time_to_first_token_seconds_bucket{{engine="{e}",le="{le}",model_name="m"}} {next(it)!r}'
                    for e in ("0", "1")]  # fmt: skip
        return "\n".join(out) + "\n"

    ep = Endpoint("vllm:1", "vllm", "http://127.0.0.1:1", 1)
    try:
        a, b = parse_metrics("vllm", text(first)), parse_metrics("vllm", text(second))
    except ExpositionError:
        return  # nothing usable: the server is down with the reason
    r = finite(reading(ep, 1.01, b, a, 1.0))
    json.dumps(r.to_dict(), allow_nan=False)


# The daemon as a whole: its own settings, scan and API, beside both servers.


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.slow
@pytest.mark.e2e
def test_a_daemon_keeps_the_key_from_another_users_server_and_its_status_strict_json(lab, tmp_path):
    key = tmp_path / "key"
    key.write_text("Bearer op-s3cret\n")
    port_mine = free_port()
    p_mine, seen_mine = lab.start(port_mine, text=_overflowing())  # root's, with sums past float range
    port_theirs = free_port()
    _p, seen_theirs = lab.start(port_theirs, as_attacker=True)
    env = {"SPARK_WATCHD_FAKE_NVML": "gb10", "SPARK_WATCHD_SERVING__AUTH_HEADER_FILE": str(key)}
    mine, theirs = f"vllm:{port_mine}", f"vllm:{port_theirs}"
    with running_daemon("--interval", "1", "--state-dir", str(tmp_path / "state"), env=env) as (_proc, base):

        def both_up():
            _, body = daemon_get(base + "/api/v1/status", timeout=2)
            rows = {
                r["server"]: r for r in _strict(body.decode() if isinstance(body, bytes) else body)["serving"]
            }
            return rows if rows.get(mine, {}).get("up") and rows.get(theirs, {}).get("up") else None

        rows = wait_until(both_up, timeout=30, what="both servers up in /api/v1/status")
        for _ in range(3):  # every read strict JSON while the overflowing server runs
            time.sleep(1)
            rows = both_up() or rows
    assert rows[mine]["pid"] == p_mine.pid and rows[mine]["kv_usage"] == 0.5
    assert rows[mine]["requests_running"] is None and rows[mine]["generation_tokens_total"] is None
    assert any(line.endswith("Bearer op-s3cret") for line in _seen(seen_mine))
    assert _seen(seen_theirs) and not [ln for ln in _seen(seen_theirs) if "op-s3cret" in ln]
