"""Fake inference servers: real HTTP servers on loopback serving the telemetry the real releases emit.

Each exposition is built with prometheus_client metric objects of the server's own names, labels and
bucket bounds, on a registry of its own, exactly as the server builds them; provenance per kind:

- vLLM 0.10/0.11 V1 engine: vllm-project/vllm vllm/v1/metrics/loggers.py (PrometheusStatLogger; read at
  commit 005a810bc40f for the 0.10 names, and the 0.11 form adding `vllm:inter_token_latency_seconds` beside
  `vllm:time_per_output_token_seconds`): labels model_name, engine; the TTFT and ITL bucket bounds as there;
  `vllm:cache_config_info` labels (num_gpu_blocks, block_size...). legacy=True serves the 0.9 names
  (`vllm:gpu_cache_usage_perc`, no inter_token_latency).
- SGLang: sgl-project/sglang python/sglang/srt/metrics/collector.py (commit 00ae9c1590d2:
  SchedulerMetricsCollector, TokenizerMetricsCollector): labels model_name, engine_type, tp_rank, pp_rank
  on the scheduler's gauges, model_name on the tokenizer's counters and histograms; `--enable-metrics`;
  `sglang:num_retracted_requests_total` (retractions); the default TTFT and ITL buckets.
- llama.cpp llama-server --metrics: ggml-org/llama.cpp tools/server/README.md (commit 00dc8057ab28,
  "GET /metrics") and handle_metrics's output form (HELP/TYPE per metric, no labels); the ggml-org/ci
  capture of commit a2df2787 shows `llamacpp:requests_processing` / `requests_deferred` verbatim.
- TensorRT-LLM trtllm-serve: NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py (commit 050f80def8df,
  MetricsCollector: prefix trtllm_, labels model_name, engine_type) served on /prometheus/metrics
  (docs/source/commands/trtllm-serve.rst: its /metrics is JSON iteration stats).
- Ollama: ollama/ollama docs/api.md `GET /api/ps` (name, model, size, digest, details, expires_at,
  size_vram; the docs' own example expiry "2024-06-04T14:38:31.83753-07:00" is parsed in
  tests/sources/test_serving_parse.py) and `GET /api/version`.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
             40.0, 80.0, 160.0, 640.0, 2560.0]  # fmt: skip
VLLM_ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
            80.0]  # fmt: skip
SGLANG_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGLANG_ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
              0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]  # fmt: skip


class FakeEngine:
    """A server's state, advanced by `step(seconds)`: tokens flow at `tps` while `running` > 0."""

    def __init__(self, kind: str, model: str = "Qwen/Qwen3-8B", legacy: bool = False):
        self.kind, self.model, self.legacy = kind, model, legacy
        self.running, self.waiting, self.kv = 4, 0, 0.42
        self.tps, self.ttft_s, self.itl_s = 120.0, 0.18, 0.03
        self.preempt_per_s = 0.0
        self.registry = CollectorRegistry()
        self.lock = threading.Lock()
        self.hang_s = 0.0  # > 0: every answer stalls this long first
        getattr(self, f"_build_{kind}")()

    # The metric objects, named as each server names them.
    def _build_vllm(self) -> None:
        r, lab = self.registry, ["model_name", "engine"]
        v = (self.model, "0")
        self.g_run = Gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", lab, registry=r
        ).labels(*v)
        self.g_wait = Gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", lab, registry=r
        ).labels(*v)
        kv_name = "vllm:gpu_cache_usage_perc" if self.legacy else "vllm:kv_cache_usage_perc"
        self.g_kv = Gauge(kv_name, "KV-cache usage. 1 means 100 percent usage.", lab, registry=r).labels(*v)
        self.c_pre = Counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", lab, registry=r
        ).labels(*v)
        self.c_prompt = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", lab, registry=r
        ).labels(*v)
        self.c_gen = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", lab, registry=r
        ).labels(*v)
        self.h_ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            lab,
            buckets=VLLM_TTFT,
            registry=r,
        ).labels(*v)
        itl = "vllm:time_per_output_token_seconds" if self.legacy else "vllm:inter_token_latency_seconds"
        self.h_itl = Histogram(
            itl, "Histogram of inter-token latency in seconds.", lab, buckets=VLLM_ITL, registry=r
        ).labels(*v)
        info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                     ["block_size", "cache_dtype", "engine", "gpu_memory_utilization", "num_gpu_blocks"], registry=r)  # fmt: skip
        info.labels("16", "auto", "0", "0.35", "2874").set(1)

    def _build_sglang(self) -> None:
        r, lab = self.registry, ["model_name", "engine_type", "tp_rank", "pp_rank"]
        v = (self.model, "unified", "0", "0")
        self.g_run = Gauge(
            "sglang:num_running_reqs", "The number of running requests.", lab, registry=r
        ).labels(*v)
        self.g_wait = Gauge(
            "sglang:num_queue_reqs", "The number of requests in the waiting queue.", lab, registry=r
        ).labels(*v)
        self.g_kv = Gauge("sglang:token_usage", "The token usage.", lab, registry=r).labels(*v)
        self.g_tp = Gauge(
            "sglang:gen_throughput", "The generation throughput (token/s).", lab, registry=r
        ).labels(*v)
        Gauge(
            "sglang:max_total_num_tokens",
            "Maximum total number of tokens in the KV cache pool.",
            lab,
            registry=r,
        ).labels(*v).set(412000)
        Gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", lab, registry=r).labels(*v).set(0.31)
        self.c_pre = Counter(
            "sglang:num_retracted_requests_total", "Total number of retracted requests.", lab, registry=r
        ).labels(*v)
        tl = ["model_name"]
        self.c_prompt = Counter(
            "sglang:prompt_tokens_total", "Number of prefill tokens processed.", tl, registry=r
        ).labels(self.model)
        self.c_gen = Counter(
            "sglang:generation_tokens_total", "Number of generation tokens processed.", tl, registry=r
        ).labels(self.model)
        self.h_ttft = Histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            tl,
            buckets=SGLANG_TTFT,
            registry=r,
        ).labels(self.model)
        self.h_itl = Histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            tl,
            buckets=SGLANG_ITL,
            registry=r,
        ).labels(self.model)

    def _build_trtllm(self) -> None:
        r, lab = self.registry, ["model_name", "engine_type"]
        v = (self.model, "trtllm")
        self.g_run = Gauge(
            "trtllm_num_requests_running", "Number of active requests", lab, registry=r
        ).labels(*v)
        self.g_wait = Gauge(
            "trtllm_num_requests_waiting", "Number of queued requests", lab, registry=r
        ).labels(*v)
        self.g_kv = Gauge("trtllm_kv_cache_utilization", "KV cache utilization", lab, registry=r).labels(*v)
        self.c_pre = None
        self.c_prompt = Counter(
            "trtllm_prompt_tokens_total",
            "Cumulative number of prompt (input) tokens processed.",
            lab,
            registry=r,
        ).labels(*v)
        self.c_gen = Counter(
            "trtllm_generation_tokens_total",
            "Cumulative number of generation (output) tokens produced.",
            lab,
            registry=r,
        ).labels(*v)
        self.h_ttft = Histogram(
            "trtllm_time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            lab,
            buckets=VLLM_TTFT,
            registry=r,
        ).labels(*v)
        self.h_itl = Histogram(
            "trtllm_time_per_output_token_seconds",
            "Histogram of time per output token in seconds.",
            lab,
            buckets=VLLM_ITL,
            registry=r,
        ).labels(*v)

    def _build_llamacpp(self) -> None:
        self.prompt_total = self.gen_total = 0.0

    def _build_ollama(self) -> None:
        self.loaded = [("qwen3:8b", 6_200_000_000)]
        self.keep_alive_s = 300.0

    def step(self, seconds: float) -> None:
        """Advance the engine: tokens and observations as the server would have counted them."""
        with self.lock:
            gen = self.tps * seconds if self.running else 0.0
            if self.kind == "llamacpp":
                self.prompt_total += gen * 3
                self.gen_total += gen
                return
            if self.kind == "ollama":
                return
            self.g_run.set(self.running)
            self.g_wait.set(self.waiting)
            self.g_kv.set(self.kv)
            if gen:
                self.c_gen.inc(gen)
                self.c_prompt.inc(gen * 3)
                for _ in range(max(1, int(seconds))):
                    self.h_ttft.observe(self.ttft_s)
                    self.h_itl.observe(self.itl_s)
            if self.c_pre is not None and self.preempt_per_s:
                self.c_pre.inc(self.preempt_per_s * seconds)
            if self.kind == "sglang":
                self.g_tp.set(self.tps if self.running else 0.0)

    def body(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of path."""
        with self.lock:
            if self.kind == "ollama":
                if path == "/api/version":
                    return 200, "application/json", json.dumps({"version": "0.12.6"}).encode()
                if path == "/api/ps":
                    return 200, "application/json", json.dumps({"models": self._ps()}).encode()
                return 404, "text/plain", b"404 page not found"
            want = "/prometheus/metrics" if self.kind == "trtllm" else "/metrics"
            if path != want:
                return 404, "text/plain", b"Not Found"
            if self.kind == "llamacpp":
                return 200, "text/plain; version=0.0.4", self._llamacpp_text().encode()
            return 200, "text/plain; version=0.0.4; charset=utf-8", generate_latest(self.registry)

    def _ps(self) -> list[dict]:
        exp = datetime.fromtimestamp(time.time() + self.keep_alive_s, timezone.utc).astimezone()
        return [
            {
                "name": name,
                "model": name,
                "size": size,
                "digest": "500a1f067a9f782620b40bee6f7b0c89e17ae61f686b92c24933e4ca4b2b8b41",
                "details": {
                    "parent_model": "",
                    "format": "gguf",
                    "family": "qwen3",
                    "families": ["qwen3"],
                    "parameter_size": "8.2B",
                    "quantization_level": "Q4_K_M",
                },  # fmt: skip
                "expires_at": exp.isoformat(timespec="microseconds"),
                "size_vram": size,
                "context_length": 4096,
            }
            for name, size in self.loaded
        ]

    def _llamacpp_text(self) -> str:
        # handle_metrics writes each metric as "# HELP llamacpp:NAME ...\n# TYPE llamacpp:NAME TYPE\nllamacpp:NAME V".
        rows = [
            ("counter", "prompt_tokens_total", "Number of prompt tokens processed.", self.prompt_total),
            ("counter", "prompt_seconds_total", "Prompt process time", self.prompt_total / 900.0),
            ("counter", "tokens_predicted_total", "Number of generation tokens processed.", self.gen_total),
            (
                "counter",
                "tokens_predicted_seconds_total",
                "Predict process time",
                self.gen_total / max(self.tps, 1),
            ),
            ("counter", "n_decode_total", "Total number of llama_decode() calls", self.gen_total / 2),
            ("gauge", "n_tokens_max", "Largest observed n_tokens.", 5016),
            ("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", 2),
            ("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s.", 1186.93),
            ("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s.", self.tps),
            ("gauge", "kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", self.kv),
            ("gauge", "kv_cache_tokens", "KV-cache tokens.", 2150),
            ("gauge", "requests_processing", "Number of requests processing.", self.running),
            ("gauge", "requests_deferred", "Number of requests deferred.", self.waiting),
        ]
        return "".join(
            f"# HELP llamacpp:{n} {h}\n# TYPE llamacpp:{n} {t}\nllamacpp:{n} {v:g}\n" for t, n, h, v in rows
        )


class FakeServer:
    """A FakeEngine behind a real ThreadingHTTPServer on 127.0.0.1 (port 0: the kernel picks)."""

    def __init__(self, engine: FakeEngine, port: int = 0):
        self.engine = engine
        eng = engine

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if eng.hang_s:
                    time.sleep(eng.hang_s)
                status, ctype, body = eng.body(self.path)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the scraper gave up on a hung answer

            def log_message(self, *args):  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def series_flood(n_bytes: int) -> bytes:
    """A hostile vLLM exposition: the running gauge with one distinct series per engine label, n_bytes long."""
    reg = CollectorRegistry()
    g = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
              ["model_name", "engine"], registry=reg)  # fmt: skip
    size, i = 0, 0
    while size < n_bytes:
        g.labels("Qwen/Qwen3-8B", str(i)).set(1)
        size += len(f'vllm:num_requests_running{{engine="{i}",model_name="Qwen/Qwen3-8B"}} 1.0\n')
        i += 1
    return generate_latest(reg)


def main(kind: str) -> None:
    """Run as a server process (`vllm serve M --port P`, `ollama serve` with OLLAMA_HOST...): serve until killed.

    The end-to-end tests launch this under each server's own command line, so the daemon finds it in the
    process table exactly as it finds the real one.
    """
    import os
    import sys

    argv = sys.argv[1:]
    if kind == "ollama":
        port = int(os.environ.get("OLLAMA_HOST", "127.0.0.1:11434").rsplit(":", 1)[1])
    elif "--port" in argv:
        port = int(argv[argv.index("--port") + 1])
    else:  # llama-server reads its flags from LLAMA_ARG_* too
        port = int(os.environ["LLAMA_ARG_PORT"])
    engine = FakeEngine(kind)
    with FakeServer(engine, port=port):
        while True:
            time.sleep(0.5)
            engine.step(0.5)
