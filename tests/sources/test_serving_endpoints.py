"""Each server's endpoint from its launcher's flags, its environment or its documented default; never off-host."""

import pytest

from spark_watchd.sources.serving_endpoints import (
    checked_url,
    endpoint_for,
    ollama_host,
    parse_environ,
    scrape_host,
)


@pytest.mark.parametrize(
    "kind, argv, url",
    [
        (
            "vllm",
            ["vllm", "serve", "Qwen/Qwen3-8B"],
            "http://127.0.0.1:8000",
        ),  # vLLM listens on all: loopback
        ("vllm", ["vllm", "serve", "m", "--port", "8100", "--host", "127.0.0.1"], "http://127.0.0.1:8100"),
        (
            "vllm",
            ["python3", "-m", "vllm.entrypoints.openai.api_server", "--port=8001"],
            "http://127.0.0.1:8001",
        ),
        (
            "sglang",
            ["python", "-m", "sglang.launch_server", "--model-path", "m", "--enable-metrics"],
            "http://127.0.0.1:30000",
        ),  # fmt: skip
        ("llamacpp", ["llama-server", "-m", "m.gguf", "--metrics"], "http://127.0.0.1:8080"),
        ("trtllm", ["trtllm-serve", "m", "--host", "localhost", "--port", "8003"], "http://127.0.0.1:8003"),
        ("ollama", ["ollama", "serve"], "http://127.0.0.1:11434"),
        ("vllm", ["vllm", "serve", "m", "--host", "::1", "--port", "9000"], "http://[::1]:9000"),
    ],
)
def test_endpoint_from_flags_or_the_documented_default(kind, argv, url):
    ep = endpoint_for(kind, argv, pid=42)
    assert ep.base_url == url and ep.pid == 42
    assert ep.server == f"{kind}:{url.rsplit(':', 1)[1]}"


def test_ollama_host_from_its_environment_as_ollama_reads_it():
    assert ollama_host("0.0.0.0:11500") == ("0.0.0.0", 11500)
    assert ollama_host("http://127.0.0.1:11435") == ("127.0.0.1", 11435)
    assert ollama_host("") == ("127.0.0.1", 11434)
    ep = endpoint_for("ollama", ["ollama", "serve"], environ={"OLLAMA_HOST": "0.0.0.0:11500"})
    assert ep.base_url == "http://127.0.0.1:11500"


def test_llama_server_reads_its_port_from_llama_arg_port():
    ep = endpoint_for("llamacpp", ["llama-server", "-m", "x"], environ={"LLAMA_ARG_PORT": "8181"})
    assert ep.base_url == "http://127.0.0.1:8181"


def test_a_server_listening_on_another_hosts_address_is_not_scraped():
    why = endpoint_for("vllm", ["vllm", "serve", "m", "--host", "10.9.8.7"])
    assert isinstance(why, str) and "not this host" in why
    assert endpoint_for(
        "vllm", ["vllm", "serve", "m", "--host", "10.9.8.7"], own_addresses={"10.9.8.7"}
    ).base_url == ("http://10.9.8.7:8000")
    assert scrape_host("example.com") is None  # names would need DNS: never


def test_a_bad_port_is_a_reason_not_a_crash():
    assert "not a port" in endpoint_for("vllm", ["vllm", "serve", "m", "--port", "http"])


def test_configured_urls_must_be_bare_loopback_or_own_addresses():
    assert checked_url("http://localhost:8000") == "http://127.0.0.1:8000"
    for bad in (
        "http://10.1.2.3:8000",
        "ftp://127.0.0.1:1",
        "http://127.0.0.1:8000/metrics",
        "http://u@127.0.0.1:1",
    ):
        with pytest.raises(ValueError):
            checked_url(bad)


def test_proc_environ_is_split_on_nul():
    assert parse_environ(b"OLLAMA_HOST=0.0.0.0:1\0PATH=/bin\0junk\0\xff=\xfe\0") == {
        "OLLAMA_HOST": "0.0.0.0:1",
        "PATH": "/bin",
    }
