"""`spark-watchd fabric-test` between two real daemons on loopback: a measured throughput when the peer's
daemon agrees; a refusal, and no bytes moved, when it has fabric tests off or the sender is not its peer."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import FIXTURES, REPO, cli_env, free_port

TRACE = FIXTURES / "traces" / "healthy_hot_60s.jsonl"


def _daemon(tmp, name, port, fleet_toml):
    cfg = tmp / f"{name}.toml"
    cfg.write_text(f'[fleet]\nname = "{name}"\ninterval_s = 5\n{fleet_toml}\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--config", str(cfg), "--replay", str(TRACE), "--speed", "60",
         "--interval", "1", "--listen", f"127.0.0.1:{port}", "--state-dir", str(tmp / f"state-{name}")],
        env=cli_env(), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/status", timeout=1).read()
            return cfg, proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise AssertionError(f"daemon {name} did not start")


@pytest.fixture
def pair(tmp_path):
    pa, pb, pc, pd = free_port(), free_port(), free_port(), free_port()
    procs = []
    try:
        cfg_a, a = _daemon(tmp_path, "spark-a", pa, f'peers = ["spark-b=127.0.0.1:{pb}", "spark-c=127.0.0.1:{pc}", '
                                                   f'"spark-d=127.0.0.1:{pd}"]')  # fmt: skip
        procs.append(a)
        # spark-b agrees: fabric tests on, spark-a (127.0.0.1) among its peers
        procs.append(
            _daemon(tmp_path, "spark-b", pb, f'peers = ["spark-a=127.0.0.1:{pa}"]\nfabric_test = true')[1]
        )
        # spark-c has them off (the default); spark-d has them on but knows only another address
        procs.append(_daemon(tmp_path, "spark-c", pc, f'peers = ["spark-a=127.0.0.1:{pa}"]')[1])
        procs.append(
            _daemon(tmp_path, "spark-d", pd, 'peers = ["spark-x=127.0.0.2:9761"]\nfabric_test = true')[1]
        )
        yield cfg_a, pb
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)


def _verb(cfg, *args):
    return subprocess.run(
        [sys.executable, "-m", "spark_watchd", "fabric-test", "--config", str(cfg), *args],
        env=cli_env(), cwd=str(REPO), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_two_daemons_measure_the_fabric_and_a_peer_that_does_not_agree_refuses(pair):
    cfg_a, port_b = pair
    ok = _verb(cfg_a, "--peer", "spark-b", "--bytes", str(256 << 20), "--seconds", "5")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "fabric-test to spark-b (127.0.0.1:" in ok.stdout and "Gb/s" in ok.stdout
    gbps = float(ok.stdout.rsplit(": ", 1)[1].split()[0])
    assert gbps > 0.1  # loopback moves gigabits; the figure is what the peer received over the time taken
    assert "0.25 GiB received of 0.25 GiB sent" in ok.stdout

    off = _verb(cfg_a, "--peer", "spark-c")
    assert off.returncode == 3 and "spark-c refused: fabric tests are off" in off.stdout
    stranger = _verb(cfg_a, "--peer", "spark-d")
    assert (
        stranger.returncode == 3 and "127.0.0.1 is not one of this daemon's [fleet] peers" in stranger.stdout
    )
    unknown = _verb(cfg_a, "--peer", "spark-z")
    assert unknown.returncode == 3 and "no peer named 'spark-z'" in unknown.stdout

    # The offer itself, as any client would make it: a bad body is 400, and no receiver is opened.
    req = urllib.request.Request(f"http://127.0.0.1:{port_b}/api/v1/fabric/offer", data=b"[1]", method="POST")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=5)
    assert exc.value.code == 400
    again = _verb(cfg_a, "--peer", "spark-b", "--bytes", str(64 << 20))  # the first test freed the receiver
    assert again.returncode == 0 and "0.06 GiB received" in again.stdout
    assert json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port_b}/api/v1/status", timeout=5).read())


def test_an_offer_with_an_overflowing_or_deep_body_is_a_400_not_a_500():
    from spark_watchd.web.fabric_test import routes
    from spark_watchd.web.http import Request

    (offer,) = routes(None)
    for body in (b'{"bytes": 1e999}', b'{"bytes": "x"}', b"[" * 120 + b"]" * 120, b"not json"):
        resp = offer.handler(Request("POST", offer.path, {}, {}, body, "127.0.0.1"))
        assert resp.status == 400, body
