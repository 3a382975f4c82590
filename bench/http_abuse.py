#!/usr/bin/env python3
"""Scrape success, latency and daemon CPU/RSS while hostile clients and local users press the daemon.

Prints figures, asserts nothing. Run from the repository root:
    python bench/http_abuse.py [--clients 500] [--seconds 30] [--scrapes-per-s 10] [--repo DIR]
    python bench/http_abuse.py --case bad-length|slow-reader|fd-limit|argv-bloat|all [--repo DIR]

`--case headers` (the default, issue 13 section 1) is described below. The issue 20 cases, each a fresh
daemon for --seconds (default 30; 10 is plenty) scraped once a second (5 s timeout per scrape):
bad-length: 8 connections sending `POST` with `Content-Length: +64` and no body, redialled when closed;
slow-reader: 10 local processes with 1.9 MB of argv each (so /api/v1/status is big where argv is not
bounded) and 8 clients that ask for /api/v1/status and never read, redialled when closed;
fd-limit: the daemon under `ulimit -n 256` and 400 idle connections, redialled when closed;
argv-bloat: the 10 processes alone: /api/v1/status size and the daemon's VmRSS before and after.

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
from _common import free_port, proc_status  # noqa: E402

LINE = b"X-Pad: " + b"a" * 1015 + b"\r\n"  # 1 KiB
HEADERS = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n" + LINE * 63  # ~64 KiB, never finished


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape_ms(port: int, timeout: float = 10) -> float | None:
    """Milliseconds for one GET /metrics on a new connection; None when it failed."""
    t0 = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
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


def start_daemon(repo: str, nofile: int | None = None) -> tuple[subprocess.Popen, int]:
    """`spark-watchd run` from `repo` on a free loopback port, once /metrics answers."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": repo, "SPARK_WATCHD_FAKE_NVML": "gb10"}
    state = tempfile.mkdtemp(prefix="http-abuse-")

    def limit() -> None:
        if nofile:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}", "--interval", "5",
         "--state-dir", state],
        env=env, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while scrape_ms(port) is None:
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            sys.exit("daemon did not come up")
        time.sleep(0.2)
    return proc, port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="headers", choices=("headers", *CASES, "all"))
    ap.add_argument("--clients", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--scrapes-per-s", type=float, default=10)
    ap.add_argument("--redial-s", type=float, default=1.0, help="an attacker redials this long after a close")
    ap.add_argument("--repo", default=str(REPO), help="checkout whose spark_watchd to run")
    args = ap.parse_args()
    if args.case != "headers":
        for name in CASES if args.case == "all" else (args.case,):
            CASES[name](args)
        return
    proc, port = start_daemon(args.repo)
    try:
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


def hold(port: int, clients: int, payload: bytes, stop: threading.Event, counts: dict) -> None:
    """Keep `clients` connections open, each sending `payload` once and never reading a byte; redial each
    one the server closes (seen as POLLRDHUP, unread data or not) 0.2 s later."""
    import select

    def dial() -> socket.socket | None:
        try:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(2)
            s.connect(("127.0.0.1", port))
            if payload:
                s.sendall(payload)
            return s
        except OSError:
            return None

    socks = {s.fileno(): s for s in (dial() for _ in range(clients)) if s}
    poller = select.poll()
    mask = select.POLLRDHUP | select.POLLHUP | select.POLLERR
    for fd in socks:
        poller.register(fd, mask)
    while not stop.wait(0.2):
        for fd, _ in poller.poll(0):
            s = socks.pop(fd)
            poller.unregister(fd)
            s.close()
            counts["closed"] += 1
            new = dial()
            if new is not None:
                socks[new.fileno()] = new
                poller.register(new.fileno(), mask)
    for s in socks.values():
        s.close()


def scrapes(port: int, seconds: float) -> tuple[int, int]:
    """(ok, total) for one /metrics scrape a second, 5 s timeout each."""
    ok = total = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        total += 1
        ok += scrape_ms(port, timeout=5) is not None
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    return ok, total


def bloat(n: int = 10) -> list[subprocess.Popen]:
    """N processes that classify as vLLM with ~1.9 MB of argv each (15 x 127 KB), their cap flag last."""
    argv = ["vllm", "-c", "import time; time.sleep(600)", "serve", "m", *(["x" * 127_000] * 15)]
    return [
        subprocess.Popen([*argv, "--gpu-memory-utilization", "0.3"], executable=sys.executable)
        for _ in range(n)
    ]


def status_bytes(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /api/v1/status HTTP/1.1\r\nHost: localhost\r\n\r\n")
        n = 0
        while chunk := s.recv(1 << 20):
            n += len(chunk)
    return n


def pressed(args, label: str, clients: int, payload: bytes, nofile: int | None = None, spawn: bool = False):
    procs = bloat() if spawn else []
    try:
        proc, port = start_daemon(args.repo, nofile)
        try:
            if spawn:
                time.sleep(6)  # a tick to see them
            stop, counts = threading.Event(), {"closed": 0}
            t = threading.Thread(target=hold, args=(port, clients, payload, stop, counts), daemon=True)
            t.start()
            time.sleep(1)
            ok, total = scrapes(port, args.seconds)
            stop.set()
            t.join(timeout=10)
            rss = proc_status(proc.pid, "VmRSS") / 1024
            print(f"{label}: {ok}/{total} scrapes OK over {args.seconds:.0f} s; "
                  f"attacker connections closed by the daemon: {counts['closed']}; daemon VmRSS {rss:.1f} MB")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def case_bad_length(args) -> None:
    head = b"POST /api/v1/progress HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    pressed(args, "bad-length (8 x Content-Length: +64, no body)", 8, head + b"Content-Length: +64\r\n\r\n")


def case_slow_reader(args) -> None:
    payload = b"GET /api/v1/status HTTP/1.1\r\nHost: localhost\r\n\r\n"
    pressed(
        args, "slow-reader (8 clients never read /api/v1/status, 10 x 1.9 MB argv)", 8, payload, spawn=True
    )


def case_fd_limit(args) -> None:
    pressed(args, "fd-limit (ulimit -n 256, 400 idle connections)", 400, b"", nofile=256)


def case_argv_bloat(args) -> None:
    proc, port = start_daemon(args.repo)
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(3):
            status_bytes(port)
        before = proc_status(proc.pid, "VmRSS") / 1024
        procs = bloat()
        time.sleep(11)  # two ticks
        size = max(status_bytes(port) for _ in range(5))
        time.sleep(5)
        after = proc_status(proc.pid, "VmRSS") / 1024
        print(
            f"argv-bloat (10 x 1.9 MB argv): /api/v1/status {size / 1e6:.2f} MB; VmRSS {before:.1f} -> {after:.1f} MB"
        )
    finally:
        for p in procs:
            p.kill()
            p.wait()
        proc.terminate()
        proc.wait(timeout=10)


CASES = {
    "bad-length": case_bad_length,
    "slow-reader": case_slow_reader,
    "fd-limit": case_fd_limit,
    "argv-bloat": case_argv_bloat,
}


if __name__ == "__main__":
    main()
