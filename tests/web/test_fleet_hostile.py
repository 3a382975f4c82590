"""Peers that cannot hurt each other (issue 29, breaks 5-7): real HTTP servers on loopback answer as bad
peers do (a drip, 200,000-deep JSON, NaN, wrong types, a 3.9 MB string) beside a good peer, and the
real pair poller must show each bad one down with its reason, the good peer and this Spark up, publish
strict JSON, keep a bounded history and log each failure once."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import structlog

from spark_watchd.web.fleet import FleetWatch, routes
from spark_watchd.web.http import Request
from spark_watchd.web.peerdoc import MAX_DEPTH, MAX_TEXT, PeerError, decode, nesting_depth, peer_status
from spark_watchd.web.peers import FleetSettings, PeerClient, parse_peer
from tests.support.fakes import CaptureServer, Reply


def strict_json(text: str | bytes):
    """json.loads that refuses NaN, Infinity and -Infinity, as every JSON parser but Python's does."""

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def own(ts=1000.0, util=91, clock=2300, temp=82, g4="warning", host="spark-a") -> dict:
    return {"ts": ts, "host": host, "worst": g4, "fresh": True, "memory": {"budget_bytes": 40 << 30},
            "gpus": [{"util_pct": util, "sm_clock_mhz": clock, "temp_c": temp}],
            "findings": {"G4": {"severity": g4, "summary": "throttling"}},
            "throughput": [{"tokens_per_second": 1500.0}], "extras": {}}  # fmt: skip


@contextlib.contextmanager
def peer(body: bytes = b"", drip: bool = False):
    """A real HTTP server on loopback answering GET /api/v1/status with `body` (200, JSON); with drip, the
    whole answer (status line, headers, body) one byte a second, as a slow-loris peer does. Yields its port."""
    if not drip:
        with CaptureServer(lambda _req: Reply(200, body, {"Content-Type": "application/json"})) as srv:
            yield int(srv.url.rsplit(":", 1)[1])
        return
    stop = threading.Event()
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body

    class Drip(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            for i in range(len(answer)):
                if stop.wait(1.0 if i else 0):
                    return
                try:
                    self.wfile.write(answer[i : i + 1])
                    self.wfile.flush()
                except OSError:
                    return

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1]
    finally:
        stop.set()
        srv.shutdown()
        srv.server_close()


def good_body() -> bytes:
    return json.dumps(own(g4="ok", temp=70, clock=2400, util=90, host="spark-c")).encode()


def watch(**peers: int) -> FleetWatch:
    s = FleetSettings(peers=[f"{n}=127.0.0.1:{p}" for n, p in peers.items()], timeout_s=3)
    return FleetWatch(s, lambda: own())


def members(view) -> dict:
    return {m["name"]: m for m in view["members"]}


def fleet_answer(w: FleetWatch) -> bytes:
    (route,) = routes(w)
    resp = route.handler(Request("GET", "/api/v1/fleet", {}, {}, b"", "127.0.0.1"))
    assert resp.status == 200
    return resp.body


def test_a_dripping_peer_is_cut_at_its_deadline_and_hides_neither_the_good_peer_nor_this_spark():
    """1 byte/s under timeout_s = 3: each recv is quick, only a deadline over the whole read ends it."""
    with peer(b"{}", drip=True) as slow, peer(good_body()) as good:
        w = watch(slow=slow, good=good)
        t0 = time.monotonic()
        view = w.poll_once()
        took = time.monotonic() - t0
        m = members(view)
        assert 2.9 < took < 4.5, took  # the deadline, not the length of the drip (~40 s)
        assert not m["slow"]["up"] and "3 s deadline" in m["slow"]["error"]
        assert m["good"]["up"] and m["good"]["temp_c"] == 70 and m["spark-a"]["up"]


def test_a_tls_handshake_that_drips_ends_at_the_same_deadline():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    stop = threading.Event()

    def drip():
        c, _ = srv.accept()
        with c:
            while not stop.wait(1.0):
                try:
                    c.send(b"\x16")  # a handshake record's first byte, a second at a time
                except OSError:
                    return

    threading.Thread(target=drip, daemon=True).start()
    s = FleetSettings(
        peers=[f"https://127.0.0.1:{srv.getsockname()[1]}"], timeout_s=3, fingerprint_sha256="00" * 32
    )
    try:
        t0 = time.monotonic()
        with pytest.raises(PeerError, match="within the 3 s deadline"):
            PeerClient(parse_peer(s.peers[0]), s).status()
        assert time.monotonic() - t0 < 4.5
    finally:
        stop.set()
        srv.close()


def test_a_200000_deep_document_is_refused_by_depth_and_the_view_is_still_published():
    deep = b'{"gpus": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    with peer(deep) as bomb, peer(good_body()) as good:
        w = watch(bomb=bomb, good=good)
        m = members(w.poll_once())
        assert not m["bomb"]["up"] and f"nested deeper than {MAX_DEPTH}" in m["bomb"]["error"]
        assert m["good"]["up"] and m["spark-a"]["up"]
        strict_json(fleet_answer(w))


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({"gpus": [1, "x", None]}, "gpus[0]: expected an object, got int"),
        ({"gpus": [{"temp_c": "hot"}]}, "gpus[0].temp_c: expected a number, got str"),
        ({"gpus": [{"util_pct": 1e308}]}, "gpus[0].util_pct: 1e+308 out of range"),
        ({"gpus": {"0": {}}}, "gpus: expected a list, got dict"),
        ({"findings": {"G4": {"severity": ["critical"]}}}, "findings.G4.severity: list is not one of"),
        ({"findings": {"G4": "critical"}}, "findings.G4: expected an object, got str"),
        ({"worst": 2}, "worst: int is not one of"),
        ({"memory": {"budget_bytes": True}}, "memory.budget_bytes: expected a number, got bool"),
        ({"extras": {"link": {"summary": {"x": 1}}}}, "extras.link.summary: expected a string, got dict"),
        ([own()], "expected an object, got list"),
    ],
)
def test_a_document_of_the_wrong_shape_is_that_peer_down_with_the_bad_field_named(doc, why):
    body = json.dumps({**own(host="spark-b"), **doc} if isinstance(doc, dict) else doc).encode()
    with peer(body) as bad, peer(good_body()) as good:
        w = watch(bad=bad, good=good)
        m = members(w.poll_once())
        assert not m["bad"]["up"]
        assert m["bad"]["error"].startswith(f"not a spark-watchd status document: {why}"), m["bad"]["error"]
        assert m["good"]["up"] and m["spark-a"]["up"]
        strict_json(fleet_answer(w))


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_number_is_refused_and_never_leaves_as_json(number):
    body = json.dumps(own(host="spark-b")).replace('"temp_c": 82', f'"temp_c": {number}').encode()
    assert number.encode() in body
    with peer(body) as bad, peer(good_body()) as good:
        w = watch(bad=bad, good=good)
        m = members(w.poll_once())
        assert not m["bad"]["up"] and m["bad"]["error"].startswith("non-finite number")
        assert m["good"]["up"] and m["spark-a"]["up"]
        strict_json(fleet_answer(w))


def test_a_huge_worst_string_every_poll_keeps_neither_the_string_nor_a_growing_history():
    """Break 7: 3.9 MB of `worst` each poll was kept whole in each chart point (74 MB /api/v1/fleet)."""
    huge = json.dumps({**own(host="spark-b"), "worst": "x" * 3_900_000}).encode()
    with peer(huge) as bad:
        w = watch(bad=bad)
        for _ in range(3):
            m = members(w.poll_once())
        assert not m["bad"]["up"] and m["bad"]["error"].startswith(
            "not a spark-watchd status document: worst: 'xxxxxxxxxxxxxxxxxxxx'… is not one of"
        )
        assert len(fleet_answer(w)) < 4000
        assert all(set(p) <= {"t", "up"} for p in w.history_json()["bad"])


def test_long_sentences_of_a_valid_peer_are_clipped_and_its_history_holds_numbers_and_severities():
    doc = own(host="h" * 5000)
    doc["findings"]["G4"]["summary"] = "s" * 3_000_000
    doc["extras"] = {"link": {"problem": "down", "summary": "l" * 100_000}, "ports": ["p" * 500_000]}
    with peer(json.dumps(doc).encode()) as b:
        w = watch(b=b)
        row = members(w.poll_once())["b"]
        assert row["up"] and len(row["findings"]["G4"]["summary"]) == MAX_TEXT and len(row["host"]) == 64
        assert len(row["link"]["summary"]) == MAX_TEXT
        (point,) = w.history_json()["b"]
        assert point["worst"] == "warning" and all(
            v is None or type(v) in (int, float, bool) for k, v in point.items() if k != "worst"
        )
        assert len(fleet_answer(w)) < 8000


def test_each_failure_is_logged_once_per_change_without_a_traceback():
    deep = b"[" * 200_000 + b"]" * 200_000
    with peer(deep) as bomb, peer(b'{"gpus": [1, "x", null]}') as typed, peer(good_body()) as good:
        w = watch(bomb=bomb, typed=typed, good=good)
        with structlog.testing.capture_logs() as logs:
            for _ in range(4):
                w.poll_once()
        lines = [e["event"] for e in logs]
        assert sorted(lines) == [
            f"peer bomb down: not a spark-watchd status document: JSON nested deeper than {MAX_DEPTH}",
            "peer typed down: not a spark-watchd status document: gpus[0]: expected an object, got int",
        ]
        assert not any("exc_info" in e or "exception" in e for e in logs)


def test_a_peer_whose_read_raises_is_down_alone():
    """Whatever a read raises (here a bug stood in by a replaced read) is that peer's reason, not the poll's."""
    with peer(good_body()) as good:
        w = watch(odd=good, good=good)
        w.clients[0].status = lambda: {}["missing"]
        m = members(w.poll_once())
        assert not m["odd"]["up"] and m["odd"]["error"] == "KeyError: 'missing'"
        assert m["good"]["up"] and m["spark-a"]["up"]


def test_the_depth_check_ignores_brackets_inside_strings_and_refuses_deep_nesting():
    assert nesting_depth(b'{"a": "[[[[[[[[", "b": [{"c": "]]\\"[["}]}') == 3
    assert nesting_depth(b"[" * 65 + b"]" * 65) == 65
    with pytest.raises(PeerError, match="nested deeper than 64"):
        decode(b"[" * 65 + b"]" * 65)
    assert decode(b"[" * 64 + b"]" * 64)
    with pytest.raises(PeerError, match="not JSON"):
        peer_status(b"{")
