"""The pair view's peer reads: a real daemon over TLS + basic auth (CA or fingerprint pinned), bounded and
timed-out answers, a peer that is down shown down, and the view the worker composes."""

from __future__ import annotations

import base64
import hashlib
import socket
import ssl
import threading
import time

import bcrypt
import pytest
from pydantic import ValidationError

from spark_watchd.sample.model import SEVERITIES
from spark_watchd.web.fleet import FleetWatch
from spark_watchd.web.peers import FleetSettings, PeerClient, PeerError, parse_peer
from tests.conftest import REPO
from tests.daemon_helpers import running_daemon

TRACE = str(REPO / "spark_watchd" / "scenarios" / "throttle.jsonl")


def _basic(user: str, pw: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()}


def _fingerprint(cert_dir) -> str:
    der = ssl.PEM_cert_to_DER_cert((cert_dir / "cert.pem").read_text())
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


@pytest.fixture(scope="module")
def tls_daemon(cert, tmp_path_factory):
    """A real daemon replaying the throttle scenario behind TLS and basic auth (peer/its password)."""
    tmp = tmp_path_factory.mktemp("peer")
    web = tmp / "web.yml"
    hashed = bcrypt.hashpw(b"desk-pair", bcrypt.gensalt(rounds=4)).decode()
    web.write_text(
        f"tls_server_config:\n  cert_file: {cert / 'cert.pem'}\n  key_file: {cert / 'key.pem'}\n"
        f"basic_auth_users:\n  peer: '{hashed}'\n"
    )
    (tmp / "pw").write_text("desk-pair\n")
    env = {
        "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp / "state"),
        "SPARK_WATCHD_DAEMON__WEB_CONFIG_FILE": str(web),
    }
    ctx = ssl.create_default_context(cafile=str(cert / "cert.pem"))
    with running_daemon("--replay", TRACE, "--speed", "60", "--loop", "--interval", "1", env=env,
                        headers=_basic("peer", "desk-pair"), scheme="https", context=ctx) as (_, base):  # fmt: skip
        yield {"port": int(base.rsplit(":", 1)[1]), "pw": tmp / "pw", "cert": cert}


def _client(d, **kw) -> PeerClient:
    settings = FleetSettings(peers=[f"spark-b=https://127.0.0.1:{d['port']}"], username="peer",
                             password_file=str(d["pw"]), **kw)  # fmt: skip
    return PeerClient(parse_peer(settings.peers[0]), settings)


def test_a_peer_behind_tls_and_basic_auth_is_read_with_its_ca_pinned(tls_daemon):
    doc = _client(tls_daemon, ca_file=str(tls_daemon["cert"] / "cert.pem")).status()
    assert doc["gpus"] and doc["findings"]["G4"]["severity"] in SEVERITIES and doc["gpus"][0]["temp_c"] > 0
    assert "mode" not in doc  # only the pair view's part of the peer's document is kept


def test_a_peer_is_read_with_its_certificate_fingerprint_pinned_instead(tls_daemon):
    doc = _client(tls_daemon, fingerprint_sha256=_fingerprint(tls_daemon["cert"])).status()
    assert doc["gpus"]
    with pytest.raises(PeerError, match="fingerprint does not match"):
        _client(tls_daemon, fingerprint_sha256="00" * 32).status()


def test_an_unpinned_self_signed_peer_and_a_wrong_password_are_refused(tls_daemon):
    with pytest.raises(PeerError, match="TLS: CERTIFICATE_VERIFY_FAILED"):
        _client(tls_daemon).status()
    (tls_daemon["pw"].parent / "bad").write_text("nope\n")
    s = FleetSettings(peers=[f"https://127.0.0.1:{tls_daemon['port']}"], username="peer",
                      password_file=str(tls_daemon["pw"].parent / "bad"), ca_file=str(tls_daemon["cert"] / "cert.pem"))  # fmt: skip
    with pytest.raises(PeerError, match="HTTP 401"):
        PeerClient(parse_peer(s.peers[0]), s).status()


def _raw_server(answer: bytes | None):
    """A loopback socket that answers every connection with `answer` (None: accepts and says nothing)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    conns = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            conns.append(c)
            c.recv(65536)
            if answer is not None:
                try:
                    c.sendall(answer)
                except OSError:
                    pass
                c.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, conns


def _local(port: int, **kw) -> PeerClient:
    s = FleetSettings(peers=[f"127.0.0.1:{port}"], **kw)
    return PeerClient(parse_peer(s.peers[0]), s)


def test_an_oversized_answer_is_refused_at_the_bound():
    body = b"{" + b" " * (8192 + 10) + b"}"
    srv, _ = _raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    try:
        with pytest.raises(PeerError, match="larger than 8192 bytes"):
            _local(srv.getsockname()[1], max_response_bytes=8192).status()
    finally:
        srv.close()


def test_a_peer_that_never_answers_costs_its_timeout_and_no_more():
    srv, conns = _raw_server(None)
    try:
        t0 = time.monotonic()
        with pytest.raises(PeerError, match="timed out"):
            _local(srv.getsockname()[1], timeout_s=0.5).status()
        assert time.monotonic() - t0 < 3
    finally:
        srv.close()
        for c in conns:
            c.close()


def test_garbage_or_a_foreign_json_document_is_not_a_status():
    for body, why in ((b"<html>", "not JSON"), (b'{"gpus": 3}', "not a spark-watchd status document")):
        srv, _ = _raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        try:
            with pytest.raises(PeerError, match=why):
                _local(srv.getsockname()[1]).status()
        finally:
            srv.close()


def test_peer_addresses_and_their_names():
    assert parse_peer("spark-b.local:9761").name == "spark-b"
    assert parse_peer("spark-b.local:9761").url == "http://spark-b.local:9761"
    assert parse_peer("https://10.0.0.2:9761").name == "10.0.0.2:9761"
    p = parse_peer("desk-b=https://10.0.0.2")
    assert (p.name, p.scheme, p.port) == ("desk-b", "https", 443)
    for bad in ("ftp://x:1", "spark-b:99999", "http://x:1/metrics", ""):
        with pytest.raises(ValidationError, match="peer"):
            FleetSettings(peers=[bad])
    with pytest.raises(ValidationError, match="64 hex digits"):
        FleetSettings(fingerprint_sha256="abc")


def _own(ts=1000.0, util=91, clock=2300, temp=82, g4="warning"):
    return {"ts": ts, "host": "spark-a", "worst": g4, "memory": {"budget_bytes": 40 << 30},
            "gpus": [{"util_pct": util, "sm_clock_mhz": clock, "temp_c": temp}],
            "findings": {"G4": {"severity": g4, "summary": "throttling"}},
            "throughput": [{"tokens_per_second": 1500.0}], "extras": {}}  # fmt: skip


def test_a_peer_that_is_down_is_shown_down_beside_this_spark():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()  # nothing listens there
    w = FleetWatch(FleetSettings(peers=[f"spark-b=127.0.0.1:{port}"], timeout_s=1), lambda: _own())
    view = w.poll_once()
    w.poll_once()
    b = next(m for m in view["members"] if m["name"] == "spark-b")
    assert not b["up"] and "refused" in b["error"].lower()
    assert view["summary"] == "peer spark-b down: no comparison" and view["straggler"] is None
    assert [p["up"] for p in w.history_json()["spark-b"]] == [False, False]
    assert w.history_json()["spark-a"][-1]["tokens_per_second"] == 1500.0


def test_a_slow_peer_because_of_the_link_is_told_from_a_hot_one():
    """No straggler by heat, but the ConnectX-7 verdict of a member is a problem: the view says so."""
    own = _own(g4="ok", temp=70, clock=2410, util=40)
    own["extras"] = {
        "link": {
            "problem": "down",
            "summary": "link down: rocep1s0f0/1 (enp1s0f0np0) was up this boot and is down now",
        }
    }
    peer = {**_own(g4="ok", temp=71, clock=2405, util=38), "host": "spark-b"}
    w = FleetWatch(FleetSettings(peers=["spark-b=127.0.0.1:9"], timeout_s=1), lambda: own)
    w.clients[0].status = lambda: peer
    view = w.poll_once()
    assert view["straggler"] is None and view["link_problem"] is True
    assert view["summary"] == (
        "no straggler: the Sparks under load run alike; ConnectX-7 link problem on spark-a: "
        "link down: rocep1s0f0/1 (enp1s0f0np0) was up this boot and is down now"
    )
    row = next(m for m in view["members"] if m["self"])
    assert row["link"]["problem"] == "down"


def _wait(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_this_spark_is_one_series_whatever_its_name_and_the_view_says_its_read_interval():
    """Issue 34: before its first sample this Spark has no host name; the legend then listed it twice."""
    docs = iter([{"fresh": False, "findings": {}, "gpus": [], "extras": {}}, _own(), _own(ts=1030.0)])
    w = FleetWatch(
        FleetSettings(peers=["spark-b=127.0.0.1:9"], timeout_s=1, interval_s=30), lambda: next(docs)
    )
    w.clients[0].status = lambda: {**_own(), "host": "spark-b"}
    for _ in range(3):
        view = w.poll_once()
    history = w.history_json()
    assert sorted(history) == ["spark-a", "spark-b"] and len(history["spark-a"]) == 3
    assert view["interval_s"] == 30 and view["self"] == "spark-a"


def test_a_peer_not_seen_yet_is_read_again_within_seconds_not_a_whole_interval(tmp_path):
    """Issue 34: two Sparks started together showed each other DOWN for a whole 30 s interval."""
    up = threading.Event()
    w = FleetWatch(FleetSettings(peers=["spark-b=127.0.0.1:9"], timeout_s=1, interval_s=30), lambda: _own())

    def status():
        if not up.is_set():
            raise PeerError("Connection refused")
        return {**_own(), "host": "spark-b"}

    w.clients[0].status = status
    w.start()
    try:
        assert _wait(lambda: w.view() is not None, 5)
        assert not next(m for m in w.view()["members"] if m["name"] == "spark-b")["up"]
        up.set()  # the peer's daemon is up a second later
        assert _wait(lambda: next(m for m in w.view()["members"] if m["name"] == "spark-b")["up"], 8)
    finally:
        w.close()


def test_the_first_sample_of_this_spark_brings_a_poll_at_once():
    """Issue 34: the first poll runs before this daemon's first sample ("stale"); the sample wakes the next."""
    from types import SimpleNamespace

    fresh = threading.Event()
    w = FleetWatch(
        FleetSettings(peers=["spark-b=127.0.0.1:9"], timeout_s=1, interval_s=30),
        lambda: {**_own(), "fresh": fresh.is_set()},
    )
    w.clients[0].status = lambda: {**_own(), "host": "spark-b"}
    w.start()
    try:
        assert _wait(lambda: w.view() is not None, 5)
        assert w.view()["members"][0]["fresh"] is False
        fresh.set()
        w.observe(SimpleNamespace(sample=object()))
        assert _wait(lambda: w.view()["members"][0]["fresh"] is True, 3)
    finally:
        w.close()
