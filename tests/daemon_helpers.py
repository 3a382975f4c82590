"""Helpers for tests that start the daemon as a subprocess and scrape it over HTTP."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO, cli_env, free_port


def http_get(url: str, timeout: float = 5.0, headers: dict | None = None, context=None) -> tuple[int, str]:
    """(status, body) for a GET; HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def samples(text: str) -> dict[tuple, float]:
    """Exposition text as {(name, frozenset(labels)): value}."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed: dict, metric: str, /, **labels) -> float | None:
    return parsed.get((metric, frozenset(labels.items())))


@contextlib.contextmanager
def running_daemon(
    *args: str,
    env: dict | None = None,
    ready_timeout: float = 20.0,
    verb: str = "run",
    headers: dict | None = None,
    scheme: str = "http",
    context=None,
    preexec_fn=None,
):
    """Start `spark-watchd VERB --listen 127.0.0.1:PORT ARGS`, wait for a first sample, yield (proc, base_url)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", verb, "--listen", f"127.0.0.1:{port}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(env),
        cwd=str(REPO),
        preexec_fn=preexec_fn,  # e.g. a lower RLIMIT_NOFILE for the daemon alone
    )
    base = f"{scheme}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"daemon exited {proc.returncode}: {err}")
            try:
                status, _ = http_get(base + "/healthz", timeout=1, headers=headers, context=context)
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("daemon did not become healthy")
            time.sleep(0.1)
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        proc.stderr.close()
