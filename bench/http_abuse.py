#!/usr/bin/env python3
"""Scrape latency and daemon CPU while many clients send big unfinished headers (issue 13, section 1).

Prints figures, asserts nothing. Run from the repository root:
    python bench/http_abuse.py [--clients 500] [--seconds 30] [--scrapes-per-s 10] [--repo DIR]

Starts `spark-watchd run` (fake GB10, free loopback port, its own state dir)
from --repo (default: this checkout; point it at another checkout to compare),
measures the /metrics median with no load, then for --seconds keeps --clients
connections open, each sending 64 KiB of header lines without the blank line
that ends them (redialling --redial-s after the server closes or refuses
one; 0 makes it a connection flood), while a
scraper times /metrics. Reports the scrape median and p90, failed scrapes, the
daemon's CPU seconds (utime + stime from /proc/PID/stat) and the number of
attacker connections the server closed or refused.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO / "bench"))
from _common import free_port  # noqa: E402

LINE = b"X-Pad: " + b"a" * 1015 + b"\r\n"  # 1 KiB
HEADERS = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n" + LINE * 63  # ~64 KiB, never finished


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape_ms(port: int) -> float | None:
    """Milliseconds for one GET /metrics on a new connection; None when it failed."""
    t0 = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
    except OSError:
        return None
    return (time.perf_counter() - t0) * 1e3 if reply.startswith(b"HTTP/1.1 200") else None


def attack(port: int, clients: int, stop: threading.Event, counts: dict, redial_s: float) -> None:
    """Keep `clients` connections each pushing HEADERS; redial any the server closes after `redial_s`."""
    sel = selectors.DefaultSelector()
    redial: list[float] = []

    def connect() -> None:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ, [0])

    for _ in range(clients):
        connect()
    while not stop.is_set():
        now = time.monotonic()
        while redial and redial[0] <= now:
            redial.pop(0)
            connect()
        for key, ev in sel.select(0.05):
            s, sent = key.fileobj, key.data
            try:
                if ev & selectors.EVENT_READ:
                    data = s.recv(4096)
                    if not data or data.startswith(b"HTTP/"):
                        raise ConnectionResetError
                if ev & selectors.EVENT_WRITE and sent[0] < len(HEADERS):
                    sent[0] += s.send(HEADERS[sent[0] :])
                    if sent[0] >= len(HEADERS):
                        sel.modify(s, selectors.EVENT_READ, sent)
            except OSError:
                counts["closed"] += 1
                sel.unregister(s)
                s.close()
                redial.append(time.monotonic() + redial_s)
    for key in list(sel.get_map().values()):
        key.fileobj.close()


def measure(port: int, seconds: float, rate: float) -> tuple[list[float], int]:
    """Scrape for `seconds` at `rate` per second: (latencies in ms, failures)."""
    lat, failed = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ms = scrape_ms(port)
        if ms is None:
            failed += 1
        else:
            lat.append(ms)
        time.sleep(1 / rate)
    return lat, failed


def fmt(lat: list[float], failed: int) -> str:
    if not lat:
        return f"no successful scrape ({failed} failed)"
    p90 = statistics.quantiles(lat, n=10)[-1] if len(lat) > 1 else lat[0]
    return f"median {statistics.median(lat):.2f} ms, p90 {p90:.2f} ms, {len(lat)} ok, {failed} failed"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--scrapes-per-s", type=float, default=10)
    ap.add_argument("--redial-s", type=float, default=1.0, help="an attacker redials this long after a close")
    ap.add_argument("--repo", default=str(REPO), help="checkout whose spark_watchd to run")
    args = ap.parse_args()
    port = free_port()
    env = {**os.environ, "PYTHONPATH": args.repo, "SPARK_WATCHD_FAKE_NVML": "gb10"}
    state = tempfile.mkdtemp(prefix="http-abuse-")
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}", "--interval", "5",
         "--state-dir", state],
        env=env, cwd=args.repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while scrape_ms(port) is None:
            if time.monotonic() > deadline or proc.poll() is not None:
                sys.exit("daemon did not come up")
            time.sleep(0.2)
        lat, failed = measure(port, min(10.0, args.seconds), args.scrapes_per_s)
        print(f"idle:       {fmt(lat, failed)}")
        stop = threading.Event()
        counts = {"closed": 0}
        t = threading.Thread(
            target=attack, args=(port, args.clients, stop, counts, args.redial_s), daemon=True
        )
        cpu0 = cpu_seconds(proc.pid)
        t.start()
        time.sleep(1)  # let the connections open
        lat, failed = measure(port, args.seconds, args.scrapes_per_s)
        cpu = cpu_seconds(proc.pid) - cpu0
        stop.set()
        t.join(timeout=10)
        print(f"{args.clients} clients x 64 KiB unfinished headers, {args.seconds:.0f} s: {fmt(lat, failed)}")
        print(
            f"daemon CPU: {cpu:.1f} s over {args.seconds + 1:.0f} s; attacker connections closed: {counts['closed']}"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
