"""`spark-watchd status --fleet`: the pair view the daemon composed, printed as one table and a verdict."""

from __future__ import annotations

import json

import pytest

from spark_watchd import cli
from spark_watchd.web.fleet import FleetWatch
from spark_watchd.web.peers import FleetSettings
from tests.conftest import free_port
from tests.support.fakes import CaptureServer, Reply


def _doc(name, util, clock, temp, g4, ts=0.0):
    return {
        "ts": ts,
        "host": name,
        "worst": g4,
        "fresh": True,
        "memory": {"budget_bytes": 41 << 30},
        "gpus": [{"util_pct": util, "sm_clock_mhz": clock, "temp_c": temp}],
        "findings": {"G4": {"severity": g4, "summary": "x"}},
        "throughput": [{"tokens_per_second": 1480.0}],
        "extras": {},
    }


def _view(peer_up: bool) -> dict:
    """What /api/v1/fleet answers on the hot Spark after 16 min of throttling while spark-b waits."""
    port = free_port()
    w = FleetWatch(
        FleetSettings(peers=[f"spark-b=127.0.0.1:{port}"], name="spark-a", timeout_s=1), lambda: {}
    )
    peer = _doc("spark-b", 62, 2410, 71, "ok")
    for minute in range(17):
        own = _doc("spark-a", 91, 2290, 83, "warning", ts=minute * 60.0)
        w.own_status = lambda own=own: own
        if peer_up:
            w.clients[0].status = lambda: peer  # the peer's answer, as the client would hand it over
        w.poll_once()
    return {"configured": True, "view": w.view(), "history": w.history_json()}


@pytest.fixture
def fleet_status(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")

    def call(doc):
        body = json.dumps(doc).encode()
        srv = CaptureServer(
            lambda r: (
                Reply(200, body, {"Content-Type": "application/json"})
                if r.path == "/api/v1/fleet"
                else Reply(404)
            )
        )
        with srv:
            code = cli.main(["status", "--fleet", "--url", srv.url])
        return code, *capsys.readouterr()

    return call


def test_the_hot_spark_and_its_waiting_peer_side_by_side_with_the_verdict(fleet_status):
    code, out, _ = fleet_status(_view(True))
    lines = out.splitlines()
    assert lines[0].split() == [
        "SPARK",
        "STATE",
        "WORST",
        "TEMP",
        "SM",
        "CLOCK",
        "UTIL",
        "BUDGET",
        "TOKENS/S",
        "LINK",
    ]
    assert lines[1].split()[:8] == ["spark-a", "(this)", "up", "warning", "83", "C", "2290", "MHz"]
    assert "spark-b" in lines[2] and "62%" in lines[2] and "41.0 GiB" in lines[2]
    assert "pair: this Spark is throttling and its DDP peer spark-b waits (utilisation 62% vs 91%)" in out
    assert code == 1


def test_a_peer_that_is_down_is_a_down_row(fleet_status):
    code, out, _ = fleet_status(_view(False))
    row = next(ln for ln in out.splitlines() if ln.startswith("spark-b"))
    assert "DOWN" in row
    assert any(ln.startswith("spark-b down: ") and "refused" in ln.lower() for ln in out.splitlines())
    assert "pair: peer spark-b down: no comparison" in out


def test_without_peers_it_says_how_to_configure_them_and_is_unknown(fleet_status):
    code, out, _ = fleet_status({"configured": False, "view": None, "history": {}})
    assert code == 3 and "[fleet] peers" in out


def test_plain_status_says_the_link_verdict_and_the_clock_cap_with_its_cost():
    from spark_watchd.commands import status

    doc = {
        "host": "spark-a",
        "findings": {},
        "extras": {
            "link": {
                "problem": "down",
                "summary": "link down: rocep1s0f0/1 (enp1s0f0np0) was up this boot and is down now",
            },
            "clock_cap": {
                "summary": "SM clock capped at 2100 MHz (a cap, not a throttle); cap 2100 MHz: -14 C, -3% tokens/s"
            },
        },
    }
    out = status.render(doc, colour=False, cols=200)
    assert "ConnectX-7 link down: rocep1s0f0/1 (enp1s0f0np0) was up this boot and is down now" in out
    assert (
        "clock cap: SM clock capped at 2100 MHz (a cap, not a throttle); cap 2100 MHz: -14 C, -3% tokens/s"
        in out
    )


def test_plain_status_says_the_platform_its_change_and_a_known_bad_kernel_with_the_advice():
    from spark_watchd.commands import status

    doc = {
        "host": "spark-a",
        "findings": {},
        "extras": {
            "platform": {
                "summary": "kernel 7.0.0-1019-nvidia, driver 595.91.07 (open), CUDA 13.0, ConnectX-7 28.45.4028",
                "change": {
                    "summary": "kernel 6.17.0-1031-nvidia -> 7.0.0-1019-nvidia; driver 580.173.02 -> 595.91.07"
                },
                "problems": [
                    {
                        "check": "kernel_7_0_0_1019",
                        "summary": "kernel 7.0.0-1019-nvidia: owners report wedges",
                        "advice": "Boot 6.17.0-1031-nvidia.",
                        "source": "NVIDIA/open-gpu-kernel-modules#1358",
                    }
                ],
            }
        },
    }
    out = status.render(doc, colour=False, cols=200)
    assert (
        "platform: kernel 7.0.0-1019-nvidia, driver 595.91.07 (open), CUDA 13.0, ConnectX-7 28.45.4028" in out
    )
    assert "changed since the last boot: kernel 6.17.0-1031-nvidia -> 7.0.0-1019-nvidia; driver" in out
    assert "known bad: kernel 7.0.0-1019-nvidia: owners report wedges. Boot 6.17.0-1031-nvidia." in out


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"configured": true, "view": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested too deep"),
        (json.dumps({"configured": True, "view": {"members": [1, "x", None]}}).encode(), "not well formed"),
        (
            json.dumps({"configured": True, "view": {"members": [{"up": True, "temp_c": "hot"}]}}).encode(),
            "not well formed",
        ),
        (
            json.dumps({"configured": True, "view": {"members": [{"up": True, "worst": ["x"]}]}}).encode(),
            "not well formed",
        ),
    ],
)
def test_a_hostile_pair_view_is_unknown_with_a_reason_not_a_traceback(capsys, body, why):
    """`status --fleet --url` may point anywhere: what answers is not trusted to be a daemon's view."""
    srv = CaptureServer(lambda r: Reply(200, body, {"Content-Type": "application/json"}))
    with srv:
        code = cli.main(["status", "--fleet", "--url", srv.url])
    out, err = capsys.readouterr()
    assert code == 3 and why in err and "Traceback" not in err + out


def test_a_down_peers_reason_is_said_under_the_table_not_in_the_link_column():
    """Issue 34: "Connection refused" in the LINK column read like a cable fault."""
    from spark_watchd.commands import status_fleet

    doc = {
        "configured": True,
        "view": {
            "summary": "peer spark-b down: no comparison",
            "members": [
                {"name": "spark-a", "self": True, "up": True, "fresh": True, "worst": "ok", "link": None},
                {"name": "spark-b", "self": False, "up": False, "error": "Connection refused"},
            ],
        },
    }
    out = status_fleet.render(doc, cols=80).splitlines()
    header = out[0]
    row = next(line for line in out if line.startswith("spark-b"))
    assert "Connection refused" not in row and row.split()[1] == "DOWN"
    assert header.split()[-1] == "LINK" and row.split()[-1] == "-"
    assert "spark-b down: Connection refused" in out
