"""A real llama.cpp `llama-server` beside a real daemon: found from LLAMA_ARG_PORT alone, its generation rate
live (its counter moves only when a request ends; /slots shows the running requests' tokens), and without
`--metrics` shown down with the server's own words.

The model is a tiny random-weight llama GGUF made on the spot with the `gguf` package (nothing from a hub).
Needs SPARK_WATCHD_LLAMA_SERVER (a llama-server binary; .ci/llama_server.sh builds one) and `gguf`.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest

from tests.conftest import REPO, free_port
from tests.daemon_helpers import http_get, running_daemon
from tests.integrations.real_servers import REQUIRE, Load, Poller, Server, get_json, need, prom_values
from tests.support.poll import wait_until

pytestmark = [pytest.mark.real_servers, pytest.mark.slow]
WORDS = " ".join(f"w{i}" for i in range(1, 17))


@pytest.fixture(scope="module")
def llama_server():
    return need("SPARK_WATCHD_LLAMA_SERVER", "a llama-server binary")


@pytest.fixture(scope="module")
def gguf_model(llama_server, tmp_path_factory):
    try:
        import gguf  # noqa: F401
    except ImportError:
        if REQUIRE:
            pytest.fail("the gguf package is not installed (.ci/run installs it)")
        pytest.skip("the gguf package is not installed")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "real_models", REPO / "tests" / "support" / "real_models.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    mod.make_gguf(out)
    return out


def start(binary: str, model, port: int, log, metrics: bool = True) -> Server:
    argv = [
        binary,
        "-m",
        str(model),
        "-c",
        "40000",
        "-np",
        "2",
        "-t",
        "1",
        "--no-webui",
        "--host",
        "127.0.0.1",
    ]
    if metrics:
        argv.append("--metrics")
    env = {**os.environ, "LLAMA_ARG_PORT": str(port)}  # the port from its environment only
    return Server(argv, env, log, f"http://127.0.0.1:{port}", "/health")


def test_a_real_llama_server_found_from_its_environment_with_a_live_rate(llama_server, gguf_model, tmp_path):
    port = free_port()
    server = start(llama_server, gguf_model, port, tmp_path / "llama.log")
    try:
        print(f"llama-server ready after {server.wait_ready(120):.1f} s")
        with running_daemon(
            "--interval", "2", "--state-dir", str(tmp_path / "state"),
            env={"SPARK_WATCHD_FAKE_NVML": "gb10"}, ready_timeout=120,
        ) as (_proc, base):  # fmt: skip
            label, url = f"llamacpp:{port}", f"http://127.0.0.1:{port}"
            own = Poller(lambda: prom_values(http_get(url + "/metrics", timeout=2)[1]), 0.25)
            seen = Poller(lambda: get_json(base + "/api/v1/status", timeout=5)["serving"], 0.5)
            own.start()
            seen.start()

            def readings():
                got = {}
                for _a, _b, status in seen.got:
                    for r in status:
                        if r["server"] == label:
                            got[r["ts"]] = r
                return [got[k] for k in sorted(got)]

            wait_until(
                lambda: any(r["up"] for r in readings()), timeout=60, interval=0.25, what=f"{label} up"
            )
            # Two clients, each asking for 16,000 tokens at a time (seconds each), for 24 s and their last.
            load = Load(
                url + "/completion", dict(prompt=WORDS, n_predict=16000, ignore_eos=True, cache_prompt=False)
            )
            t0 = time.time()
            load.steady(2)
            time.sleep(24)
            t1 = time.time()
            load.finish()
            t_done = time.time()
            assert not load.errors, load.errors
            time.sleep(4)
            rs = [r for r in readings() if r["up"]]
            during = [
                r for r in rs if t0 + 4 <= r["ts"] <= t1 - 1 and r["generation_tokens_per_s"] is not None
            ]
            assert len(during) >= 5, during
            # Live: every interval of steady generation has tokens; the counter alone moves only as requests end.
            assert all(r["generation_tokens_in_flight"] is not None for r in during)
            assert min(r["generation_tokens_per_s"] for r in during) > 0, [
                r["generation_tokens_per_s"] for r in during
            ]
            counter = [
                b["generation_tokens_total"] - a["generation_tokens_total"]
                for a, b in zip(during, during[1:], strict=False)
            ]
            print(
                "daemon tokens/s:",
                [round(r["generation_tokens_per_s"]) for r in during],
                "counter steps:",
                counter,
            )
            # The counter alone stands still in an interval where no request ended, while tokens flow.
            assert 0.0 in counter, counter
            client_rate = load.tokens / (t_done - t0)
            med = statistics.median(r["generation_tokens_per_s"] for r in during)
            print(f"clients {client_rate:.1f} tokens/s, daemon median {med:.1f}")
            assert 0.6 * client_rate <= med <= 1.6 * client_rate
            # The counter as the daemon read it lies between the server's own reads around each scrape.
            checked = 0
            for r in rs:
                b = own.bracket(r["ts"], "llamacpp:tokens_predicted_total", after=2.5)
                if b is not None:
                    assert b[0] <= r["generation_tokens_total"] <= b[1]
                    checked += 1
            assert checked >= 5
            seen.stop()
            own.stop()
    finally:
        server.stop()

    # Without --metrics: down, with the server's own hint.
    port2 = free_port()
    bare = start(llama_server, gguf_model, port2, tmp_path / "llama2.log", metrics=False)
    try:
        bare.wait_ready(120)
        with running_daemon(
            "--interval", "2", "--state-dir", str(tmp_path / "state2"),
            env={"SPARK_WATCHD_FAKE_NVML": "gb10"}, ready_timeout=120,
        ) as (_proc, base):  # fmt: skip
            r = wait_until(
                lambda: next((x for x in get_json(base + "/api/v1/status")["serving"] if x["server"] == f"llamacpp:{port2}"), None),
                timeout=30, interval=0.5, what="the server without --metrics read",
            )  # fmt: skip
            assert not r["up"] and "501" in r["error"] and "--metrics" in r["error"], r
    finally:
        bare.stop()
