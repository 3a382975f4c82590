"""End to end: the daemon beside fake vLLM, SGLang, llama.cpp and Ollama servers on loopback.

Each fake is a real process under its server's own command line (`python .../vllm serve M --port P`,
`python -m sglang.launch_server ... --enable-metrics`, `python .../llama-server -m M --metrics --port P`,
`python .../ollama serve` with OLLAMA_HOST), serving the exposition the real release emits
(tests/support/serving_fakes.py). The daemon finds them in the process table, scrapes them, and shows
them in /metrics, on the page (Chromium), in `status` and in a recorded trace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_watchd.sample.trace import read_trace
from tests.conftest import REPO, cli_env, free_port, require_binary, run_cli
from tests.daemon_helpers import http_get, running_daemon, samples, value
from tests.support.poll import wait_until

pytestmark = pytest.mark.e2e
KINDS = ("vllm", "sglang", "llamacpp", "ollama")


def _launcher(tmp: Path, name: str, kind: str) -> Path:
    path = tmp / name
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\nfrom tests.support.serving_fakes import main\nmain({kind!r})\n"
    )
    return path


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """The four fake servers as processes; yields {kind: port}."""
    tmp = tmp_path_factory.mktemp("servers")
    (tmp / "pkg" / "sglang").mkdir(parents=True)
    (tmp / "pkg" / "sglang" / "__init__.py").write_text("")
    _launcher(tmp / "pkg" / "sglang", "launch_server.py", "sglang")
    ports = {k: free_port() for k in KINDS}
    py = sys.executable
    cmds = {
        "vllm": [py, str(_launcher(tmp, "vllm", "vllm")), "serve", "Qwen/Qwen3-8B", "--port", str(ports["vllm"])],
        "sglang": [py, "-m", "sglang.launch_server", "--model-path", "m", "--port", str(ports["sglang"]), "--enable-metrics"],
        "llamacpp": [py, str(_launcher(tmp, "llama-server", "llamacpp")), "-m", "q.gguf", "--metrics", "--port", str(ports["llamacpp"])],
        "ollama": [py, str(_launcher(tmp, "ollama", "ollama")), "serve"],
    }  # fmt: skip
    env = cli_env({"PYTHONPATH": f"{tmp / 'pkg'}:{REPO}", "OLLAMA_HOST": f"127.0.0.1:{ports['ollama']}"})
    procs = [
        subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in cmds.values()
    ]
    try:
        for kind, port in ports.items():
            wait_until(lambda p=port: _answers(p), timeout=20, what=f"fake {kind} on {port}")
        yield ports
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)


def _answers(port: int) -> bool:
    for path in ("/metrics", "/api/version"):
        try:
            status, _ = http_get(f"http://127.0.0.1:{port}{path}", timeout=1)
            if status == 200:
                return True
        except OSError:
            pass
    return False


def test_daemon_scrapes_all_four_and_shows_them_in_metrics_page_status_and_trace(servers, tmp_path):
    require_binary("chromium")
    env = {"SPARK_WATCHD_FAKE_NVML": "gb10", "SPARK_WATCHD_WEB__PAGE_REFRESH_SECONDS": "1"}
    args = ("--interval", "1", "--state-dir", str(tmp_path / "state"))
    with running_daemon(*args, env=env) as (_proc, base):
        labels = {k: dict(kind=k, server=f"{k}:{p}") for k, p in servers.items()}

        def scraped():
            _, body = http_get(base + "/metrics", timeout=2)
            m = samples(body.decode() if isinstance(body, bytes) else body)
            ok = all(value(m, "sparkwatchd_serving_up", **lab) == 1 for lab in labels.values())
            tps = all((value(m, "sparkwatchd_serving_generation_tokens_per_second", **labels[k]) or 0) > 0
                      for k in ("vllm", "sglang", "llamacpp"))  # fmt: skip
            return m if ok and tps else None

        m = wait_until(scraped, timeout=30, what="all four servers scraped with tokens flowing")
        assert value(m, "sparkwatchd_serving_requests_running", **labels["vllm"]) == 4
        assert value(m, "sparkwatchd_serving_kv_cache_usage_ratio", **labels["sglang"]) == pytest.approx(0.42)
        assert value(m, "sparkwatchd_serving_time_to_first_token_p95_seconds", **labels["vllm"]) is not None
        assert value(m, "sparkwatchd_serving_models_loaded", **labels["ollama"]) == 1
        assert (value(m, "sparkwatchd_serving_model_expiry_seconds", **labels["ollama"]) or 0) > 200

        res = run_cli("status", "--url", base, "--color", "never", env={"COLUMNS": "160"})
        assert "serving:" in res.stdout and "TOKENS/S" in res.stdout, res.stdout
        rows = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.split() and ":" in ln.split()[0]}
        for kind, port in servers.items():
            assert f"{kind}:{port}" in rows, res.stdout
        assert "Qwen/Qwen3-8B" in rows[f"vllm:{servers['vllm']}"]
        # Only our four: the table is host-wide, and another server on this host (a real vLLM on a Spark, a
        # parallel test's fake that just exited) may be listed down beside them.
        assert not [k for k, p in servers.items() if "DOWN" in rows[f"{k}:{p}"]], res.stdout

        from tests.web.browser import launch, open_page

        with launch() as ctx, open_page(ctx, base) as (page, log):
            page.wait_for_selector('#serving tr[data-kind="vllm"]', timeout=15_000)
            page.wait_for_selector('#chart-serving path[data-series^="vllm:"]', timeout=15_000)
            # Our four (the table is host-wide: another server on this host may be listed beside them).
            shown = page.locator("#serving tr th").all_inner_texts()
            assert all(any(t.startswith(f"{k}:{p}") for t in shown) for k, p in servers.items()), shown
            assert "1 loaded, unloads in" in page.locator('#serving tr[data-kind="ollama"]').inner_text()
            page.locator("#h-serving").scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "serving.png"), full_page=True)
            assert log.errors == [] and log.off_origin == []

    trace = tmp_path / "rec.jsonl"
    res = run_cli(
        "record", str(trace), "--interval", "1", "--duration", "4", env={"SPARK_WATCHD_FAKE_NVML": "gb10"}
    )
    assert res.returncode == 0, res.stderr
    got = {r.kind for s in read_trace(trace) for r in s.serving if r.up}
    assert got == set(KINDS)


def test_a_replayed_inference_throttle_shows_the_cut_beside_the_heat_on_the_page(tmp_path):
    """The page lines the server's own decode rate up with the throttle: G4 critical, the Serving chart
    under the same shaded throttle band as temperature and clocks."""
    require_binary("chromium")
    from tests.conftest import FIXTURES
    from tests.web.browser import launch, open_page

    trace = FIXTURES / "traces" / "serving" / "inference_throttle_30s.jsonl"
    args = (
        "--replay",
        str(trace),
        "--speed",
        "100000",
        "--interval",
        "1",
        "--state-dir",
        str(tmp_path / "s"),
    )
    with running_daemon(*args, env={"SPARK_WATCHD_WEB__PAGE_REFRESH_SECONDS": "1"}) as (_proc, base):
        wait_until(
            lambda: json.loads(http_get(base + "/api/v1/history?limit=1")[1])["held"] >= 360, timeout=60
        )
        with launch() as ctx, open_page(ctx, base) as (page, log):
            card = page.locator('.finding[data-gotcha="G4"][data-severity="critical"]')
            card.wait_for(timeout=15_000)
            assert "slowing inference" in card.inner_text() and "vllm:8000" in card.inner_text()
            page.wait_for_selector('#chart-serving path[data-series="vllm:8000 tokens/s"]')
            # The throttle band the temperature chart shades is drawn on the Serving chart too.
            assert (
                page.locator("#chart-serving .band").count() == page.locator("#chart-temp .band").count() >= 1
            )
            # Energy per unit of work beside the charts: the trace's J per generated token for the server.
            assert (
                "vllm:8000" in page.locator("#energy").inner_text()
                and "J/token" in page.locator("#energy").inner_text()
            )
            page.locator("#chart-serving").screenshot(path=str(tmp_path / "serving-chart.png"))
            assert log.errors == [] and log.off_origin == []
