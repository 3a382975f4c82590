"""The on-demand fabric measurement between the two Sparks of a pair: a fixed amount of data, a few seconds.

The sender (`spark-watchd fabric-test`, on one Spark) asks the peer's daemon, `POST /api/v1/fabric/offer`,
for a receiver. The peer's daemon agrees only when its own `[fleet] fabric_test` is on and the request comes
from the address of one of its own configured peers; it then listens on one ephemeral port of its web listen
address for one connection from that address, for `fabric_test_seconds`, and reads at most the offered
bytes (bounded by its `fabric_test_bytes`): a 16-byte token, the data, then it answers the byte count it
received. One test at a time; a second offer is refused while one runs. The data path is a plain TCP
socket to the peer's configured address: configure the peer by its ConnectX-7 (RDMA netdev) address and the
bytes cross that link. Nothing is written to disk; the data is zeros.
"""

from __future__ import annotations

import json
import secrets
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.web.http import Request, Response, Route
from spark_watchd.web.peers import FleetSettings, Peer, PeerClient, PeerError, parse_peer

OFFER_PATH = "/api/v1/fabric/offer"
TOKEN_BYTES = 16
CHUNK = 1 << 20


class FabricTestError(Exception):
    """The test could not run: refused by the peer, unreachable, cut short."""


def _addresses(host: str) -> set[str]:
    try:
        return {a[4][0] for a in socket.getaddrinfo(host, None)}
    except OSError:
        return set()


class FabricSink:
    """The receiving side, in the peer's daemon: agrees to one bounded test at a time from a configured peer."""

    def __init__(self, settings: FleetSettings, listen_host: str, clock=time.monotonic):
        self.s = settings
        self.listen_host = listen_host or "0.0.0.0"
        self.clock = clock
        self._busy = threading.Lock()
        self.last: dict[str, Any] | None = None  # the last test's figures, for the status of this side

    def _peer_addresses(self) -> set[str]:
        out: set[str] = set()
        for p in self.s.peers:
            out |= _addresses(parse_peer(p).host)
        return out

    def offer(self, client: str, nbytes: int) -> tuple[int, dict[str, Any]]:
        """(HTTP status, document): a port and token to send to, or why not."""
        if not self.s.fabric_test:
            return 403, {"error": "fabric tests are off on this daemon ([fleet] fabric_test = false)"}
        if client.removeprefix("::ffff:") not in {a.removeprefix("::ffff:") for a in self._peer_addresses()}:
            return 403, {"error": f"{client} is not one of this daemon's [fleet] peers"}
        if not self._busy.acquire(blocking=False):
            return 409, {"error": "a fabric test is already running"}
        try:
            limit = max(1, min(int(nbytes), self.s.fabric_test_bytes))
            srv = socket.create_server((self.listen_host, 0))
        except (OSError, ValueError) as exc:
            self._busy.release()
            return 503, {"error": f"cannot listen: {exc}"}
        token = secrets.token_bytes(TOKEN_BYTES)
        t = threading.Thread(
            target=self._receive, args=(srv, client, token, limit), daemon=True, name="fabric-sink"
        )
        t.start()
        return 200, {
            "port": srv.getsockname()[1],
            "token": token.hex(),
            "bytes": limit,
            "seconds": self.s.fabric_test_seconds,
        }

    def _receive(self, srv: socket.socket, client: str, token: bytes, limit: int) -> None:
        deadline = self.clock() + self.s.fabric_test_seconds + 2.0  # the sender's budget and a connect's
        got = 0
        try:
            srv.settimeout(self.s.fabric_test_seconds)
            conn, addr = srv.accept()
            with conn:
                if addr[0].removeprefix("::ffff:") != client.removeprefix("::ffff:"):
                    return
                conn.settimeout(1.0)
                head = b""
                while len(head) < TOKEN_BYTES and self.clock() < deadline:
                    part = conn.recv(TOKEN_BYTES - len(head))
                    if not part:
                        return
                    head += part
                if not secrets.compare_digest(head, token):
                    return
                buf = bytearray(CHUNK)
                while got < limit and self.clock() < deadline:
                    try:
                        n = conn.recv_into(buf, min(CHUNK, limit - got))
                    except TimeoutError:
                        continue
                    if n == 0:
                        break
                    got += n
                conn.sendall(struct.pack("!Q", got))
        except OSError:
            pass
        finally:
            srv.close()
            self.last = {"bytes": got}
            self._busy.release()


def routes(sink: FabricSink | None) -> list[Route]:
    """POST /api/v1/fabric/offer {"bytes": N}: a receiver for one fabric test, or 403/409 with the reason."""

    def offer(req: Request) -> Response:
        try:
            nbytes = int((json.loads(req.body or b"{}") or {}).get("bytes", 0))
        except (ValueError, TypeError, AttributeError, OverflowError):  # 1e999 is inf: no int
            return Response(400, b'{"error": "body must be {\\"bytes\\": N}"}', "application/json")
        if sink is None:
            status, doc = 403, {"error": "fabric tests are off on this daemon (no [fleet] peers)"}
        else:
            status, doc = sink.offer(req.client, nbytes)
        return Response(status, dumps_strict(doc).encode(), "application/json", {"Cache-Control": "no-store"})

    return [Route("POST", OFFER_PATH, offer, max_body=256)]


@dataclass(frozen=True, slots=True)
class FabricResult:
    """What one test measured."""

    peer: str
    address: str
    sent_bytes: int
    received_bytes: int
    seconds: float

    @property
    def gbps(self) -> float:
        return self.received_bytes * 8 / self.seconds / 1e9 if self.seconds > 0 else 0.0


def measure(peer: Peer, settings: FleetSettings, nbytes: int, seconds: float) -> FabricResult:
    """Ask the peer's daemon for a receiver, then send it nbytes of zeros (stopping at `seconds`)."""
    try:
        status, doc = PeerClient(peer, settings).post_json(OFFER_PATH, {"bytes": int(nbytes)})
    except PeerError as exc:
        raise FabricTestError(f"{peer.name}: {exc}") from None
    if status != 200:
        raise FabricTestError(f"{peer.name} refused: {doc.get('error') or f'HTTP {status}'}")
    limit, port, token = int(doc["bytes"]), int(doc["port"]), bytes.fromhex(doc["token"])
    chunk = memoryview(bytes(CHUNK))
    sent = 0
    try:
        with socket.create_connection((peer.host, port), timeout=settings.timeout_s) as sock:
            sock.sendall(token)
            t0 = time.perf_counter()
            stop = t0 + min(seconds, float(doc.get("seconds") or seconds))
            while sent < limit and time.perf_counter() < stop:
                n = min(CHUNK, limit - sent)
                sock.sendall(chunk[:n])
                sent += n
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(settings.timeout_s + seconds)
            ack = b""
            while len(ack) < 8:
                part = sock.recv(8 - len(ack))
                if not part:
                    raise FabricTestError(f"{peer.name} closed the test before answering")
                ack += part
            elapsed = time.perf_counter() - t0
    except OSError as exc:
        raise FabricTestError(f"{peer.name} ({peer.host}:{port}): {exc.strerror or exc}") from None
    (received,) = struct.unpack("!Q", ack)
    return FabricResult(peer.name, f"{peer.host}:{port}", sent, received, elapsed)
