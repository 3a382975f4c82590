"""One redaction of argv secrets for whatever persists argv (issue 29 §9)."""

from __future__ import annotations

import pytest

from spark_watchd.sample.redact import REDACTED, redact_argv, redact_command_line, redact_sample_dict


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["vllm", "serve", "m", "--api-key", "sk-1"], ["vllm", "serve", "m", "--api-key", REDACTED]),
        (["x", "--api-key=sk-1", "--token", "t"], ["x", f"--api-key={REDACTED}", "--token", REDACTED]),
        (["x", "--hf-token", "hf_1", "--api_key", "k"], ["x", "--hf-token", REDACTED, "--api_key", REDACTED]),
        (["env", "HF_TOKEN=hf_1", "OPENAI_API_KEY=k", "MY_SECRET=s", "DB_PASSWORD=p", "python"],
         ["env", f"HF_TOKEN={REDACTED}", f"OPENAI_API_KEY={REDACTED}", f"MY_SECRET={REDACTED}",
          f"DB_PASSWORD={REDACTED}", "python"]),
        (["curl", "-H", "Authorization: Bearer abc"], ["curl", "-H", f"Authorization: Bearer {REDACTED}"]),
        # flags are matched by word: a vLLM batch size keeps its value; a flag with no value hides nothing
        (["vllm", "--max-num-batched-tokens", "8192", "--port", "8000"],
         ["vllm", "--max-num-batched-tokens", "8192", "--port", "8000"]),
        (["x", "--api-key", "--port", "1"], ["x", "--api-key", "--port", "1"]),
        (["x", "--api-key"], ["x", "--api-key"]),
        (["PATH=/usr/bin", "--model=/m"], ["PATH=/usr/bin", "--model=/m"]),
        (["sh", "-c", "HF_TOKEN=h vllm serve m --api-key sk-1 --port 8000"],
         ["sh", "-c", f"HF_TOKEN={REDACTED} vllm serve m --api-key {REDACTED} --port 8000"]),
    ],
)  # fmt: skip
def test_secret_values_are_redacted_and_the_rest_kept(argv, want):
    assert list(redact_argv(argv)) == want


def test_a_joined_command_line_and_a_sample_object_are_redacted_alike():
    assert redact_command_line("vllm serve m --api-key sk-1 --port 8000") == (
        f"vllm serve m --api-key {REDACTED} --port 8000"
    )
    assert redact_command_line("curl -H Authorization: Bearer abc http://x") == (
        f"curl -H Authorization: Bearer {REDACTED} http://x"
    )
    d = {"v": 1, "ts": 1.0, "processes": [{"pid": 1, "cmdline": ["a", "--token", "t"]}, {"pid": 2}]}
    out = redact_sample_dict(d)
    assert out["processes"][0]["cmdline"] == ["a", "--token", REDACTED] and out["processes"][1] == {"pid": 2}
    assert d["processes"][0]["cmdline"] == ["a", "--token", "t"]  # the caller's object is left alone
    clean = {"v": 1, "ts": 1.0, "processes": [{"pid": 1, "cmdline": ["a"]}]}
    assert redact_sample_dict(clean) is clean


def test_every_trace_writer_keeps_no_argv_secret(tmp_path):
    """`record`, `run --record` and the captures on trouble all write through TraceWriter."""
    from dataclasses import replace

    from spark_watchd.sample.trace import TraceWriter, read_trace
    from tests.postmortem.helpers import scenario

    s = scenario("vllm_creep_oom_30s")[0]
    procs = tuple(replace(p, cmdline=(*p.cmdline, "--api-key", "sk-live-1")) for p in s.processes)
    with TraceWriter(tmp_path / "t.jsonl") as w:
        w.write(replace(s, processes=procs))
    assert "sk-live-1" not in (tmp_path / "t.jsonl").read_text()
    (back,) = read_trace(tmp_path / "t.jsonl")
    assert back.processes[0].cmdline[-2:] == ("--api-key", REDACTED)
