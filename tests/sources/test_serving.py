"""The serving source against real HTTP servers on loopback: discovery, figures, and every way a server fails."""

import dataclasses
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spark_watchd.sample.model import ProcessInfo
from spark_watchd.sources.serving import Scraper, ServingSource, http_get
from spark_watchd.sources.serving_endpoints import Endpoint
from spark_watchd.sources.serving_settings import ServingSettings
from tests.support.poll import wait_until as wait_for
from tests.support.serving_fakes import FakeEngine, FakeServer


def _proc(pid, argv, resident=True):
    return ProcessInfo(pid, 1000.0 + pid, argv[0], tuple(argv), 1 << 30, None, resident)


def _vllm(port, pid=None):
    # The claimant of a server this test process serves: this process (or an ancestor) holds its port.
    pid = os.getpid() if pid is None else pid
    return _proc(pid, ["vllm", "serve", "Qwen/Qwen3-8B", "--port", str(port)])


class Log:
    def __init__(self):
        self.lines = []

    def warning(self, msg, **kw):
        self.lines.append(("warning", msg))

    def info(self, msg, **kw):
        self.lines.append(("info", msg))

    debug = info


def _latest(src, server):
    out = src.collect({"processes": src._procs})["serving"]
    return next((r for r in out if r.server == server), None)


def test_a_discovered_vllm_is_scraped_and_its_interval_figures_computed():
    eng = FakeEngine("vllm")
    with FakeServer(eng) as srv:
        src = ServingSource(ServingSettings(), interval_s=0.2, own_addresses=frozenset())
        src._procs = (_vllm(srv.port),)
        server = f"vllm:{srv.port}"
        try:
            eng.step(5)
            wait_for(lambda: _latest(src, server) is not None, timeout=5)
            eng.step(5)  # 600 tokens more, 5 TTFT/ITL observations
            r = wait_for(lambda: (x := _latest(src, server)) and x.generation_tokens_per_s and x, timeout=5)
            assert r.up and r.kind == "vllm" and r.pid == os.getpid() and r.model == "Qwen/Qwen3-8B"
            assert r.requests_running == 4 and r.kv_usage == pytest.approx(0.42)
            assert r.generation_tokens_per_s > 0 and r.ttft_p50_s == pytest.approx(0.175, abs=0.05)
            assert r.itl_p95_s is not None and 0.025 <= r.itl_p95_s <= 0.05
        finally:
            src.close()


def test_a_hanging_server_delays_neither_the_tick_nor_the_other_servers_scrape():
    hung, ok = FakeEngine("vllm"), FakeEngine("llamacpp")
    hung.hang_s = 5.0
    with FakeServer(hung) as h, FakeServer(ok) as o:
        src = ServingSource(ServingSettings(timeout_s=1.0), interval_s=0.2, own_addresses=frozenset())
        src._procs = (
            _vllm(h.port),
            _proc(os.getppid(), ["llama-server", "-m", "x.gguf", "--metrics", "--port", str(o.port)]),
        )
        try:
            t0 = time.perf_counter()
            first = {r.server: r for r in src.collect({"processes": src._procs})["serving"]}
            # Servers found now are read in this sample: their first scrapes are waited for, at most the scrape
            # timeout (here 1 s) in all; the hanging one's is not there, or is there down (its read timed out
            # at that same 1 s: on a loaded machine the wait can end just after it).
            assert time.perf_counter() - t0 < 1.5
            hung_first = first.get(f"vllm:{h.port}")
            assert hung_first is None or (not hung_first.up and "timed out" in (hung_first.error or ""))
            good = wait_for(lambda: _latest(src, f"llamacpp:{o.port}"), timeout=3)
            assert good.up
            costs = []
            for _ in range(5):
                t0 = time.perf_counter()
                src.collect({"processes": src._procs})
                costs.append(time.perf_counter() - t0)
            assert max(costs) < 0.05
            bad = wait_for(lambda: (x := _latest(src, f"vllm:{h.port}")) and x, timeout=4)
            assert not bad.up and "timed out" in bad.error.lower()
        finally:
            src.close()


class _Redirect(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path == "/big/metrics":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"# " + b"x" * 200_000 + b"\n")
            return
        self.send_response(302)
        self.send_header("Location", "http://203.0.113.9/metrics")
        self.end_headers()

    def log_message(self, *a):
        pass


@pytest.fixture
def odd_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_redirects_are_never_followed(odd_server):
    from spark_watchd.sources.serving import ScrapeError

    with pytest.raises(ScrapeError, match="302 redirect to http://203.0.113.9/metrics: not followed"):
        http_get(f"http://127.0.0.1:{odd_server}/metrics", 2.0, 1 << 20, {})


def test_an_answer_over_the_size_cap_is_refused(odd_server):
    from spark_watchd.sources.serving import ScrapeError

    with pytest.raises(ScrapeError, match="over 100000 bytes"):
        http_get(f"http://127.0.0.1:{odd_server}/big/metrics", 2.0, 100_000, {})


def test_up_and_down_are_logged_once_per_change_and_an_outage_restarts_the_rates():
    eng = FakeEngine("sglang")
    srv = FakeServer(eng).__enter__()
    log = Log()
    ep = Endpoint(f"sglang:{srv.port}", "sglang", srv.url, 5)
    sc = Scraper(ep, ServingSettings(timeout_s=0.5), 60, http_get, log, time.time)
    assert sc.scrape_once().up and sc.scrape_once().up
    srv.__exit__()
    r1, r2 = sc.scrape_once(), sc.scrape_once()
    assert not r1.up and not r2.up and r1.error
    assert [lvl for lvl, _ in log.lines] == ["warning"]  # the first up is not news; one line for the outage
    with FakeServer(eng, port=srv.port):
        back = sc.scrape_once()
    assert back.up and back.generation_tokens_per_s is None  # no rate across the gap
    assert log.lines[-1] == ("info", f"sglang:{srv.port} answering again")


def test_auth_header_is_read_from_its_file_and_sent(tmp_path):
    seen = {}

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen["auth"] = self.headers.get("Authorization")
            body = b"# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n"
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    key = tmp_path / "key"
    key.write_text("Bearer s3cret\n")
    try:
        port = httpd.server_address[1]
        ep = Endpoint(f"llamacpp:{port}", "llamacpp", f"http://127.0.0.1:{port}")
        r = Scraper(
            ep, ServingSettings(auth_header_file=str(key)), 60, http_get, Log(), time.time
        ).scrape_once()
        assert r.up and seen["auth"] == "Bearer s3cret"
        assert "s3cret" not in repr(r)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_disabled_overrides_and_extra_endpoints_shape_the_target_list():
    s = ServingSettings(
        servers={"vllm:8000": {"enabled": False}},
        endpoints=[{"kind": "ollama", "url": "http://127.0.0.1:11500", "name": "ollama-box"}],
    )
    src = ServingSource(s, own_addresses=frozenset())
    targets = src.targets((_proc(1, ["vllm", "serve", "m"]), _proc(2, ["llama-server", "-m", "x"])))
    assert [t.server for t in targets] == ["ollama-box", "llamacpp:8080"]  # configured ones first


def test_an_off_host_extra_endpoint_is_a_config_error():
    with pytest.raises(ValueError, match="not loopback"):
        ServingSettings(endpoints=[{"kind": "vllm", "url": "http://192.0.2.1:8000"}])


def test_the_serving_section_reads_from_toml_with_overrides_and_endpoints(tmp_path):
    from spark_watchd.config import load_settings
    from spark_watchd.errors import ConfigError

    cfg = tmp_path / "config.toml"
    cfg.write_text(
        "[serving]\ntimeout_s = 1.5\n"
        '[serving.servers."vllm:8000"]\nenabled = false\n'
        '[serving.servers."sglang:30000"]\nurl = "http://localhost:31000"\n'
        '[[serving.endpoints]]\nkind = "ollama"\nurl = "http://127.0.0.1:11500"\nname = "box"\n'
    )
    s = load_settings(str(cfg), environ={}).serving
    assert s.timeout_s == 1.5 and s.servers["vllm:8000"].enabled is False
    assert s.servers["sglang:30000"].url == "http://127.0.0.1:31000"
    assert s.endpoints[0].name == "box"
    cfg.write_text('[[serving.endpoints]]\nkind = "tgi"\nurl = "http://127.0.0.1:8080"\n')
    with pytest.raises(ConfigError, match="serving.endpoints"):
        load_settings(str(cfg), environ={})


def test_the_workloads_are_grouped_again_only_when_a_process_changes(monkeypatch):
    """Memory moves every tick; who the processes are does not: the grouping is redone only for the latter."""
    import spark_watchd.sources.serving as serving

    calls = []
    real = serving.group_workloads
    monkeypatch.setattr(serving, "group_workloads", lambda procs: calls.append(1) or real(procs))
    src = ServingSource(ServingSettings(), own_addresses=frozenset())
    procs = [_vllm(8001), _proc(7, ["python", "train.py"])]
    first = src.targets(procs)
    moved = [dataclasses.replace(p, rss_bytes=p.rss_bytes + 4096) for p in procs]
    assert src.targets(moved) == first and len(calls) == 1
    assert [t.server for t in src.targets([*procs, _vllm(8002, pid=101)])] == ["vllm:8001", "vllm:8002"]
    assert len(calls) == 2


def test_auth_uids_default_to_the_daemons_own_and_root_and_are_checked(tmp_path):
    from spark_watchd.config import load_settings
    from spark_watchd.errors import ConfigError

    assert ServingSettings().allowed_uids() == {0, os.geteuid()}
    cfg = tmp_path / "config.toml"
    cfg.write_text("[serving]\nauth_uids = [0, 998]\nmax_series = 2000\n")
    s = load_settings(str(cfg), environ={}).serving
    assert s.allowed_uids() == {0, 998} and s.max_series == 2000
    cfg.write_text("[serving]\nauth_uids = [-1]\n")
    with pytest.raises(ConfigError, match="auth_uids"):
        load_settings(str(cfg), environ={})
