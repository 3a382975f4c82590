"""What a training loop pays per ProgressReporter.report() call: daemon down, and a live progress endpoint.

Prints figures, asserts nothing. Run: python bench/throughput_client.py [CALLS]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import free_port  # noqa: E402

from spark_watchd.integrations.reporter import ProgressReporter  # noqa: E402


def measure(url: str, calls: int, min_interval: float) -> tuple[list[float], ProgressReporter]:
    rep = ProgressReporter("bench", url=url, min_interval=min_interval)
    lat = []
    for step in range(calls):
        t = time.perf_counter()
        rep.report(step, tokens=step * 4096)
        lat.append(time.perf_counter() - t)
    rep.close()
    return lat, rep


def show(label: str, lat: list[float], rep: ProgressReporter) -> None:
    lat_us = sorted(x * 1e6 for x in lat)
    p99 = lat_us[int(len(lat_us) * 0.99) - 1]
    print(
        f"{label:38s} calls={len(lat_us):6d} median={statistics.median(lat_us):6.1f}us "
        f"p99={p99:6.1f}us max={lat_us[-1]:8.1f}us sent={rep.sent} coalesced/dropped={rep.dropped}"
    )


class Ok(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *a):
        pass


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    lat, rep = measure(f"http://127.0.0.1:{free_port()}", calls, 5.0)
    show("daemon not running", lat, rep)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        lat, rep = measure(url, calls, 5.0)
        show("endpoint up, min_interval=5 s", lat, rep)
        lat, rep = measure(url, calls // 10, 0.0)
        show("endpoint up, min_interval=0 (worst)", lat, rep)
    finally:
        httpd.shutdown()


if __name__ == "__main__":
    main()
